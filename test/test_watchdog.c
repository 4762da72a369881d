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
    /* 3 s = five watchdog timeouts: without renewal it would be gone. */
    for (int i = 0; i < 15; i++) {
        th_sleep_ms(200);
        long long ttl = th_pttl(r, name);
        cr_assert(ttl > 0 && ttl <= 600, "renewed to the 600 ms lease, ttl %lld", ttl);
        cr_assert_eq(th_hget_int(r, name, owner), 1);
    }
    uint64_t calls = 0, renewed = 0;
    th_ok(rlock_client_stat(c, RLOCK_STAT_RENEWAL_CALLS, &calls));
    th_ok(rlock_client_stat(c, RLOCK_STAT_RENEWED, &renewed));
    cr_assert(calls >= 10 && renewed >= 10, "one renewal per 200 ms period: %llu",
              (unsigned long long)calls);
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
    uint64_t held = 0, calls0 = 0, calls1 = 0;
    th_ok(rlock_client_stat(c, RLOCK_STAT_HELD, &held));
    cr_assert_eq(held, N);
    th_ok(rlock_client_stat(c, RLOCK_STAT_RENEWAL_CALLS, &calls0));
    th_sleep_ms(1500); /* five periods of 300 ms */
    th_ok(rlock_client_stat(c, RLOCK_STAT_RENEWAL_CALLS, &calls1));
    uint64_t calls = calls1 - calls0;
    /* 250 locks in batches of 100 = 3 calls a round, about 5 rounds. */
    cr_assert(calls >= 6 && calls <= 21, "renewal calls %llu", (unsigned long long)calls);
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
    int64_t deadline = th_now_ms() + 3000;
    int calls = 0;
    while (th_now_ms() < deadline) {
        pthread_mutex_lock(&lost.mu);
        calls = lost.calls;
        pthread_mutex_unlock(&lost.mu);
        if (calls) {
            break;
        }
        th_sleep_ms(20);
    }
    cr_assert_eq(calls, 1, "on_lock_lost called once with its arg");
    cr_assert_str_eq(lost.name, name);
    cr_assert_eq(lost.tid, rlock_thread_id());
    th_sleep_ms(500);
    cr_assert_eq(lost.calls, 1, "not reported again");
    cr_assert_eq(th_exists(r, name), 0, "the watchdog does not resurrect it");
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
    th_sleep_ms(1000); /* > three renewal periods */
    cr_assert_eq(th_exists(r, name), 0, "expired: nobody renewed it");
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
    th_sleep_ms(500);
    long long ttl = th_pttl(r, name);
    cr_assert(ttl > 0 && ttl <= 500, "counting down from 1000: %lld", ttl);
    th_ok(rlock_unlock(l));
    rlock_free(l);
    rlock_client_free(c);
    redisFree(r);
    free(name);
}
