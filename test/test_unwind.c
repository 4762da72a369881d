/* Unwinding after a lost hold (issue 15 §3), for every kind of the kind
 * table (test/kinds.h): a thread that took a lock n deep (n = 1..3 for the
 * reentrant kinds; 1 for the non-reentrant ones, whose second lock is
 * refused with RLOCK_EDEADLK) and lost it (force-unlocked from another
 * client, an explicit lease that ran out, a watchdog-mode hold the
 * watchdog found gone) gets RLOCK_ELOST from each of its n unlocks, then
 * RLOCK_ENOTOWNER; the unwinding unlocks never touch a hold another owner
 * took meanwhile (its field and count, its TTL, the fair queue and its
 * waiter, the fenced token counter and fence record, a reader's timeout
 * keys) and publish nothing; the thread can lock again afterwards (a fresh
 * hold of count 1). A hold taken again after the loss is a fresh one,
 * released by the unlocks that come first (last in, first out). Also the
 * GNU C scope-bound release (RLOCK_SCOPED_UNLOCK, RLOCK_SCOPED_LOCK):
 * unwinding by scope. */
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kinds.h"

TestSuite(unwind, .timeout = 60);

typedef enum cause { FORCE, LEASE, WATCHDOG } cause;

/* Explicit lease of the LEASE cause, and the watchdog timeout of the
 * WATCHDOG cause: short, so that the loss comes soon, but scaled, since
 * every hold of a test must still be there when all are taken (th_ms). */
#define SHORT_LEASE_MS 400
#define WD_TIMEOUT_MS 600
/* The other client's hold: outlives every test. */
#define OTHER_LEASE_MS 60000

static const char *cause_name(cause why)
{
    return why == FORCE ? "force-unlock" : why == LEASE ? "lease expiry" : "watchdog";
}

/* Takes l (kind k, name) depth deep for the thread of client c: Redis has
 * the count. A non-reentrant kind takes it once (depth 1) and its second
 * lock is refused with RLOCK_EDEADLK, changing nothing. */
static void take(rlock_client *c, redisContext *r, const th_kind *k, rlock *l, const char *name,
                 int depth, int64_t lease)
{
    for (int i = 0; i < depth; i++) {
        th_ok(rlock_lock(l, lease));
    }
    if (!k->reentrant) {
        cr_assert_eq(depth, 1);
        long long ttl = th_pttl(r, name);
        th_assert_status(rlock_lock(l, lease), RLOCK_EDEADLK);
        cr_assert(th_pttl(r, name) <= ttl, "%s: the refused re-entry reset the TTL", k->id);
    }
    int64_t n = 0;
    th_ok(rlock_hold_count(l, &n));
    cr_assert_eq(n, depth, "%s: rlock_hold_count() says %lld", k->id, (long long)n);
    th_kind_assert_held(r, k, name, c, rlock_thread_id(), depth);
}

/* Loses the holds of kind k at names[0..n-1] for the given cause; returns
 * once every key is gone (and, for WATCHDOG, each loss reported). */
static void lose(rlock_client *other, redisContext *r, const th_kind *k, char **names, int n,
                 cause why, int64_t lease, th_lost_count *lost)
{
    for (int i = 0; i < n; i++) {
        if (why == FORCE) {
            rlock *f = th_kind_new(other, k, names[i]);
            bool was = false;
            th_ok(rlock_force_unlock(f, &was));
            cr_assert(was, "%s: rlock_force_unlock() found nothing at %s", k->id, names[i]);
            rlock_free(f);
        } else if (why == LEASE) {
            th_wait_exists(r, names[i], 0, lease + 2000);
        } else {
            /* Deleted behind the client's back: the next renewal finds it. */
            th_run(r, "DEL %s", names[i]);
        }
    }
    if (why == WATCHDOG) {
        cr_assert(TH_POLL(th_lost_calls(lost) >= n, 3 * WD_TIMEOUT_MS + 1000),
                  "on_lock_lost called %d times for %d holds", th_lost_calls(lost), n);
    }
    for (int i = 0; i < n; i++) {
        cr_assert_eq(th_exists(r, names[i]), 0);
    }
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

/* Appends the reply of a command, flattened, to *s (for comparing what
 * Redis has before and after). */
static void dump(redisContext *r, char **s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(r, fmt, ap);
    va_end(ap);
    cr_assert(rep != NULL, "redis: %s", r->errstr);
    char *t = NULL;
    if (rep->type == REDIS_REPLY_ARRAY) {
        cr_assert(asprintf(&t, "%s[", *s) > 0);
        for (size_t i = 0; i < rep->elements; i++) {
            char *u = NULL;
            const redisReply *e = rep->element[i];
            cr_assert(asprintf(&u, "%s%s ", t, e->type == REDIS_REPLY_STRING ? e->str : "?") > 0);
            free(t);
            t = u;
        }
        char *u = NULL;
        cr_assert(asprintf(&u, "%s] ", t) > 0);
        free(t);
        t = u;
    } else if (rep->type == REDIS_REPLY_STRING) {
        cr_assert(asprintf(&t, "%s'%s' ", *s, rep->str) > 0);
    } else if (rep->type == REDIS_REPLY_INTEGER) {
        cr_assert(asprintf(&t, "%s%lld ", *s, rep->integer) > 0);
    } else {
        cr_assert(asprintf(&t, "%s(type %d) ", *s, rep->type) > 0);
    }
    freeReplyObject(rep);
    free(*s);
    *s = t;
}

/* What of kind k's keys beside the hash must not change while the thread
 * unwinds: the fair queue and its deadlines, the fenced token counter and
 * fence record; caller frees. */
static char *side_keys(redisContext *r, const th_kind *k, const char *name)
{
    char *s = strdup("");
    if (k->fair) {
        char *q = th_prefixed("redisson_lock_queue", name);
        char *z = th_prefixed("redisson_lock_timeout", name);
        dump(r, &s, "LRANGE %s 0 -1", q);
        dump(r, &s, "ZRANGE %s 0 -1 WITHSCORES", z);
        free(q);
        free(z);
    }
    if (k->fenced) {
        char *t = th_prefixed("redisson_lock_token", name);
        char *f = th_prefixed("rlock_fence", name);
        dump(r, &s, "GET %s", t);
        dump(r, &s, "HGETALL %s", f);
        free(t);
        free(f);
    }
    return s;
}

/* The other owner's hold, and what must stay as it is while the thread
 * unwinds. */
typedef struct others {
    const th_kind *k; /* NULL: nobody took the lock after the loss */
    rlock_client *c;
    char *field;
    long long ttl;  /* the hash's PTTL: never raised */
    char *rtimeout; /* a reader's timeout key, or NULL */
    long long rttl; /* its PTTL: never raised */
    char *side;     /* side_keys() */
} others;

static void check_others(redisContext *r, const th_kind *k, const char *name, others *o,
                         const char *when)
{
    char *side = side_keys(r, k, name);
    cr_assert_str_eq(side, o->side, "%s: the %s lock's side keys changed: %s -> %s", when, k->id,
                     o->side, side);
    free(side);
    if (!o->k) {
        cr_assert_eq(th_exists(r, name), 0, "%s: a key appeared at %s", when, name);
        return;
    }
    /* Exactly the other's hold: its field, count 1, the mode, the reader's
     * timeout key. */
    th_kind_assert_held(r, o->k, name, o->c, rlock_thread_id(), 1);
    long long now = th_pttl(r, name);
    cr_assert(now > 0 && now <= o->ttl, "%s: the other hold's PTTL went from %lld to %lld", when,
              o->ttl, now);
    o->ttl = now;
    if (o->rtimeout) {
        now = th_pttl(r, o->rtimeout);
        cr_assert(now > 0 && now <= o->rttl,
                  "%s: the other reader's timeout key's PTTL went from %lld to %lld", when, o->rttl,
                  now);
        o->rttl = now;
    }
}

/* A fair waiter queued behind the other holder (its own client): takes
 * the lock once the other releases it, and releases it. */
typedef struct waiter {
    rlock_client *c;
    const th_kind *k;
    const char *name;
    rlock_status st, unlock_st;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    rlock *l = NULL;
    w->st = w->k->make(w->c, w->name, &l);
    if (w->st == RLOCK_OK) {
        w->st = rlock_lock_ex(l, th_ms(30000), RLOCK_WATCHDOG, NULL, NULL);
        if (w->st == RLOCK_OK) {
            w->unlock_st = rlock_unlock(l);
        }
        rlock_free(l);
    }
    return NULL;
}

/* One lock of the test: its name, depth and who takes it after the loss
 * (ok: NULL for nobody). */
typedef struct one {
    char *name;
    int depth;
    const th_kind *ok;
    rlock *l;
} one;

/* Unwinds one lost lock: (with an other kind ok) another client takes it
 * (for a fair lock with a waiter queued behind it), then depth unlocks
 * answer RLOCK_ELOST and one more RLOCK_ENOTOWNER, with Redis checked
 * after each; the other releases it and the thread takes it again, a
 * fresh hold of count 1. */
static void unwind_one(rlock_client *c, rlock_client *other, redisContext *r, const th_kind *k,
                       one *x, cause why)
{
    const char *name = x->name;
    others o = {x->ok, other, NULL, 0, NULL, 0, NULL};
    rlock *ol = NULL;
    rlock_client *wc = NULL;
    waiter w = {NULL, k, name, RLOCK_OK, RLOCK_OK};
    pthread_t wt;
    if (x->ok) {
        ol = th_kind_new(other, x->ok, name);
        th_ok(rlock_lock(ol, OTHER_LEASE_MS));
        o.field = th_kind_field(x->ok, other, rlock_thread_id());
        o.ttl = th_pttl(r, name);
        if (x->ok->read) {
            char *owner = th_owner(other, rlock_thread_id());
            cr_assert(asprintf(&o.rtimeout, "{%s}:%s:rwlock_timeout:1", name, owner) > 0);
            free(owner);
            o.rttl = th_pttl(r, o.rtimeout);
        }
        if (k->fair) {
            wc = th_client(NULL, 0);
            w.c = wc;
            cr_assert_eq(pthread_create(&wt, NULL, waiter_main, &w), 0);
            th_kind_wait_waiting(0, k, name, 3000);
        }
    }
    o.side = side_keys(r, k, name);
    char when[160];
    snprintf(when, sizeof when, "%s lock, %s, depth %d, other %s, taken", k->id, cause_name(why),
             x->depth, x->ok ? x->ok->id : "none");
    check_others(r, k, name, &o, when);
    /* Every channel of the name: the unwinding unlocks publish nothing
     * while another owner holds it (a message would wake its waiters). */
    char *pat = NULL;
    cr_assert(asprintf(&pat, "*%s*", name) > 0);
    redisContext *sub = x->ok ? th_psubscribe(0, pat) : NULL;
    for (int i = 1; i <= x->depth; i++) {
        snprintf(when, sizeof when, "%s lock, %s, depth %d, other %s, unlock %d", k->id,
                 cause_name(why), x->depth, x->ok ? x->ok->id : "none", i);
        rlock_status st = rlock_unlock(x->l);
        cr_assert_eq(st, RLOCK_ELOST, "%s: expected RLOCK_ELOST, got %s", when,
                     rlock_status_name(st));
        check_others(r, k, name, &o, when);
        assert_not_held(x->l, when);
    }
    snprintf(when, sizeof when, "%s lock, %s, depth %d, other %s, the unlock after", k->id,
             cause_name(why), x->depth, x->ok ? x->ok->id : "none");
    rlock_status st = rlock_unlock(x->l);
    cr_assert_eq(st, RLOCK_ENOTOWNER, "%s: expected RLOCK_ENOTOWNER, got %s", when,
                 rlock_status_name(st));
    check_others(r, k, name, &o, when);
    if (sub) {
        char *m = th_next_message(sub, 50);
        cr_assert(m == NULL, "%s lock, %s, depth %d, other %s: an unwinding unlock published '%s'",
                  k->id, cause_name(why), x->depth, x->ok->id, m ? m : "");
        redisFree(sub);
    }
    if (ol) {
        th_ok(rlock_unlock(ol));
        rlock_free(ol);
    }
    if (wc) {
        cr_assert_eq(pthread_join(wt, NULL), 0);
        th_assert_status(w.st, RLOCK_OK);
        th_assert_status(w.unlock_st, RLOCK_OK);
        rlock_client_free(wc);
    }
    cr_assert_eq(th_exists(r, name), 0);
    if (k->fair) {
        th_kind_assert_free(r, k, name);
    }
    /* The thread may take it again: a fresh hold of count 1. */
    th_ok(rlock_lock(x->l, RLOCK_WATCHDOG));
    int64_t n = 0;
    th_ok(rlock_hold_count(x->l, &n));
    cr_assert_eq(n, 1, "%s: the fresh hold counts %lld", when, (long long)n);
    cr_assert_eq(th_kind_count(r, k, name, c, rlock_thread_id()), 1);
    th_ok(rlock_unlock(x->l));
    th_assert_status(rlock_unlock(x->l), RLOCK_ENOTOWNER);
    cr_assert_eq(th_exists(r, name), 0);
    free(pat);
    free(o.field);
    free(o.rtimeout);
    free(o.side);
}

/* Every depth of kind k (1..3; 1 for a non-reentrant kind), each alone
 * and each with another owner taking it after the loss: the kind that
 * excludes ours (the rival: a writer for a reader, a reader for a
 * writer), and for the read/write halves also their own kind (another
 * reader beside ours; another writer). All are taken, lost at once for the
 * cause (one lease, one watchdog round), then unwound one by one. */
static void unwind_kind(int kind, cause why)
{
    const th_kind *k = &th_kinds[kind];
    th_lost_count lost = {PTHREAD_MUTEX_INITIALIZER, 0};
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = th_url();
    if (why == WATCHDOG) {
        cfg.watchdog_timeout_ms = th_ms(WD_TIMEOUT_MS);
    }
    cfg.on_lock_lost = th_count_lost;
    cfg.on_lock_lost_arg = &lost;
    rlock_client *c = th_client_cfg(&cfg);
    rlock_client *other = th_client(NULL, 0);
    redisContext *r = th_redis(0);
    int64_t lease = why == LEASE ? th_ms(SHORT_LEASE_MS) : RLOCK_WATCHDOG;

    const th_kind *oks[3] = {NULL, th_kind_rival(k), NULL};
    int noks = 2;
    if (th_kind_rival(k) != k) {
        oks[noks++] = k;
    }
    int maxdepth = k->reentrant ? 3 : 1;
    one xs[9];
    char *names[9];
    int n = 0;
    for (int d = 1; d <= maxdepth; d++) {
        for (int j = 0; j < noks; j++) {
            char *name = th_name("unwind");
            xs[n] = (one){name, d, oks[j], th_kind_new(c, k, name)};
            names[n++] = name;
        }
    }
    for (int i = 0; i < n; i++) {
        take(c, r, k, xs[i].l, xs[i].name, xs[i].depth, lease);
    }
    lose(other, r, k, names, n, why, lease, &lost);
    for (int i = 0; i < n; i++) {
        assert_not_held(xs[i].l, "after the loss");
    }
    if (why != FORCE) {
        /* Known here without Redis (a force-unlock is not, until Redis
         * answers a renewal, unlock or re-entry). */
        uint64_t held = 9;
        th_ok(rlock_client_stat(c, RLOCK_STAT_HELD, &held));
        cr_assert_eq(held, 0, "RLOCK_STAT_HELD counts a lost hold");
    }
    for (int i = 0; i < n; i++) {
        unwind_one(c, other, r, k, &xs[i], why);
        rlock_free(xs[i].l);
        free(xs[i].name);
    }
    rlock_client_free(c);
    rlock_client_free(other);
    /* Reported once per hold for a watchdog-mode hold the watchdog found
     * gone; never for an explicit lease; a force-unlocked one is found by
     * the next renewal only if it comes before the unwinding (30 s
     * here). */
    int calls = th_lost_calls(&lost);
    if (why == WATCHDOG) {
        cr_assert_eq(calls, n, "on_lock_lost called %d times for %d holds", calls, n);
    } else if (why == LEASE) {
        cr_assert_eq(calls, 0, "on_lock_lost called %d times", calls);
    } else {
        cr_assert(calls <= n, "on_lock_lost called %d times for %d holds", calls, n);
    }
    redisFree(r);
}

#define UNWIND_TESTS(id, kind)       \
    Test(unwind, id##_force_unlock)  \
    {                                \
        unwind_kind(kind, FORCE);    \
    }                                \
    Test(unwind, id##_lease_expiry)  \
    {                                \
        unwind_kind(kind, LEASE);    \
    }                                \
    Test(unwind, id##_watchdog_loss) \
    {                                \
        unwind_kind(kind, WATCHDOG); \
    }

UNWIND_TESTS(reentrant, TK_REENTRANT)
UNWIND_TESTS(fair, TK_FAIR)
UNWIND_TESTS(fenced, TK_FENCED)
UNWIND_TESTS(spin, TK_SPIN)
UNWIND_TESTS(read, TK_READ)
UNWIND_TESTS(write, TK_WRITE)
UNWIND_TESTS(nonreentrant, TK_NONREENTRANT)
UNWIND_TESTS(fair_nonreentrant, TK_FAIR_NONREENTRANT)

/* The reentrant lock taken depth deep and lost for the cause (the tests
 * below). */
static void take_and_lose(rlock_client *c, rlock_client *other, rlock *l, const char *name,
                          int depth, cause why, th_lost_count *lost)
{
    redisContext *r = th_redis(0);
    const th_kind *k = &th_kinds[TK_REENTRANT];
    char *names[1] = {(char *)name};
    take(c, r, k, l, name, depth, RLOCK_WATCHDOG);
    lose(other, r, k, names, 1, why, RLOCK_WATCHDOG, lost);
    redisFree(r);
}

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
    take_and_lose(c, other, l, name, 3, FORCE, &k);
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
    take_and_lose(c, other, l, name, 3, FORCE, &k);
    th_assert_status(rlock_lock(l, RLOCK_WATCHDOG), RLOCK_ELOST);
    cr_assert_eq(th_exists(r, name), 0, "the re-entry took a hold");
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);

    take_and_lose(c, other, l, name, 3, FORCE, &k);
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
static int nested_then_return_early(rlock *l, redisContext *r, const char *name, const char *owner)
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
