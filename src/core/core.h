/* core: what every layer shares. Time, a byte-keyed map, statuses and
 * error detail, names derived from a lock name, request ids, thread ids,
 * the URL, and the hold registry. Nothing here talks to Redis. */
#ifndef RLOCK_CORE_H
#define RLOCK_CORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rlock.h"

struct rlock_client;

/* Connections are made lazily, so a large pool costs nothing until that
 * many threads talk to Redis at once; then it saves them queueing. */
#define RLOCK__DEFAULT_POOL 32
#define RLOCK__DEFAULT_CONNECT_MS 2000
#define RLOCK__DEFAULT_COMMAND_MS 3000
#define RLOCK__DEFAULT_WATCHDOG_MS 30000
#define RLOCK__DEFAULT_BATCH 100
#define RLOCK__DEFAULT_SUBSCRIBE_MS 7500
#define RLOCK__DEFAULT_RETRY_MS 30000
#define RLOCK__DEFAULT_FAIR_WAIT_MS 300000 /* Redisson's fairLockWaitTimeout */
#define RLOCK__DEFAULT_SPIN_MIN_MS 1
#define RLOCK__DEFAULT_SPIN_MAX_MS 128
/* The watchdog settles a doubt a thread left (an exited thread's, a live
 * thread's give-up) this long after it was left or the last try failed. */
#define RLOCK__DOUBT_RETRY_MS 1000
/* The unlock latch's TTL: Redisson's is 16-20 s with its defaults; a fixed
 * 20 s covers our own retries (spec 0.3). */
#define RLOCK__LATCH_TTL_MS 20000

/* ---- time (time.c) --------------------------------------------------- */

/* The acquire latch's TTL: every resend of one request (for up to
 * retry_timeout_ms) and the settling after must find it. */
int64_t rlock__acquire_latch_ttl(const struct rlock_client *c);
/* Whether a request first sent at first_sent_ms, whose latch lives ttl_ms
 * from when it ran (no earlier than its send), can still be answered
 * exactly by sending it again now: the copy sent now must reach Redis
 * (within command_timeout_ms, plus a second) before that latch can be
 * gone. Later, only hold counts can tell. */
bool rlock__latch_trusted(const struct rlock_client *c, int64_t first_sent_ms, int64_t ttl_ms);

/* CLOCK_MONOTONIC in ms: never jumps with wall-clock changes. */
int64_t rlock__now_ms(void);
/* CLOCK_REALTIME in ms since the epoch: only for what other clients read
 * as a date (the fair lock's deadlines in Redis, which Redisson compares
 * with its own wall clock), never for a local timeout. */
int64_t rlock__wall_ms(void);
void rlock__deadline_ts(int64_t deadline_ms, struct timespec *ts);
/* A condvar on CLOCK_MONOTONIC. */
int rlock__cond_init(pthread_cond_t *cv);
/* Waits on cv until deadline_ms (monotonic ms; < 0: no deadline). Returns
 * false when the deadline passed. */
bool rlock__cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ms);
/* The earlier of two deadlines, where < 0 means none. */
int64_t rlock__min_deadline(int64_t a, int64_t b);
void rlock__sleep_ms(int64_t ms);

/* ---- string map (map.c): chained hash table keyed by bytes ------------- */

typedef struct rlock__map_node {
    struct rlock__map_node *next;
    uint64_t hash;
    size_t keylen;
    const char *key; /* owned by the containing object */
} rlock__map_node;

typedef struct rlock__map {
    rlock__map_node **slots;
    size_t nslots;
    size_t count;
} rlock__map;

uint64_t rlock__hash(const char *key, size_t len);
rlock_status rlock__map_init(rlock__map *m);
void rlock__map_destroy(rlock__map *m);
rlock__map_node *rlock__map_get(rlock__map *m, const char *key, size_t len);
/* Inserts n (key, keylen already set); may grow the table. */
rlock_status rlock__map_put(rlock__map *m, rlock__map_node *n);
void rlock__map_del(rlock__map *m, rlock__map_node *n);
/* Visits every node; fn may not change the map. */
void rlock__map_each(rlock__map *m, void (*fn)(rlock__map_node *, void *), void *arg);

/* ---- error detail (errors.c) ----------------------------------------- */

/* Sets this thread's rlock_last_error() text (printf-style) and returns st,
 * so that "return rlock__fail(st, ...)" reads as one step. */
rlock_status rlock__fail(rlock_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Clears it at the start of a public call. */
void rlock__error_clear(void);

/* ---- names (names.c, spec 0.1) --------------------------------------- */

/* prefix(P, N) as a malloc'd string with an optional tail; NULL on ENOMEM. */
char *rlock__prefixed(const char *prefix, const char *name, size_t len, const char *tail,
                      size_t *outlen);

/* ---- request ids (reqid.c) ------------------------------------------- */

/* Bumped in every fork()ed child (pthread_atfork): a value other than the
 * one a client was made under means "this is a child", without the system
 * call getpid() costs. */
uint64_t rlock__fork_generation(void);
/* 16 random bytes as 32 hex digits (spec 1); never repeats across fork(). */
void rlock__request_id(char out[33]);

/* ---- URL (url.c) ----------------------------------------------------- */

typedef struct rlock__endpoint {
    char *host; /* TCP host, or NULL for a unix socket */
    int port;
    char *path;     /* unix socket path, or NULL */
    char *user;     /* ACL user, or NULL */
    char *password; /* or NULL */
    int db;
    bool tls; /* rediss:// */
} rlock__endpoint;

rlock_status rlock__parse_url(const char *url, rlock__endpoint *ep);
void rlock__endpoint_free(rlock__endpoint *ep);
/* "host:port" or the socket path, for messages (never the password). */
void rlock__endpoint_label(const rlock__endpoint *ep, char *buf, size_t size);

/* ---- the hold registry (holds.c) ------------------------------------- */

/* How core tells the layers above that a hold was lost: a function and its
 * argument stored in the client (src/client.c points them at the callback
 * queue), so that core never calls up. Called with hold_mu held. epoch is
 * the hold's (rlock__holder.epoch); final: the report needs no check at
 * delivery (its thread exited, so that (name, thread) never holds again). */
typedef void (*rlock__lost_fn)(void *arg, const char *name, size_t len, uint64_t tid,
                               uint64_t epoch, bool final);

/* What this client knows of one thread's hold on one lock name. Records
 * are only read or changed under the client's hold_mu, and looked up by
 * (name, thread) each time: no pointer to one is kept across a release of
 * the mutex, so any thread may free one under it.
 *
 * One clock: expires_ms is always derived from what Redis
 * was last told. Every request that sets the key's TTL (a first acquire, a
 * re-entry, a partial unlock, a renewal) reports its send time and the TTL
 * it set (rlock__holder_told); Redis ran it no earlier than it was sent, so
 * "send time + TTL" never outlives the key. Never the max of what we
 * believe: a renewal reports the TTL it left (it never shortens one, so a
 * late renewal cannot cut a lease told since), and that is what counts. */
struct rlock__kind; /* sync/sync.h: the lock kind, opaque here */

/* What a kind's re-entry does to how long its hold lives (its kind's
 * rlock__kind.reentry), which the registry's deadline follows (I6). */
typedef enum rlock__reentry {
    /* The key's TTL becomes the lease (the reentrant lock's hash kinds). */
    RLOCK__REENTRY_SETS = 0,
    /* The lease is added to the TTL left (the write half: Redisson's
     * pexpire(pttl + lease)): the hold lives at least the lease longer
     * than it did, never less. */
    RLOCK__REENTRY_ADDS,
    /* The new level gets a key of its own with the lease, the levels below
     * keep theirs (the read half's timeout keys): the hold lives as long as
     * its longest-lived level, never less than before. */
    RLOCK__REENTRY_KEEPS,
} rlock__reentry;

typedef struct rlock__holder {
    struct rlock__holder *next; /* the next holder of the same name */
    /* The other records of the same thread (its rlock__thread_holds), so
     * that its exit visits only its own, and the name this one is of. */
    struct rlock__holder *tnext, *tprev;
    struct rlock__hold *hold;
    uint64_t tid;
    int64_t count;      /* holds taken and not yet released */
    int64_t lost_levels; /* levels of a lost hold its thread was told of
                            (RLOCK_ELOST) and has not unwound yet: each
                            unlock Redis answers "no hold" takes one and
                            says RLOCK_ELOST. Below any hold taken since
                            (count), which its unlocks release first. */
    int64_t lease_ms;   /* lease of the latest explicit-lease acquire; 0 none */
    int64_t wd_depth;   /* depth of the lowest level taken in watchdog mode,
                           0 none: renewed while nonzero (levels are
                           released last in, first out) */
    int64_t expires_ms; /* local time the key can expire in Redis, from the
                           TTL-setting requests (-1: nothing held) */
    int64_t told_ms;    /* no earlier than Redis ran the TTL-setting request
                           that ran last: the latest send time applied */
    int64_t settled_ms; /* when the latest TTL-setting request was confirmed:
                           a request sent after it ran after all of them */
    int64_t reentry_from_ms; /* expires_ms when the thread's latest re-entry
                                was first sent: a lower bound of the life of
                                the levels below it, from which an additive
                                re-entry's deadline counts (-1 none) */
    const struct rlock__kind *kind; /* how to renew it: the kind of the
                                       acquisition that took its first hold
                                       (count 0 -> 1); nothing else changes
                                       it (docs/engine.md, I14) */
    int64_t token;      /* a fenced kind's token of the latest acquisition,
                           -1 none */
    uint64_t epoch;     /* changes with every first acquisition */
    bool lost;          /* Redis no longer has it (renewal, re-entry) */
    bool in_round;      /* a renewal round in flight includes this hold */
    bool suspect;       /* an acquire got no reply and may have run: settle
                           it with suspect_rid */
    bool suspect_count; /* ... or Redis counts more than we do (an acquire
                           ran past its latch's horizon): give the surplus
                           back; suspect_rid is then the give-back that got
                           no reply ("" none), sent again first, its first
                           send at giveback_sent_ms */
    bool pending;       /* an unlock got no reply: resend pending_rid */
    bool acquiring;     /* its thread is between prepare and the outcome */
    bool orphan;        /* its thread exited with this doubt: the watchdog
                           settles it (c->wd_doubts) */
    bool settling;      /* claimed: one settler (its thread, the watchdog,
                           the close) is sending its doubts; every other
                           waits on c->claim_cv or passes (I4) */
    bool giving_up;     /* a waiter's give-up (the fair lock leaving Redis's
                           queue) got no answer: sent again, with the wait
                           give_up_wait_ms, until Redis answers it */
    int64_t give_up_wait_ms;
    int64_t pending_sent_ms; /* first send of the unanswered unlock */
    union {
        int64_t suspect_held;     /* the count when the acquire was sent */
        int64_t giveback_sent_ms; /* suspect_count: the give-back's first send */
    };
    /* The kinds of the requests in doubt, which settle them with their own
     * scripts: one of another kind than the hold's (a re-entry through
     * another kind of the same layout) is settled as it was sent. */
    const struct rlock__kind *suspect_kind, *pending_kind, *give_up_kind;
    char pending_rid[33]; /* the ids last: no padding between them */
    char suspect_rid[33];
} rlock__holder;

typedef struct rlock__hold {
    rlock__map_node node; /* key = name (keylen bytes): the lock name, or
                             name NUL tag for a kind with a key_tag */
    rlock__holder *holders;
    char *name;
    size_t namelen; /* of the lock name in Redis (up to the NUL) */
    size_t keylen;
} rlock__hold;

/* The records of one thread, in the client's map keyed by the 8 bytes of
 * its id; gone with its last record. */
typedef struct rlock__thread_holds {
    rlock__map_node node;
    uint64_t tid;
    rlock__holder *first;
} rlock__thread_holds;

/* A copy of a record, taken under the mutex. */
typedef struct rlock__hold_view {
    int64_t count;    /* 0 when no record */
    int64_t lost_levels;
    int64_t lease_ms; /* the TTL a partial unlock sets: that of the levels
                         left below the one released */
    bool lost, suspect, pending, in_round, giving_up;
    bool orphan; /* its thread exited */
    int64_t give_up_wait_ms;
    bool ends_watchdog; /* a partial unlock now releases the watchdog-mode
                           level: the hold leaves watchdog mode */
    int64_t pending_sent_ms;
    char pending_rid[33];
    int64_t suspect_held;
    char suspect_rid[33];
    bool suspect_count;
    int64_t giveback_sent_ms;
    int64_t token; /* of the latest acquisition (fenced kinds), -1 none */
    /* The record's kind (NULL: no record), and those of its doubts. */
    const struct rlock__kind *kind, *suspect_kind, *pending_kind, *give_up_kind;
} rlock__hold_view;

rlock_status rlock__holds_init(struct rlock_client *c);
void rlock__holds_free(struct rlock_client *c);
/* The record of (name, tid), created with count 0 if missing (so that
 * recording a successful acquire can never fail for memory), of the given
 * kind. An existing record keeps its kind: only an acquisition that takes
 * a first hold changes it (rlock__hold_acquired), never an attempt that
 * Redis may yet refuse. */
rlock_status rlock__hold_prepare(struct rlock_client *c, const char *name, size_t len,
                                 uint64_t tid, const struct rlock__kind *kind);
void rlock__hold_view_of(struct rlock_client *c, const char *name, size_t len, uint64_t tid,
                         rlock__hold_view *v);
/* An acquire sent at sent_ms ran: count + 1; a first one starts a new
 * epoch and gives the record its kind (a re-entry through another kind of
 * the same layout leaves it). The lease (RLOCK_WATCHDOG or an explicit
 * one) sets the deadline of a first hold; a re-entry's follows rule (the
 * kind's): SETS, sent_ms + lease; ADDS, the deadline noted when it was
 * sent (rlock__hold_reentry_sent), or sent_ms if later, + lease; KEEPS,
 * the later of that noted deadline and sent_ms + lease; neither of the
 * last two ever lowers the deadline (every value kept is a lower bound of
 * when Redis can let the hold go, whichever order a renewal in flight ran
 * in). A watchdog-mode level is renewed with the record's kind's script
 * until it is released. */
void rlock__hold_acquired(struct rlock_client *c, const char *name, size_t len, uint64_t tid,
                          int64_t lease_ms, int64_t sent_ms, const struct rlock__kind *kind,
                          int64_t token, rlock__reentry rule);
/* A re-entry of the given rule with lease ttl_ms is first sent at sent_ms:
 * SETS, as rlock__hold_ttl_may() (it may shorten the TTL); ADDS and KEEPS
 * never shorten the hold's life, so the deadline stays, and is noted for
 * rlock__hold_acquired(). */
void rlock__hold_reentry_sent(struct rlock_client *c, const char *name, size_t len, uint64_t tid,
                              int64_t sent_ms, int64_t ttl_ms, rlock__reentry rule);
/* An unlock sent at sent_ms ran: all = the key is gone for us (forget),
 * else count - 1 and the TTL it set (the view's lease_ms) sets the
 * deadline. The answer to an unanswered unlock resent with its id counts
 * from its first send. */
void rlock__hold_released(struct rlock_client *c, const char *name, size_t len, uint64_t tid,
                          bool all, int64_t sent_ms);
/* Another request sent at sent_ms set the key's TTL to ttl_ms (e.g. the
 * release of an orphaned level). */
void rlock__hold_ttl_set(struct rlock_client *c, const char *name, size_t len, uint64_t tid,
                         int64_t sent_ms, int64_t ttl_ms);
/* The same on a record (hold_mu held): the deadline follows the request
 * that Redis ran last; for requests in flight together, the earlier of
 * what each would give. */
void rlock__holder_told(rlock__holder *x, int64_t sent_ms, int64_t ttl_ms);
/* How long before its deadline a watchdog-mode hold that no renewal could
 * confirm is reported lost: a tenth of watchdog_timeout_ms (at least 1). */
int64_t rlock__lost_margin(const struct rlock_client *c);

/* ---- formatting (fmt.c) ---------------------------------------------- */

/* v in decimal into buf (21 bytes for any value), NUL-terminated; returns
 * the length. Never touches the locale. */
size_t rlock__fmt_u64(char *buf, uint64_t v);
size_t rlock__fmt_i64(char *buf, int64_t v);
/* v as 16 lowercase hex digits and a NUL (17 bytes). */
void rlock__fmt_hex16(char *buf, uint64_t v);
/* A request about to be sent at sent_ms may set the key's TTL to ttl_ms (a
 * re-entry, a partial unlock): until its answer says what Redis did, the
 * deadline comes no later than that, so a report is never late for it. */
void rlock__hold_ttl_may(struct rlock_client *c, const char *name, size_t len, uint64_t tid,
                         int64_t sent_ms, int64_t ttl_ms);
/* Redis no longer has this thread's hold: stop renewing, report RLOCK_ELOST
 * at its next unlock. */
void rlock__hold_mark_lost(struct rlock_client *c, const char *name, size_t len, uint64_t tid);
/* The thread is being told (RLOCK_ELOST) that its hold is gone: its levels
 * become lost levels, less the one an unlock unwinds (by_unlock), and it
 * holds nothing any more (a lock takes a fresh hold, above them). An
 * unlock of a lost level (count 0) takes one of those. Drops a record
 * left with nothing to remember. */
void rlock__hold_unwound_lost(struct rlock_client *c, const char *name, size_t len, uint64_t tid,
                              bool by_unlock);
/* Records (rid != NULL: "" when only the hold counts can tell) or clears
 * an acquire of kind that got no answer, first sent at sent_ms with lease
 * ttl_ms: it may have run (or still run) and set the key's TTL, so a held
 * hold's deadline comes no later than sent_ms + ttl_ms (ttl_ms < 0: it
 * cannot shorten the hold's life, a kind whose re-entry adds or keeps:
 * the deadline stays). It is settled with its kind's scripts. */
/* The give-back of a surplus (a suspect_count record) that got no reply:
 * rid (NULL: none left in doubt), first sent at sent_ms. */
void rlock__hold_set_giveback(struct rlock_client *c, const char *name, size_t len, uint64_t tid,
                              const char *rid, int64_t sent_ms);
void rlock__hold_set_suspect(struct rlock_client *c, const char *name, size_t len, uint64_t tid,
                             const char *rid, int64_t sent_ms, int64_t ttl_ms,
                             const struct rlock__kind *kind);
/* Keeps (rid != NULL, first sent at sent_ms by kind) or clears the id of
 * an unanswered unlock; a last hold whose unlock went unanswered is no
 * longer renewed, and an inner one's deadline comes no later than what
 * the unlock, if it ran, set. It is sent again with kind's script. */
void rlock__hold_set_pending(struct rlock_client *c, const char *name, size_t len, uint64_t tid,
                             const char *rid, int64_t sent_ms, const struct rlock__kind *kind);
/* Keeps (on, with the wait it was sent with and its kind) or clears a
 * waiter's give-up that got no answer: it is sent again (it is safe to run
 * twice) by the thread's next call on the name, at close, or by the
 * watchdog (a second later, and every second until Redis answers it),
 * whether the thread lives or has exited, under the record's claim. */
void rlock__hold_set_give_up(struct rlock_client *c, const char *name, size_t len, uint64_t tid,
                             bool on, int64_t wait_ms, const struct rlock__kind *kind);
/* Who claims a record to settle its doubts (docs/engine.md, I4). */
typedef enum rlock__claimer {
    RLOCK__CLAIM_WAIT, /* the thread itself, or the close: waits while
                          another settler has the claim */
    RLOCK__CLAIM_TRY   /* the watchdog: passes when the record is claimed,
                          and, of a live thread, unless it has a give-up
                          in doubt and its thread is not acquiring */
} rlock__claimer;
/* The view of (name, tid) (*v) and, when it has a doubt to settle (an
 * acquire, a give-up, with pending_too an unlock), the claim of it
 * (*claimed): nobody else sends its doubts until rlock__hold_unclaim().
 * RLOCK__CLAIM_WAIT waits for another's claim until deadline_ms (< 0:
 * none), then RLOCK_ETIMEDOUT. One lookup when nothing is in doubt. */
rlock_status rlock__hold_claim(struct rlock_client *c, const char *name, size_t len,
                               uint64_t tid, rlock__claimer who, bool pending_too,
                               int64_t deadline_ms, rlock__hold_view *v, bool *claimed);
/* Ends the claim: drops the record if nothing is left to track, wakes
 * whoever waits for it. */
void rlock__hold_unclaim(struct rlock_client *c, const char *name, size_t len, uint64_t tid);
/* Ends an acquire that took nothing, and drops the record if nothing is
 * left to track (count 0, nothing in doubt). */
void rlock__hold_tidy(struct rlock_client *c, const char *name, size_t len, uint64_t tid);
/* Waits while a renewal round in flight includes (name, tid), so that a
 * fresh explicit lease is not stretched by a late renewal of the hold
 * before it. At most until deadline_ms. */
void rlock__hold_wait_round(struct rlock_client *c, const char *name, size_t len, uint64_t tid,
                            int64_t deadline_ms);
/* Unlinks and frees x, and h with its last holder. hold_mu held. */
void rlock__holder_remove(struct rlock_client *c, rlock__hold *h, rlock__holder *x);
/* Holds tracked right now (count > 0, not lost, lease not run out). */
uint64_t rlock__holds_count(struct rlock_client *c);
/* Thread tid exited: its watchdog holds stop being renewed and are reported
 * lost (final reports, through c->lost_fn). Its records are freed, except
 * those with something in doubt (an acquire that may have run, an unlock
 * not answered, a give-up not answered): they stay, with no hold counted,
 * for the watchdog's settling or the close's. Costs the thread's own
 * records, not the client's. */
void rlock__holds_thread_exit(struct rlock_client *c, uint64_t tid);
/* The epoch of (name, tid)'s record, 0 when none. hold_mu held. */
uint64_t rlock__hold_epoch_locked(struct rlock_client *c, const char *name, size_t len,
                                  uint64_t tid);
/* Whether (name, tid) still has the hold of that epoch, and it is lost:
 * a report about it is not stale. Takes hold_mu. */
bool rlock__hold_still_lost(struct rlock_client *c, const char *name, size_t len, uint64_t tid,
                            uint64_t epoch);

/* ---- clients and threads (client.c) ---------------------------------- */

/* Fills the zero fields of cfg with defaults; RLOCK_EINVAL when one is out
 * of range. */
rlock_status rlock__config_fill(rlock_config *cfg);
/* The process's list of live clients, which a thread's exit walks; after
 * rlock__live_remove() returns no thread-exit hook is inside c. A fork()ed
 * child starts with an empty list. */
void rlock__live_add(struct rlock_client *c);
void rlock__live_remove(struct rlock_client *c);

/* Marks a public call in progress; RLOCK_ECLOSED when closing or in a
 * fork()ed child. Pair with rlock__leave(). Clears the error detail. */
rlock_status rlock__enter(struct rlock_client *c);
/* Its last touch of the client happens before rlock__calls_wait() can
 * return. */
void rlock__leave(struct rlock_client *c);
bool rlock__closing(struct rlock_client *c);
/* For the closer: init/destroy the count's mutex, refuse new calls, then
 * wait until the calls in progress have left. */
void rlock__calls_init(struct rlock_client *c);
void rlock__calls_destroy(struct rlock_client *c);
void rlock__calls_close(struct rlock_client *c);
void rlock__calls_wait(struct rlock_client *c);
void rlock__stat_add(struct rlock_client *c, rlock_stat s, uint64_t n);
/* Creates a thread with every signal blocked, so that no library thread
 * ever takes a signal meant for the application (SIGPIPE included). */
int rlock__thread_start(pthread_t *th, void *(*fn)(void *), void *arg);

#endif
