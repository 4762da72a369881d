/* The watchdog: renewal while held, batching, loss detection, and no
 * renewal after unlock (Redisson issue #7272). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

TestSuite(watchdog, .timeout = 60);

Test(watchdog, keeps_lock_for_several_timeouts)
{
    rlock_client *c = th_client(NULL, 600);
    redisContext *r = th_redis(0);
    char *name = th_name("wd");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    char *owner = th_owner(c, rlock_thread_id());
    /* 3 s = five watchdog timeouts: without renewal it would be gone. The
     * sleeps are the point: time passes, sampled every 200 ms. */
    for (int i = 0; i < 15; i++) {
        th_sleep_ms(200);
        long long ttl = th_pttl(r, name);
        cr_assert(ttl > 0 && ttl <= 600, "renewed to the 600 ms lease, ttl %lld", ttl);
        cr_assert_eq(th_hget_int(r, name, owner), 1);
    }
    uint64_t calls = 0, renewed = 0;
    th_ok(rlock_client_stat(c, RLOCK_STAT_RENEWAL_CALLS, &calls));
    th_ok(rlock_client_stat(c, RLOCK_STAT_RENEWED, &renewed));
    /* A 600 ms lease that lived 3 s was renewed at least once per lease;
     * how often beyond that is the watchdog's pace, not asserted here. */
    cr_assert(calls >= 5 && renewed >= 5, "%llu renewal calls, %llu renewals in 3 s",
              (unsigned long long)calls, (unsigned long long)renewed);
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0);
    rlock_free(l);
    rlock_client_free(c);
    redisFree(r);
    free(owner);
    free(name);
}

Test(watchdog, many_locks_share_one_script_call)
{
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = th_url();
    cfg.watchdog_timeout_ms = 900;
    cfg.watchdog_batch_size = 100;
    rlock_client *c = th_client_cfg(&cfg);
    enum { N = 250 };
    rlock *l[N];
    char *names[N];
    for (int i = 0; i < N; i++) {
        names[i] = th_name("many");
        th_ok(rlock_new(c, names[i], &l[i]));
        th_ok(rlock_lock(l[i], RLOCK_WATCHDOG));
    }
    uint64_t held = 0, calls0 = 0, calls1 = 0, ren0 = 0, ren1 = 0;
    th_ok(rlock_client_stat(c, RLOCK_STAT_HELD, &held));
    cr_assert_eq(held, N);
    th_ok(rlock_client_stat(c, RLOCK_STAT_RENEWAL_CALLS, &calls0));
    th_ok(rlock_client_stat(c, RLOCK_STAT_RENEWED, &ren0));
    th_sleep_ms(1500); /* time passes: longer than the 900 ms lease */
    th_ok(rlock_client_stat(c, RLOCK_STAT_RENEWAL_CALLS, &calls1));
    th_ok(rlock_client_stat(c, RLOCK_STAT_RENEWED, &ren1));
    uint64_t calls = calls1 - calls0, renewed = ren1 - ren0;
    /* 250 locks in batches of 100: 3 calls a round renewing 100, 100 and
     * 50, whatever the number of rounds. One call per lock would renew 1
     * per call; a batch above 100 would renew more than 100 per call. (A
     * call counts just before its renewals do: one call of slack.) */
    cr_assert(calls >= 3, "renewal calls %llu in 1.5 s", (unsigned long long)calls);
    cr_assert(renewed >= 50 * (calls - 1) && renewed <= 100 * (calls + 1),
              "%llu locks renewed in %llu calls: not batches of up to 100",
              (unsigned long long)renewed, (unsigned long long)calls);
    redisContext *r = th_redis(0);
    for (int i = 0; i < N; i++) {
        cr_assert(th_pttl(r, names[i]) > 0, "lock %d still held", i);
        th_ok(rlock_unlock(l[i]));
        rlock_free(l[i]);
        free(names[i]);
    }
    th_ok(rlock_client_stat(c, RLOCK_STAT_HELD, &held));
    cr_assert_eq(held, 0);
    rlock_client_free(c);
    redisFree(r);
}

static struct {
    pthread_mutex_t mu;
    char name[256];
    uint64_t tid;
    int calls;
} lost = {PTHREAD_MUTEX_INITIALIZER, "", 0, 0};

static void on_lost(const char *name, uint64_t tid, void *arg)
{
    pthread_mutex_lock(&lost.mu);
    snprintf(lost.name, sizeof lost.name, "%s", name);
    lost.tid = tid;
    lost.calls += arg == &lost ? 1 : 1000;
    pthread_mutex_unlock(&lost.mu);
}

Test(watchdog, lost_lock_is_reported_and_unlock_says_elost)
{
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = th_url();
    cfg.watchdog_timeout_ms = 600;
    cfg.on_lock_lost = on_lost;
    cfg.on_lock_lost_arg = &lost;
    rlock_client *c = th_client_cfg(&cfg);
    redisContext *r = th_redis(0);
    char *name = th_name("lost");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    /* Someone deletes it behind our back (an operator, an expiry). */
    th_run(r, "DEL %s", name);
    int calls = 0;
    TH_POLL((pthread_mutex_lock(&lost.mu), calls = lost.calls, pthread_mutex_unlock(&lost.mu),
             calls != 0),
            3000);
    cr_assert_eq(calls, 1, "on_lock_lost called once with its arg");
    cr_assert_str_eq(lost.name, name);
    cr_assert_eq(lost.tid, rlock_thread_id());
    th_sleep_ms(500); /* time passes: two more renewal rounds */
    pthread_mutex_lock(&lost.mu);
    calls = lost.calls;
    pthread_mutex_unlock(&lost.mu);
    cr_assert_eq(calls, 1, "not reported again");
    cr_assert_eq(th_exists(r, name), 0, "the watchdog does not resurrect it");
    /* Both levels unwind with RLOCK_ELOST (0.2 said ENOTOWNER for the
     * outer one), then nothing is held. */
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    /* A new acquisition after the loss is a fresh hold. */
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    char *owner = th_owner(c, rlock_thread_id());
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    th_ok(rlock_unlock(l));
    rlock_free(l);
    rlock_client_free(c);
    redisFree(r);
    free(owner);
    free(name);
}

Test(watchdog, no_renewal_outlives_unlock)
{
    /* Redisson #7272: a fast lock/unlock must not leave a renewal behind.
     * After many cycles, a key carrying our owner field (written by hand)
     * must expire on its own. */
    rlock_client *c = th_client(NULL, 300);
    redisContext *r = th_redis(0);
    char *name = th_name("7272");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    for (int i = 0; i < 200; i++) {
        th_ok(rlock_lock(l, RLOCK_WATCHDOG));
        th_ok(rlock_unlock(l));
    }
    uint64_t held = 1;
    th_ok(rlock_client_stat(c, RLOCK_STAT_HELD, &held));
    cr_assert_eq(held, 0, "nothing registered for renewal");
    char *owner = th_owner(c, rlock_thread_id());
    th_run(r, "HSET %s %s 1", name, owner);
    th_run(r, "PEXPIRE %s 400", name);
    /* A leftover renewal (every 100 ms, to 300 ms) would keep it forever. */
    th_wait_exists(r, name, 0, 400 + 1000);
    rlock_free(l);
    rlock_client_free(c);
    redisFree(r);
    free(owner);
    free(name);
}

Test(watchdog, explicit_lease_is_not_renewed)
{
    rlock_client *c = th_client(NULL, 300);
    redisContext *r = th_redis(0);
    char *name = th_name("norenew");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, 1000));
    long long ttl = th_pttl(r, name);
    cr_assert(ttl > 0 && ttl <= 1000, "lease 1000: PTTL %lld", ttl);
    /* The watchdog runs every 100 ms: renewing this hold, to either lease,
     * would keep the key forever. */
    th_wait_exists(r, name, 0, 1000 + 2000);
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    rlock_free(l);
    rlock_client_free(c);
    redisFree(r);
    free(name);
}
