/* The fault tests of the reentrant lock (test_faults) for every kind, and
 * the engine's races for every kind whose state differs from it (issue 16).
 * Each scenario is written once against the kind table of test/kinds.h and
 * run per kind:
 *   killed_holder      a holder process killed (SIGKILL): the lock is taken
 *                      by another process once its lease runs out, never
 *                      before, and within the lease and a margin;
 *   stalled_holder     a holder process stopped (SIGSTOP) past its lease:
 *                      another process takes the lock; resumed, the holder
 *                      hears on_lock_lost and its unlock says RLOCK_ELOST,
 *                      and the new hold is untouched;
 *   restart_loading    Redis restarted with a data set it takes a while to
 *                      load (LOADING): a hold survives, its watchdog
 *                      resumes, a waiter and a lock call made while loading
 *                      get the lock after the load, an unlock made while
 *                      loading is done;
 *   cut_release/acquire the reply of an unlock or an acquire lost with its
 *                      connection: exactly one level released or taken;
 *   fork_holder        a fork()ed child of a holder cannot unlock the
 *                      parent's hold, and the parent still holds it;
 *   fair_waiter_*cut_off  a fair waiter whose link dies (its call ends
 *                      with an error, or is cancelled) and whose thread
 *                      makes no further call: once the link is back, the
 *                      free lock goes to the next waiter (the client's
 *                      watchdog sends the unanswered give-up again
 *                      within about a second of Redis answering);
 * and the races, for the fair, fenced, spin, read and write locks:
 *   force_unlock_vs_acquire  a force unlock racing a local acquire: an
 *                      acquisition that survived the delete is renewed, one
 *                      that did not is told (on_lock_lost, RLOCK_ELOST);
 *   nested_unlock_retry  a nested unlock whose reply was cut, and one that
 *                      timed out and is retried by the caller, each release
 *                      exactly one level;
 *   reentry_after_loss  a re-entry of a hold gone from Redis (deleted, or
 *                      its explicit lease over) is RLOCK_ELOST and takes
 *                      nothing; a later lock takes a fresh hold.
 * For the read lock "the other process" is a writer (and for the write
 * lock a reader): readers share, so what must keep out is the other half.
 * Every test runs on a private redis-server; timing scales with th_ms(). */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "faultkit.h"
#include "harness.h"
#include "kinds.h"
#include "proxy.h"

static th_server srv;
static char *url;
/* key-load-delay (µs per key): a restarted server loads the data set of
 * the LOADING tests for a while; the others load nothing. */
static const char *const server_args[] = {"--key-load-delay", "100",
                                          "--loading-process-events-interval-bytes", "1024", NULL};

static void setup(void)
{
    th_server_start_args(&srv, server_args);
    url = th_server_url(&srv);
}

static void teardown(void)
{
    th_server_stop(&srv);
    free(url);
}

TestSuite(kindfaults, .init = setup, .fini = teardown, .timeout = 120);
TestSuite(kindraces, .init = setup, .fini = teardown, .timeout = 120);

/* The holders' watchdog: as in test_faults. */
#define WD_MS 1500

static rlock_client *client(int64_t wd_ms, int64_t cmd_ms, int64_t retry_ms, th_lost_count *lost)
{
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.watchdog_timeout_ms = wd_ms;
    cfg.command_timeout_ms = cmd_ms;
    cfg.connect_timeout_ms = 1000;
    cfg.retry_timeout_ms = retry_ms;
    cfg.subscribe_timeout_ms = 2000;
    if (lost) {
        cfg.on_lock_lost = th_count_lost;
        cfg.on_lock_lost_arg = lost;
    }
    return th_client_cfg(&cfg);
}

static redisContext *admin(void)
{
    return th_redis(srv.port);
}

/* A name for kind k's test: "<what>-<kind>:...". */
static char *kname(const char *what, const th_kind *k)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s-%s", what, k->id);
    return th_name(prefix);
}

/* Waits until name and its read timeout keys are gone (a dead reader's
 * timeout keys expire with its hold, a few ms apart), then asserts that
 * nothing of kind k is left. */
static void assert_free_soon(redisContext *r, const th_kind *k, const char *name)
{
    TH_POLL(th_exists(r, name) == 0 && th_read_timeouts(r, name, NULL, 0) == 0, 1000);
    th_kind_assert_free(r, k, name);
}

/* ---- forked holders ------------------------------------------------------ */

typedef struct holder_arg {
    const th_kind *k;
    const char *name;
    th_ready *ready;
} holder_arg;

static atomic_int child_lost;

static void child_on_lost(const char *name, uint64_t tid, void *arg)
{
    (void)name;
    (void)tid;
    (void)arg;
    atomic_fetch_add(&child_lost, 1);
}

/* In a child: a client of its own and the lock held with the watchdog.
 * Exit codes 10-12 if that fails. */
static int child_hold(holder_arg *a, rlock_client **c, rlock **l)
{
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.watchdog_timeout_ms = WD_MS;
    cfg.command_timeout_ms = 500;
    cfg.on_lock_lost = child_on_lost;
    if (rlock_client_new(&cfg, c) != RLOCK_OK) {
        return 10;
    }
    if (a->k->make(*c, a->name, l) != RLOCK_OK) {
        return 11;
    }
    if (rlock_lock(*l, RLOCK_WATCHDOG) != RLOCK_OK) {
        return 12;
    }
    return th_ready_signal(a->ready) ? 0 : 13;
}

/* Holds the lock until it is killed. */
static int doomed_child(void *arg)
{
    rlock_client *c;
    rlock *l;
    int code = child_hold(arg, &c, &l);
    if (code != 0) {
        return code;
    }
    for (int i = 0; i < 600; i++) {
        th_sleep_ms(100);
    }
    return 0;
}

/* Holds the lock; once stopped and continued, expects to hear of the loss:
 * on_lock_lost once, then RLOCK_ELOST from its unlock and RLOCK_ENOTOWNER
 * from the next. */
static int stalled_child(void *arg)
{
    rlock_client *c;
    rlock *l;
    int code = child_hold(arg, &c, &l);
    if (code != 0) {
        return code;
    }
    TH_POLL(atomic_load(&child_lost) != 0, 30000);
    if (atomic_load(&child_lost) != 1) {
        return 14;
    }
    rlock_status st = rlock_unlock(l);
    if (st != RLOCK_ELOST) {
        return 20 + (int)st;
    }
    st = rlock_unlock(l);
    if (st != RLOCK_ENOTOWNER) {
        return 40 + (int)st;
    }
    rlock_free(l);
    rlock_client_free(c);
    return 0;
}

/* The rival of kind k (this process) takes name, waiting up to 8 s;
 * returns ms since t0 when it had it. */
static int64_t rival_takes(rlock *l, int64_t t0)
{
    th_ok(rlock_try_lock(l, th_ms(8000), RLOCK_WATCHDOG));
    return th_now_ms() - t0;
}

static void killed_holder(int kind)
{
    const th_kind *k = &th_kinds[kind], *rv = th_kind_rival(k);
    char *name = kname("killed", k);
    th_ready ready;
    th_ready_init(&ready);
    holder_arg a = {k, name, &ready};
    pid_t pid = th_fork(doomed_child, &a); /* before this process has threads */
    th_ready_wait(&ready, pid, 10000);
    redisContext *r = admin();
    th_wait_renewal(r, name, 3000); /* held by the child's watchdog */
    cr_assert_eq(kill(pid, SIGKILL), 0);
    int64_t t_kill = th_now_ms();
    long long ttl0 = th_pttl(r, name);
    cr_assert_eq(th_wait(pid), 128 + SIGKILL);
    cr_assert(ttl0 > 0, "%s lock gone at the kill (PTTL %lld)", k->id, ttl0);

    rlock_client *p = client(WD_MS, 500, 5000, NULL);
    rlock *l = th_kind_new(p, rv, name);
    int64_t dt = rival_takes(l, t_kill);
    cr_log_info("%s: PTTL %lld at the kill, the %s lock taken %lld ms after it", k->id, ttl0,
                rv->id, (long long)dt);
    cr_assert(dt >= ttl0 - 100,
              "%s: the %s lock taken %lld ms after the kill, the lease had %lld ms left", k->id,
              rv->id, (long long)dt, ttl0);
    cr_assert(dt <= WD_MS + th_ms(1500),
              "%s: the %s lock taken %lld ms after the kill (lease %d ms)", k->id, rv->id,
              (long long)dt, WD_MS);
    th_kind_assert_held(r, rv, name, p, rlock_thread_id(), 1);
    th_ok(rlock_unlock(l));
    assert_free_soon(r, k, name);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(p);
    th_ready_close(&ready);
    free(name);
}

static void stalled_holder(int kind)
{
    const th_kind *k = &th_kinds[kind], *rv = th_kind_rival(k);
    char *name = kname("stalled", k);
    th_ready ready;
    th_ready_init(&ready);
    holder_arg a = {k, name, &ready};
    pid_t pid = th_fork(stalled_child, &a);
    th_ready_wait(&ready, pid, 10000);
    cr_assert_eq(kill(pid, SIGSTOP), 0);
    int wst;
    cr_assert_eq(waitpid(pid, &wst, WUNTRACED), pid);
    cr_assert(WIFSTOPPED(wst));
    int64_t t_stop = th_now_ms();
    redisContext *r = admin();
    long long ttl0 = th_pttl(r, name);
    cr_assert(ttl0 > 0, "%s lock gone at the stop (PTTL %lld)", k->id, ttl0);

    rlock_client *p = client(WD_MS, 500, 5000, NULL);
    rlock *l = th_kind_new(p, rv, name);
    int64_t dt = rival_takes(l, t_stop);
    cr_log_info("%s: PTTL %lld at the stop, the %s lock taken %lld ms after it", k->id, ttl0,
                rv->id, (long long)dt);
    cr_assert(dt >= ttl0 - 100,
              "%s: the %s lock taken %lld ms after the stop, the lease had %lld ms left", k->id,
              rv->id, (long long)dt, ttl0);
    uint64_t me = rlock_thread_id();
    th_kind_assert_held(r, rv, name, p, me, 1);
    kill(pid, SIGCONT);
    int code = th_wait_bounded(pid, 15000);
    cr_assert_eq(code, 0,
                 "%s: child exit %d (14: on_lock_lost not called once; 20+s: its unlock returned "
                 "s instead of RLOCK_ELOST; 40+s: the next one s instead of RLOCK_ENOTOWNER)",
                 k->id, code);
    th_kind_assert_held(r, rv, name, p, me, 1); /* the stale holder touched nothing */
    th_ok(rlock_unlock(l));
    assert_free_soon(r, k, name);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(p);
    th_ready_close(&ready);
    free(name);
}

/* ---- a restart that loads a data set ------------------------------------ */

/* A thread that takes a lock of kind k (waiting up to wait_ms), holds it
 * hold_ms and unlocks it. */
typedef struct taker {
    rlock_client *c;
    const th_kind *k;
    const char *name;
    int64_t wait_ms;
    int64_t hold_ms;
    rlock_status st, unlock_st;
    atomic_llong got_at; /* 0 until the lock call returned */
    atomic_bool linger;  /* set: the thread stays alive until it is cleared */
    pthread_t th;
} taker;

static void *taker_main(void *arg)
{
    taker *t = arg;
    rlock *l = NULL;
    rlock_status st = t->k->make(t->c, t->name, &l);
    if (st == RLOCK_OK) {
        st = rlock_try_lock(l, t->wait_ms, RLOCK_WATCHDOG);
    }
    t->st = st;
    atomic_store(&t->got_at, th_now_ms());
    if (st == RLOCK_OK) {
        th_sleep_ms(t->hold_ms);
        t->unlock_st = rlock_unlock(l);
    }
    rlock_free(l);
    while (atomic_load(&t->linger)) {
        th_sleep_ms(10);
    }
    return NULL;
}

/* linger: the thread stays alive after its calls until t->linger is
 * cleared (a live thread that makes no further call for the name). */
static void taker_run(taker *t, rlock_client *c, const th_kind *k, const char *name,
                      int64_t wait_ms, int64_t hold_ms, bool linger)
{
    *t = (taker){.c = c, .k = k, .name = name, .wait_ms = wait_ms, .hold_ms = hold_ms};
    t->st = t->unlock_st = (rlock_status)-1;
    atomic_init(&t->got_at, 0);
    atomic_init(&t->linger, linger);
    cr_assert_eq(pthread_create(&t->th, NULL, taker_main, t), 0);
}

static void taker_start(taker *t, rlock_client *c, const th_kind *k, const char *name,
                        int64_t wait_ms, int64_t hold_ms)
{
    taker_run(t, c, k, name, wait_ms, hold_ms, false);
}

static bool taker_returned(taker *t)
{
    return atomic_load(&t->got_at) != 0;
}

static void *restart_main(void *arg)
{
    th_server_restart(arg); /* returns once the load is over (PING answers) */
    return NULL;
}

/* 8000 keys at key-load-delay 100 µs: 1.5 to 2 s of LOADING, five times
 * the 300 ms command timeout. The holds' watchdog lease (9 s) outlasts the
 * restart and the load: the expiry Redis saved is absolute. */
#define LOAD_KEYS 8000
#define LOAD_WD_MS 9000

static void restart_loading(int kind)
{
    const th_kind *k = &th_kinds[kind], *rv = th_kind_rival(k);
    char *n1 = kname("load-held", k), *n2 = kname("load-new", k), *n3 = kname("load-unlock", k);
    th_lost_count lost_a = {PTHREAD_MUTEX_INITIALIZER, 0}, lost_e = {PTHREAD_MUTEX_INITIALIZER, 0};
    rlock_client *a = client(LOAD_WD_MS, 300, 15000, &lost_a);
    rlock_client *b = client(LOAD_WD_MS, 300, 15000, NULL);
    /* An unlock rides out LOADING for about 2 x command_timeout_ms. */
    rlock_client *e = client(LOAD_WD_MS, 3000, 15000, &lost_e);
    rlock *l1 = th_kind_new(a, k, n1), *l3 = th_kind_new(e, k, n3);
    th_ok(rlock_lock(l1, RLOCK_WATCHDOG));
    th_ok(rlock_lock(l3, RLOCK_WATCHDOG));
    uint64_t me = rlock_thread_id();
    taker w, d;
    taker_start(&w, b, rv, n1, th_ms(30000), 0); /* waits for l1 across the restart */
    th_kind_wait_waiting(srv.port, rv, n1, 3000);

    redisContext *r = admin();
    th_run(r, "DEBUG POPULATE %d kf-load 10", LOAD_KEYS);
    th_run(r, "SAVE");
    redisFree(r);
    pthread_t rs;
    cr_assert_eq(pthread_create(&rs, NULL, restart_main, &srv), 0);
    cr_assert(TH_POLL(th_loading(srv.port), 5000), "the restarted server never answered LOADING");
    int64_t t_load = th_now_ms();
    taker_start(&d, b, k, n2, th_ms(30000), 0); /* a fresh lock call meets LOADING */
    rlock_status st3 = rlock_unlock(l3);
    int64_t t3 = th_now_ms() - t_load;
    pthread_join(rs, NULL);
    int64_t t_loaded = th_now_ms() - t_load;
    cr_log_info("%s: loaded %lld ms after LOADING was first seen; the unlock made while loading "
                "returned %s after %lld ms",
                k->id, (long long)t_loaded, rlock_status_name(st3), (long long)t3);
    th_assert_status(st3, RLOCK_OK);
    r = admin();
    th_kind_assert_free(r, k, n3);

    cr_assert(!taker_returned(&w), "%s: the waiter returned %s while the lock was held", k->id,
              rlock_status_name(w.st));
    th_kind_assert_held(r, k, n1, a, me, 1);
    th_wait_renewal(r, n1, LOAD_WD_MS); /* the watchdog renews it again */
    cr_assert(TH_POLL(taker_returned(&d), 15000),
              "%s: the lock call made while loading is still "
              "blocked",
              k->id);
    pthread_join(d.th, NULL);
    th_assert_status(d.st, RLOCK_OK);
    th_assert_status(d.unlock_st, RLOCK_OK);

    int64_t t_rel = th_now_ms();
    th_ok(rlock_unlock(l1));
    cr_assert(TH_POLL(taker_returned(&w), 3000),
              "%s: the waiter did not get the lock within 3 s "
              "of the release",
              k->id);
    pthread_join(w.th, NULL);
    th_assert_status(w.st, RLOCK_OK);
    th_assert_status(w.unlock_st, RLOCK_OK);
    cr_log_info("%s: the waiter took it %lld ms after the release", k->id,
                (long long)(atomic_load(&w.got_at) - t_rel));
    cr_assert_eq(th_lost_calls(&lost_a), 0, "%s: a hold across the restart was reported lost",
                 k->id);
    cr_assert_eq(th_lost_calls(&lost_e), 0);
    th_kind_assert_free(r, k, n1);
    th_kind_assert_free(r, k, n2);
    redisFree(r);
    rlock_free(l1);
    rlock_free(l3);
    rlock_client_free(a);
    rlock_client_free(b);
    rlock_client_free(e);
    free(n1);
    free(n2);
    free(n3);
}

/* ---- replies lost with their connection ---------------------------------- */

/* A client through a proxy to the private server, its scripts loaded. */
static rlock_client *cut_client(tp_proxy **px, const th_kind *k)
{
    *px = th_proxy_start(srv.port);
    rlock_client *c = th_proxy_client(*px, 0);
    th_warm_scripts(c, k->make, k->reentrant);
    return c;
}

static void cut_release(int kind)
{
    const th_kind *k = &th_kinds[kind];
    tp_proxy *px;
    rlock_client *c = cut_client(&px, k);
    char *name = kname("cut-release", k);
    rlock *l = th_kind_new(c, k, name);
    int depth = k->reentrant ? 2 : 1;
    for (int i = 0; i < depth; i++) {
        th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    }
    uint64_t me = rlock_thread_id();
    redisContext *r = admin();
    th_kind_assert_held(r, k, name, c, me, depth);
    /* Each unlock runs, its reply is lost, the library sends it again with
     * the same id: one level released, never two, and never none. */
    for (int i = depth - 1; i >= 0; i--) {
        th_cut_unlock(px, name);
        th_ok(rlock_unlock(l));
        cr_assert_eq(tp_cuts(px), (uint64_t)(depth - i), "the proxy did not cut the unlock");
        if (i > 0) {
            th_kind_assert_held(r, k, name, c, me, i);
        }
    }
    th_kind_assert_free(r, k, name);
    uint64_t held = 1;
    th_ok(rlock_client_stat(c, RLOCK_STAT_HELD, &held));
    cr_assert_eq(held, 0);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    tp_free(px);
    free(name);
}

static long long token_key(redisContext *r, const char *name)
{
    char *tk = th_prefixed("redisson_lock_token", name);
    redisReply *rep = th_cmd(r, "GET %s", tk);
    long long v = rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : -1;
    freeReplyObject(rep);
    free(tk);
    return v;
}

static void cut_acquire(int kind)
{
    const th_kind *k = &th_kinds[kind];
    tp_proxy *px;
    rlock_client *c = cut_client(&px, k);
    char *name = kname("cut-acquire", k);
    rlock *l = th_kind_new(c, k, name);
    uint64_t me = rlock_thread_id();
    redisContext *r = admin();
    int depth = k->reentrant ? 2 : 1;
    /* Each acquire runs, its reply is lost: the library finds out what it
     * did (the same request again, answered by its latch) and counts one
     * hold, never two. */
    for (int i = 1; i <= depth; i++) {
        th_cut_acquire(px, name);
        th_ok(rlock_try_lock(l, 5000, RLOCK_WATCHDOG));
        cr_assert_eq(tp_cuts(px), (uint64_t)i, "the proxy did not cut the acquire");
        th_kind_assert_held(r, k, name, c, me, i);
        int64_t n = 0;
        th_ok(rlock_hold_count(l, &n));
        cr_assert_eq(n, i);
        if (k->fenced) {
            int64_t tok = 0;
            th_ok(rlock_fence_token(l, &tok));
            cr_assert_eq(tok, token_key(r, name),
                         "the token of the acquisition whose reply "
                         "was lost is not the one it took");
        }
    }
    if (!k->reentrant) {
        th_assert_status(rlock_try_lock(l, 0, RLOCK_WATCHDOG), RLOCK_EDEADLK);
        th_kind_assert_held(r, k, name, c, me, 1);
    }
    for (int i = 0; i < depth; i++) {
        th_ok(rlock_unlock(l));
    }
    th_kind_assert_free(r, k, name);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    tp_free(px);
    free(name);
}

/* ---- fork ------------------------------------------------------------------ */

typedef struct fork_arg {
    rlock_client *c;
    rlock *l;
    const th_kind *k;
    const char *name;
} fork_arg;

/* In the child: the inherited client refuses every call; a client of its
 * own cannot unlock the parent's hold nor take it (a reader shares it). */
static int forked_child(void *arg)
{
    fork_arg *f = arg;
    bool b;
    rlock_status got[4] = {rlock_unlock(f->l), rlock_force_unlock(f->l, &b),
                           rlock_lock(f->l, RLOCK_WATCHDOG), rlock_try_lock(f->l, 0, 1000)};
    for (int i = 0; i < 4; i++) {
        if (got[i] != RLOCK_ECLOSED) {
            return 10 + i;
        }
    }
    if (!TH_FORKED_CHILD_CAN_MAKE_CLIENTS) {
        return 0;
    }
    rlock_free(f->l);
    rlock_client_free(f->c);
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    rlock_client *c;
    rlock *own, *rival;
    if (rlock_client_new(&cfg, &c) != RLOCK_OK || f->k->make(c, f->name, &own) != RLOCK_OK ||
        th_kind_rival(f->k)->make(c, f->name, &rival) != RLOCK_OK) {
        return 20;
    }
    if (rlock_unlock(own) != RLOCK_ENOTOWNER) {
        return 21;
    }
    if (rlock_try_lock(rival, 0, 1000) != RLOCK_EBUSY) {
        return 22;
    }
    rlock_status st = rlock_try_lock(own, 0, 1000);
    if (f->k->read ? st != RLOCK_OK || rlock_unlock(own) != RLOCK_OK : st != RLOCK_EBUSY) {
        return 23;
    }
    rlock_free(own);
    rlock_free(rival);
    rlock_client_free(c);
    return 0;
}

static void fork_holder(int kind)
{
    const th_kind *k = &th_kinds[kind];
    char *name = kname("fork", k);
    rlock_client *a = client(WD_MS, 500, 5000, NULL);
    rlock *l = th_kind_new(a, k, name);
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_after_renewal_round(a);
    fork_arg f = {a, l, k, name};
    pid_t pid = th_fork(forked_child, &f);
    int code = th_wait_bounded(pid, 15000);
    cr_assert_eq(code, 0,
                 "%s: child exit %d (-1: hung; 10-13: a call on the inherited client did not "
                 "return RLOCK_ECLOSED; 20: its own client failed; 21: it could unlock the "
                 "parent's hold; 22: the other half was not refused; 23: the same kind was "
                 "not refused (or, for a reader, not shared))",
                 k->id, code);
    redisContext *r = admin();
    th_wait_renewal(r, name, 3000);
    th_kind_assert_held(r, k, name, a, rlock_thread_id(), 1);
    th_ok(rlock_unlock(l));
    th_kind_assert_free(r, k, name);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(a);
    free(name);
}

/* ---- race: force unlock against a local acquire ------------------------- */

#define RACE_N 100
#define RACE_WD_MS 1200

typedef struct race {
    pthread_barrier_t go;
    rlock *locks[RACE_N];
    rlock *forcers[RACE_N];
    rlock_status got[RACE_N];
    rlock_status unlocked[RACE_N];
    uint64_t tid;
} race;

static void *race_acquirer(void *arg)
{
    race *x = arg;
    x->tid = rlock_thread_id();
    for (int i = 0; i < RACE_N; i++) {
        pthread_barrier_wait(&x->go);
        x->got[i] = rlock_try_lock(x->locks[i], 0, RLOCK_WATCHDOG);
    }
    pthread_barrier_wait(&x->go); /* results written */
    /* Alive while the holds are checked: an exited thread's holds are no
     * longer renewed. */
    pthread_barrier_wait(&x->go);
    for (int i = 0; i < RACE_N; i++) {
        x->unlocked[i] = x->got[i] == RLOCK_OK ? rlock_unlock(x->locks[i]) : RLOCK_OK;
    }
    pthread_barrier_wait(&x->go);
    return NULL;
}

static void force_unlock_vs_acquire(int kind)
{
    const th_kind *k = &th_kinds[kind];
    th_lost_count lost = {PTHREAD_MUTEX_INITIALIZER, 0};
    rlock_client *c = client(RACE_WD_MS, 1000, 5000, &lost);
    race *x = calloc(1, sizeof *x);
    char *names[RACE_N];
    for (int i = 0; i < RACE_N; i++) {
        names[i] = kname("race-force", k);
        x->locks[i] = th_kind_new(c, k, names[i]);
        x->forcers[i] = th_kind_new(c, k, names[i]);
    }
    pthread_barrier_init(&x->go, NULL, 2);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, race_acquirer, x), 0);
    int was = 0;
    for (int i = 0; i < RACE_N; i++) {
        pthread_barrier_wait(&x->go);
        bool b = false;
        th_ok(rlock_force_unlock(x->forcers[i], &b));
        was += b;
    }
    pthread_barrier_wait(&x->go);
    redisContext *r = admin();
    bool alive[RACE_N];
    int taken = 0, survivors = 0;
    for (int i = 0; i < RACE_N; i++) {
        taken += x->got[i] == RLOCK_OK;
        alive[i] = x->got[i] == RLOCK_OK && th_kind_count(r, k, names[i], c, x->tid) == 1;
        survivors += alive[i];
    }
    cr_log_info("%s: %d of %d acquisitions, %d after the delete, %d deleted by it (force unlock "
                "found %d held)",
                k->id, taken, RACE_N, survivors, taken - survivors, was);
    cr_assert_eq(taken, RACE_N, "%s: a try_lock of a lock nobody else takes failed", k->id);
    th_sleep_ms(2 * RACE_WD_MS + th_ms(300)); /* two leases pass: only renewal keeps a hold */
    for (int i = 0; i < RACE_N; i++) {
        if (alive[i]) {
            cr_assert_eq(th_kind_count(r, k, names[i], c, x->tid), 1,
                         "%s: %s, acquired after the force unlock, was not renewed", k->id,
                         names[i]);
        }
    }
    /* Each acquisition the delete removed is reported once: the watchdog
     * found it gone. */
    TH_POLL(th_lost_calls(&lost) >= taken - survivors, 2000);
    cr_assert_eq(th_lost_calls(&lost), taken - survivors,
                 "%s: %d on_lock_lost calls for %d deleted acquisitions", k->id,
                 th_lost_calls(&lost), taken - survivors);
    pthread_barrier_wait(&x->go);
    pthread_barrier_wait(&x->go);
    pthread_join(th, NULL);
    for (int i = 0; i < RACE_N; i++) {
        if (x->got[i] == RLOCK_OK) {
            th_assert_status(x->unlocked[i], alive[i] ? RLOCK_OK : RLOCK_ELOST);
        }
        th_kind_assert_free(r, k, names[i]);
        rlock_free(x->locks[i]);
        rlock_free(x->forcers[i]);
        free(names[i]);
    }
    pthread_barrier_destroy(&x->go);
    redisFree(r);
    free(x);
    rlock_client_free(c);
}

/* ---- race: a nested unlock retried --------------------------------------- */

static void nested_unlock_retry(int kind)
{
    const th_kind *k = &th_kinds[kind];
    tp_proxy *px = th_proxy_start(srv.port);
    char u[64];
    snprintf(u, sizeof u, "redis://127.0.0.1:%d", tp_port(px));
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = u;
    cfg.command_timeout_ms = 300;
    cfg.retry_timeout_ms = 5000;
    rlock_client *c = th_client_cfg(&cfg);
    th_warm_scripts(c, k->make, k->reentrant);
    char *name = kname("nested", k);
    rlock *l = th_kind_new(c, k, name);
    for (int i = 0; i < 3; i++) {
        th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    }
    uint64_t me = rlock_thread_id();
    redisContext *r = admin();
    th_kind_assert_held(r, k, name, c, me, 3);
    /* The reply of the inner unlock is lost: the library's resend (same
     * id) releases nothing more. */
    th_cut_unlock(px, name);
    th_ok(rlock_unlock(l));
    cr_assert_eq(tp_cuts(px), 1, "the proxy did not cut the unlock");
    th_kind_assert_held(r, k, name, c, me, 2);
    /* The next inner unlock times out (the server sleeps) and runs when it
     * wakes up; the caller retries, as the header says: one level. */
    th_stall s;
    th_stall_start(&s, srv.port, th_ms(1000));
    rlock_status st = rlock_unlock(l);
    cr_assert(st == RLOCK_ETIMEDOUT || st == RLOCK_EIO, "%s: the unlock during the stall: %s",
              k->id, rlock_status_name(st));
    th_stall_end(&s);
    th_ok(rlock_unlock(l));
    th_kind_assert_held(r, k, name, c, me, 1);
    int64_t n = 0;
    th_ok(rlock_hold_count(l, &n));
    cr_assert_eq(n, 1);
    th_ok(rlock_unlock(l));
    th_kind_assert_free(r, k, name);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    tp_free(px);
    free(name);
}

/* ---- race: re-entry after a loss ------------------------------------------ */

/* Deletes the lock behind its holder's back, as a restart without
 * persistence would: the hash and the read holds' timeout keys. */
static void delete_lock(redisContext *r, const char *name)
{
    th_run(r, "DEL %s", name);
    redisReply *keys = th_cmd(r, "KEYS {%s}:*:rwlock_timeout:*", name);
    for (size_t i = 0; i < keys->elements; i++) {
        th_run(r, "DEL %s", keys->element[i]->str);
    }
    freeReplyObject(keys);
}

static void reentry_after_loss(int kind)
{
    const th_kind *k = &th_kinds[kind];
    rlock_client *c = client(0, 1000, 5000, NULL);
    char *name = kname("reentry-lost", k);
    rlock *l = th_kind_new(c, k, name);
    uint64_t me = rlock_thread_id();
    redisContext *r = admin();

    /* Gone from Redis behind the client's back. */
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    long long tok = k->fenced ? token_key(r, name) : 0;
    delete_lock(r, name);
    th_assert_status(rlock_lock(l, RLOCK_WATCHDOG), RLOCK_ELOST);
    th_kind_assert_free(r, k, name); /* the re-entry took no fresh hold */
    if (k->fenced) {
        cr_assert_eq(token_key(r, name), tok, "the refused re-entry took a token");
    }
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);

    /* An explicit lease that ran out: known by the client's own clock. */
    int64_t lease = th_ms(500);
    th_ok(rlock_lock(l, lease));
    th_sleep_ms(lease + th_ms(300)); /* the lease runs out */
    th_assert_status(rlock_try_lock(l, 0, lease), RLOCK_ELOST);
    th_kind_assert_free(r, k, name);
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);

    /* A later lock takes a fresh hold, of one level. */
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_kind_assert_held(r, k, name, c, me, 1);
    int64_t n = 0;
    th_ok(rlock_hold_count(l, &n));
    cr_assert_eq(n, 1);
    th_ok(rlock_unlock(l));
    th_kind_assert_free(r, k, name);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    free(name);
}

/* ---- a fair waiter cut off from Redis ------------------------------------ */

/* A waiter of the fair lock (rlock_lock(): its place in Redis's queue has
 * a deadline of fair_wait_timeout_ms, 5 minutes) whose link goes dead: its
 * attempts and its give-up go unanswered, and its call returns an error.
 * The thread lives on and makes no further call for the name. Once the
 * link is back, the lock, free by then, must go to the next waiter: the
 * client knows the place it may have left (the request in doubt it keeps),
 * and docs/api.md says a waiter whose wait ends with an error leaves the
 * queue. A place left to its deadline keeps the free lock from everyone
 * for up to 5 minutes. */
static void fair_waiter_cut_off(int kind)
{
    const th_kind *k = &th_kinds[kind];
    char *name = kname("cut-off", k);
    tp_proxy *px = th_proxy_start(srv.port);
    char u[64];
    snprintf(u, sizeof u, "redis://127.0.0.1:%d", tp_port(px));
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = u;
    cfg.command_timeout_ms = 300;
    cfg.connect_timeout_ms = 300;
    cfg.retry_timeout_ms = 1500;
    cfg.subscribe_timeout_ms = 1000;
    rlock_client *b = th_client_cfg(&cfg);
    rlock_client *a = client(WD_MS, 1000, 5000, NULL);
    rlock *la = th_kind_new(a, k, name);
    th_ok(rlock_lock(la, 2000)); /* an explicit lease: the waiter retries when it ends */
    taker w;
    taker_run(&w, b, k, name, RLOCK_WAIT_FOREVER, 0, true);
    redisContext *r = admin();
    cr_assert(TH_POLL(th_fair_queued(r, name) == 1, 3000), "the waiter did not queue");
    tp_mute(px, true); /* its link goes half-dead: nothing it sends is answered */
    cr_assert(TH_POLL(taker_returned(&w), 10000), "the waiter is still waiting");
    cr_assert(w.st == RLOCK_EIO || w.st == RLOCK_ETIMEDOUT, "the cut-off waiter returned %s",
              rlock_status_name(w.st));
    th_wait_exists(r, name, 0, 3000); /* the holder's lease is over: the lock is free */
    tp_mute(px, false);
    tp_drop(px); /* the link is back: its client reconnects */
    long long queued = th_fair_queued(r, name);
    rlock_client *c = client(WD_MS, 1000, 5000, NULL);
    rlock *lc = th_kind_new(c, k, name);
    int64_t t0 = th_now_ms();
    rlock_status st = rlock_try_lock(lc, th_ms(5000), RLOCK_WATCHDOG);
    cr_log_info("%s: the cut-off waiter returned %s; its link back, %lld waiter(s) queued; the "
                "next waiter's try_lock(5 s): %s after %lld ms",
                k->id, rlock_status_name(w.st), queued, rlock_status_name(st),
                (long long)(th_now_ms() - t0));
    th_assert_status(st, RLOCK_OK);
    th_ok(rlock_unlock(lc));
    atomic_store(&w.linger, false);
    pthread_join(w.th, NULL);
    rlock_free(lc);
    rlock_free(la);
    rlock_client_free(c);
    rlock_client_free(a);
    rlock_client_free(b);
    th_kind_assert_free(r, k, name);
    redisFree(r);
    tp_free(px);
    free(name);
}

/* The same place left by a waiter cancelled while its link is dead: its
 * last attempt was answered (queued behind the holder), its give-up goes
 * unanswered. The thread lives on and makes no further call for the name;
 * closing its client would give the place back, but the client stays
 * open. The lock, released once the link is back, must go to the next
 * waiter. */
typedef struct cancelled_waiter {
    rlock *l;
    rlock_cancel *cancel;
    rlock_status st;
    atomic_bool done;
    atomic_bool linger;
} cancelled_waiter;

static void *cancelled_main(void *arg)
{
    cancelled_waiter *x = arg;
    x->st = rlock_lock_ex(x->l, RLOCK_WAIT_FOREVER, RLOCK_WATCHDOG, x->cancel, NULL);
    atomic_store(&x->done, true);
    while (atomic_load(&x->linger)) {
        th_sleep_ms(10);
    }
    return NULL;
}

static void fair_waiter_cancelled_cut_off(int kind)
{
    const th_kind *k = &th_kinds[kind];
    char *name = kname("cancel-cut-off", k);
    tp_proxy *px = th_proxy_start(srv.port);
    char u[64];
    snprintf(u, sizeof u, "redis://127.0.0.1:%d", tp_port(px));
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = u;
    cfg.command_timeout_ms = 300;
    cfg.connect_timeout_ms = 300;
    cfg.retry_timeout_ms = 1500;
    rlock_client *b = th_client_cfg(&cfg);
    rlock_client *a = client(WD_MS, 1000, 5000, NULL);
    rlock *la = th_kind_new(a, k, name);
    th_ok(rlock_lock(la, RLOCK_WATCHDOG));
    cancelled_waiter x = {.l = th_kind_new(b, k, name)};
    th_ok(rlock_cancel_new(&x.cancel));
    atomic_init(&x.done, false);
    atomic_init(&x.linger, true);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, cancelled_main, &x), 0);
    redisContext *r = admin();
    cr_assert(TH_POLL(th_fair_queued(r, name) == 1, 3000), "the waiter did not queue");
    tp_mute(px, true);
    rlock_cancel_fire(x.cancel);
    cr_assert(TH_POLL(atomic_load(&x.done), 5000), "the cancelled waiter is still waiting");
    th_assert_status(x.st, RLOCK_ECANCELED);
    th_sleep_ms(th_ms(1000)); /* its give-up, unanswered, times out */
    tp_mute(px, false);
    tp_drop(px); /* the link is back */
    th_ok(rlock_unlock(la));
    rlock_client *c = client(WD_MS, 1000, 5000, NULL);
    rlock *lc = th_kind_new(c, k, name);
    int64_t t0 = th_now_ms();
    rlock_status st = rlock_try_lock(lc, th_ms(5000), RLOCK_WATCHDOG);
    cr_log_info("%s: a waiter cancelled while cut off: %lld waiter(s) queued; the next "
                "waiter's try_lock(5 s): %s after %lld ms",
                k->id, th_fair_queued(r, name), rlock_status_name(st),
                (long long)(th_now_ms() - t0));
    th_assert_status(st, RLOCK_OK);
    th_ok(rlock_unlock(lc));
    atomic_store(&x.linger, false);
    pthread_join(th, NULL);
    rlock_free(x.l);
    rlock_client_free(b);
    th_kind_assert_free(r, k, name);
    rlock_free(lc);
    rlock_free(la);
    rlock_cancel_free(x.cancel);
    rlock_client_free(c);
    rlock_client_free(a);
    redisFree(r);
    tp_free(px);
    free(name);
}

/* ---- the tests, per kind ---------------------------------------------------- */

#define PER_KIND(suite, fn, tag, kind) \
    Test(suite, fn##_##tag)            \
    {                                  \
        fn(kind);                      \
    }

#define EVERY_KIND(suite, fn)                          \
    PER_KIND(suite, fn, reentrant, TK_REENTRANT)       \
    PER_KIND(suite, fn, fair, TK_FAIR)                 \
    PER_KIND(suite, fn, fenced, TK_FENCED)             \
    PER_KIND(suite, fn, spin, TK_SPIN)                 \
    PER_KIND(suite, fn, read, TK_READ)                 \
    PER_KIND(suite, fn, write, TK_WRITE)               \
    PER_KIND(suite, fn, nonreentrant, TK_NONREENTRANT) \
    PER_KIND(suite, fn, fair_nonreentrant, TK_FAIR_NONREENTRANT)

/* The kinds whose Redis state differs from the reentrant lock's. */
#define STATE_KINDS(suite, fn)             \
    PER_KIND(suite, fn, fair, TK_FAIR)     \
    PER_KIND(suite, fn, fenced, TK_FENCED) \
    PER_KIND(suite, fn, spin, TK_SPIN)     \
    PER_KIND(suite, fn, read, TK_READ)     \
    PER_KIND(suite, fn, write, TK_WRITE)

EVERY_KIND(kindfaults, killed_holder)
EVERY_KIND(kindfaults, stalled_holder)
EVERY_KIND(kindfaults, restart_loading)
EVERY_KIND(kindfaults, cut_release)
EVERY_KIND(kindfaults, cut_acquire)
EVERY_KIND(kindfaults, fork_holder)

STATE_KINDS(kindraces, force_unlock_vs_acquire)
STATE_KINDS(kindraces, nested_unlock_retry)
STATE_KINDS(kindraces, reentry_after_loss)

PER_KIND(kindfaults, fair_waiter_cut_off, fair, TK_FAIR)
PER_KIND(kindfaults, fair_waiter_cut_off, fair_nonreentrant, TK_FAIR_NONREENTRANT)
PER_KIND(kindfaults, fair_waiter_cancelled_cut_off, fair, TK_FAIR)
