/* The lock kinds as the tests see them: one table of constructors, so a
 * test written once runs for every kind, and the Redis state of each kind
 * (spec 0.2): the hash at the name and the field of a hold ("<uuid>:<tid>",
 * the write half's "<uuid>:<tid>:write"), the fair lock's queue and
 * deadlines, the read holds' timeout keys, the channel a waiter listens on.
 * Header only (static inline): include it after harness.h. */
#ifndef RLOCK_TEST_KINDS_H
#define RLOCK_TEST_KINDS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

typedef rlock_status (*th_kind_ctor)(rlock_client *c, const char *name, rlock **out);

enum {
    TK_REENTRANT,
    TK_FAIR,
    TK_FENCED,
    TK_SPIN,
    TK_READ,
    TK_WRITE,
    TK_NONREENTRANT,
    TK_FAIR_NONREENTRANT,
    TK_N
};

typedef struct th_kind {
    const char *id; /* as in test names and RLOCK_CHAOS_KINDS */
    th_kind_ctor make;
    /* The kind whose holder this kind's holder keeps out: itself, or the
     * other half of a read/write lock (readers share with readers). */
    int rival;
    bool reentrant;
    bool read;   /* shared: readers hold at once */
    bool write;  /* its field is "<owner>:write" */
    bool fair;   /* a queue and deadlines beside the hash */
    bool fenced; /* a token key beside the hash */
    bool spin;   /* no channel: waiters poll */
} th_kind;

static const th_kind th_kinds[TK_N] = {
    [TK_REENTRANT] = {"reentrant", rlock_new, TK_REENTRANT, true, false, false, false, false,
                      false},
    [TK_FAIR] = {"fair", rlock_new_fair, TK_FAIR, true, false, false, true, false, false},
    [TK_FENCED] = {"fenced", rlock_new_fenced, TK_FENCED, true, false, false, false, true, false},
    [TK_SPIN] = {"spin", rlock_new_spin, TK_SPIN, true, false, false, false, false, true},
    [TK_READ] = {"read", rlock_new_read, TK_WRITE, true, true, false, false, false, false},
    [TK_WRITE] = {"write", rlock_new_write, TK_READ, true, false, true, false, false, false},
    [TK_NONREENTRANT] = {"nonreentrant", rlock_new_nonreentrant, TK_NONREENTRANT, false, false,
                         false, false, false, false},
    [TK_FAIR_NONREENTRANT] = {"fair_nonreentrant", rlock_new_fair_nonreentrant,
                              TK_FAIR_NONREENTRANT, false, false, false, true, false, false},
};

static inline const th_kind *th_kind_rival(const th_kind *k)
{
    return &th_kinds[k->rival];
}

/* A handle of kind k for name on c; aborts the test on failure. */
static inline rlock *th_kind_new(rlock_client *c, const th_kind *k, const char *name)
{
    rlock *l = NULL;
    th_assert_status(k->make(c, name, &l), RLOCK_OK);
    return l;
}

/* prefix(p, name) of spec 0.1 (braces unless the name has a '{'); caller
 * frees. */
static inline char *th_prefixed(const char *p, const char *name)
{
    char *s = NULL;
    int n = strchr(name, '{') ? asprintf(&s, "%s:%s", p, name) : asprintf(&s, "%s:{%s}", p, name);
    cr_assert(n > 0);
    return s;
}

/* The hash field of a hold of kind k by thread tid of client c; caller
 * frees. */
static inline char *th_kind_field(const th_kind *k, rlock_client *c, uint64_t tid)
{
    char *owner = th_owner(c, tid);
    if (!k->write) {
        return owner;
    }
    char *s = NULL;
    cr_assert(asprintf(&s, "%s:write", owner) > 0);
    free(owner);
    return s;
}

/* The hold count Redis has for that hold (0: none). */
static inline long long th_kind_count(redisContext *r, const th_kind *k, const char *name,
                                      rlock_client *c, uint64_t tid)
{
    char *f = th_kind_field(k, c, tid);
    long long n = th_hget_int(r, name, f);
    free(f);
    return n;
}

/* HGET name mode as a malloc'd string, "" when absent (read/write lock). */
static inline char *th_rw_mode(redisContext *r, const char *name)
{
    redisReply *rep = th_cmd(r, "HGET %s mode", name);
    char *s = strdup(rep->type == REDIS_REPLY_STRING ? rep->str : "");
    freeReplyObject(rep);
    return s;
}

/* How many keys match pattern (KEYS: the test servers are small). */
static inline long long th_count_keys(redisContext *r, const char *pattern)
{
    redisReply *rep = th_cmd(r, "KEYS %s", pattern);
    long long n = rep->type == REDIS_REPLY_ARRAY ? (long long)rep->elements : -1;
    freeReplyObject(rep);
    return n;
}

/* The read holds' timeout keys of name: those of thread tid of client c,
 * or (c NULL) of every reader. */
static inline long long th_read_timeouts(redisContext *r, const char *name, rlock_client *c,
                                         uint64_t tid)
{
    char *owner = c ? th_owner(c, tid) : strdup("*");
    char *pat = NULL;
    cr_assert(asprintf(&pat,
                       strchr(name, '{') ? "%s:%s:rwlock_timeout:*" : "{%s}:%s:rwlock_timeout:*",
                       name, owner) > 0);
    long long n = th_count_keys(r, pat);
    free(pat);
    free(owner);
    return n;
}

static inline long long th_llen(redisContext *r, const char *key)
{
    redisReply *rep = th_cmd(r, "LLEN %s", key);
    long long n = rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
    freeReplyObject(rep);
    return n;
}

static inline long long th_zcard(redisContext *r, const char *key)
{
    redisReply *rep = th_cmd(r, "ZCARD %s", key);
    long long n = rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
    freeReplyObject(rep);
    return n;
}

/* The fair lock's queue length (waiters in Redis). */
static inline long long th_fair_queued(redisContext *r, const char *name)
{
    char *q = th_prefixed("redisson_lock_queue", name);
    long long n = th_llen(r, q);
    free(q);
    return n;
}

/* Asserts that Redis holds exactly one hold of count n for that thread
 * of kind k at name, and nobody else's: the field, no other holder field,
 * the read/write mode, the read holds' timeout keys, a TTL. */
static inline void th__kind_assert_held(const char *file, int line, redisContext *r,
                                        const th_kind *k, const char *name, rlock_client *c,
                                        uint64_t tid, long long n)
{
    long long got = th_kind_count(r, k, name, c, tid);
    cr_assert_eq(got, n, "%s:%d: %s lock %s: hold count %lld in Redis, expected %lld", file, line,
                 k->id, name, got, n);
    long long fields = th_hlen(r, name), want = (k->read || k->write) ? 2 : 1;
    cr_assert_eq(fields, want, "%s:%d: %s lock %s: %lld hash fields, expected %lld (one holder)",
                 file, line, k->id, name, fields, want);
    long long ttl = th_pttl(r, name);
    cr_assert(ttl > 0, "%s:%d: %s lock %s: PTTL %lld", file, line, k->id, name, ttl);
    if (k->read || k->write) {
        char *m = th_rw_mode(r, name);
        cr_assert_str_eq(m, k->read ? "read" : "write", "%s:%d: %s lock %s: mode '%s'", file, line,
                         k->id, name, m);
        free(m);
    }
    if (k->read) {
        long long t = th_read_timeouts(r, name, c, tid);
        cr_assert_eq(t, n, "%s:%d: read lock %s: %lld timeout keys for %lld holds", file, line,
                     name, t, n);
    }
}
#define th_kind_assert_held(r, k, name, c, tid, n) \
    th__kind_assert_held(__FILE__, __LINE__, r, k, name, c, tid, n)

/* Asserts that nothing of kind k is left at name: no hash, no read
 * timeout keys, an empty fair queue and deadline set. */
static inline void th__kind_assert_free(const char *file, int line, redisContext *r,
                                        const th_kind *k, const char *name)
{
    cr_assert_eq(th_exists(r, name), 0, "%s:%d: %s lock %s still held (%lld fields, PTTL %lld)",
                 file, line, k->id, name, th_hlen(r, name), th_pttl(r, name));
    if (k->read || k->write) {
        long long t = th_read_timeouts(r, name, NULL, 0);
        cr_assert_eq(t, 0, "%s:%d: %lld read timeout keys left at %s", file, line, t, name);
    }
    if (k->fair) {
        char *q = th_prefixed("redisson_lock_queue", name);
        char *z = th_prefixed("redisson_lock_timeout", name);
        long long nq = th_llen(r, q), nz = th_zcard(r, z);
        cr_assert(nq == 0 && nz == 0, "%s:%d: fair lock %s: %lld queued, %lld deadlines left", file,
                  line, name, nq, nz);
        free(q);
        free(z);
    }
}
#define th_kind_assert_free(r, k, name) th__kind_assert_free(__FILE__, __LINE__, r, k, name)

/* Waits (th_ms(timeout_ms)) until a waiter of kind k on name is in
 * place, as Redis shows it: queued (fair), subscribed to the name's
 * channel, or, for a spin waiter that leaves no trace, a fixed while. */
static inline void th__kind_wait_waiting(const char *file, int line, int port, const th_kind *k,
                                         const char *name, int64_t timeout_ms)
{
    if (k->fair) {
        redisContext *r = th_redis(port);
        bool ok = TH_POLL(th_fair_queued(r, name) >= 1, timeout_ms);
        redisFree(r);
        cr_assert(ok, "%s:%d: no fair waiter queued for %s within %lld ms", file, line, name,
                  (long long)th_ms(timeout_ms));
    } else if (k->read || k->write) {
        char *ch = th_prefixed("redisson_rwlock", name);
        th__wait_numsub(file, line, port, ch, 1, timeout_ms);
        free(ch);
    } else if (!k->spin) {
        th__wait_waiters(file, line, port, name, 1, timeout_ms);
    } else {
        th_sleep_ms(th_ms(300)); /* a spin waiter polls: nothing to see */
    }
}
#define th_kind_wait_waiting(port, k, name, timeout_ms) \
    th__kind_wait_waiting(__FILE__, __LINE__, port, k, name, timeout_ms)

#endif
