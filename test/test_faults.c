/* Faults: Redis restarted, stopped, stalled (CLIENT PAUSE, DEBUG SLEEP),
 * connections killed or cut between request and reply, holders stopped,
 * killed, exiting or forking. Every test runs on a PRIVATE redis-server so
 * that restarting or pausing it never disturbs the other tests, uses short
 * timeouts, and bounds every wait. The expectations are those of the design:
 * nobody hangs, a lost hold is reported (on_lock_lost, RLOCK_ELOST), no two
 * owners ever hold the lock at once, and no hold is left behind in Redis
 * that the library does not know about. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "faultkit.h"
#include "harness.h"
#include "proxy.h"

static th_server srv;
static char *url;

/* RLOCK_TEST_FAULTS_TLS=1 (make check runs the suite both ways): the
 * private server also listens with TLS, and every client of the library
 * the suite makes connects with rediss:// and trusts the harness's CA. The
 * test's own checks (admin(), srv.port) stay on the plain port. */
static bool over_tls;
static th_tls certs;

static void setup(void)
{
    const char *e = getenv("RLOCK_TEST_FAULTS_TLS");
    over_tls = e != NULL && *e != '\0' && strcmp(e, "0") != 0;
    if (over_tls) {
        url = th_tls_setup(&certs, &srv, "no", false);
    } else {
        th_server_start(&srv);
        url = th_server_url(&srv);
    }
}

static void teardown(void)
{
    if (over_tls) {
        th_tls_teardown(&certs, &srv, url);
    } else {
        th_server_stop(&srv);
        free(url);
    }
}

TestSuite(faults, .init = setup, .fini = teardown, .timeout = 100);

/* ---- helpers ---------------------------------------------------------- */

typedef struct lost_rec {
    atomic_int count;
    atomic_ullong tid;
    char name[256];
} lost_rec;

static void on_lost(const char *name, uint64_t tid, void *arg)
{
    lost_rec *lr = arg;
    snprintf(lr->name, sizeof lr->name, "%s", name);
    atomic_store(&lr->tid, tid);
    atomic_fetch_add(&lr->count, 1);
}

/* cfg->url = u (the suite's url), with the CA when the suite runs over TLS. */
static void set_url(rlock_config *cfg, const char *u)
{
    cfg->url = u;
    cfg->tls_ca_file = over_tls ? certs.ca : NULL;
}

/* Tests whose fault the proxy injects by matching request bytes (a cut
 * acquire or unlock, a held-back SUBSCRIBE) cannot see them through TLS. */
static void skip_over_tls(const char *what)
{
    if (over_tls) {
        cr_skip_test("%s: the proxy matches request bytes, which TLS encrypts", what);
    }
}

static void config(rlock_config *cfg, const char *u, int64_t wd_ms, int64_t cmd_ms,
                   int64_t retry_ms, lost_rec *lr)
{
    rlock_config_init(cfg);
    set_url(cfg, u);
    cfg->watchdog_timeout_ms = wd_ms;
    cfg->command_timeout_ms = cmd_ms;
    cfg->connect_timeout_ms = 1000;
    cfg->retry_timeout_ms = retry_ms;
    cfg->subscribe_timeout_ms = 2000;
    if (lr) {
        cfg->on_lock_lost = on_lost;
        cfg->on_lock_lost_arg = lr;
    }
}

static rlock_client *fclient(int64_t wd_ms, int64_t cmd_ms, int64_t retry_ms, lost_rec *lr)
{
    rlock_config cfg;
    config(&cfg, url, wd_ms, cmd_ms, retry_ms, lr);
    return th_client_cfg(&cfg);
}

static redisContext *admin(void)
{
    return th_redis(srv.port);
}

/* Waits until want connections subscribe to name's channel. */
static void wait_subscribers(const char *name, long long want, int64_t timeout_ms)
{
    th_wait_waiters(srv.port, name, want, timeout_ms);
}

static bool wait_lost(lost_rec *lr, int want, int64_t timeout_ms)
{
    return TH_POLL(atomic_load(&lr->count) >= want, timeout_ms);
}

static long long client_kill(const char *type)
{
    redisContext *r = admin();
    redisReply *rep = th_cmd(r, "CLIENT KILL TYPE %s", type);
    long long n = rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
    freeReplyObject(rep);
    redisFree(r);
    return n;
}

/* A thread that takes a lock (waiting), holds it a while and unlocks. */
typedef struct waiter {
    rlock_client *c;
    const char *name;
    int64_t wait_ms; /* < 0: rlock_lock() */
    int64_t lease_ms;
    int64_t hold_ms;
    atomic_int *inside;
    atomic_int *overlaps;
    rlock_status st;
    rlock_status unlock_st;
    int64_t t_acquired;
    atomic_bool started; /* about to call rlock_lock/rlock_try_lock */
    atomic_bool done;
    pthread_t th;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    rlock *l = NULL;
    rlock_status st = rlock_new(w->c, w->name, &l);
    if (st == RLOCK_OK) {
        atomic_store(&w->started, true);
        st = w->wait_ms < 0 ? rlock_lock(l, w->lease_ms)
                            : rlock_try_lock(l, w->wait_ms, w->lease_ms);
        w->t_acquired = th_now_ms();
        if (st == RLOCK_OK) {
            if (w->inside && atomic_fetch_add(w->inside, 1) != 0) {
                atomic_fetch_add(w->overlaps, 1);
            }
            th_sleep_ms(w->hold_ms);
            if (w->inside) {
                atomic_fetch_sub(w->inside, 1);
            }
            w->unlock_st = rlock_unlock(l);
        }
        rlock_free(l);
    }
    w->st = st;
    atomic_store(&w->done, true);
    return NULL;
}

static void waiter_start(waiter *w)
{
    atomic_init(&w->done, false);
    atomic_init(&w->started, false);
    w->st = (rlock_status)-1;
    w->unlock_st = (rlock_status)-1;
    cr_assert_eq(pthread_create(&w->th, NULL, waiter_main, w), 0);
}

/* Joins w if it returns within th_ms(timeout_ms). */
static bool waiter_join(waiter *w, int64_t timeout_ms)
{
    timeout_ms = th_ms(timeout_ms);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return pthread_timedjoin_np(w->th, NULL, &ts) == 0;
}

/* waitpid with a bound: the exit code, 128+signal, or -1 after killing a
 * child that did not finish within th_ms(timeout_ms). */
static int wait_bounded(pid_t pid, int64_t timeout_ms)
{
    return th_wait_bounded(pid, timeout_ms);
}

/* A proxy in front of the private server's plain port, relaying at once
 * (its tests skip over TLS: skip_over_tls()). */
static tp_proxy *proxy_start(void)
{
    cr_assert(!over_tls, "the proxy's tests skip over TLS");
    return th_proxy_start(srv.port);
}

/* A client through p, its scripts loaded (test/faultkit.h): cut requests
 * (th_cut_acquire(), th_cut_unlock()) are the scripts themselves, not
 * EVALSHAs answered with NOSCRIPT. */
static rlock_client *proxy_client(tp_proxy *p)
{
    rlock_client *c = th_proxy_client(p, 1500);
    th_warm_scripts(c, rlock_new, true);
    return c;
}

/* ---- Redis restart and outage ----------------------------------------- */

Test(faults, restart_waiters_return_and_holder_learns_loss)
{
    char *name = th_name("restart");
    lost_rec lost = {0};
    rlock_client *a = fclient(1500, 500, 10000, &lost);
    rlock_client *b = fclient(1500, 500, 10000, NULL);
    rlock *l;
    th_ok(rlock_new(a, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    uint64_t me = rlock_thread_id();

    atomic_int inside = 0, overlaps = 0;
    waiter w[3] = {
        {.c = b, .name = name, .wait_ms = -1, .lease_ms = RLOCK_WATCHDOG, .hold_ms = 200},
        {.c = b, .name = name, .wait_ms = 15000, .lease_ms = RLOCK_WATCHDOG, .hold_ms = 200},
        {.c = a, .name = name, .wait_ms = 15000, .lease_ms = 5000, .hold_ms = 200},
    };
    for (int i = 0; i < 3; i++) {
        w[i].inside = &inside;
        w[i].overlaps = &overlaps;
        waiter_start(&w[i]);
    }
    wait_subscribers(name, 2, 3000);
    for (int i = 0; i < 3; i++) {
        cr_assert(!atomic_load(&w[i].done), "waiter %d returned while the lock was held", i);
    }

    int64_t t0 = th_now_ms();
    th_server_restart(&srv);
    /* The server has no persistence: the key is gone, so every waiter must
     * get the lock in turn, well before the 15 s wait runs out. */
    for (int i = 0; i < 3; i++) {
        cr_assert(waiter_join(&w[i], 12000), "waiter %d still blocked 12 s after the restart", i);
    }
    for (int i = 0; i < 3; i++) {
        th_assert_status(w[i].st, RLOCK_OK);
        th_assert_status(w[i].unlock_st, RLOCK_OK);
        cr_log_info("waiter %d acquired %lld ms after the restart", i,
                    (long long)(w[i].t_acquired - t0));
    }
    cr_assert_eq(atomic_load(&overlaps), 0, "two waiters held the lock at once");

    /* The holder's renewal finds its field gone: on_lock_lost, then ELOST. */
    cr_assert(wait_lost(&lost, 1, 5000), "on_lock_lost not called within 5 s of the restart");
    cr_assert_eq(atomic_load(&lost.count), 1);
    cr_assert_str_eq(lost.name, name);
    cr_assert_eq(atomic_load(&lost.tid), me);
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    redisContext *r = admin();
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(b);
    rlock_client_free(a);
    free(name);
}

Test(faults, restart_watchdog_resumes)
{
    char *before = th_name("wd-before");
    char *after = th_name("wd-after");
    lost_rec lost = {0};
    rlock_client *a = fclient(1500, 500, 10000, &lost);
    rlock *l1, *l2;
    th_ok(rlock_new(a, before, &l1));
    th_ok(rlock_new(a, after, &l2));
    th_ok(rlock_lock(l1, RLOCK_WATCHDOG));
    th_server_restart(&srv);
    /* rlock_lock() rides out the dead connections left by the restart. */
    th_ok(rlock_lock(l2, RLOCK_WATCHDOG));
    uint64_t renewed0 = 0, renewed1 = 0;
    th_ok(rlock_client_stat(a, RLOCK_STAT_RENEWED, &renewed0));
    th_sleep_ms(3 * 1500); /* three leases pass: only renewal keeps the lock */
    char *owner = th_owner(a, rlock_thread_id());
    redisContext *r = admin();
    cr_assert_eq(th_hget_int(r, after, owner), 1, "lock taken after the restart not renewed");
    long long ttl = th_pttl(r, after);
    cr_assert(ttl > 0 && ttl <= 1500, "PTTL %lld", ttl);
    th_ok(rlock_client_stat(a, RLOCK_STAT_RENEWED, &renewed1));
    cr_assert(renewed1 - renewed0 >= 4, "only %llu renewals in 3 leases",
              (unsigned long long)(renewed1 - renewed0));
    cr_assert(wait_lost(&lost, 1, 3000));
    cr_assert_str_eq(lost.name, before, "the lost lock is the one held across the restart");
    cr_assert_eq(atomic_load(&lost.count), 1);
    th_ok(rlock_unlock(l2));
    th_assert_status(rlock_unlock(l1), RLOCK_ELOST);
    cr_assert_eq(th_exists(r, after), 0);
    redisFree(r);
    rlock_free(l1);
    rlock_free(l2);
    rlock_client_free(a);
    free(owner);
    free(before);
    free(after);
}

Test(faults, outage_longer_than_retry_timeout_gives_eio)
{
    char *name = th_name("outage");
    rlock_client *a = fclient(1500, 300, 1000, NULL);
    rlock_client *b = fclient(1500, 300, 1000, NULL);
    rlock *l;
    th_ok(rlock_new(a, name, &l));
    th_ok(rlock_lock(l, 20000));
    waiter w = {.c = b, .name = name, .wait_ms = -1, .lease_ms = RLOCK_WATCHDOG};
    waiter_start(&w);
    wait_subscribers(name, 1, 3000);

    int64_t t0 = th_now_ms();
    th_server_kill(&srv);
    cr_assert(waiter_join(&w, 8000), "rlock_lock() still blocked 8 s into the outage");
    th_assert_status(w.st, RLOCK_EIO);
    int64_t dt = w.t_acquired - t0;
    cr_log_info("waiter gave up %lld ms into the outage (retry_timeout_ms 1000)", (long long)dt);
    cr_assert(dt >= 800, "gave up after %lld ms, before retry_timeout_ms", (long long)dt);
    th_assert_status(rlock_unlock(l), RLOCK_EIO);

    th_server_restart(&srv);
    /* The hold is gone with the server: the holder's next unlock says so,
     * and a new acquisition succeeds once the pool has reconnected. */
    th_assert_status(rlock_try_lock(l, 5000, 2000), RLOCK_OK);
    th_ok(rlock_unlock(l));
    rlock_free(l);
    rlock_client_free(a);
    rlock_client_free(b);
    free(name);
}

/* ---- connections killed ----------------------------------------------- */

Test(faults, kill_normal_while_holding_and_waiting)
{
    char *name = th_name("kill-normal");
    lost_rec lost = {0};
    rlock_client *a = fclient(1500, 500, 10000, &lost);
    rlock_client *b = fclient(1500, 500, 10000, NULL);
    rlock *l;
    th_ok(rlock_new(a, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    waiter w = {.c = b, .name = name, .wait_ms = 15000, .lease_ms = RLOCK_WATCHDOG};
    waiter_start(&w);
    wait_subscribers(name, 1, 3000);

    cr_assert(client_kill("normal") >= 2, "expected command connections of both clients");
    /* Longer than the lease: only a watchdog that reconnected keeps it. */
    th_sleep_ms(2500);
    char *owner = th_owner(a, rlock_thread_id());
    redisContext *r = admin();
    cr_assert_eq(th_hget_int(r, name, owner), 1, "holder's lock lapsed after the kill");
    cr_assert(!atomic_load(&w.done), "waiter returned (%s) while the lock was held",
              rlock_status_name(w.st));
    cr_assert_eq(atomic_load(&lost.count), 0);

    int64_t t0 = th_now_ms();
    th_ok(rlock_unlock(l));
    cr_assert(waiter_join(&w, 5000));
    th_assert_status(w.st, RLOCK_OK);
    th_assert_status(w.unlock_st, RLOCK_OK);
    cr_log_info("waiter acquired %lld ms after the unlock", (long long)(w.t_acquired - t0));
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(a);
    rlock_client_free(b);
    free(owner);
    free(name);
}

Test(faults, kill_pubsub_then_release_after_resubscribe)
{
    char *name = th_name("kill-pubsub");
    rlock_client *a = fclient(1500, 500, 10000, NULL);
    rlock_client *b = fclient(1500, 500, 10000, NULL);
    rlock *l;
    th_ok(rlock_new(a, name, &l));
    /* An explicit 60 s lease: only a message (or a reconnect wake-up) can
     * get the waiter in promptly, never the TTL, even with the bounds below
     * scaled by th_ms(). */
    th_ok(rlock_lock(l, 60000));
    waiter w = {.c = b, .name = name, .wait_ms = 15000, .lease_ms = RLOCK_WATCHDOG};
    waiter_start(&w);
    wait_subscribers(name, 1, 3000);

    cr_assert(client_kill("pubsub") >= 1);
    wait_subscribers(name, 1, 3000); /* resubscribed */
    cr_assert(!atomic_load(&w.done), "waiter returned (%s) while the lock was held",
              rlock_status_name(w.st));
    int64_t t0 = th_now_ms();
    th_ok(rlock_unlock(l));
    cr_assert(waiter_join(&w, 5000), "waiter not woken within 5 s (lease 60 s)");
    th_assert_status(w.st, RLOCK_OK);
    th_assert_status(w.unlock_st, RLOCK_OK);
    cr_log_info("waiter acquired %lld ms after the unlock", (long long)(w.t_acquired - t0));
    uint64_t rec = 0;
    th_ok(rlock_client_stat(b, RLOCK_STAT_RECONNECTS, &rec));
    cr_assert(rec >= 1, "RLOCK_STAT_RECONNECTS %llu", (unsigned long long)rec);
    rlock_free(l);
    rlock_client_free(a);
    rlock_client_free(b);
    free(name);
}

/* The release lands while the subscriber is reconnecting: its message is
 * lost, so the waiter must retry once the new subscription is in place
 * (design: the pub/sub thread "wakes every waiter so they retry"). A proxy
 * in front of the waiter's client makes the re-SUBSCRIBE reach Redis 300 ms
 * late, as a slow link would; the release comes inside that window. */
Test(faults, kill_pubsub_and_release_while_resubscribing)
{
    skip_over_tls("the re-SUBSCRIBE held back");
    char *name = th_name("kill-pubsub-race");
    tp_proxy *px = proxy_start();
    rlock_client *a = fclient(1500, 500, 10000, NULL);
    rlock_client *b = proxy_client(px);
    rlock *l;
    th_ok(rlock_new(a, name, &l));
    th_ok(rlock_lock(l, 60000)); /* never the TTL: see above */
    waiter w = {.c = b, .name = name, .wait_ms = 15000, .lease_ms = RLOCK_WATCHDOG};
    waiter_start(&w);
    wait_subscribers(name, 1, 3000);
    cr_assert(!atomic_load(&w.done));

    tp_delay_matching(px, "SUBSCRIBE", th_ms(300));
    cr_assert(client_kill("pubsub") >= 1);
    /* Reconnected, its SUBSCRIBE held back by the proxy: release now. */
    cr_assert(TH_POLL(tp_delayed(px) > 0, 3000), "no re-SUBSCRIBE reached the proxy");
    int64_t t0 = th_now_ms();
    th_ok(rlock_unlock(l));
    cr_assert(waiter_join(&w, 5000),
              "waiter not woken within 5 s of the unlock (lease 60 s): the release "
              "published before the re-SUBSCRIBE took effect was lost and nothing "
              "made the waiter retry once the subscription was back");
    th_assert_status(w.st, RLOCK_OK);
    th_assert_status(w.unlock_st, RLOCK_OK);
    cr_log_info("waiter acquired %lld ms after the unlock", (long long)(w.t_acquired - t0));
    rlock_free(l);
    rlock_client_free(a);
    rlock_client_free(b);
    tp_free(px);
    free(name);
}

typedef struct poker {
    rlock *l;
    int n;
} poker;

static void *poke_main(void *arg)
{
    poker *p = arg;
    for (int i = 0; i < p->n; i++) {
        bool b;
        rlock_is_locked(p->l, &b);
    }
    return NULL;
}

/* Fills the pool with several idle connections, then kills them all. */
static void fill_pool_then_kill(rlock *l)
{
    pthread_t t[4];
    poker p = {l, 300};
    for (int i = 0; i < 4; i++) {
        pthread_create(&t[i], NULL, poke_main, &p);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
    }
    long long killed = client_kill("normal");
    cr_log_info("killed %lld command connection(s)", killed);
    cr_assert(killed >= 2, "the pool should have had several connections, killed %lld", killed);
}

Test(faults, kill_normal_then_unlock_succeeds)
{
    char *name = th_name("kill-unlock");
    rlock_config cfg;
    config(&cfg, url, 1500, 500, 5000, NULL);
    cfg.pool_size = 4;
    rlock_client *a = th_client_cfg(&cfg);
    rlock *l;
    th_ok(rlock_new(a, name, &l));
    th_ok(rlock_lock(l, 20000));
    fill_pool_then_kill(l);
    /* The unlock is idempotent (latch) and retried on a fresh connection:
     * a dropped link must not make it fail. */
    th_ok(rlock_unlock(l));
    redisContext *r = admin();
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(a);
    free(name);
}

Test(faults, kill_normal_then_try_lock_succeeds)
{
    char *name = th_name("kill-trylock");
    rlock_config cfg;
    config(&cfg, url, 1500, 500, 5000, NULL);
    cfg.pool_size = 4;
    rlock_client *a = th_client_cfg(&cfg);
    rlock *l;
    th_ok(rlock_new(a, name, &l));
    fill_pool_then_kill(l);
    /* A free lock and a single attempt: stale pooled connections must not
     * turn it into RLOCK_EIO. */
    th_ok(rlock_try_lock(l, 0, 5000));
    int64_t n = 0;
    th_ok(rlock_hold_count(l, &n));
    cr_assert_eq(n, 1);
    th_ok(rlock_unlock(l));
    rlock_free(l);
    rlock_client_free(a);
    free(name);
}

/* ---- request executed, reply lost ------------------------------------- */

Test(faults, acquire_reply_lost_is_not_counted_twice)
{
    skip_over_tls("the cut acquire");
    tp_proxy *px = proxy_start();
    rlock_client *a = proxy_client(px);
    char *name = th_name("cut-acquire");
    rlock *l;
    th_ok(rlock_new(a, name, &l));
    th_cut_acquire(px, name);
    /* The first acquire runs in Redis but its reply never arrives. The
     * library must find out (spec 2.2: HGET tells for a first acquisition)
     * rather than send it again, which would count a second hold. */
    th_ok(rlock_try_lock(l, 5000, 10000));
    cr_assert_eq(tp_cuts(px), 1, "the proxy did not cut the acquire");
    char *owner = th_owner(a, rlock_thread_id());
    redisContext *r = admin();
    cr_assert_eq(th_hget_int(r, name, owner), 1, "one rlock_try_lock() counted %lld holds",
                 th_hget_int(r, name, owner));
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0, "lock still held (PTTL %lld) after its only unlock",
                 th_pttl(r, name));
    redisFree(r);
    rlock_free(l);
    rlock_client_free(a);
    tp_free(px);
    free(owner);
    free(name);
}

Test(faults, acquire_reply_lost_zero_wait_leaves_no_unknown_hold)
{
    skip_over_tls("the cut acquire");
    tp_proxy *px = proxy_start();
    rlock_client *a = proxy_client(px);
    char *name = th_name("cut-acquire0");
    rlock *l;
    th_ok(rlock_new(a, name, &l));
    th_cut_acquire(px, name);
    rlock_status st = rlock_try_lock(l, 0, 10000);
    cr_assert_eq(tp_cuts(px), 1, "the proxy did not cut the acquire");
    char *owner = th_owner(a, rlock_thread_id());
    redisContext *r = admin();
    long long n = th_hget_int(r, name, owner);
    uint64_t held = 0;
    th_ok(rlock_client_stat(a, RLOCK_STAT_HELD, &held));
    cr_log_info("try_lock(0) whose reply was lost: %s; Redis count %lld; tracked holds %llu",
                rlock_status_name(st), n, (unsigned long long)held);
    /* Either the caller is told it holds the lock (and it is tracked), or
     * Redis holds nothing for it: never a hold nobody knows about. */
    if (st == RLOCK_OK) {
        cr_assert_eq(n, 1);
        cr_assert_eq(held, 1);
        th_ok(rlock_unlock(l));
    } else {
        cr_assert_eq(n, 0,
                     "%s returned, yet Redis holds the lock for this thread "
                     "(count %lld, PTTL %lld) and the library does not track it",
                     rlock_status_name(st), n, th_pttl(r, name));
    }
    redisFree(r);
    rlock_free(l);
    rlock_client_free(a);
    tp_free(px);
    free(owner);
    free(name);
}

Test(faults, unlock_reply_lost_is_retried_idempotently)
{
    skip_over_tls("the cut unlock");
    tp_proxy *px = proxy_start();
    rlock_client *a = proxy_client(px);
    char *name = th_name("cut-unlock");
    rlock *l;
    th_ok(rlock_new(a, name, &l));
    th_ok(rlock_lock(l, 10000));
    th_ok(rlock_lock(l, 10000));
    char *owner = th_owner(a, rlock_thread_id());
    redisContext *r = admin();
    /* The partial unlock runs, its reply is lost, the retry (same latch)
     * must not decrement a second time. */
    th_cut_unlock(px, name);
    th_ok(rlock_unlock(l));
    cr_assert_eq(tp_cuts(px), 1, "the proxy did not cut the unlock");
    cr_assert_eq(th_hget_int(r, name, owner), 1, "the retried unlock decremented twice");
    th_cut_unlock(px, name);
    th_ok(rlock_unlock(l));
    cr_assert_eq(tp_cuts(px), 2);
    cr_assert_eq(th_exists(r, name), 0);
    uint64_t held = 1;
    th_ok(rlock_client_stat(a, RLOCK_STAT_HELD, &held));
    cr_assert_eq(held, 0);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(a);
    tp_free(px);
    free(owner);
    free(name);
}

/* ---- slow or stalled server ------------------------------------------- */

/* The no-orphan tests use long leases (60 s, and a 30 s watchdog): an
 * acquire that Redis ran after its caller gave up would hold that long, so
 * each check below comes long before a lease could run out and tell a
 * released orphan from an expired one. */
enum { ORPHAN_LEASE_MS = 60000, ORPHAN_WATCHDOG_MS = 30000 };

/* After a stall, this thread's next call for l's name must find exactly
 * its own hold in Redis (the late acquire released, not counted on top),
 * and its only unlock must leave nothing behind. */
static void next_call_releases_orphan(rlock *l, const char *name, const char *owner)
{
    redisContext *r = admin();
    th_ok(rlock_try_lock(l, 0, ORPHAN_LEASE_MS));
    cr_assert_eq(th_hget_int(r, name, owner), 1, "%s: the late acquire counts on top of this one",
                 name);
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0, "%s still held (PTTL %lld) after its only unlock", name,
                 th_pttl(r, name));
    redisFree(r);
}

/* Script calls Redis has run (EVALSHA and EVAL), from INFO commandstats. */
static long long script_calls(redisContext *r)
{
    redisReply *rep = th_cmd(r, "INFO commandstats");
    cr_assert_eq(rep->type, REDIS_REPLY_STRING);
    long long n = 0;
    const char *keys[2] = {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="};
    for (int i = 0; i < 2; i++) {
        const char *at = strstr(rep->str, keys[i]);
        if (at) {
            n += atoll(at + strlen(keys[i]));
        }
    }
    freeReplyObject(rep);
    return n;
}

Test(faults, client_pause_calls_time_out_and_leave_no_orphan)
{
    char *n1 = th_name("pause1");
    char *n2 = th_name("pause2");
    rlock_client *a = fclient(ORPHAN_WATCHDOG_MS, 300, 5000, NULL);
    rlock *l1, *l2;
    th_ok(rlock_new(a, n1, &l1));
    th_ok(rlock_new(a, n2, &l2));
    redisContext *r = admin();
    long long scripts0 = script_calls(r);
    freeReplyObject(th_cmd(r, "CLIENT PAUSE 3000 ALL"));
    int64_t t0 = th_now_ms(), t;

    /* Each call is answered by its command timeout, not by the pause. */
    t = th_now_ms();
    th_assert_status(rlock_try_lock(l1, 0, ORPHAN_LEASE_MS), RLOCK_ETIMEDOUT);
    cr_assert(th_now_ms() - t < 2000, "try_lock took %lld ms", (long long)(th_now_ms() - t));
    t = th_now_ms();
    bool b;
    th_assert_status(rlock_is_locked(l1, &b), RLOCK_ETIMEDOUT);
    cr_assert(th_now_ms() - t < 1500);
    /* A call that waits sends its unanswered request again (the same id:
     * it can never count twice) until its wait ends. */
    t = th_now_ms();
    th_assert_status(rlock_try_lock(l2, 1000, RLOCK_WATCHDOG), RLOCK_ETIMEDOUT);
    cr_assert(th_now_ms() - t < 2500, "try_lock took %lld ms", (long long)(th_now_ms() - t));
    uint64_t held = 1;
    th_ok(rlock_client_stat(a, RLOCK_STAT_HELD, &held));
    cr_assert_eq(held, 0, "a timed-out acquire is not tracked as held");

    /* Once the pause is over, Redis runs what it still has queued: only the
     * requests of connections that are still open (it drops those of a
     * client that disconnected while paused, and the library closes a
     * connection whose reply timed out). Whatever ran must be exactly the
     * holds Redis now has for this thread, one per acquire that ran; the
     * next call of the thread releases each of them. */
    th_wait_awake(srv.port, 5000);
    char *owner = th_owner(a, rlock_thread_id());
    long long ran = script_calls(r) - scripts0;
    long long c1 = th_hget_int(r, n1, owner), c2 = th_hget_int(r, n2, owner);
    cr_log_info("after the pause: %lld acquire(s) ran; %s count %lld, %s count %lld", ran, n1, c1,
                n2, c2);
    cr_assert(c1 >= 0 && c1 <= 1 && c2 >= 0 && c2 <= 1, "an acquire ran twice: counts %lld, %lld",
              c1, c2);
    cr_assert_eq(ran, c1 + c2,
                 "%lld acquire script(s) ran during or after the pause, but Redis holds %lld "
                 "hold(s) for the thread",
                 ran, c1 + c2);
    next_call_releases_orphan(l1, n1, owner);
    next_call_releases_orphan(l2, n2, owner);
    cr_assert(th_now_ms() - t0 < ORPHAN_WATCHDOG_MS,
              "too slow to tell a released orphan from an expired one");
    redisFree(r);
    rlock_free(l1);
    rlock_free(l2);
    rlock_client_free(a);
    free(owner);
    free(n1);
    free(n2);
}

Test(faults, debug_sleep_acquire_times_out_and_leaves_no_orphan)
{
    char *n1 = th_name("sleep1");
    char *n2 = th_name("sleep2");
    rlock_client *a = fclient(ORPHAN_WATCHDOG_MS, 300, 5000, NULL);
    rlock *l1, *l2;
    th_ok(rlock_new(a, n1, &l1));
    th_ok(rlock_new(a, n2, &l2));
    th_ok(rlock_lock(l1, 1000)); /* connect and load the scripts first */
    th_ok(rlock_unlock(l1));
    th_stall s;
    th_stall_start(&s, srv.port, 2500);
    int64_t t0 = th_now_ms(), t = t0;
    th_assert_status(rlock_try_lock(l1, 0, ORPHAN_LEASE_MS), RLOCK_ETIMEDOUT);
    cr_assert(th_now_ms() - t < 2000);
    t = th_now_ms();
    th_assert_status(rlock_try_lock(l2, 1000, RLOCK_WATCHDOG), RLOCK_ETIMEDOUT);
    cr_assert(th_now_ms() - t < 2500);
    th_stall_end(&s);

    /* The acquires sent before the timeouts were in the sleeping server's
     * socket buffers: they run once it wakes up, each leaving a hold the
     * library never counted. */
    char *owner = th_owner(a, rlock_thread_id());
    redisContext *r = admin();
    bool ran = TH_POLL(th_hget_int(r, n1, owner) == 1, 2000);
    cr_assert(ran, "the late acquire did not run (%s count %lld): nothing to test", n1,
              th_hget_int(r, n1, owner));
    /* The second acquire needed a new connection (the first call's was
     * dropped when it timed out), whose handshake (CLIENT SETNAME) timed
     * out first: it was never sent. Either way the next call settles. */
    long long c2 = th_hget_int(r, n2, owner);
    cr_assert(c2 == 0 || c2 == 1, "%s count %lld", n2, c2);
    uint64_t held = 1;
    th_ok(rlock_client_stat(a, RLOCK_STAT_HELD, &held));
    cr_assert_eq(held, 0);
    next_call_releases_orphan(l1, n1, owner);
    next_call_releases_orphan(l2, n2, owner);
    cr_assert(th_now_ms() - t0 < ORPHAN_WATCHDOG_MS,
              "too slow to tell a released orphan from an expired one");
    redisFree(r);
    rlock_free(l1);
    rlock_free(l2);
    rlock_client_free(a);
    free(owner);
    free(n1);
    free(n2);
}

Test(faults, debug_sleep_unlock_times_out_then_settles)
{
    char *name = th_name("sleep-unlock");
    lost_rec lost = {0};
    rlock_client *a = fclient(1500, 300, 5000, &lost);
    rlock *l;
    th_ok(rlock_new(a, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_stall s;
    th_stall_start(&s, srv.port, 2000);
    int64_t t = th_now_ms();
    th_assert_status(rlock_unlock(l), RLOCK_ETIMEDOUT);
    cr_assert(th_now_ms() - t < 2000, "unlock took %lld ms", (long long)(th_now_ms() - t));
    th_stall_end(&s);
    /* The timed-out unlock may or may not have run after the sleep, before
     * or after this retry; the retry settles it either way. */
    rlock_status st = rlock_unlock(l);
    cr_log_info("unlock retried after the sleep: %s, on_lock_lost calls %d", rlock_status_name(st),
                atomic_load(&lost.count));
    cr_assert(st == RLOCK_OK || st == RLOCK_ELOST, "retry returned %s", rlock_status_name(st));
    redisContext *r = admin();
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    uint64_t held = 1;
    th_ok(rlock_client_stat(a, RLOCK_STAT_HELD, &held));
    cr_assert_eq(held, 0);
    rlock_free(l);
    rlock_client_free(a);
    free(name);
}

Test(faults, debug_sleep_shorter_than_lease_keeps_lock)
{
    char *name = th_name("sleep-renew");
    lost_rec lost = {0};
    rlock_client *a = fclient(3000, 300, 5000, &lost);
    rlock *l;
    th_ok(rlock_new(a, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    redisContext *r = admin();
    th_wait_renewal(r, name, 3000); /* a renewal round has run */
    th_stall s;
    th_stall_start(&s, srv.port, 1000);
    th_stall_end(&s);
    th_sleep_ms(3500); /* longer than the 3 s lease: only renewal after the stall keeps it */
    char *owner = th_owner(a, rlock_thread_id());
    cr_assert_eq(th_hget_int(r, name, owner), 1, "the lock lapsed during a 1 s stall");
    cr_assert(th_pttl(r, name) > 0);
    cr_assert_eq(atomic_load(&lost.count), 0);
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(a);
    free(owner);
    free(name);
}

/* ---- holders stopped, killed, exiting, forking ------------------------ */

typedef struct child_arg {
    const char *url;
    const char *name;
    th_ready *ready;
    int64_t lease;
} child_arg;

static atomic_int child_lost;

static void child_on_lost(const char *name, uint64_t tid, void *arg)
{
    (void)name;
    (void)tid;
    (void)arg;
    atomic_fetch_add(&child_lost, 1);
}

/* Takes the lock, tells the parent, and after being stopped and continued
 * checks that it learnt of the loss. Exit code 0 = as expected. */
static int stalled_child(void *arg)
{
    child_arg *a = arg;
    rlock_config cfg;
    rlock_config_init(&cfg);
    set_url(&cfg, a->url);
    cfg.watchdog_timeout_ms = 1500;
    cfg.command_timeout_ms = 500;
    cfg.on_lock_lost = child_on_lost;
    rlock_client *c;
    rlock *l;
    if (rlock_client_new(&cfg, &c) != RLOCK_OK) {
        return 10;
    }
    if (rlock_new(c, a->name, &l) != RLOCK_OK) {
        return 11;
    }
    if (rlock_lock(l, RLOCK_WATCHDOG) != RLOCK_OK) {
        return 12;
    }
    if (!th_ready_signal(a->ready)) {
        return 13;
    }
    TH_POLL(atomic_load(&child_lost) != 0, 30000);
    if (atomic_load(&child_lost) != 1) {
        return 14;
    }
    rlock_status st = rlock_unlock(l);
    if (st != RLOCK_ELOST) {
        return 20 + (int)st;
    }
    rlock_free(l);
    rlock_client_free(c);
    return 0;
}

Test(faults, stopped_holder_learns_loss_and_spares_new_owner)
{
    char *name = th_name("sigstop");
    th_ready ready;
    th_ready_init(&ready);
    child_arg ca = {url, name, &ready, 0};
    pid_t pid = th_fork(stalled_child, &ca);
    th_ready_wait(&ready, pid, 10000);
    cr_assert_eq(kill(pid, SIGSTOP), 0);
    int wst;
    cr_assert_eq(waitpid(pid, &wst, WUNTRACED), pid);
    cr_assert(WIFSTOPPED(wst));

    rlock_client *p = fclient(1500, 500, 5000, NULL);
    rlock *l;
    th_ok(rlock_new(p, name, &l));
    int64_t t0 = th_now_ms();
    th_ok(rlock_try_lock(l, th_ms(6000), RLOCK_WATCHDOG));
    cr_log_info("parent acquired %lld ms after stopping the holder", (long long)(th_now_ms() - t0));
    kill(pid, SIGCONT);
    int code = wait_bounded(pid, 15000);
    cr_assert_eq(code, 0,
                 "child exit %d (14: on_lock_lost not called once, 20+s: unlock returned s "
                 "instead of RLOCK_ELOST)",
                 code);
    char *owner = th_owner(p, rlock_thread_id());
    redisContext *r = admin();
    cr_assert_eq(th_hget_int(r, name, owner), 1, "the stale holder touched the new owner's lock");
    cr_assert_eq(th_hlen(r, name), 1);
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(p);
    th_ready_close(&ready);
    free(owner);
    free(name);
}

/* Takes the lock, tells the parent, then waits to be killed. */
static int doomed_child(void *arg)
{
    child_arg *a = arg;
    rlock_config cfg;
    rlock_config_init(&cfg);
    set_url(&cfg, a->url);
    cfg.watchdog_timeout_ms = 1500;
    rlock_client *c;
    rlock *l;
    if (rlock_client_new(&cfg, &c) != RLOCK_OK || rlock_new(c, a->name, &l) != RLOCK_OK ||
        rlock_lock(l, a->lease) != RLOCK_OK) {
        return 10;
    }
    if (!th_ready_signal(a->ready)) {
        return 13;
    }
    for (int i = 0; i < 600; i++) {
        th_sleep_ms(100);
    }
    return 0;
}

static void killed_holder_case(int64_t lease)
{
    char *name = th_name("sigkill");
    th_ready ready;
    th_ready_init(&ready);
    child_arg ca = {url, name, &ready, lease};
    pid_t pid = th_fork(doomed_child, &ca);
    th_ready_wait(&ready, pid, 10000);
    redisContext *r = admin();
    if (lease == RLOCK_WATCHDOG) {
        th_wait_renewal(r, name, 3000); /* the child's watchdog renews it */
        th_wait_renewal(r, name, 3000);
    }
    cr_assert_eq(kill(pid, SIGKILL), 0);
    int64_t t_kill = th_now_ms();
    long long ttl0 = th_pttl(r, name);
    cr_assert_eq(th_wait(pid), 128 + SIGKILL);
    cr_assert(ttl0 > 0, "lock gone at the kill (PTTL %lld)", ttl0);
    th_sleep_ms(300); /* time passes, nobody renews: the lease alone still holds it */
    cr_assert_eq(th_exists(r, name), 1, "lock freed 300 ms after the holder died (PTTL was %lld)",
                 ttl0);

    rlock_client *p = fclient(1500, 500, 5000, NULL);
    rlock *l;
    th_ok(rlock_new(p, name, &l));
    th_ok(rlock_try_lock(l, th_ms(8000), 2000));
    int64_t dt = th_now_ms() - t_kill;
    cr_log_info("lease %lld: PTTL %lld at the kill, acquired %lld ms after it", (long long)lease,
                ttl0, (long long)dt);
    cr_assert(dt >= ttl0 - 100, "acquired %lld ms after the kill, lease had %lld ms left",
              (long long)dt, ttl0);
    th_ok(rlock_unlock(l));
    redisFree(r);
    rlock_free(l);
    rlock_client_free(p);
    th_ready_close(&ready);
    free(name);
}

Test(faults, killed_holder_watchdog_lock_frees_after_lease)
{
    killed_holder_case(RLOCK_WATCHDOG);
}

Test(faults, killed_holder_explicit_lease_frees_after_lease)
{
    killed_holder_case(2500);
}

typedef struct exiter {
    rlock *l;
    uint64_t tid;
    rlock_status st;
} exiter;

static void *exit_holding(void *arg)
{
    exiter *e = arg;
    e->tid = rlock_thread_id();
    e->st = rlock_lock(e->l, RLOCK_WATCHDOG);
    return NULL;
}

Test(faults, thread_exit_while_holding_stops_renewal)
{
    char *name = th_name("exit");
    rlock_client *a = fclient(1500, 500, 5000, NULL);
    rlock *l;
    th_ok(rlock_new(a, name, &l));
    exiter e = {l, 0, RLOCK_EINVAL};
    pthread_t t;
    pthread_create(&t, NULL, exit_holding, &e);
    pthread_join(t, NULL);
    th_ok(e.st);
    /* A hold belongs to a live thread: once it exits, the watchdog stops
     * renewing it (0.1 renewed it for ever), and it runs out with its
     * lease, as if the process had died. */
    uint64_t held = 9;
    th_ok(rlock_client_stat(a, RLOCK_STAT_HELD, &held));
    cr_assert_eq(held, 0, "the exited thread's hold is still counted");
    redisContext *r = admin();
    int64_t until = th_now_ms() + 1500 + th_ms(2000);
    while (th_exists(r, name) && th_now_ms() < until) {
        th_sleep_ms(50);
    }
    cr_assert_eq(th_exists(r, name), 0, "the exited thread's hold is still renewed");
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(a);
    free(name);
}

Test(faults, client_freed_while_holding_lock_expires_after_lease)
{
    char *name = th_name("free-held");
    rlock_client *a = fclient(1500, 500, 5000, NULL);
    rlock *l;
    th_ok(rlock_new(a, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    char *owner = th_owner(a, rlock_thread_id());
    rlock_free(l);
    int64_t t0 = th_now_ms();
    rlock_client_free(a);
    cr_assert(th_now_ms() - t0 < th_ms(3000), "rlock_client_free took %lld ms",
              (long long)(th_now_ms() - t0));
    redisContext *r = admin();
    long long ttl = th_pttl(r, name);
    cr_assert(ttl > 0 && ttl <= 1500, "PTTL %lld after free", ttl);
    cr_assert_eq(th_hget_int(r, name, owner), 1, "rlock_client_free() must not unlock");
    /* Gone once the 1.5 s lease runs out: nothing renews it any more. */
    th_wait_exists(r, name, 0, 3000);
    redisFree(r);
    free(owner);
    free(name);
}

Test(faults, client_freed_while_threads_wait_returns_eclosed)
{
    char *name = th_name("free-waiting");
    rlock_client *a = fclient(1500, 500, 5000, NULL);
    rlock_client *b = fclient(1500, 500, 5000, NULL);
    rlock *l;
    th_ok(rlock_new(a, name, &l));
    th_ok(rlock_lock(l, 20000));
    waiter w[3] = {
        {.c = b, .name = name, .wait_ms = -1, .lease_ms = RLOCK_WATCHDOG},
        {.c = b, .name = name, .wait_ms = -1, .lease_ms = 5000},
        {.c = b, .name = name, .wait_ms = 15000, .lease_ms = RLOCK_WATCHDOG},
    };
    for (int i = 0; i < 3; i++) {
        waiter_start(&w[i]);
    }
    wait_subscribers(name, 1, 3000);
    cr_assert(TH_POLL(atomic_load(&w[0].started) && atomic_load(&w[1].started) &&
                          atomic_load(&w[2].started),
                      3000));
    /* No call tells from outside that a thread sleeps inside rlock_lock():
     * give the three that entered it a moment to get there. */
    th_sleep_ms(th_ms(200));
    int64_t t0 = th_now_ms();
    rlock_client_free(b);
    cr_assert(th_now_ms() - t0 < th_ms(3000), "rlock_client_free took %lld ms",
              (long long)(th_now_ms() - t0));
    for (int i = 0; i < 3; i++) {
        cr_assert(waiter_join(&w[i], 3000), "waiter %d still blocked after the free", i);
        th_assert_status(w[i].st, RLOCK_ECLOSED);
    }
    char *owner = th_owner(a, rlock_thread_id());
    redisContext *r = admin();
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(a);
    free(owner);
    free(name);
}

typedef struct fork_arg {
    rlock_client *c;
    rlock *l;
    const char *url;
    const char *name;
} fork_arg;

/* In a fork()ed child: every call on the inherited client is refused,
 * freeing it returns, and a client of its own works. */
static int forked_child(void *arg)
{
    fork_arg *f = arg;
    bool b;
    int64_t n;
    rlock *x;
    rlock_status got[9] = {
        rlock_lock(f->l, RLOCK_WATCHDOG),
        rlock_try_lock(f->l, 0, 1000),
        rlock_unlock(f->l),
        rlock_force_unlock(f->l, &b),
        rlock_is_locked(f->l, &b),
        rlock_is_held_by_current_thread(f->l, &b),
        rlock_hold_count(f->l, &n),
        rlock_remain_ttl(f->l, &n),
        rlock_new(f->c, "other", &x),
    };
    for (int i = 0; i < 9; i++) {
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
    set_url(&cfg, f->url);
    rlock_client *c;
    rlock *l;
    if (rlock_client_new(&cfg, &c) != RLOCK_OK || rlock_new(c, f->name, &l) != RLOCK_OK) {
        return 30;
    }
    if (rlock_try_lock(l, 0, 1000) != RLOCK_EBUSY) {
        return 31;
    }
    rlock_free(l);
    if (rlock_new(c, "forked-child-own", &l) != RLOCK_OK || rlock_lock(l, 2000) != RLOCK_OK ||
        rlock_unlock(l) != RLOCK_OK) {
        return 32;
    }
    rlock_free(l);
    rlock_client_free(c);
    return 0;
}

Test(faults, fork_while_holding)
{
    char *name = th_name("fork");
    rlock_client *a = fclient(1500, 500, 5000, NULL);
    rlock *l;
    th_ok(rlock_new(a, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    /* Fork just after a renewal round, the next one 500 ms away, so that
     * no thread of the parent is in the middle of an allocation. */
    th_after_renewal_round(a);
    fork_arg f = {a, l, url, name};
    pid_t pid = th_fork(forked_child, &f);
    int code = wait_bounded(pid, 15000);
    cr_assert_eq(code, 0,
                 "child exit %d (-1: hung; 10-18: a call on the inherited client did not "
                 "return RLOCK_ECLOSED; 30-32: its own client failed)",
                 code);
    /* The parent's hold is untouched and still renewed. */
    redisContext *r = admin();
    th_wait_renewal(r, name, 3000);
    char *owner = th_owner(a, rlock_thread_id());
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    cr_assert_eq(th_hlen(r, name), 1);
    cr_assert(th_pttl(r, name) > 0);
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(a);
    free(owner);
    free(name);
}
