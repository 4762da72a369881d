/* The non-reentrant lock (Redisson 4.4's non-reentrant getLock, spec 2.8)
 * against a real Redis: the reentrant lock's hash, channel, unlock and
 * renewal, but the holder asking again is refused at once (RLOCK_EDEADLK,
 * where Redisson answers NON_REENTRANT_REACQUIRE) and nothing changes in
 * Redis: no second count, no new TTL. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

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

TestSuite(nonreentrant, .init = setup, .fini = teardown, .timeout = 60);

#define JAVA_OWNER "6f1c0a4e-2b7d-4c3e-9a51-0d2f8e7b1c44:57"

static rlock *nonre(rlock_client *cl, const char *name)
{
    rlock *l = NULL;
    th_ok(rlock_new_nonreentrant(cl, name, &l));
    return l;
}

typedef struct waiter {
    const char *name;
    rlock_status st;
    int64_t returned_at;
    int64_t count; /* its hold count in Redis once it had the lock */
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    rlock *l = nonre(c, w->name);
    w->st = rlock_lock(l, RLOCK_WATCHDOG);
    __atomic_store_n(&w->returned_at, th_now_ms(), __ATOMIC_RELEASE);
    if (w->st == RLOCK_OK) {
        th_ok(rlock_hold_count(l, &w->count));
        th_ok(rlock_unlock(l));
    }
    rlock_free(l);
    return NULL;
}

Test(nonreentrant, the_holder_asking_again_gets_edeadlk_and_nothing_changes)
{
    char *name = th_name("nonre");
    rlock *l = nonre(c, name);
    cr_assert_str_eq(rlock_kind(l), "nonreentrant");
    char *owner = th_owner(c, rlock_thread_id());
    th_ok(rlock_lock(l, 10000));
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    cr_assert_eq(th_hlen(r, name), 1);
    long long ttl0 = th_pttl(r, name);
    cr_assert(ttl0 > 0 && ttl0 <= 10000);
    th_sleep_ms(300); /* time passes: a reset TTL would show */
    int64_t t0 = th_now_ms();
    th_assert_status(rlock_lock(l, 60000), RLOCK_EDEADLK);
    th_assert_status(rlock_lock(l, RLOCK_WATCHDOG), RLOCK_EDEADLK);
    cr_assert(th_now_ms() - t0 < th_ms(200), "the refusal waited");
    cr_assert_eq(th_hget_int(r, name, owner), 1, "a second count was taken");
    cr_assert_eq(th_hlen(r, name), 1);
    long long ttl = th_pttl(r, name);
    cr_assert(ttl > 0 && ttl <= ttl0 - 250, "the TTL was reset (%lld, was %lld)", ttl, ttl0);
    int64_t n = 0;
    th_ok(rlock_hold_count(l, &n));
    cr_assert_eq(n, 1);
    bool held = false;
    th_ok(rlock_is_held_by_current_thread(l, &held));
    cr_assert(held);
    /* One unlock ends it. */
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    /* And it can be taken again. */
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    long long wd = th_pttl(r, name);
    cr_assert(wd > 25000 && wd <= 30000, "watchdog lease, got %lld", wd);
    th_ok(rlock_unlock(l));
    rlock_free(l);
    free(owner);
    free(name);
}

Test(nonreentrant, try_lock_by_the_holder_is_edeadlk_at_once)
{
    char *name = th_name("nonretry");
    rlock *l = nonre(c, name);
    char *owner = th_owner(c, rlock_thread_id());
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_assert_status(rlock_try_lock(l, 0, RLOCK_WATCHDOG), RLOCK_EDEADLK);
    int64_t t0 = th_now_ms();
    int64_t ttl = 12345;
    th_assert_status(rlock_lock_ex(l, 2000, 5000, NULL, &ttl), RLOCK_EDEADLK);
    cr_assert(th_now_ms() - t0 < th_ms(200), "try_lock waited on its own hold");
    cr_assert_eq(ttl, 12345, "no holder TTL is told for RLOCK_EDEADLK");
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    cr_assert(th_pttl(r, name) > 25000, "the watchdog lease stands");
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0);
    rlock_free(l);
    free(owner);
    free(name);
}

/* A refused re-acquisition asked with a shorter lease than the hold's must
 * not make the client believe the hold ends sooner: it changed nothing. */
Test(nonreentrant, a_refused_shorter_lease_does_not_shorten_the_hold)
{
    char *name = th_name("nonrelease");
    rlock *l = nonre(c, name);
    th_ok(rlock_lock(l, 20000));
    th_assert_status(rlock_try_lock(l, 0, 300), RLOCK_EDEADLK);
    th_sleep_ms(600); /* past the refused lease: the hold is still there */
    bool held = false;
    th_ok(rlock_is_held_by_current_thread(l, &held));
    cr_assert(held, "the refused 300 ms lease was taken for the hold's");
    cr_assert(th_pttl(r, name) > 15000);
    /* Asked again, it is still refused (not RLOCK_ELOST: the hold is
     * there), and rlock_wait_unlocked() still sees the thread's own hold. */
    th_assert_status(rlock_try_lock(l, 0, 300), RLOCK_EDEADLK);
    th_assert_status(rlock_wait_unlocked(l, 100, NULL), RLOCK_EDEADLK);
    int64_t n = 0;
    th_ok(rlock_hold_count(l, &n));
    cr_assert_eq(n, 1);
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0);
    rlock_free(l);
    free(name);
}

Test(nonreentrant, another_thread_waits_and_unlock_publishes_zero)
{
    char *name = th_name("nonrewait");
    char *chan = th_channel(name);
    redisContext *sub = th_subscribe(0, chan);
    rlock *l = nonre(c, name);
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    waiter w = {name, RLOCK_EIO, 0, 0};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, waiter_main, &w), 0);
    /* It waits as the reentrant lock's waiters do: subscribed. */
    th_wait_numsub(0, chan, 2, 3000);
    th_sleep_ms(th_ms(200));
    cr_assert_eq(__atomic_load_n(&w.returned_at, __ATOMIC_ACQUIRE), 0, "the waiter returned");
    int64_t t0 = th_now_ms();
    th_ok(rlock_unlock(l));
    char *m = th_next_message(sub, 2000);
    cr_assert_not_null(m, "the unlock publishes");
    cr_assert_str_eq(m, "0");
    free(m);
    cr_assert_eq(pthread_join(t, NULL), 0);
    th_ok(w.st);
    cr_assert_eq(w.count, 1);
    cr_assert(w.returned_at - t0 < th_ms(1000), "woken %lld ms after the release",
              (long long)(w.returned_at - t0));
    m = th_next_message(sub, 2000);
    cr_assert_not_null(m, "the waiter's unlock publishes too");
    free(m);
    cr_assert_eq(th_exists(r, name), 0);
    /* Force unlock publishes "0" as well. */
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    bool was = false;
    th_ok(rlock_force_unlock(l, &was));
    cr_assert(was);
    m = th_next_message(sub, 2000);
    cr_assert_not_null(m);
    cr_assert_str_eq(m, "0");
    free(m);
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    redisFree(sub);
    rlock_free(l);
    free(chan);
    free(name);
}

Test(nonreentrant, a_hold_of_the_same_owner_in_redis_is_refused_not_entered)
{
    /* The thread's owner field is there though this client does not know
     * it (written by hand): Redisson refuses it as a re-acquisition, and
     * so does rlock, leaving it as it was. */
    char *name = th_name("nonrehand");
    char *owner = th_owner(c, rlock_thread_id());
    th_run(r, "HSET %s %s 1", name, owner);
    th_run(r, "PEXPIRE %s 10000", name);
    rlock *l = nonre(c, name);
    th_assert_status(rlock_try_lock(l, 0, 60000), RLOCK_EDEADLK);
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    cr_assert(th_pttl(r, name) <= 10000);
    th_run(r, "DEL %s", name);
    /* Another owner's hold is waited for, as usual. */
    th_run(r, "HSET %s " JAVA_OWNER " 1", name);
    th_run(r, "PEXPIRE %s 10000", name);
    int64_t ttl = 0;
    th_assert_status(rlock_lock_ex(l, 200, 60000, NULL, &ttl), RLOCK_EBUSY);
    cr_assert(ttl > 0 && ttl <= 10000);
    th_run(r, "DEL %s", name);
    rlock_free(l);
    free(owner);
    free(name);
}

Test(nonreentrant, watchdog_renews_the_single_hold)
{
    rlock_client *wc = th_client(NULL, 900);
    char *name = th_name("nonrewd");
    rlock *l = nonre(wc, name);
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_assert_status(rlock_lock(l, RLOCK_WATCHDOG), RLOCK_EDEADLK);
    th_wait_renewal(r, name, 3000);
    th_wait_renewal(r, name, 3000);
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0, "one unlock releases it");
    rlock_free(l);
    rlock_client_free(wc);
    free(name);
}

Test(nonreentrant, another_kind_at_the_name_is_ekind)
{
    char *name = th_name("nonrekind");
    th_run(r, "HSET %s mode write " JAVA_OWNER ":write 1", name);
    th_run(r, "PEXPIRE %s 10000", name);
    rlock *l = nonre(c, name);
    th_assert_status(rlock_lock(l, RLOCK_WATCHDOG), RLOCK_EKIND);
    cr_assert_eq(th_hlen(r, name), 2);
    th_run(r, "DEL %s", name);
    rlock_free(l);
    free(name);
}
