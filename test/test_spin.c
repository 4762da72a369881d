/* The spin lock (Redisson getSpinLock, spec 6) against a real Redis: the
 * reentrant lock's hash, but no pub/sub at all (no publish on unlock,
 * force unlock or abandon; waiters never SUBSCRIBE) and waiters that poll
 * with Redisson's exponential back-off (spin_min_delay_ms doubling to
 * spin_max_delay_ms). Attempts are counted and timed with MONITOR on a
 * private server, so that no other test's commands mix in. */
#include <poll.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "proxy.h"

static rlock_client *c;
static redisContext *r;

static void setup(void)
{
    c = th_client(NULL, 0);
    r = th_redis(0);
}

static void teardown(void)
{
    redisFree(r);
    rlock_client_free(c);
}

TestSuite(spin, .init = setup, .fini = teardown, .timeout = 90);

/* A Redisson client's owner field, for holds written by hand. */
#define JAVA_OWNER "6f1c0a4e-2b7d-4c3e-9a51-0d2f8e7b1c44:57"

static rlock_client *client_with(const char *url, int64_t min_ms, int64_t max_ms)
{
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url ? url : th_url();
    cfg.spin_min_delay_ms = min_ms;
    cfg.spin_max_delay_ms = max_ms;
    return th_client_cfg(&cfg);
}

static rlock *spin(rlock_client *cl, const char *name)
{
    rlock *l = NULL;
    th_ok(rlock_new_spin(cl, name, &l));
    return l;
}

/* A thread that waits for a spin lock: rlock_lock_ex(wait_ms, lease,
 * cancel) (or rlock_wait_unlocked() with watch), then unlocks what it got. */
typedef struct waiter {
    rlock_client *c;
    const char *name;
    int64_t wait_ms;
    int64_t lease_ms;
    rlock_cancel *cancel;
    bool watch;
    bool keep; /* leave the hold (and the handle) for the test */
    rlock *l;
    rlock_status st;
    int64_t returned_at;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    th_ok(rlock_new_spin(w->c, w->name, &w->l));
    if (w->watch) {
        w->st = rlock_wait_unlocked(w->l, w->wait_ms, w->cancel);
    } else {
        w->st = rlock_lock_ex(w->l, w->wait_ms, w->lease_ms ? w->lease_ms : RLOCK_WATCHDOG,
                              w->cancel, NULL);
    }
    __atomic_store_n(&w->returned_at, th_now_ms(), __ATOMIC_RELEASE);
    if (w->st == RLOCK_OK && !w->watch && !w->keep) {
        th_ok(rlock_unlock(w->l));
    }
    if (!w->keep) {
        rlock_free(w->l);
        w->l = NULL;
    }
    return NULL;
}

static int64_t returned_at(waiter *w)
{
    return __atomic_load_n(&w->returned_at, __ATOMIC_ACQUIRE);
}

/* ---- layout ----------------------------------------------------------- */

Test(spin, layout_after_lock_reentry_partial_and_full_unlock)
{
    char *name = th_name("spinlayout");
    rlock *l = spin(c, name);
    cr_assert_str_eq(rlock_kind(l), "spin");
    char *owner = th_owner(c, rlock_thread_id());
    for (int i = 1; i <= 3; i++) {
        th_ok(rlock_lock(l, RLOCK_WATCHDOG));
        cr_assert_eq(th_hget_int(r, name, owner), i);
        cr_assert_eq(th_hlen(r, name), 1, "exactly one owner field");
        long long ttl = th_pttl(r, name);
        cr_assert(ttl > 25000 && ttl <= 30000, "watchdog lease 30 s, got %lld", ttl);
        int64_t n = 0;
        th_ok(rlock_hold_count(l, &n));
        cr_assert_eq(n, i);
    }
    redisReply *t = th_cmd(r, "TYPE %s", name);
    cr_assert_str_eq(t->str, "hash", "the reentrant lock's hash");
    freeReplyObject(t);
    th_run(r, "PEXPIRE %s 20000", name);
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_hget_int(r, name, owner), 2);
    cr_assert(th_pttl(r, name) > 25000, "a partial unlock resets the lease");
    th_ok(rlock_unlock(l));
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0, "key deleted at count 0");
    bool held = true;
    th_ok(rlock_is_held_by_current_thread(l, &held));
    cr_assert(!held);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    /* Explicit lease: PEXPIRE with it. */
    th_ok(rlock_lock(l, 5000));
    long long ttl = th_pttl(r, name);
    cr_assert(ttl > 0 && ttl <= 5000, "explicit lease, got %lld", ttl);
    th_ok(rlock_unlock(l));
    rlock_free(l);
    free(owner);
    free(name);
}

/* ---- no pub/sub -------------------------------------------------------- */

/* An acquire of the only hold that runs at once but whose replies the
 * proxy holds back (the caller is told RLOCK_ETIMEDOUT); once they are
 * through, the thread's next call abandons the request and gives the
 * hold back. */
static void abandon_last_hold(tp_proxy *px, rlock *l, const char *name)
{
    int64_t window = th_ms(600), delay = th_ms(800);
    int64_t t0 = th_now_ms();
    tp_delay(px, TP_REPLIES, window, delay);
    th_assert_status(rlock_try_lock(l, 0, 60000), RLOCK_ETIMEDOUT);
    cr_assert_eq(th_exists(r, name), 1, "setup: the acquire did not run");
    while (th_now_ms() - t0 < window + delay + th_ms(200)) {
        th_sleep_ms(20); /* every held reply through: the next call is not */
    }
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    cr_assert_eq(th_exists(r, name), 0, "the abandon gave the hold back");
}

Test(spin, no_publish_on_unlock_force_unlock_or_abandon)
{
    char *name = th_name("spinquiet");
    char *chan = th_channel(name);
    char *pattern = NULL;
    cr_assert(asprintf(&pattern, "*%s*", name) > 0);
    redisContext *sub = th_subscribe(0, chan);
    redisContext *psub = th_psubscribe(0, pattern); /* any channel naming it */
    rlock *l = spin(c, name);

    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_ok(rlock_unlock(l));
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0);
    cr_assert_null(th_next_message(sub, 300), "the spin lock's unlock published");
    cr_assert_null(th_next_message(psub, 50), "the spin lock's unlock published");

    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    bool was = false;
    th_ok(rlock_force_unlock(l, &was));
    cr_assert(was);
    cr_assert_eq(th_exists(r, name), 0);
    th_ok(rlock_force_unlock(l, &was));
    cr_assert(!was, "nothing left to delete");
    cr_assert_null(th_next_message(sub, 300), "the spin lock's force unlock published");
    cr_assert_null(th_next_message(psub, 50), "the spin lock's force unlock published");
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);

    /* An abandoned acquire that had taken the only hold: a reentrant lock
     * publishes as it gives it back (shown first, so the subscribers are
     * known to hear it), the spin lock does not. */
    tp_proxy *px = tp_new(th_port());
    cr_assert(px && tp_start(px) == 0);
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", tp_port(px));
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.command_timeout_ms = 300;
    cfg.retry_timeout_ms = 10000;
    rlock_client *pc = th_client_cfg(&cfg);
    rlock *re = NULL, *sp = spin(pc, name);
    th_ok(rlock_new(pc, name, &re));
    th_ok(rlock_lock(re, 60000)); /* scripts cached, connection made */
    th_ok(rlock_unlock(re));
    th_ok(rlock_lock(sp, 60000));
    th_ok(rlock_unlock(sp));
    char *m = th_next_message(sub, 2000);
    cr_assert_not_null(m, "the reentrant unlock publishes");
    free(m);
    m = th_next_message(psub, 2000);
    cr_assert_not_null(m);
    free(m);

    abandon_last_hold(px, re, name);
    m = th_next_message(sub, 2000);
    cr_assert_not_null(m, "the reentrant abandon publishes as it gives the last hold back");
    cr_assert_str_eq(m, "0");
    free(m);
    m = th_next_message(psub, 2000);
    cr_assert_not_null(m);
    free(m);

    abandon_last_hold(px, sp, name);
    cr_assert_null(th_next_message(sub, 300), "the spin lock's abandon published");
    cr_assert_null(th_next_message(psub, 50), "the spin lock's abandon published");

    rlock_free(re);
    rlock_free(sp);
    rlock_client_free(pc);
    tp_free(px);
    redisFree(psub);
    redisFree(sub);
    rlock_free(l);
    free(pattern);
    free(chan);
    free(name);
}

/* The sub= field of every connection of client cl (CLIENT LIST: named
 * rlock:<first 8 characters of its id>:...), summed with psub= and ssub=. */
static long long subscriptions_of(rlock_client *cl)
{
    char tag[32];
    snprintf(tag, sizeof tag, "name=rlock:%.8s:", rlock_client_id(cl));
    redisReply *list = th_cmd(r, "CLIENT LIST");
    cr_assert_eq(list->type, REDIS_REPLY_STRING);
    long long subs = 0;
    int conns = 0;
    for (char *line = strtok(list->str, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strstr(line, tag)) {
            continue;
        }
        conns++;
        const char *fields[] = {" sub=", " psub=", " ssub="};
        for (int i = 0; i < 3; i++) {
            const char *f = strstr(line, fields[i]);
            if (f) {
                subs += atoll(f + strlen(fields[i]));
            }
        }
    }
    freeReplyObject(list);
    cr_assert(conns >= 2, "the client's connections are listed (%d)", conns);
    return subs;
}

Test(spin, a_spin_waiter_never_subscribes)
{
    char *name = th_name("spinnosub");
    th_run(r, "HSET %s " JAVA_OWNER " 1", name);
    th_run(r, "PEXPIRE %s 60000", name);
    rlock_client *wc = client_with(NULL, 0, 0);
    waiter w = {.c = wc, .name = name, .wait_ms = -1};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, waiter_main, &w), 0);
    waiter v = {.c = wc, .name = name, .wait_ms = -1, .watch = true};
    pthread_t tv;
    cr_assert_eq(pthread_create(&tv, NULL, waiter_main, &v), 0);
    /* Both wait through several back-off rounds. */
    th_sleep_ms(th_ms(600));
    cr_assert_eq(returned_at(&w), 0, "the waiter returned (%s) while the lock was held",
                 rlock_status_name(w.st));
    char *chan = th_channel(name);
    cr_assert_eq(th_numsub(0, chan), 0, "a spin waiter subscribed to the lock channel");
    redisReply *chans = th_cmd(r, "PUBSUB CHANNELS *%s*", name);
    cr_assert_eq(chans->elements, 0, "a channel naming the lock has subscribers");
    freeReplyObject(chans);
    cr_assert_eq(subscriptions_of(wc), 0, "the spin waiters' client subscribed to something");
    th_run(r, "DEL %s", name); /* a Redisson spin unlock: no publish */
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(pthread_join(tv, NULL), 0);
    th_ok(w.st);
    th_ok(v.st);
    rlock_client_free(wc);
    free(chan);
    free(name);
}

/* ---- waiting and back-off ------------------------------------------ */

/* MONITOR on a connection of its own: the arrival times (server clock, in
 * microseconds) of the acquire attempts for name (its acquire latch is
 * only in attempts). */
typedef struct monitor {
    redisContext *m;
    const char *name;
} monitor;

static void monitor_start(monitor *mo, int port, const char *name)
{
    mo->m = th_redis(port);
    mo->name = name;
    th_run(mo->m, "MONITOR");
}

/* Reads what MONITOR sent until nothing comes for 300 ms (scaled). */
static size_t monitor_attempts(monitor *mo, int64_t *us, size_t cap)
{
    char needle[256];
    snprintf(needle, sizeof needle, "\"rlock_acquire_latch:{%s}:", mo->name);
    size_t n = 0;
    for (;;) {
        void *rep = NULL;
        cr_assert_eq(redisGetReplyFromReader(mo->m, &rep), REDIS_OK);
        if (rep) {
            redisReply *x = rep;
            /* The script's own calls show too ("[0 lua]"): only the
             * EVALSHA / EVAL lines are attempts. */
            if (x->type == REDIS_REPLY_STATUS && strstr(x->str, needle) &&
                (strcasestr(x->str, "\"evalsha\"") || strcasestr(x->str, "\"eval\"")) &&
                n < cap) {
                us[n++] = (int64_t)(strtod(x->str, NULL) * 1e6);
            }
            freeReplyObject(rep);
            continue;
        }
        struct pollfd pfd = {mo->m->fd, POLLIN, 0};
        if (poll(&pfd, 1, (int)th_ms(300)) <= 0) {
            break;
        }
        cr_assert_eq(redisBufferRead(mo->m), REDIS_OK);
    }
    redisFree(mo->m);
    return n;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The median of n values (sorted in place): one late wake-up of a loaded
 * machine does not move it. */
static int64_t median(int64_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_i64);
    return v[n / 2];
}

static long long cmdstat_calls(redisContext *x, const char *cmd)
{
    redisReply *info = th_cmd(x, "INFO commandstats");
    char key[64];
    snprintf(key, sizeof key, "cmdstat_%s:calls=", cmd);
    const char *p = strstr(info->str, key);
    long long v = p ? atoll(p + strlen(key)) : 0;
    freeReplyObject(info);
    return v;
}

Test(spin, back_off_doubles_up_to_the_max_delay)
{
    /* With the defaults (1 ms doubling to 128 ms), a waiter that cannot
     * have the lock for 1.5 s attempts about 8 times while its delay grows
     * and then once per 128 ms: some twenty attempts, not hundreds. */
    th_server srv;
    th_server_start(&srv);
    char *url = th_server_url(&srv);
    rlock_client *wc = client_with(url, 0, 0);
    redisContext *x = th_redis(srv.port);
    char *name = th_name("spinbackoff");
    th_run(x, "HSET %s " JAVA_OWNER " 1", name);
    th_run(x, "PEXPIRE %s 60000", name);
    rlock *l = spin(wc, name);
    th_assert_status(rlock_try_lock(l, 0, 1000), RLOCK_EBUSY); /* scripts cached */
    long long before = cmdstat_calls(x, "evalsha") + cmdstat_calls(x, "eval");
    monitor mo;
    monitor_start(&mo, srv.port, name);
    int64_t wait = 1500;
    int64_t holder_ttl = 0;
    th_assert_status(rlock_lock_ex(l, wait, RLOCK_WATCHDOG, NULL, &holder_ttl), RLOCK_EBUSY);
    cr_assert(holder_ttl > 50000 && holder_ttl <= 60000, "the holder's TTL, got %lld",
              (long long)holder_ttl);
    int64_t at[512];
    size_t n = monitor_attempts(&mo, at, 512);
    long long calls = cmdstat_calls(x, "evalsha") + cmdstat_calls(x, "eval") - before;
    cr_assert_eq(calls, (long long)n, "MONITOR saw %zu attempts, commandstats %lld", n, calls);
    cr_log_info("defaults, %lld ms held: %zu attempts", (long long)wait, n);
    /* At most 8 growing delays plus 1500/128 at the cap, plus the first
     * and the last attempt: 22; fewer when the machine is slow. */
    cr_assert(n >= 8 && n <= 24, "%zu attempts in %lld ms: the back-off does not grow as "
              "Redisson's", n, (long long)wait);
    /* Sleep i (from 0) lasts at least min(2^i, 128) ms: it doubles, and the
     * jitter only adds (a sleep is never shorter; the server's clock and
     * the client's millisecond one: 1 ms of slack). The very last sleep
     * ends at the deadline: not counted. */
    int64_t capped[512];
    size_t ncapped = 0;
    for (size_t i = 0; i + 2 < n; i++) {
        int64_t gap = at[i + 1] - at[i], nominal = i < 7 ? (int64_t)1 << i : 128;
        cr_assert(gap >= (nominal - 1) * 1000, "delay %zu is %lld us, below %lld ms", i,
                  (long long)gap, (long long)nominal);
        if (i >= 8) {
            capped[ncapped++] = gap;
        }
    }
    /* The first delay is the minimum, 1 ms; once grown, the delays stay at
     * the maximum, 128 ms, not beyond (the 10 ms slices overrun it little). */
    cr_assert(at[1] - at[0] < th_ms(30) * 1000, "first delay %lld us",
              (long long)(at[1] - at[0]));
    cr_assert(ncapped >= 3, "only %zu delays at the maximum", ncapped);
    int64_t med = median(capped, ncapped);
    cr_log_info("delays at the cap: median %lld us", (long long)med);
    cr_assert(med <= (128 + th_ms(30)) * 1000, "the delays at the cap are %lld us (median), "
              "not 128 ms", (long long)med);
    redisFree(x);
    rlock_free(l);
    rlock_client_free(wc);
    th_server_stop(&srv);
    free(url);
    free(name);
}

Test(spin, min_equal_to_max_is_a_constant_back_off)
{
    th_server srv;
    th_server_start(&srv);
    char *url = th_server_url(&srv);
    rlock_client *wc = client_with(url, 100, 100);
    redisContext *x = th_redis(srv.port);
    char *name = th_name("spinconst");
    th_run(x, "HSET %s " JAVA_OWNER " 1", name);
    th_run(x, "PEXPIRE %s 60000", name);
    rlock *l = spin(wc, name);
    th_assert_status(rlock_try_lock(l, 0, 1000), RLOCK_EBUSY);
    monitor mo;
    monitor_start(&mo, srv.port, name);
    th_assert_status(rlock_try_lock(l, 1000, RLOCK_WATCHDOG), RLOCK_EBUSY);
    int64_t at[512];
    size_t n = monitor_attempts(&mo, at, 512);
    cr_assert(n >= 5 && n <= 12, "%zu attempts in 1000 ms at a constant 100 ms", n);
    int64_t gaps[512];
    for (size_t i = 0; i + 2 < n; i++) { /* the last sleep ends at the deadline */
        gaps[i] = at[i + 1] - at[i];
        cr_assert(gaps[i] >= 99000, "delay %zu is %lld us, below the constant 100 ms", i,
                  (long long)gaps[i]);
    }
    int64_t med = median(gaps, n - 2);
    cr_assert(med <= (100 + th_ms(30)) * 1000, "the delays are %lld us (median), not 100 ms",
              (long long)med);
    redisFree(x);
    rlock_free(l);
    rlock_client_free(wc);
    th_server_stop(&srv);
    free(url);
    free(name);
}

Test(spin, back_off_settings_are_checked)
{
    rlock_config cfg;
    rlock_config_init(&cfg);
    cr_assert_eq(cfg.spin_min_delay_ms, 1, "Redisson's first delay");
    cr_assert_eq(cfg.spin_max_delay_ms, 128, "Redisson's longest delay");
    cfg.url = th_url();
    rlock_client *bad = NULL;
    cfg.spin_min_delay_ms = 50;
    cfg.spin_max_delay_ms = 40;
    th_assert_status(rlock_client_new(&cfg, &bad), RLOCK_EINVAL);
    cr_assert_null(bad);
    cfg.spin_min_delay_ms = 200; /* above the default maximum, no maximum given */
    cfg.spin_max_delay_ms = 0;
    th_assert_status(rlock_client_new(&cfg, &bad), RLOCK_EINVAL);
    cfg.spin_min_delay_ms = -1;
    cfg.spin_max_delay_ms = 128;
    th_assert_status(rlock_client_new(&cfg, &bad), RLOCK_EINVAL);
    cfg.spin_min_delay_ms = 1;
    cfg.spin_max_delay_ms = -5;
    th_assert_status(rlock_client_new(&cfg, &bad), RLOCK_EINVAL);
    cfg.spin_max_delay_ms = RLOCK_MAX_TIME_MS + 1;
    th_assert_status(rlock_client_new(&cfg, &bad), RLOCK_EINVAL);
    cfg.spin_min_delay_ms = RLOCK_MAX_TIME_MS + 1;
    th_assert_status(rlock_client_new(&cfg, &bad), RLOCK_EINVAL);
    cr_assert_null(bad);
    /* min == max, and zeros (the defaults), are accepted. */
    cfg.spin_min_delay_ms = 64;
    cfg.spin_max_delay_ms = 64;
    th_ok(rlock_client_new(&cfg, &bad));
    rlock_client_free(bad);
    cfg.spin_min_delay_ms = 0;
    cfg.spin_max_delay_ms = 0;
    th_ok(rlock_client_new(&cfg, &bad));
    rlock_client_free(bad);
}

Test(spin, try_lock_wait_is_honoured)
{
    char *name = th_name("spintry");
    th_run(r, "HSET %s " JAVA_OWNER " 1", name);
    th_run(r, "PEXPIRE %s 60000", name);
    rlock *l = spin(c, name);
    int64_t t0 = th_now_ms();
    th_assert_status(rlock_try_lock(l, 0, RLOCK_WATCHDOG), RLOCK_EBUSY);
    cr_assert(th_now_ms() - t0 < th_ms(100), "a zero wait waited");
    for (int64_t wait = 300; wait <= 700; wait += 400) {
        t0 = th_now_ms();
        int64_t ttl = 0;
        th_assert_status(rlock_lock_ex(l, wait, 5000, NULL, &ttl), RLOCK_EBUSY);
        int64_t took = th_now_ms() - t0;
        /* Not a delay (128 ms) past the wait, as Redisson's tryLock can be:
         * the last sleep ends at the deadline, one attempt follows. */
        cr_assert(took >= wait && took <= wait + th_ms(100), "try_lock(%lld) took %lld ms",
                  (long long)wait, (long long)took);
        cr_assert(ttl > 0 && ttl <= 60000, "the holder's TTL, got %lld", (long long)ttl);
    }
    cr_assert_eq(th_hget_int(r, name, JAVA_OWNER), 1, "the hold is untouched");
    cr_assert_eq(th_hlen(r, name), 1);
    th_run(r, "DEL %s", name);
    rlock_free(l);
    free(name);
}

Test(spin, cancellation_ends_the_wait_within_a_slice)
{
    /* A constant 3 s back-off: a wait that only noticed the token after
     * its sleep would take seconds. */
    rlock_client *wc = client_with(NULL, 3000, 3000);
    char *name = th_name("spincancel");
    th_run(r, "HSET %s " JAVA_OWNER " 1", name);
    th_run(r, "PEXPIRE %s 60000", name);
    rlock_cancel *tok = NULL;
    th_ok(rlock_cancel_new(&tok));
    waiter w = {.c = wc, .name = name, .wait_ms = -1, .cancel = tok};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, waiter_main, &w), 0);
    th_sleep_ms(th_ms(300)); /* inside its first 3 s sleep */
    cr_assert_eq(returned_at(&w), 0);
    int64_t t0 = th_now_ms();
    rlock_cancel_fire(tok);
    cr_assert_eq(pthread_join(t, NULL), 0);
    th_assert_status(w.st, RLOCK_ECANCELED);
    int64_t took = returned_at(&w) - t0;
    cr_assert(took <= th_ms(150), "cancelled after %lld ms (10 ms slices)", (long long)took);
    cr_assert_eq(th_hget_int(r, name, JAVA_OWNER), 1);
    /* The same for rlock_wait_unlocked(). */
    rlock_cancel_reset(tok);
    waiter v = {.c = wc, .name = name, .wait_ms = -1, .cancel = tok, .watch = true};
    cr_assert_eq(pthread_create(&t, NULL, waiter_main, &v), 0);
    th_sleep_ms(th_ms(300));
    cr_assert_eq(returned_at(&v), 0);
    t0 = th_now_ms();
    rlock_cancel_fire(tok);
    cr_assert_eq(pthread_join(t, NULL), 0);
    th_assert_status(v.st, RLOCK_ECANCELED);
    took = returned_at(&v) - t0;
    cr_assert(took <= th_ms(150), "wait_unlocked cancelled after %lld ms", (long long)took);
    rlock_cancel_free(tok);
    rlock_client_free(wc);
    th_run(r, "DEL %s", name);
    free(name);
}

Test(spin, client_close_wakes_a_spin_waiter)
{
    rlock_client *wc = client_with(NULL, 3000, 3000);
    char *name = th_name("spinclose");
    th_run(r, "HSET %s " JAVA_OWNER " 1", name);
    th_run(r, "PEXPIRE %s 60000", name);
    waiter w = {.c = wc, .name = name, .wait_ms = -1, .keep = true};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, waiter_main, &w), 0);
    th_sleep_ms(th_ms(300));
    cr_assert_eq(returned_at(&w), 0);
    int64_t t0 = th_now_ms();
    rlock_client_free(wc); /* waits for the waiter's call to return */
    int64_t took = th_now_ms() - t0;
    cr_assert_eq(pthread_join(t, NULL), 0);
    th_assert_status(w.st, RLOCK_ECLOSED);
    cr_assert(returned_at(&w) - t0 <= th_ms(300), "woken after %lld ms",
              (long long)(returned_at(&w) - t0));
    cr_assert(took < th_ms(1500), "rlock_client_free() took %lld ms", (long long)took);
    rlock_free(w.l);
    cr_assert_eq(th_hget_int(r, name, JAVA_OWNER), 1);
    th_run(r, "DEL %s", name);
    free(name);
}

/* ---- holders in other processes ---------------------------------------- */

typedef struct child_hold {
    const char *name;
    int64_t hold_ms;
    int fd; /* the child writes its th_now_ms() after the lock, then after
               the unlock returned */
} child_hold;

static int hold_then_release(void *arg)
{
    child_hold *h = arg;
    rlock_client *cc = NULL;
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = th_url();
    if (rlock_client_new(&cfg, &cc) != RLOCK_OK) {
        return 10;
    }
    rlock *l;
    if (rlock_new_spin(cc, h->name, &l) != RLOCK_OK || rlock_lock(l, RLOCK_WATCHDOG) != RLOCK_OK) {
        return 11;
    }
    int64_t t = th_now_ms();
    if (write(h->fd, &t, sizeof t) != sizeof t) {
        return 12;
    }
    th_sleep_ms(h->hold_ms);
    if (rlock_unlock(l) != RLOCK_OK) {
        return 13;
    }
    t = th_now_ms();
    if (write(h->fd, &t, sizeof t) != sizeof t) {
        return 14;
    }
    rlock_free(l);
    rlock_client_free(cc);
    return 0;
}

/* valgrind checks each forked child for leaks at its _exit(): the parent's
 * handle, held only in a register, would count as lost in the child. */
static rlock *volatile reachable;

Test(spin, waiter_takes_the_lock_within_the_max_delay_of_a_release_elsewhere)
{
    if (!TH_FORKED_CHILD_CAN_MAKE_CLIENTS) {
        cr_skip_test("a forked child cannot make clients under this sanitizer");
    }
    char *name = th_name("spinwake");
    rlock *l = spin(c, name);
    reachable = l;
    int64_t after[3];
    for (int round = 0; round < 3; round++) {
        int fds[2];
        cr_assert_eq(pipe(fds), 0);
        /* Held long enough for the waiter's delay to reach its maximum. */
        child_hold h = {name, 700 + 150 * round, fds[1]};
        pid_t pid = th_fork(hold_then_release, &h);
        close(fds[1]);
        int64_t locked_at = 0, released_at = 0;
        cr_assert_eq(read(fds[0], &locked_at, sizeof locked_at), (ssize_t)sizeof locked_at);
        th_ok(rlock_lock(l, RLOCK_WATCHDOG));
        int64_t got = th_now_ms();
        cr_assert_eq(read(fds[0], &released_at, sizeof released_at),
                     (ssize_t)sizeof released_at);
        close(fds[0]);
        int ws = th_wait(pid);
        cr_assert_eq(ws, 0, "round %d: the holding child ended with %d", round, ws);
        after[round] = got - released_at;
        cr_assert(after[round] <= 128 + th_ms(400),
                  "round %d: acquired %lld ms after the release (at most 128 ms)", round,
                  (long long)after[round]);
        th_ok(rlock_unlock(l));
    }
    int64_t med = median(after, 3);
    cr_log_info("acquired after the release: median %lld ms, max %lld ms", (long long)med,
                (long long)after[2]);
    cr_assert(med <= 128 + th_ms(60), "acquired %lld ms (median) after the release, not within "
              "the 128 ms maximum delay", (long long)med);
    rlock_free(l);
    free(name);
}

typedef struct counting {
    const char *name;
    const char *counter;
    int iterations;
} counting;

static void *count_thread(void *arg)
{
    counting *k = arg;
    rlock_client *cc = NULL;
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = th_url();
    if (rlock_client_new(&cfg, &cc) != RLOCK_OK) {
        return (void *)1;
    }
    struct timeval tv = {5, 0};
    redisContext *x = redisConnectWithTimeout("127.0.0.1", th_port(), tv);
    rlock *l = NULL;
    long bad = (!x || x->err || rlock_new_spin(cc, k->name, &l) != RLOCK_OK) ? 2 : 0;
    for (int i = 0; i < k->iterations && !bad; i++) {
        if (rlock_lock(l, i % 2 ? RLOCK_WATCHDOG : 10000) != RLOCK_OK) {
            bad = 3;
            break;
        }
        /* A non-atomic increment: a second holder would lose updates. */
        redisReply *g = redisCommand(x, "GET %s", k->counter);
        long long v = g && g->type == REDIS_REPLY_STRING ? atoll(g->str) : 0;
        freeReplyObject(g);
        th_sleep_ms(1);
        freeReplyObject(redisCommand(x, "SET %s %lld", k->counter, v + 1));
        if (rlock_unlock(l) != RLOCK_OK) {
            bad = 4;
        }
    }
    if (x) {
        redisFree(x);
    }
    rlock_free(l);
    rlock_client_free(cc);
    return (void *)bad;
}

static int count_process(void *arg)
{
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        if (pthread_create(&t[i], NULL, count_thread, arg) != 0) {
            return 20;
        }
    }
    int code = 0;
    for (int i = 0; i < 2; i++) {
        void *res = NULL;
        pthread_join(t[i], &res);
        if (res) {
            code = (int)(long)res;
        }
    }
    return code;
}

Test(spin, mutual_exclusion_across_processes, .timeout = 120)
{
    if (!TH_FORKED_CHILD_CAN_MAKE_CLIENTS) {
        cr_skip_test("a forked child cannot make clients under this sanitizer");
    }
    char *name = th_name("spinmutex");
    char *counter = NULL;
    cr_assert(asprintf(&counter, "%s:counter", name) > 0);
    enum { NPROC = 3, ITER = 12 };
    counting k = {name, counter, ITER};
    pid_t pids[NPROC];
    for (int i = 0; i < NPROC; i++) {
        pids[i] = th_fork(count_process, &k);
    }
    for (int i = 0; i < NPROC; i++) {
        cr_assert_eq(th_wait_bounded(pids[i], 100000), 0, "process %d failed", i);
    }
    redisReply *g = th_cmd(r, "GET %s", counter);
    cr_assert_eq(g->type, REDIS_REPLY_STRING);
    cr_assert_eq(atoll(g->str), NPROC * 2 * ITER, "lost updates: %s of %d", g->str,
                 NPROC * 2 * ITER);
    freeReplyObject(g);
    cr_assert_eq(th_exists(r, name), 0);
    th_run(r, "DEL %s", counter);
    free(counter);
    free(name);
}

/* ---- the watchdog ------------------------------------------------------ */

Test(spin, watchdog_renews_and_reports_a_lost_hold)
{
    th_lost_count lost = {PTHREAD_MUTEX_INITIALIZER, 0};
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = th_url();
    cfg.watchdog_timeout_ms = 1500;
    cfg.on_lock_lost = th_count_lost;
    cfg.on_lock_lost_arg = &lost;
    rlock_client *wc = th_client_cfg(&cfg);
    char *name = th_name("spinwd");
    rlock *l = spin(wc, name);
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    long long ttl = th_pttl(r, name);
    cr_assert(ttl > 0 && ttl <= 1500);
    th_wait_renewal(r, name, 3000);
    th_wait_renewal(r, name, 3000);
    cr_assert_eq(th_lost_calls(&lost), 0);
    th_run(r, "DEL %s", name); /* taken away behind its back */
    cr_assert(TH_POLL(th_lost_calls(&lost) == 1, 5000), "the loss was not reported");
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    /* An explicit lease is not renewed. */
    th_ok(rlock_lock(l, 600));
    th_wait_exists(r, name, 0, 600 + 3000);
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    rlock_free(l);
    rlock_client_free(wc);
    free(name);
}

/* ---- interplay with Redisson and other kinds --------------------------- */

Test(spin, a_redisson_hold_written_by_hand_is_respected)
{
    char *name = th_name("spinjava");
    th_run(r, "HSET %s " JAVA_OWNER " 1", name);
    th_run(r, "PEXPIRE %s 60000", name);
    rlock *l = spin(c, name);
    th_assert_status(rlock_try_lock(l, 0, RLOCK_WATCHDOG), RLOCK_EBUSY);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    bool locked = false, held = true;
    th_ok(rlock_is_locked(l, &locked));
    th_ok(rlock_is_held_by_current_thread(l, &held));
    cr_assert(locked && !held);
    int64_t n = -1, ttl = 0;
    th_ok(rlock_hold_count(l, &n));
    cr_assert_eq(n, 0);
    th_ok(rlock_remain_ttl(l, &ttl));
    cr_assert(ttl > 50000 && ttl <= 60000);
    cr_assert_eq(th_hget_int(r, name, JAVA_OWNER), 1);
    cr_assert_eq(th_hlen(r, name), 1);
    /* A waiter takes it once the Java holder's unlock (a DEL, no publish)
     * ran: within the longest delay. */
    waiter w = {.c = c, .name = name, .wait_ms = -1, .lease_ms = 10000, .keep = true};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, waiter_main, &w), 0);
    th_sleep_ms(th_ms(700));
    cr_assert_eq(returned_at(&w), 0, "took a lock held by hand");
    int64_t t0 = th_now_ms();
    th_run(r, "DEL %s", name);
    cr_assert_eq(pthread_join(t, NULL), 0);
    th_ok(w.st);
    cr_assert(returned_at(&w) - t0 <= 128 + th_ms(250), "acquired %lld ms after the release",
              (long long)(returned_at(&w) - t0));
    redisReply *h = th_cmd(r, "HGETALL %s", name);
    cr_assert_eq(h->elements, 2, "one owner field");
    cr_assert_str_eq(h->element[1]->str, "1");
    cr_assert_eq(strncmp(h->element[0]->str, rlock_client_id(c), 36), 0);
    freeReplyObject(h);
    cr_assert(th_pttl(r, name) <= 10000, "the waiter's lease");
    /* The waiter's thread has ended with its hold (an explicit lease,
     * not renewed): a Java admin's forceUnlock, a DEL. */
    bool was = false;
    th_ok(rlock_force_unlock(l, &was));
    cr_assert(was);
    rlock_free(w.l);
    rlock_free(l);
    free(name);
}

Test(spin, another_kind_at_the_name_is_ekind_and_untouched)
{
    char *name = th_name("spinkind");
    /* A read/write lock's hash: a 'mode' field. */
    th_run(r, "HSET %s mode read " JAVA_OWNER " 1", name);
    th_run(r, "PEXPIRE %s 60000", name);
    rlock *l = spin(c, name);
    int64_t t0 = th_now_ms();
    th_assert_status(rlock_try_lock(l, 0, RLOCK_WATCHDOG), RLOCK_EKIND);
    th_assert_status(rlock_lock(l, RLOCK_WATCHDOG), RLOCK_EKIND);
    cr_assert(th_now_ms() - t0 < th_ms(500), "a lock of another kind was waited for");
    cr_assert_eq(th_hlen(r, name), 2, "the read/write hash was changed");
    redisReply *m = th_cmd(r, "HGET %s mode", name);
    cr_assert_str_eq(m->str, "read");
    freeReplyObject(m);
    cr_assert_eq(th_hget_int(r, name, JAVA_OWNER), 1);
    cr_assert(th_pttl(r, name) <= 60000);
    /* A key of another type. */
    th_run(r, "DEL %s", name);
    th_run(r, "SET %s hello", name);
    th_assert_status(rlock_try_lock(l, 0, RLOCK_WATCHDOG), RLOCK_EKIND);
    th_assert_status(rlock_unlock(l), RLOCK_EKIND);
    redisReply *g = th_cmd(r, "GET %s", name);
    cr_assert_str_eq(g->str, "hello", "the other value is left alone");
    freeReplyObject(g);
    th_run(r, "DEL %s", name);
    rlock_free(l);
    free(name);
}

Test(spin, wait_unlocked_polls)
{
    char *name = th_name("spinwatch");
    th_run(r, "HSET %s " JAVA_OWNER " 1", name);
    th_run(r, "PEXPIRE %s 60000", name);
    rlock *l = spin(c, name);
    th_assert_status(rlock_wait_unlocked(l, 0, NULL), RLOCK_EBUSY);
    int64_t t0 = th_now_ms();
    th_assert_status(rlock_wait_unlocked(l, 300, NULL), RLOCK_EBUSY);
    cr_assert(th_now_ms() - t0 >= 300);
    waiter v = {.c = c, .name = name, .wait_ms = -1, .watch = true};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, waiter_main, &v), 0);
    th_sleep_ms(th_ms(500));
    cr_assert_eq(returned_at(&v), 0, "saw a held lock free");
    char *chan = th_channel(name);
    cr_assert_eq(th_numsub(0, chan), 0, "the watcher subscribed");
    t0 = th_now_ms();
    th_run(r, "DEL %s", name);
    cr_assert_eq(pthread_join(t, NULL), 0);
    th_ok(v.st);
    cr_assert(returned_at(&v) - t0 <= 128 + th_ms(250), "saw the release after %lld ms",
              (long long)(returned_at(&v) - t0));
    /* Its own hold: it would wait on itself. */
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_assert_status(rlock_wait_unlocked(l, 1000, NULL), RLOCK_EDEADLK);
    th_ok(rlock_unlock(l));
    th_ok(rlock_wait_unlocked(l, 0, NULL));
    rlock_free(l);
    free(chan);
    free(name);
}

/* ---- the constructors ---------------------------------------------------- */

typedef struct closing {
    rlock_client *c;
    rlock *l;
    atomic_bool done;
} closing;

static void *closing_call(void *arg)
{
    closing *k = arg;
    bool b;
    (void)rlock_is_locked(k->l, &b);
    atomic_store(&k->done, true);
    return NULL;
}

static void *closing_free(void *arg)
{
    closing *k = arg;
    rlock_client_free(k->c);
    atomic_store(&k->done, true);
    return NULL;
}

/* rlock_new_spin() and rlock_new_nonreentrant() check their arguments as
 * rlock_new() does, and refuse a client that is closing. */
Test(spin, constructors_refuse_bad_arguments_and_a_closing_client)
{
    rlock *x = NULL;
    rlock_status (*ctor[2])(rlock_client *, const char *, rlock **) = {rlock_new_spin,
                                                                      rlock_new_nonreentrant};
    char *huge = malloc(RLOCK_NAME_MAX + 2);
    cr_assert(huge);
    memset(huge, 'n', RLOCK_NAME_MAX + 1);
    huge[RLOCK_NAME_MAX + 1] = '\0';
    for (int i = 0; i < 2; i++) {
        th_assert_status(ctor[i](NULL, "n", &x), RLOCK_EINVAL);
        th_assert_status(ctor[i](c, NULL, &x), RLOCK_EINVAL);
        th_assert_status(ctor[i](c, "", &x), RLOCK_EINVAL);
        th_assert_status(ctor[i](c, "n", NULL), RLOCK_EINVAL);
        th_assert_status(ctor[i](c, huge, &x), RLOCK_EINVAL);
        cr_assert_null(x);
        th_ok(ctor[i](c, "n", &x));
        cr_assert_str_eq(rlock_kind(x), i ? "nonreentrant" : "spin");
        cr_assert_str_eq(rlock_name(x), "n");
        rlock_free(x);
        x = NULL;
    }
    free(huge);

    /* A call stalled on the server keeps the close waiting; a constructor
     * called meanwhile is refused at once. */
    th_server srv;
    th_server_start(&srv);
    char *url = th_server_url(&srv);
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.command_timeout_ms = 5000;
    cfg.spin_min_delay_ms = 60000; /* the waiter below sleeps through */
    cfg.spin_max_delay_ms = 60000;
    rlock_client *cc = th_client_cfg(&cfg);
    rlock *sl = spin(cc, "stalled");
    /* A spin waiter of the client, asleep: the close wakes it first. */
    redisContext *x0 = th_redis(srv.port);
    th_run(x0, "HSET held " JAVA_OWNER " 1");
    th_run(x0, "PEXPIRE held 60000");
    redisFree(x0);
    waiter w = {.c = cc, .name = "held", .wait_ms = -1};
    pthread_t tw;
    cr_assert_eq(pthread_create(&tw, NULL, waiter_main, &w), 0);
    th_sleep_ms(th_ms(300)); /* its first attempt is answered: it sleeps */
    closing stalled = {.c = cc, .l = sl}, closer = {.c = cc};
    atomic_init(&stalled.done, false);
    atomic_init(&closer.done, false);
    th_stall st;
    th_stall_start(&st, srv.port, th_ms(3000));
    uint64_t sent0 = 0, sent = 0;
    th_ok(rlock_client_stat(cc, RLOCK_STAT_COMMANDS, &sent0));
    pthread_t ts, tc;
    cr_assert_eq(pthread_create(&ts, NULL, closing_call, &stalled), 0);
    cr_assert(TH_POLL(rlock_client_stat(cc, RLOCK_STAT_COMMANDS, &sent) == RLOCK_OK &&
                          sent > sent0,
                      2000),
              "the stalled call sent nothing");
    cr_assert_eq(pthread_create(&tc, NULL, closing_free, &closer), 0);
    cr_assert(TH_POLL(returned_at(&w) != 0, 2000), "the close did not wake the waiter");
    th_assert_status(w.st, RLOCK_ECLOSED);
    cr_assert(!atomic_load(&stalled.done) && !atomic_load(&closer.done),
              "no window left: the stalled call returned");
    for (int i = 0; i < 2; i++) {
        th_assert_status(ctor[i](cc, "entering", &x), RLOCK_ECLOSED);
        cr_assert_null(x);
    }
    cr_assert(!atomic_load(&closer.done), "the close ended while the constructors ran");
    pthread_join(ts, NULL);
    pthread_join(tc, NULL);
    pthread_join(tw, NULL);
    th_stall_end(&st);
    rlock_free(sl);
    th_server_stop(&srv);
    free(url);
}
