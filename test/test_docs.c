/* Promises the docs make in one sentence that no other test pins down:
 * the order of freeing handles and their client (include/rlock.h,
 * docs/api.md, rlock_client_new(3): handles may be freed before or after
 * their client). The memory side of "after" is judged by the sanitizer and
 * valgrind runs of this file (make asan, make valgrind). */
#include <stdlib.h>

#include "harness.h"

TestSuite(docs, .timeout = 60);

/* rlock_free() touches only the handle, so it may come after
 * rlock_client_free(); neither free unlocks: the hold stays in Redis with
 * its lease. */
Test(docs, handles_may_be_freed_after_their_client)
{
    rlock_client *c = th_client(NULL, 0);
    char *name = th_name("docs-after");
    char *owner = th_owner(c, rlock_thread_id());
    rlock *held, *unused;
    th_ok(rlock_new(c, name, &held));
    th_ok(rlock_new(c, name, &unused));
    th_ok(rlock_lock(held, 60000));
    redisContext *r = th_redis(0);
    cr_assert_eq(th_hget_int(r, name, owner), 1);

    rlock_client_free(c);
    rlock_free(held);
    rlock_free(unused);
    rlock_free(NULL);

    cr_assert_eq(th_hget_int(r, name, owner), 1, "freeing the client and handles unlocked");
    long long ttl = th_pttl(r, name);
    cr_assert(ttl > 50000 && ttl <= 60000, "the 60 s lease was touched: PTTL %lld", ttl);
    th_run(r, "DEL %s", name);
    redisFree(r);
    free(owner);
    free(name);
}

/* rlock_free() before the client does not unlock either: holds belong to
 * threads, not handles, and a watchdog hold keeps being renewed until any
 * handle of the same name unlocks it. */
Test(docs, handle_freed_before_its_client_keeps_its_hold)
{
    rlock_client *c = th_client(NULL, 3000);
    char *name = th_name("docs-before");
    char *owner = th_owner(c, rlock_thread_id());
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    rlock_free(l);

    redisContext *r = th_redis(0);
    cr_assert_eq(th_hget_int(r, name, owner), 1, "freeing the handle unlocked");
    th_wait_renewal(r, name, 3000);
    cr_assert_eq(th_hget_int(r, name, owner), 1);

    rlock *again;
    th_ok(rlock_new(c, name, &again));
    th_ok(rlock_unlock(again));
    cr_assert_eq(th_exists(r, name), 0, "the unlock through another handle released it");
    rlock_free(again);
    rlock_client_free(c);
    redisFree(r);
    free(owner);
    free(name);
}
