/* Adversarial review of the unwinding of lost holds (I13), of
 * rlock_wait_unlocked() and of the scope-bound release macros: probes
 * against a real redis-server. Each test states the promise it checks. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "proxy.h"

TestSuite(revunwind, .timeout = 90);

#define LONG_LEASE_MS 60000

/* ---- helpers ----------------------------------------------------------- */

static void force(rlock_client *c, const char *name)
{
    rlock *f;
    th_ok(rlock_new(c, name, &f));
    bool was = false;
    th_ok(rlock_force_unlock(f, &was));
    cr_assert(was, "force unlock found nothing");
    rlock_free(f);
}

/* The other owner's field: exactly one field, count 1. */
static void assert_other(redisContext *r, const char *name, const char *owner, const char *when)
{
    cr_assert_eq(th_hlen(r, name), 1, "%s: the hash has %lld fields", when, th_hlen(r, name));
    cr_assert_eq(th_hget_int(r, name, owner), 1, "%s: the other owner's count is %lld", when,
                 th_hget_int(r, name, owner));
}

/* ---- unwinding: mixed orders --------------------------------------------- */

/* Lost two deep (force), one unlock (ELOST), a fresh hold two deep, one
 * partial unlock (OK), lost again (force), another client takes it. Left:
 * one lost level of the first hold, one of the second. Every unlock from
 * here answers ELOST (two of them), then ENOTOWNER; the other owner's hold
 * is untouched after each. */
Test(revunwind, lose_relock_lose_again_unwinds_every_level)
{
    rlock_client *c = th_client(NULL, 0), *other = th_client(NULL, 0);
    redisContext *r = th_redis(0);
    char *name = th_name("ru-mixed");
    char *owner = th_owner(c, rlock_thread_id());
    char *oowner = th_owner(other, rlock_thread_id());
    rlock *l, *o;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_new(other, name, &o));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    force(other, name);
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_ok(rlock_lock(l, 20000));
    cr_assert_eq(th_hget_int(r, name, owner), 2);
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    force(other, name);
    th_ok(rlock_lock(o, LONG_LEASE_MS));
    assert_other(r, name, oowner, "taken");
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    assert_other(r, name, oowner, "unlock 1");
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    assert_other(r, name, oowner, "unlock 2");
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    assert_other(r, name, oowner, "unlock 3");
    /* A fresh hold after all that is renewed and released normally. */
    th_ok(rlock_unlock(o));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    rlock_free(l);
    rlock_free(o);
    rlock_client_free(c);
    rlock_client_free(other);
    redisFree(r);
    free(owner);
    free(oowner);
    free(name);
}

/* Two handles of one name in one thread share the thread's levels: lost
 * through one, unwound through the other. */
Test(revunwind, two_handles_of_one_name_share_the_lost_levels)
{
    rlock_client *c = th_client(NULL, 0), *other = th_client(NULL, 0);
    redisContext *r = th_redis(0);
    char *name = th_name("ru-handles");
    rlock *a, *b;
    th_ok(rlock_new(c, name, &a));
    th_ok(rlock_new(c, name, &b));
    th_ok(rlock_lock(a, RLOCK_WATCHDOG));
    th_ok(rlock_lock(b, RLOCK_WATCHDOG));
    force(other, name);
    rlock_free(a); /* a handle freed with lost levels */
    th_assert_status(rlock_unlock(b), RLOCK_ELOST);
    th_assert_status(rlock_unlock(b), RLOCK_ELOST);
    th_assert_status(rlock_unlock(b), RLOCK_ENOTOWNER);
    rlock_free(b);
    rlock_client_free(c);
    rlock_client_free(other);
    redisFree(r);
    free(name);
}

/* A fresh watchdog-mode hold above lost levels is renewed (it is a real
 * hold), and not after its unlock. */
Test(revunwind, fresh_hold_above_lost_levels_is_renewed)
{
    rlock_client *c = th_client(NULL, 600), *other = th_client(NULL, 0);
    redisContext *r = th_redis(0);
    char *name = th_name("ru-renew");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    force(other, name);
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_wait_renewal(r, name, 3000);
    th_wait_renewal(r, name, 3000);
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0);
    th_sleep_ms(800);
    cr_assert_eq(th_exists(r, name), 0);
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    rlock_free(l);
    rlock_client_free(c);
    rlock_client_free(other);
    redisFree(r);
    free(name);
}

/* The lost-lock callback: once per loss of a watchdog-mode hold, so two
 * for lose, relock, lose again. */
Test(revunwind, lost_callback_once_per_loss)
{
    th_lost_count k = {PTHREAD_MUTEX_INITIALIZER, 0};
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = th_url();
    cfg.watchdog_timeout_ms = 600;
    cfg.on_lock_lost = th_count_lost;
    cfg.on_lock_lost_arg = &k;
    rlock_client *c = th_client_cfg(&cfg);
    redisContext *r = th_redis(0);
    char *name = th_name("ru-cb");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_run(r, "DEL %s", name);
    cr_assert(TH_POLL(th_lost_calls(&k) == 1, 3000));
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_run(r, "DEL %s", name);
    cr_assert(TH_POLL(th_lost_calls(&k) == 2, 3000), "reports: %d", th_lost_calls(&k));
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    th_sleep_ms(th_ms(800));
    cr_assert_eq(th_lost_calls(&k), 2, "reports: %d", th_lost_calls(&k));
    rlock_free(l);
    rlock_client_free(c);
    redisFree(r);
    free(name);
}

/* A thread that exits with lost levels: its record goes, the name can be
 * taken by others, and a later thread of the process is not affected. */
typedef struct exiter {
    rlock_client *c, *other;
    const char *name;
} exiter;

static void *exit_with_lost_levels(void *arg)
{
    exiter *e = arg;
    rlock *l;
    th_ok(rlock_new(e->c, e->name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    force(e->other, e->name);
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    rlock_free(l);
    return NULL;
}

Test(revunwind, thread_exit_with_lost_levels)
{
    rlock_client *c = th_client(NULL, 0), *other = th_client(NULL, 0);
    redisContext *r = th_redis(0);
    char *name = th_name("ru-exit");
    exiter e = {c, other, name};
    for (int i = 0; i < 20; i++) {
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, exit_with_lost_levels, &e), 0);
        pthread_join(t, NULL);
    }
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_ok(rlock_unlock(l));
    uint64_t held = 9;
    th_ok(rlock_client_stat(c, RLOCK_STAT_HELD, &held));
    cr_assert_eq(held, 0);
    cr_assert_eq(th_exists(r, name), 0);
    rlock_free(l);
    rlock_client_free(c);
    rlock_client_free(other);
    redisFree(r);
    free(name);
}

/* fork() with lost levels in the parent: the child's calls on the
 * parent's client answer ECLOSED and touch nothing; the parent then
 * unwinds as before. */
static int child_unlocks(void *arg)
{
    rlock *l = arg;
    rlock_status st = rlock_unlock(l);
    return st == RLOCK_ECLOSED ? 0 : 10 + (int)st;
}

Test(revunwind, fork_with_lost_levels)
{
    rlock_client *c = th_client(NULL, 0), *other = th_client(NULL, 0);
    char *name = th_name("ru-fork");
    char *oowner = th_owner(other, rlock_thread_id());
    rlock *l, *o;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_new(other, name, &o));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    force(other, name);
    th_ok(rlock_lock(o, LONG_LEASE_MS));
    pid_t pid = th_fork(child_unlocks, l);
    cr_assert_eq(th_wait(pid), 0, "the child's unlock did not answer ECLOSED");
    /* Connected after the fork: under valgrind the child's exit checks for
     * leaks, and a context only the parent's registers point to would read
     * as lost there. */
    redisContext *r = th_redis(0);
    assert_other(r, name, oowner, "after the child");
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    assert_other(r, name, oowner, "after the parent");
    th_ok(rlock_unlock(o));
    rlock_free(l);
    rlock_free(o);
    rlock_client_free(c);
    rlock_client_free(other);
    redisFree(r);
    free(oowner);
    free(name);
}

/* ---- rlock_wait_unlocked ------------------------------------------------ */

/* Six waiters in one client queued behind another client's hold, the
 * one at index acquirer with rlock_lock(), the others with
 * rlock_wait_unlocked(): the holder's unlock frees them all, each within
 * a second, not at the holder's lease. */
static void six_waiters_all_woken(const char *prefix, int acquirer)
{
    rlock_client *a = th_client(NULL, 0), *b = th_client(NULL, 0);
    char *name = th_name(prefix);
    rlock *hl;
    th_ok(rlock_new(b, name, &hl));
    th_ok(rlock_lock(hl, LONG_LEASE_MS));
    th_bg w[6];
    pthread_t t[6];
    for (int i = 0; i < 6; i++) {
        w[i] = (th_bg){.c = a, .name = name, .wait_ms = RLOCK_WAIT_FOREVER, .lock = i == acquirer};
        cr_assert_eq(pthread_create(&t[i], NULL, th_bg_main, &w[i]), 0);
        th_wait_blocked(th_bg_tid(&w[i]), 3000);
    }
    int64_t at = th_now_ms();
    th_ok(rlock_unlock(hl));
    for (int i = 0; i < 6; i++) {
        pthread_join(t[i], NULL);
        th_ok(w[i].st);
        cr_assert(w[i].returned_at - at < th_ms(1000), "waiter %d returned %lld ms after", i,
                  (long long)(w[i].returned_at - at));
    }
    rlock_free(hl);
    rlock_client_free(a);
    rlock_client_free(b);
    free(name);
}

/* Five waiters of rlock_wait_unlocked() queued before an rlock_lock()
 * waiter, all in one client: the holder's unlock frees them all and the
 * acquirer gets the lock within a second, not at the holder's lease. */
Test(revunwind, acquirer_behind_five_watchers_woken_within_a_second)
{
    six_waiters_all_woken("ru-five", 5);
}

/* The same with the acquirer first and the watchers behind it: they see
 * the lock free once the acquirer has unlocked. */
Test(revunwind, watchers_behind_an_acquirer_see_it_free_after_it)
{
    six_waiters_all_woken("ru-five2", 0);
}

/* A cancel that races the release's wake-up: the acquirer queued behind
 * the cancelled watcher still gets the lock within a second. */
Test(revunwind, cancel_racing_the_wake_passes_it_on)
{
    rlock_client *a = th_client(NULL, 0), *b = th_client(NULL, 0);
    for (int round = 0; round < 15; round++) {
        char *name = th_name("ru-cancel");
        rlock *hl;
        th_ok(rlock_new(b, name, &hl));
        th_ok(rlock_lock(hl, LONG_LEASE_MS));
        rlock_cancel *tok;
        th_ok(rlock_cancel_new(&tok));
        th_bg w = {.c = a, .name = name, .wait_ms = RLOCK_WAIT_FOREVER, .cancel = tok};
        th_bg acq = {.c = a, .name = name, .wait_ms = RLOCK_WAIT_FOREVER, .lock = true};
        pthread_t t1, t2;
        cr_assert_eq(pthread_create(&t1, NULL, th_bg_main, &w), 0);
        th_wait_blocked(th_bg_tid(&w), 3000);
        cr_assert_eq(pthread_create(&t2, NULL, th_bg_main, &acq), 0);
        th_wait_blocked(th_bg_tid(&acq), 3000);
        int64_t at = th_now_ms();
        th_ok(rlock_unlock(hl));
        if (round % 3) {
            th_sleep_ms(round % 5);
        }
        rlock_cancel_fire(tok);
        pthread_join(t1, NULL);
        pthread_join(t2, NULL);
        cr_assert(w.st == RLOCK_OK || w.st == RLOCK_ECANCELED, "%s", rlock_status_name(w.st));
        th_ok(acq.st);
        cr_assert(acq.returned_at - at < th_ms(1000), "round %d: acquirer got it %lld ms after",
                  round, (long long)(acq.returned_at - at));
        rlock_cancel_free(tok);
        rlock_free(hl);
        free(name);
    }
    rlock_client_free(a);
    rlock_client_free(b);
}

/* The pub/sub link drops and the holder unlocks while it is down (the
 * release message reaches nobody): the watcher still sees the lock free
 * soon after the link is back, not at the holder's lease. */
Test(revunwind, watcher_survives_pubsub_drop)
{
    rlock_client *a = th_client(NULL, 0), *b = th_client(NULL, 0);
    redisContext *r = th_redis(0);
    char *name = th_name("ru-psdrop");
    rlock *hl;
    th_ok(rlock_new(b, name, &hl));
    th_ok(rlock_lock(hl, LONG_LEASE_MS));
    th_bg w = {.c = a, .name = name, .wait_ms = RLOCK_WAIT_FOREVER};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, th_bg_main, &w), 0);
    th_wait_waiters(0, name, 1, 3000);
    th_wait_blocked(th_bg_tid(&w), 3000);
    th_run(r, "CLIENT KILL TYPE pubsub");
    int64_t at = th_now_ms();
    th_ok(rlock_unlock(hl));
    pthread_join(t, NULL);
    th_ok(w.st);
    cr_assert(w.returned_at - at < th_ms(3000), "returned %lld ms after the unlock",
              (long long)(w.returned_at - at));
    rlock_free(hl);
    rlock_client_free(a);
    rlock_client_free(b);
    redisFree(r);
    free(name);
}

/* The client freed while a watcher waits: RLOCK_ECLOSED, promptly. */
Test(revunwind, client_freed_while_watching_is_eclosed)
{
    rlock_client *a = th_client(NULL, 0), *b = th_client(NULL, 0);
    char *name = th_name("ru-closed");
    rlock *hl;
    th_ok(rlock_new(b, name, &hl));
    th_ok(rlock_lock(hl, LONG_LEASE_MS));
    th_bg w = {.c = a, .name = name, .wait_ms = RLOCK_WAIT_FOREVER};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, th_bg_main, &w), 0);
    th_wait_blocked(th_bg_tid(&w), 3000);
    int64_t at = th_now_ms();
    rlock_client_free(a);
    pthread_join(t, NULL);
    th_assert_status(w.st, RLOCK_ECLOSED);
    cr_assert(w.returned_at - at < th_ms(2000), "returned %lld ms after the free",
              (long long)(w.returned_at - at));
    th_ok(rlock_unlock(hl));
    rlock_free(hl);
    rlock_client_free(b);
    free(name);
}

/* EDEADLK through another handle of the same name; after the hold was
 * lost and nobody holds it: free; lost and held by another: waited for. */
Test(revunwind, edeadlk_other_handle_and_lost_hold)
{
    rlock_client *c = th_client(NULL, 0), *other = th_client(NULL, 0);
    char *name = th_name("ru-deadlk");
    rlock *l, *m, *o;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_new(c, name, &m));
    th_ok(rlock_new(other, name, &o));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_assert_status(rlock_wait_unlocked(m, 200, NULL), RLOCK_EDEADLK);
    force(other, name);
    th_ok(rlock_wait_unlocked(m, 200, NULL));
    th_ok(rlock_lock(o, LONG_LEASE_MS));
    th_assert_status(rlock_wait_unlocked(m, 200, NULL), RLOCK_EBUSY);
    th_assert_status(rlock_wait_unlocked(m, 0, NULL), RLOCK_EBUSY);
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_ok(rlock_unlock(o));
    th_ok(rlock_wait_unlocked(m, 0, NULL));
    rlock_free(l);
    rlock_free(m);
    rlock_free(o);
    rlock_client_free(c);
    rlock_client_free(other);
    free(name);
}

/* The caller's own acquire went unanswered (it ran: Redis holds the
 * caller's field) and is left in doubt. rlock_wait_unlocked() settles it
 * first, as every call does: the doubtful acquire is abandoned (the hold it
 * took given back), so the lock is free at once; before the fix the wait
 * sat out its whole length on the caller's own hold and answered
 * RLOCK_EBUSY. */
Test(revunwind, wait_unlocked_on_own_acquire_in_doubt)
{
    tp_proxy *p = tp_new(th_port());
    cr_assert(p != NULL && tp_start(p) == 0, "cannot start the proxy");
    char u[64];
    snprintf(u, sizeof u, "redis://127.0.0.1:%d", tp_port(p));
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = u;
    cfg.command_timeout_ms = 500;
    cfg.connect_timeout_ms = 500;
    cfg.retry_timeout_ms = 1000;
    rlock_client *c = th_client_cfg(&cfg);
    redisContext *r = th_redis(0);
    char *name = th_name("ru-doubt");
    char *owner = th_owner(c, rlock_thread_id());
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    /* Warm the scripts and the pool. */
    th_ok(rlock_lock(l, 20000));
    th_ok(rlock_unlock(l));
    /* Every reply in the next 1.5 s comes 2.5 s late: the acquire runs,
     * its answer (and the resend's) misses the command timeout. */
    tp_delay(p, TP_REPLIES, 1500, 2500);
    rlock_status st = rlock_try_lock(l, 0, 20000);
    cr_assert(st == RLOCK_ETIMEDOUT || st == RLOCK_EIO, "try_lock: %s", rlock_status_name(st));
    th_wait_exists(r, name, 1, 3000);
    cr_assert_eq(th_hget_int(r, name, owner), 1, "the acquire did not run");
    th_sleep_ms(3000); /* the delays are over */
    int64_t t0 = th_now_ms();
    st = rlock_wait_unlocked(l, 3000, NULL);
    int64_t took = th_now_ms() - t0;
    cr_assert(st == RLOCK_OK && took < 1500,
              "wait_unlocked on the caller's own hold in doubt: %s after %lld ms (Redis: "
              "field %lld, PTTL %lld)",
              rlock_status_name(st), (long long)took, th_hget_int(r, name, owner),
              th_pttl(r, name));
    cr_assert_eq(th_exists(r, name), 0, "the settled acquire left its hold");
    rlock_free(l);
    rlock_client_free(c);
    cr_assert_eq(th_exists(r, name), 0, "the close left the hold");
    tp_free(p);
    redisFree(r);
    free(owner);
    free(name);
}

/* A name of RLOCK_NAME_MAX bytes waits like any other; one byte more is
 * refused at rlock_new(). */
Test(revunwind, longest_name_waits)
{
    rlock_client *a = th_client(NULL, 0), *b = th_client(NULL, 0);
    char *name = malloc(RLOCK_NAME_MAX + 2);
    memset(name, 'n', RLOCK_NAME_MAX + 1);
    name[RLOCK_NAME_MAX + 1] = '\0';
    rlock *x = NULL;
    th_assert_status(rlock_new(a, name, &x), RLOCK_EINVAL);
    snprintf(name, 32, "ru-long:%d:", (int)getpid());
    name[strlen(name)] = 'n';
    name[RLOCK_NAME_MAX] = '\0';
    rlock *hl;
    th_ok(rlock_new(b, name, &hl));
    th_ok(rlock_lock(hl, LONG_LEASE_MS));
    th_bg w = {.c = a, .name = name, .wait_ms = 10000};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, th_bg_main, &w), 0);
    th_wait_blocked(th_bg_tid(&w), 3000);
    int64_t at = th_now_ms();
    th_ok(rlock_unlock(hl));
    pthread_join(t, NULL);
    th_ok(w.st);
    cr_assert(w.returned_at - at < th_ms(1000), "returned %lld ms after",
              (long long)(w.returned_at - at));
    rlock_free(hl);
    rlock_client_free(a);
    rlock_client_free(b);
    free(name);
}

/* ---- the scope-bound release in users' builds --------------------------- */

static bool have(const char *cc)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", cc);
    return system(cmd) == 0;
}

/* Compiles src with cc and flags against include/; 0 when it compiled. */
static int compile(const char *cc, const char *flags, const char *src)
{
    char path[] = "/tmp/rlock-revunwind-XXXXXX.c";
    int fd = mkstemps(path, 2);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(src, f);
    fclose(f);
    char *inc = th_build_path("../include");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s -I%s -I include -fsyntax-only %s", cc, flags, inc, path);
    int rc = system(cmd);
    unlink(path);
    free(inc);
    return rc;
}

/* The documented use of RLOCK_SCOPED_LOCK names the variable only for its
 * cleanup; a -Wall -Werror build must not fail on it (clang says "unused
 * variable"). */
Test(revunwind, scoped_lock_unused_variable_builds_with_clang_werror)
{
    if (!have("clang")) {
        cr_skip_test("no clang");
    }
    const char *src = "#include \"rlock.h\"\n"
                      "void work(void);\n"
                      "int f(rlock *l);\n"
                      "int f(rlock *l)\n{\n"
                      "    rlock_status st;\n"
                      "    RLOCK_SCOPED_LOCK(held, l, RLOCK_WATCHDOG, &st);\n"
                      "    if (st != RLOCK_OK)\n        return (int)st;\n"
                      "    work();\n    return 0;\n}\n";
    cr_assert_eq(compile("clang", "-std=c11 -Wall -Werror", src), 0,
                 "RLOCK_SCOPED_LOCK breaks a clang -Wall -Werror build (unused variable)");
    cr_assert_eq(compile("gcc", "-std=c11 -Wall -Wextra -Werror -pedantic", src), 0);
}

/* Including rlock.h, without using the macros, in a -std=c89 (-ansi)
 * build: it compiled before the macros came (warnings only under
 * -pedantic); "static inline" is not C89. */
Test(revunwind, header_still_compiles_as_c89)
{
    const char *src = "#include \"rlock.h\"\nint main(void) { return 0; }\n";
    cr_assert_eq(compile("gcc", "-std=c89", src), 0, "rlock.h no longer compiles with -std=c89");
    if (have("clang")) {
        cr_assert_eq(compile("clang", "-std=c89", src), 0,
                     "rlock.h no longer compiles with clang -std=c89");
    }
}
