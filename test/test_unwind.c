/* Unwinding after a lost hold (issue 15 §3): a thread that took a lock n
 * deep and lost it (force-unlocked from another client, an explicit lease
 * that ran out, a watchdog-mode hold the watchdog found gone) gets
 * RLOCK_ELOST from each of its n unlocks, then RLOCK_ENOTOWNER; the
 * unwinding unlocks never touch a hold another owner took meanwhile; a
 * hold taken again after the loss is a fresh one, released by the unlocks
 * that come first (last in, first out). Also the GNU C scope-bound release
 * (RLOCK_SCOPED_UNLOCK, RLOCK_SCOPED_LOCK): unwinding by scope. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

TestSuite(unwind, .timeout = 60);

typedef enum cause { FORCE, LEASE, WATCHDOG } cause;

/* Explicit lease of the LEASE cause, and the watchdog timeout of the
 * WATCHDOG cause: short, so that the loss comes soon. */
#define SHORT_LEASE_MS 300
#define WD_TIMEOUT_MS 600
/* The other client's hold: outlives every test. */
#define OTHER_LEASE_MS 60000

static const char *cause_name(cause why)
{
    return why == FORCE ? "force-unlock" : why == LEASE ? "lease expiry" : "watchdog";
}

/* Takes the lock depth deep and loses it for the given cause; returns once
 * the key is gone (and, for WATCHDOG, the loss reported). */
static void take_and_lose(rlock_client *other, rlock *l, const char *name, int depth, cause why,
                          th_lost_count *k)
{
    redisContext *r = th_redis(0);
    for (int i = 0; i < depth; i++) {
        th_ok(rlock_lock(l, why == LEASE ? SHORT_LEASE_MS : RLOCK_WATCHDOG));
    }
    int64_t n = 0;
    th_ok(rlock_hold_count(l, &n));
    cr_assert_eq(n, depth);
    if (why == FORCE) {
        rlock *f;
        th_ok(rlock_new(other, name, &f));
        bool was = false;
        th_ok(rlock_force_unlock(f, &was));
        cr_assert(was);
        rlock_free(f);
    } else if (why == LEASE) {
        th_wait_exists(r, name, 0, SHORT_LEASE_MS + 2000);
    } else {
        /* Deleted behind the client's back: the next renewal finds it. */
        th_run(r, "DEL %s", name);
        cr_assert(TH_POLL(th_lost_calls(k) != 0, 3 * WD_TIMEOUT_MS), "on_lock_lost never called");
    }
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
}

/* What the thread's queries answer after the loss: Redis's truth. */
static void assert_not_held(rlock *l, const char *when)
{
    int64_t n = -1;
    bool held = true;
    th_ok(rlock_hold_count(l, &n));
    cr_assert_eq(n, 0, "%s: rlock_hold_count() says %lld", when, (long long)n);
    th_ok(rlock_is_held_by_current_thread(l, &held));
    cr_assert(!held, "%s: rlock_is_held_by_current_thread() says held", when);
}

/* The other client's hold, as Redis has it: exactly its field, count 1,
 * a TTL no longer than what it had before. */
static void assert_others_hold(redisContext *r, const char *name, const char *owner,
                               long long *ttl, const char *when)
{
    cr_assert_eq(th_hlen(r, name), 1, "%s: the hash has %lld fields", when, th_hlen(r, name));
    cr_assert_eq(th_hget_int(r, name, owner), 1, "%s: the other owner's count changed", when);
    long long now = th_pttl(r, name);
    cr_assert(now > 0 && now <= *ttl, "%s: the other hold's PTTL went from %lld to %lld", when,
              *ttl, now);
    *ttl = now;
}

/* One run: depth levels lost for the cause, then (with_other) another
 * client takes the lock, then depth unlocks answer RLOCK_ELOST and one more
 * RLOCK_ENOTOWNER, with Redis checked after each. */
static void unwind_once(int depth, cause why, bool with_other)
{
    th_lost_count k = {PTHREAD_MUTEX_INITIALIZER, 0};
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = th_url();
    if (why == WATCHDOG) {
        cfg.watchdog_timeout_ms = WD_TIMEOUT_MS;
    }
    cfg.on_lock_lost = th_count_lost;
    cfg.on_lock_lost_arg = &k;
    rlock_client *c = th_client_cfg(&cfg);
    rlock_client *other = th_client(NULL, 0);
    redisContext *r = th_redis(0);
    char *name = th_name("unwind");
    rlock *l, *o;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_new(other, name, &o));

    take_and_lose(other, l, name, depth, why, &k);
    assert_not_held(l, "after the loss");
    if (why != FORCE) {
        /* Known here without Redis (a force-unlock is not, until Redis
         * answers a renewal, unlock or re-entry). */
        uint64_t held = 9;
        th_ok(rlock_client_stat(c, RLOCK_STAT_HELD, &held));
        cr_assert_eq(held, 0, "RLOCK_STAT_HELD counts a lost hold");
    }

    char *oowner = NULL;
    long long ttl = 0;
    if (with_other) {
        /* From another thread's client: its own owner field. */
        th_ok(rlock_lock(o, OTHER_LEASE_MS));
        oowner = th_owner(other, rlock_thread_id());
        ttl = th_pttl(r, name);
        assert_others_hold(r, name, oowner, &ttl, "taken");
    }
    for (int i = 1; i <= depth; i++) {
        char when[96];
        snprintf(when, sizeof when, "%s, depth %d, unlock %d", cause_name(why), depth, i);
        rlock_status st = rlock_unlock(l);
        cr_assert_eq(st, RLOCK_ELOST, "%s: expected RLOCK_ELOST, got %s", when,
                     rlock_status_name(st));
        if (with_other) {
            assert_others_hold(r, name, oowner, &ttl, when);
        } else {
            cr_assert_eq(th_exists(r, name), 0, "%s: a key appeared", when);
        }
        assert_not_held(l, when);
    }
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    if (with_other) {
        assert_others_hold(r, name, oowner, &ttl, "after ENOTOWNER");
        th_ok(rlock_unlock(o));
    }
    cr_assert_eq(th_exists(r, name), 0);
    /* The thread may take it again: a fresh hold of count 1. */
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    int64_t n = 0;
    th_ok(rlock_hold_count(l, &n));
    cr_assert_eq(n, 1);
    th_ok(rlock_unlock(l));
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    rlock_free(l);
    rlock_free(o);
    rlock_client_free(c);
    rlock_client_free(other);
    /* Reported once for a watchdog-mode hold the watchdog found gone;
     * never for an explicit lease; a force-unlocked one is found by the
     * next renewal only if it comes before the unwinding (30 s here). */
    int calls = th_lost_calls(&k);
    if (why == WATCHDOG) {
        cr_assert_eq(calls, 1, "on_lock_lost called %d times", calls);
    } else if (why == LEASE) {
        cr_assert_eq(calls, 0, "on_lock_lost called %d times", calls);
    } else {
        cr_assert(calls <= 1, "on_lock_lost called %d times", calls);
    }
    redisFree(r);
    free(oowner);
    free(name);
}

static void unwind_case(int depth, cause why)
{
    unwind_once(depth, why, false);
    unwind_once(depth, why, true);
}

Test(unwind, force_unlock_depth_1) { unwind_case(1, FORCE); }
Test(unwind, force_unlock_depth_2) { unwind_case(2, FORCE); }
Test(unwind, force_unlock_depth_3) { unwind_case(3, FORCE); }
Test(unwind, lease_expiry_depth_1) { unwind_case(1, LEASE); }
Test(unwind, lease_expiry_depth_2) { unwind_case(2, LEASE); }
Test(unwind, lease_expiry_depth_3) { unwind_case(3, LEASE); }
Test(unwind, watchdog_loss_depth_1) { unwind_case(1, WATCHDOG); }
Test(unwind, watchdog_loss_depth_2) { unwind_case(2, WATCHDOG); }
Test(unwind, watchdog_loss_depth_3) { unwind_case(3, WATCHDOG); }

/* Lost three deep, unlocked once (RLOCK_ELOST), locked again: a fresh hold
 * (count 1 in Redis) on top of the two lost levels left. The next unlock
 * releases it (it came last), the two after answer RLOCK_ELOST, then
 * RLOCK_ENOTOWNER. A stale lost level never stands for the new hold's
 * unlock, which would leave the new hold in Redis. */
Test(unwind, lock_again_midway_is_a_fresh_hold_released_first)
{
    th_lost_count k = {PTHREAD_MUTEX_INITIALIZER, 0};
    rlock_client *c = th_client(NULL, 0), *other = th_client(NULL, 0);
    redisContext *r = th_redis(0);
    char *name = th_name("unwind-again");
    char *owner = th_owner(c, rlock_thread_id());
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    take_and_lose(other, l, name, 3, FORCE, &k);
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    int64_t n = 0;
    th_ok(rlock_hold_count(l, &n));
    cr_assert_eq(n, 1, "the new hold counts %lld", (long long)n);
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0, "the new hold's unlock left it in Redis");
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    rlock_free(l);
    rlock_client_free(c);
    rlock_client_free(other);
    redisFree(r);
    free(owner);
    free(name);
}

/* A re-entry is the first call to find the loss: it takes nothing and
 * answers RLOCK_ELOST (as since 0.2); the three levels still unwind with
 * RLOCK_ELOST each. A second lock after that ELOST is a fresh hold, and
 * the three levels sit below it. */
Test(unwind, reentry_finds_the_loss_and_every_level_still_unwinds)
{
    th_lost_count k = {PTHREAD_MUTEX_INITIALIZER, 0};
    rlock_client *c = th_client(NULL, 0), *other = th_client(NULL, 0);
    redisContext *r = th_redis(0);
    char *name = th_name("unwind-reentry");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    take_and_lose(other, l, name, 3, FORCE, &k);
    th_assert_status(rlock_lock(l, RLOCK_WATCHDOG), RLOCK_ELOST);
    cr_assert_eq(th_exists(r, name), 0, "the re-entry took a hold");
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);

    take_and_lose(other, l, name, 3, FORCE, &k);
    th_assert_status(rlock_try_lock(l, 0, RLOCK_WATCHDOG), RLOCK_ELOST);
    th_ok(rlock_try_lock(l, 0, RLOCK_WATCHDOG));
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0);
    for (int i = 0; i < 3; i++) {
        th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    }
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    rlock_free(l);
    rlock_client_free(c);
    rlock_client_free(other);
    redisFree(r);
    free(name);
}

/* ---- the GNU C scope-bound release ------------------------------------ */

/* Takes the lock twice in nested scopes and returns from the inner one:
 * both levels are released on the way out. */
static int nested_then_return_early(rlock *l, redisContext *r, const char *name,
                                    const char *owner)
{
    rlock_status st;
    RLOCK_SCOPED_LOCK(outer, l, RLOCK_WATCHDOG, &st);
    th_ok(st);
    cr_assert(outer == l);
    {
        RLOCK_SCOPED_LOCK(inner, l, 30000, &st);
        th_ok(st);
        cr_assert_eq(th_hget_int(r, name, owner), 2);
        if (inner) {
            return 7; /* both released here, inner first */
        }
    }
    return 0;
}

Test(unwind, scoped_unlock_releases_on_early_return_and_break)
{
    rlock_client *c = th_client(NULL, 0);
    redisContext *r = th_redis(0);
    char *name = th_name("unwind-scoped");
    char *owner = th_owner(c, rlock_thread_id());
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    cr_assert_eq(nested_then_return_early(l, r, name, owner), 7);
    cr_assert_eq(th_exists(r, name), 0, "the scoped holds were not released");
    /* A break out of a loop body leaves the scope too. */
    for (int i = 0; i < 3; i++) {
        rlock *held RLOCK_SCOPED_UNLOCK = NULL;
        th_ok(rlock_lock(l, RLOCK_WATCHDOG));
        held = l;
        cr_assert_eq(th_hget_int(r, name, owner), 1, "iteration %d: a level leaked", i);
        if (i == 1) {
            break;
        }
    }
    cr_assert_eq(th_exists(r, name), 0, "break did not release");
    rlock_free(l);
    rlock_client_free(c);
    redisFree(r);
    free(owner);
    free(name);
}

/* A lock that fails leaves the variable NULL: leaving the scope releases
 * nothing, so the outer hold is still there, count 1. */
Test(unwind, scoped_unlock_after_a_failed_lock_releases_nothing)
{
    rlock_client *c = th_client(NULL, 0);
    redisContext *r = th_redis(0);
    char *name = th_name("unwind-scoped-fail");
    char *owner = th_owner(c, rlock_thread_id());
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    rlock_cancel *tok;
    th_ok(rlock_cancel_new(&tok));
    rlock_cancel_fire(tok);
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    {
        rlock *held RLOCK_SCOPED_UNLOCK = NULL;
        rlock_status st = rlock_lock_ex(l, 0, RLOCK_WATCHDOG, tok, NULL);
        th_assert_status(st, RLOCK_ECANCELED);
        if (st == RLOCK_OK) {
            held = l;
        }
    }
    cr_assert_eq(th_hget_int(r, name, owner), 1, "the failed lock's scope released a level");
    {
        /* The same through RLOCK_SCOPED_LOCK: a re-entry of a lost hold
         * fails with RLOCK_ELOST and takes nothing. */
        th_run(r, "DEL %s", name);
        th_run(r, "HSET %s other:1 1", name);
        rlock_status st;
        RLOCK_SCOPED_LOCK(g, l, RLOCK_WATCHDOG, &st);
        th_assert_status(st, RLOCK_ELOST);
        cr_assert(g == NULL);
    }
    cr_assert_eq(th_hget_int(r, name, "other:1"), 1, "another owner's hold was touched");
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_run(r, "DEL %s", name);
    rlock_cancel_free(tok);
    rlock_free(l);
    rlock_client_free(c);
    redisFree(r);
    free(owner);
    free(name);
}
