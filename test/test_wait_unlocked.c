/* rlock_wait_unlocked() (issue 15 §6): waits until nobody holds a lock,
 * without taking it, in the same local queue as rlock_lock(): free at
 * once, woken by another client's unlock, the holder's lease as the
 * fallback, a wait that runs out, a cancellation from another thread, the
 * caller holding it itself, and an acquirer behind it still woken. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

TestSuite(wait_unlocked, .timeout = 60);

#define LONG_LEASE_MS 60000

Test(wait_unlocked, free_at_once)
{
    rlock_client *c = th_client(NULL, 0);
    redisContext *r = th_redis(0);
    char *name = th_name("wu-free");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_wait_unlocked(l, 0, NULL));
    int64_t t0 = th_now_ms();
    th_ok(rlock_wait_unlocked(l, RLOCK_WAIT_FOREVER, NULL));
    cr_assert(th_now_ms() - t0 < th_ms(1000), "a free lock took %lld ms",
              (long long)(th_now_ms() - t0));
    cr_assert_eq(th_exists(r, name), 0, "waiting took the lock");
    th_assert_status(rlock_wait_unlocked(NULL, 0, NULL), RLOCK_EINVAL);
    th_assert_status(rlock_wait_unlocked(l, -2, NULL), RLOCK_EINVAL);
    th_assert_status(rlock_wait_unlocked(l, RLOCK_MAX_TIME_MS + 1, NULL), RLOCK_EINVAL);
    rlock_free(l);
    rlock_client_free(c);
    redisFree(r);
    free(name);
}

/* Another client holds it with a long lease and unlocks: the waiter
 * returns within a second of the unlock (the release message, not the
 * lease), and the lock is not taken by the wait. */
Test(wait_unlocked, woken_by_another_clients_unlock)
{
    rlock_client *a = th_client(NULL, 0), *b = th_client(NULL, 0);
    redisContext *r = th_redis(0);
    char *name = th_name("wu-wake");
    rlock *hl;
    th_ok(rlock_new(b, name, &hl));
    th_ok(rlock_lock(hl, LONG_LEASE_MS));
    th_bg w = {.c = a, .name = name, .wait_ms = RLOCK_WAIT_FOREVER};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, th_bg_main, &w), 0);
    th_wait_waiters(0, name, 1, 3000);
    int64_t at = th_now_ms();
    th_ok(rlock_unlock(hl));
    pthread_join(th, NULL);
    th_ok(w.st);
    cr_assert(w.returned_at - at < th_ms(1000), "returned %lld ms after the unlock",
              (long long)(w.returned_at - at));
    cr_assert_eq(th_exists(r, name), 0, "waiting took the lock");
    rlock_free(hl);
    rlock_client_free(a);
    rlock_client_free(b);
    redisFree(r);
    free(name);
}

/* Nobody unlocks: the holder's lease runs out, and the waiter sees it free
 * then (it sleeps on the lease its probe saw, no message comes). */
Test(wait_unlocked, lease_running_out_ends_the_wait)
{
    rlock_client *a = th_client(NULL, 0), *b = th_client(NULL, 0);
    char *name = th_name("wu-lease");
    rlock *hl, *l;
    th_ok(rlock_new(b, name, &hl));
    th_ok(rlock_new(a, name, &l));
    th_ok(rlock_lock(hl, 500));
    int64_t t0 = th_now_ms();
    th_ok(rlock_wait_unlocked(l, 10000, NULL));
    int64_t took = th_now_ms() - t0;
    cr_assert(took >= 400 && took < 500 + th_ms(1000), "returned after %lld ms", (long long)took);
    rlock_free(hl);
    rlock_free(l);
    rlock_client_free(a);
    rlock_client_free(b);
    free(name);
}

Test(wait_unlocked, still_held_when_the_wait_runs_out_is_ebusy)
{
    rlock_client *a = th_client(NULL, 0), *b = th_client(NULL, 0);
    redisContext *r = th_redis(0);
    char *name = th_name("wu-busy");
    char *owner = th_owner(b, rlock_thread_id());
    rlock *hl, *l;
    th_ok(rlock_new(b, name, &hl));
    th_ok(rlock_new(a, name, &l));
    th_ok(rlock_lock(hl, LONG_LEASE_MS));
    th_assert_status(rlock_wait_unlocked(l, 0, NULL), RLOCK_EBUSY);
    int64_t t0 = th_now_ms();
    th_assert_status(rlock_wait_unlocked(l, 300, NULL), RLOCK_EBUSY);
    int64_t took = th_now_ms() - t0;
    cr_assert(took >= 300 && took < 300 + th_ms(1000), "returned after %lld ms",
              (long long)took);
    cr_assert_eq(th_hget_int(r, name, owner), 1, "the holder's count changed");
    cr_assert_eq(th_hlen(r, name), 1);
    /* Nothing is left queued: the holder's unlock finds no local waiter. */
    th_ok(rlock_unlock(hl));
    rlock_free(hl);
    rlock_free(l);
    rlock_client_free(a);
    rlock_client_free(b);
    redisFree(r);
    free(owner);
    free(name);
}

Test(wait_unlocked, cancelled_from_another_thread)
{
    rlock_client *a = th_client(NULL, 0), *b = th_client(NULL, 0);
    char *name = th_name("wu-cancel");
    rlock *hl, *l;
    th_ok(rlock_new(b, name, &hl));
    th_ok(rlock_new(a, name, &l));
    th_ok(rlock_lock(hl, LONG_LEASE_MS));
    rlock_cancel *tok;
    th_ok(rlock_cancel_new(&tok));
    th_bg w = {.c = a, .name = name, .wait_ms = RLOCK_WAIT_FOREVER, .cancel = tok};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, th_bg_main, &w), 0);
    th_wait_waiters(0, name, 1, 3000);
    th_wait_blocked(th_bg_tid(&w), 3000);
    int64_t at = th_now_ms();
    rlock_cancel_fire(tok);
    pthread_join(th, NULL);
    th_assert_status(w.st, RLOCK_ECANCELED);
    cr_assert(w.returned_at - at < th_ms(1000), "returned %lld ms after the cancel",
              (long long)(w.returned_at - at));
    /* A token fired before the call: at once, without a round trip. */
    th_assert_status(rlock_wait_unlocked(l, RLOCK_WAIT_FOREVER, tok), RLOCK_ECANCELED);
    rlock_cancel_reset(tok);
    th_assert_status(rlock_wait_unlocked(l, 0, tok), RLOCK_EBUSY);
    th_ok(rlock_unlock(hl));
    rlock_cancel_free(tok);
    rlock_free(hl);
    rlock_free(l);
    rlock_client_free(a);
    rlock_client_free(b);
    free(name);
}

/* The calling thread holds it: it could never become free while the
 * thread waits, so RLOCK_EDEADLK at once, whatever wait_ms. Another thread
 * of the same client holding it is another owner: waited for. A hold lost
 * behind the thread's back is not its own any more: free. */
Test(wait_unlocked, caller_holding_it_is_edeadlk)
{
    rlock_client *c = th_client(NULL, 0);
    redisContext *r = th_redis(0);
    char *name = th_name("wu-self");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    int64_t t0 = th_now_ms();
    th_assert_status(rlock_wait_unlocked(l, RLOCK_WAIT_FOREVER, NULL), RLOCK_EDEADLK);
    th_assert_status(rlock_wait_unlocked(l, 0, NULL), RLOCK_EDEADLK);
    cr_assert(th_now_ms() - t0 < th_ms(1000));
    cr_assert_str_eq(rlock_status_name(RLOCK_EDEADLK), "RLOCK_EDEADLK");
    th_bg w = {.c = c, .name = name, .wait_ms = 200};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, th_bg_main, &w), 0);
    pthread_join(th, NULL);
    th_assert_status(w.st, RLOCK_EBUSY);
    th_ok(rlock_unlock(l));
    th_ok(rlock_wait_unlocked(l, 0, NULL));
    /* Lost behind its back, then taken by another owner: waited for. */
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_run(r, "DEL %s", name);
    th_run(r, "HSET %s other:1 1", name);
    th_run(r, "PEXPIRE %s 300", name);
    th_ok(rlock_wait_unlocked(l, 5000, NULL));
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    rlock_free(l);
    rlock_client_free(c);
    redisFree(r);
    free(name);
}

/* An acquirer queued behind a waiter of this call (same client, same
 * name) still gets the lock when the holder unlocks: the release's one
 * wake-up goes to the oldest waiter, which passes it on when it leaves
 * without taking the lock (engine.md I8). */
Test(wait_unlocked, acquirer_behind_it_is_still_woken)
{
    rlock_client *a = th_client(NULL, 0), *b = th_client(NULL, 0);
    char *name = th_name("wu-pass");
    rlock *hl;
    th_ok(rlock_new(b, name, &hl));
    th_ok(rlock_lock(hl, LONG_LEASE_MS));
    th_bg w1 = {.c = a, .name = name, .wait_ms = RLOCK_WAIT_FOREVER};
    th_bg w2 = {.c = a, .name = name, .wait_ms = RLOCK_WAIT_FOREVER, .lock = true};
    pthread_t t1, t2;
    cr_assert_eq(pthread_create(&t1, NULL, th_bg_main, &w1), 0);
    th_wait_waiters(0, name, 1, 3000);
    th_wait_blocked(th_bg_tid(&w1), 3000);
    cr_assert_eq(pthread_create(&t2, NULL, th_bg_main, &w2), 0);
    th_wait_blocked(th_bg_tid(&w2), 3000);
    int64_t at = th_now_ms();
    th_ok(rlock_unlock(hl));
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    th_ok(w1.st);
    th_ok(w2.st);
    cr_assert(w2.returned_at - at < th_ms(1000), "the acquirer got it %lld ms after the unlock",
              (long long)(w2.returned_at - at));
    rlock_free(hl);
    rlock_client_free(a);
    rlock_client_free(b);
    free(name);
}
