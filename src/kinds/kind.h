/* kinds: one file per lock kind, each filling one table of operations that
 * the shared engine (sync/) calls: how to attempt, release, force-release
 * and renew, which channel to wait on and what its message means. A new
 * kind (fair, read, write, fenced, spin) is a file here, its scripts in
 * lua/, and its tests. */
#ifndef RLOCK_KIND_H
#define RLOCK_KIND_H

#include "core/core.h"
#include "net/net.h"
#include "sync/sync.h"

struct rlock;

/* The outcome of one acquire attempt that got an answer. */
typedef enum rlock__taken {
    RLOCK__TAKEN,    /* acquired or re-entered: count is the new count */
    RLOCK__HELD,     /* held elsewhere: ttl is the holder's PTTL (-1 none) */
    RLOCK__GONE,     /* a re-entry found this thread's hold gone: nothing changed */
    RLOCK__SPENT,    /* a copy of this request already ran and took nothing, or it
                        was abandoned: nothing changed, attempt again with a new id */
} rlock__taken;

typedef struct rlock__attempt {
    rlock__taken what;
    int64_t count;
    int64_t ttl;
} rlock__attempt;

/* What an abandoned attempt had done (lua/abandon.lua's reply). */
typedef enum rlock__abandoned {
    RLOCK__TOOK_NOTHING = 0, /* and now never will */
    RLOCK__GAVE_BACK = 1,    /* took a hold, given back; the owner holds the rest */
    RLOCK__GAVE_BACK_ALL = 2, /* took the owner's only hold, given back: key deleted */
    RLOCK__TOOK_LOST = 3,    /* took a hold, but the owner's field is gone already */
} rlock__abandoned;

/* The outcome of one release that got an answer. */
typedef enum rlock__released {
    RLOCK__NOT_HELD = -1, /* the owner had no hold */
    RLOCK__PARTIAL = 0,   /* count - 1, still held */
    RLOCK__FREED = 1,     /* the last hold: key deleted, waiters woken */
} rlock__released;

typedef struct rlock__kind {
    const char *name;
    /* One attempt for owner "<uuid>:<tid>" with request id rid; held is
     * the count this thread believes it has (0: a first acquisition).
     * resend: the same rid went out before without an answer. Redis
     * remembers what a request with this rid did (its acquire latch), so
     * sending it again is always safe: it never takes a second hold. */
    rlock_status (*attempt)(struct rlock *l, const char *owner, int64_t lease_ms, int64_t held,
                            const char *rid, bool resend, rlock__attempt *out,
                            int64_t deadline_ms);
    /* Settles the attempt rid that never got an answer: afterwards no copy
     * of it can take a hold, and a hold it took is given back (lease_ms for
     * the holds left). *out: what it had done (rlock__abandoned). */
    rlock_status (*abandon)(struct rlock *l, const char *owner, const char *rid,
                            int64_t lease_ms, int *out, int64_t deadline_ms);
    /* One release with request id rid (the unlock latch makes a resend of
     * the same id safe). */
    rlock_status (*release)(struct rlock *l, const char *owner, const char *rid, int64_t lease_ms,
                            rlock__released *out, int64_t deadline_ms);
    rlock_status (*force_release)(struct rlock *l, bool *was_locked, int64_t deadline_ms);
    /* The owner's hold count in Redis (outcome checks after a lost reply). */
    rlock_status (*count)(struct rlock *l, const char *owner, int64_t *count,
                          int64_t deadline_ms);
    /* Renewal: KEYS = names, ARGV[1] = lease, ARGV[1 + i] = owner of
     * KEYS[i]; the reply is an array of 1 (renewed) / 0 (gone). */
    const rlock__script *renew;
    rlock__wake wake;
} rlock__kind;

extern const rlock__kind rlock__kind_reentrant;

/* A handle: a lock name of one kind, with its derived names. */
struct rlock {
    rlock_client *c;
    const rlock__kind *kind;
    char *name;
    size_t namelen;
    char *channel; /* redisson_lock__channel:{name} */
    size_t chanlen;
    char *latch_prefix; /* redisson_unlock_latch:{name}: */
    size_t latch_prefix_len;
    char *acq_latch_prefix; /* rlock_acquire_latch:{name}: */
    size_t acq_latch_prefix_len;
};

/* Fills a handle (the derived names are allocated); fini frees them. */
rlock_status rlock__handle_init(struct rlock *l, rlock_client *c, const rlock__kind *kind,
                                const char *name, size_t len);
void rlock__handle_fini(struct rlock *l);

#define RLOCK__OWNER_MAX 64
/* A latch key: prefix + the 32 hex digits of a request id, malloc'd (a
 * name may be long: never on the stack). NULL on ENOMEM. */
char *rlock__latch_key(const char *prefix, size_t prefix_len, const char *rid, size_t *len);
/* "<client uuid>:<tid>" into buf (RLOCK__OWNER_MAX bytes). */
void rlock__owner(const rlock_client *c, uint64_t tid, char *buf);

/* Reply parsers, kept apart from I/O so they can be fuzzed. Each returns
 * RLOCK_OK with *out set, or RLOCK_EPROTO / the error reply's status. */
rlock_status rlock__parse_attempt(const redisReply *r, rlock__attempt *out);
rlock_status rlock__parse_release(const redisReply *r, rlock__released *out);
rlock_status rlock__parse_int(const redisReply *r, int64_t *out);
/* rlock__run() of a call whose reply is an integer (or nil: 0); *out is
 * written only on RLOCK_OK. */
rlock_status rlock__run_int(rlock_client *c, const rlock__call *call, int64_t *out,
                           int64_t deadline_ms);
/* A renewal reply for k calls: res[i] = 1 renewed, 0 gone, left -1 when
 * the reply is of another shape. */
void rlock__parse_renewal(const redisReply *r, size_t k, int8_t *res);

#endif
