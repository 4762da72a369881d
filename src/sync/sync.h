/* sync: waiting and holding. Subscriptions (one refcounted entry per
 * channel, asked of the topology), cancellation tokens, the one acquire
 * loop every lock kind shares, release with its request-id bookkeeping,
 * the watchdog that renews held locks, and the thread that runs user
 * callbacks off the renewal path. */
#ifndef RLOCK_SYNC_H
#define RLOCK_SYNC_H

#include "core/core.h"
#include "net/net.h"

struct rlock;

/* ---- subscriptions and waiters (pubsub.c) ---------------------------- */

typedef struct rlock__chan rlock__chan;
typedef struct rlock__waiter rlock__waiter;

/* What a release message means for local waiters of a channel. */
typedef enum rlock__wake {
    RLOCK__WAKE_ONE, /* "0": the oldest local waiter retries */
    RLOCK__WAKE_ALL, /* every local waiter retries */
} rlock__wake;

rlock_status rlock__pubsub_start(struct rlock_client *c);
/* Stops the thread and wakes every waiter (they return RLOCK_ECLOSED). */
void rlock__pubsub_stop(struct rlock_client *c);
/* Frees the entries once no caller is left. */
void rlock__pubsub_free(struct rlock_client *c);
/* What a thread saw of a channel right before it sent an attempt, for
 * rlock__chan_join() after it: the subscription's epoch (0: not
 * confirmed then) and the channel's wake sequence. */
typedef struct rlock__chan_seen {
    uint64_t epoch;
    uint64_t seq;
} rlock__chan_seen;
void rlock__chan_peek(struct rlock_client *c, const char *channel, size_t len,
                      rlock__chan_seen *out);
/* Joins the local queue of channel, subscribing if first: *out_w is this
 * thread's place. *hint_ms is when the holder's lease runs out as the most
 * recent failed attempt of a queued local waiter saw it (-1: unknown), so
 * a newcomer queued behind them knows how long it may sleep. *live (seen
 * may be NULL: false): the channel has been subscribed, on one connection,
 * since seen was taken, and no message came since; every release that
 * runs after the attempt sent after seen will wake this waiter, so it
 * need not attempt again before it sleeps. */
rlock_status rlock__chan_join(struct rlock_client *c, const char *channel, size_t len,
                              rlock__wake wake, rlock__chan **out_ch, rlock__waiter **out_w,
                              bool *queued_behind, int64_t *hint_ms, const rlock__chan_seen *seen,
                              bool *live);
/* Waits until the subscription is confirmed, deadline_ms passes (then
 * RLOCK_ETIMEDOUT: the caller goes on and sleeps on the lease), the client
 * closes (RLOCK_ECLOSED) or the waiter's token is cancelled. */
rlock_status rlock__chan_wait_subscribed(struct rlock_client *c, rlock__chan *ch,
                                         rlock__waiter *w, int64_t deadline_ms);
/* Handles one reply or message read on the pub/sub connection (called
 * with ps_mu held; exposed for the reply fuzzer). */
void rlock__pubsub_on_reply(struct rlock_client *c, const redisReply *r);
/* Whether local threads are queued on channel right now. */
bool rlock__chan_queued(struct rlock_client *c, const char *channel, size_t len);
/* A failed attempt of this waiter saw the holder's lease end at until_ms
 * (-1: no expiry): the hint for newcomers is replaced, never stretched. */
void rlock__chan_saw_lease(struct rlock_client *c, rlock__chan *ch, rlock__waiter *w,
                           int64_t until_ms);
/* Notes the channel's wake sequence; taken before each attempt of a queued
 * waiter and handed to rlock__chan_used_wake() after it. */
uint64_t rlock__chan_mark(struct rlock_client *c, rlock__chan *ch);
/* The attempt sent after mark found the lock held elsewhere: a wake-up
 * given before mark was used (the holder's release will wake the queue
 * again). One given after mark was not: the release it stands for may
 * have run after the attempt, so it stays owed; the waiter retries at once
 * and, if it leaves instead, passes it on. */
void rlock__chan_used_wake(struct rlock_client *c, rlock__chan *ch, rlock__waiter *w,
                           uint64_t mark);
/* Sleeps until a release message wakes this waiter, a reconnect, a
 * cancellation or deadline_ms (< 0: none). Returns RLOCK_OK, RLOCK_ECLOSED
 * or RLOCK_ECANCELED. */
rlock_status rlock__chan_sleep(struct rlock_client *c, rlock__chan *ch, rlock__waiter *w,
                               int64_t deadline_ms);
/* Leaves the queue. A waiter that leaves without the lock while holding a
 * wake-up it did not use passes it on to the next one; one that leaves with
 * it tells the others when its lease ends (lease_end_ms), and they wait for
 * that instead of the lease they saw before. */
void rlock__chan_leave(struct rlock_client *c, rlock__chan *ch, rlock__waiter *w, bool acquired,
                       int64_t lease_end_ms);
/* Sets the cancellation token a waiter listens to (NULL: none). */
void rlock__waiter_set_cancel(rlock__waiter *w, rlock_cancel *t);

/* ---- cancellation (cancel.c) ----------------------------------------- */

/* Registers (ch, w) with the token so rlock_cancel() wakes it; returns
 * false when the token is already cancelled. */
bool rlock__cancel_watch(rlock_cancel *t, struct rlock_client *c, rlock__chan *ch,
                         rlock__waiter *w);
void rlock__cancel_unwatch(rlock_cancel *t, rlock__waiter *w);
bool rlock__cancelled(const rlock_cancel *t);
/* Called by rlock_cancel_fire() for each watched waiter, with no token lock
 * held; implemented by pubsub.c. */
void rlock__chan_cancel(struct rlock_client *c, rlock__chan *ch, rlock__waiter *w);

/* ---- the seam a lock kind fills (handle.c) ---------------------------- */

/* The engine below calls a lock kind only through this table, which each
 * file of kinds/ fills; a handle names its kind. Nothing here knows a
 * kind's scripts. */

/* The outcome of one acquire attempt that got an answer. */
typedef enum rlock__taken {
    RLOCK__TAKEN,    /* acquired or re-entered: count is the new count */
    RLOCK__HELD,     /* held elsewhere: ttl is the holder's PTTL (-1 none) */
    RLOCK__GONE,     /* a re-entry found this thread's hold gone: nothing changed */
    RLOCK__SPENT,    /* the request was settled already (a copy of a resent or
                        abandoned one): nothing changed, attempt again with a new id */
    RLOCK__SELF,     /* only the calling thread stands in the way (a read hold
                        asking for the write lock, a non-reentrant lock asked
                        again): waiting would wait on itself; nothing changed */
    RLOCK__FOREIGN,  /* the name holds another kind of lock (or a key of
                        another type): nothing changed */
} rlock__taken;

typedef struct rlock__attempt {
    rlock__taken what;
    int64_t count;
    int64_t ttl;   /* RLOCK__HELD: how long to sleep at most before the next
                      attempt (the holder's PTTL; -1 none: a wake-up ends it) */
    int64_t token; /* RLOCK__TAKEN by a fenced kind: the acquisition's token,
                      else -1 */
} rlock__attempt;

/* How a waiter of a kind learns that it should try again. */
typedef enum rlock__wait_policy {
    RLOCK__WAIT_SHARED, /* one channel per name (l->channel), its local waiters
                           queued in arrival order (no barging) */
    RLOCK__WAIT_OWN,    /* a channel per waiter, l->channel + ":" + owner (the
                           fair lock: Redis keeps the queue, the release
                           wakes only its head) */
    RLOCK__WAIT_POLL,   /* no messages: sleep and try again, the delay growing
                           from spin_min_delay_ms to spin_max_delay_ms */
} rlock__wait_policy;

/* What an abandoned attempt had done (lua/abandon.lua's reply). */
typedef enum rlock__abandoned {
    RLOCK__TOOK_NOTHING = 0, /* and now never will */
    RLOCK__GAVE_BACK = 1,    /* took a hold, given back; the owner holds the rest */
    RLOCK__GAVE_BACK_ALL = 2, /* took the owner's only hold, given back: key deleted */
    RLOCK__TOOK_LOST = 3,    /* the owner's holds are gone (expired, force-unlocked) */
} rlock__abandoned;

/* The outcome of one release that got an answer. */
typedef enum rlock__released {
    RLOCK__NOT_HELD = -1, /* the owner had no hold */
    RLOCK__PARTIAL = 0,   /* count - 1, still held */
    RLOCK__FREED = 1,     /* the last hold: key deleted, waiters woken */
} rlock__released;

/* The layout of the name's key a kind keeps its holds in. Kinds of one
 * layout count a thread's holds of the name in the same field (a re-entry
 * through either is one more of the same count), so the registry may keep
 * them in one record; kinds of two layouts never hold one name together
 * (each one's scripts refuse the other's key: RLOCK_EKIND). */
typedef enum rlock__layout {
    RLOCK__LAYOUT_LOCK = 0, /* the reentrant lock's hash, owner -> count, no
                               'mode' (reentrant, fair, fenced, spin and the
                               non-reentrant forms) */
    RLOCK__LAYOUT_RW,       /* a read/write lock's hash, with 'mode' */
} rlock__layout;

typedef struct rlock__kind {
    const char *name;
    rlock__layout layout;
    /* The channel its releases publish on: prefix("chan_prefix", name);
     * NULL: its releases publish nothing and the handle has no channel
     * (l->channel NULL; the spin lock, whose wait is RLOCK__WAIT_POLL). */
    const char *chan_prefix;
    /* NULL, or the tag of a second kind sharing the name and the thread
     * (the write half of a read/write lock: its field is owner ":" tag):
     * the registry keeps its holds apart, under name "\0" tag. */
    const char *key_tag;
    /* NULL, or the other kind whose holds of the same name and thread the
     * registry keeps apart (key_tag: the read and write halves): a call of
     * this kind settles that kind's doubts of the name too, before it
     * sends anything (engine.md I4). */
    const struct rlock__kind *sibling;
    rlock__wait_policy wait;
    /* true: not reentrant (Redisson 4.4's non-reentrant forms): an attempt
     * with held > 0 answers {4,0} (RLOCK__SELF) and changes nothing, so
     * the engine does not take it for a re-entry that may reset the TTL. */
    bool no_reentry;
    /* Holds of this kind share the lock (the read half): a newcomer
     * attempts at once even while other local threads queue for the name,
     * and a waiter queued behind them attempts again once subscribed
     * instead of sleeping in turn (an exclusive kind's no-barging rule
     * would keep a reader behind a waiting writer while readers hold, and
     * a reader that missed a "1" asleep until the holders' lease ends). */
    bool shared;
    /* What a re-entry does to how long the hold lives, which the
     * registry's deadline follows (engine.md I6): SETS (the default) the
     * key's TTL becomes the lease, so an unanswered re-entry may shorten
     * it; ADDS the lease is added to the TTL left (the write half, as
     * Redisson's); KEEPS the new level lives by a key of its own, the
     * levels below by theirs (the read half). The last two never shorten
     * the hold's life: the deadline only moves later. */
    rlock__reentry reentry;
    /* One attempt for owner "<uuid>:<tid>" with request id rid; held is
     * the count this thread believes it has (0: a first acquisition);
     * wait_ms the caller's wait (-1 forever, 0 none).
     * resend: the same rid went out before without an answer. Redis
     * remembers what a request with this rid did (its acquire latch), so
     * sending it again is always safe: it never takes a second hold. */
    rlock_status (*attempt)(struct rlock *l, const char *owner, int64_t lease_ms, int64_t held,
                            int64_t wait_ms, const char *rid, bool resend, rlock__attempt *out,
                            int64_t deadline_ms);
    /* NULL, or the step a waiter takes when it stops waiting without the
     * lock after an attempt (the fair lock leaves Redis's queue). Safe to
     * run again; wait_ms as given to attempt. */
    rlock_status (*give_up)(struct rlock *l, const char *owner, int64_t wait_ms,
                            int64_t deadline_ms);
    /* Settles the attempt rid, sent with the count held, that never got
     * an answer: afterwards no copy of it can take a hold, and a hold it
     * took is given back (lease_ms for the holds left). *out: what it had
     * done (rlock__abandoned). */
    rlock_status (*abandon)(struct rlock *l, const char *owner, const char *rid, int64_t held,
                            int64_t lease_ms, int *out, int64_t deadline_ms);
    /* One release with request id rid (the unlock latch makes a resend of
     * the same id safe). */
    rlock_status (*release)(struct rlock *l, const char *owner, const char *rid, int64_t lease_ms,
                            rlock__released *out, int64_t deadline_ms);
    rlock_status (*force_release)(struct rlock *l, bool *was_locked, int64_t deadline_ms);
    /* The owner's hold count in Redis (outcome checks after a lost reply). */
    rlock_status (*count)(struct rlock *l, const char *owner, int64_t *count,
                          int64_t deadline_ms);
    /* Whether anyone holds it: -2 free, -1 held with no expiry, else the
     * holder's lease left in ms. A read, safe to send again. */
    rlock_status (*holder_ttl)(struct rlock *l, int64_t *ttl, int64_t deadline_ms);
    /* NULL (EXISTS name), or whether the lock counts as locked for this
     * kind (the write half: only a writer holds it). */
    rlock_status (*is_locked)(struct rlock *l, bool *locked, int64_t deadline_ms);
    /* Renewal: KEYS = names, ARGV[1] = lease, ARGV[1 + i] = owner of
     * KEYS[i]; the reply is an array of 0 (gone) or the hold's TTL after
     * the renewal (-1: none), which the registry takes as the hold's life
     * (I6, I7): the key's, for a hold that lives by its key; the read
     * half's, by its own timeout keys (the longest, no longer than the
     * name's: 0 when none is left), never the name's alone, which another
     * client's reader may keep longer. It extends a TTL to the lease,
     * never shortens one (a late renewal must not cut a lease told
     * since). */
    const rlock__script *renew;
    /* What a message on its channel means for local waiters ("1" always
     * wakes them all). */
    rlock__wake wake;
} rlock__kind;

/* A handle: a lock name of one kind, with its derived names. */
struct rlock {
    rlock_client *c;
    const rlock__kind *kind;
    char *name;
    size_t namelen;
    char *key; /* the registry's key: name, or name "\0" kind->key_tag */
    size_t keylen;
    char *channel; /* prefix(kind->chan_prefix, name), or NULL (none) */
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
/* The registry's key of kind's holds of name: the name, or name NUL tag
 * (key_tag). rlock__registry_key_len() is its length; buf must hold one
 * byte more (the key is NUL-terminated). */
size_t rlock__registry_key_len(const rlock__kind *kind, size_t len);
void rlock__registry_key(const rlock__kind *kind, const char *name, size_t len, char *buf);
/* A new handle of kind for the public constructors (argument checks, the
 * call guard): rlock_new(), rlock_new_fair(), ... */
rlock_status rlock__handle_new(rlock_client *c, const char *name, const rlock__kind *kind,
                               struct rlock **out);

#define RLOCK__OWNER_MAX 80
/* A latch key: prefix + the 32 hex digits of a request id, malloc'd (a
 * name may be long: never on the stack). NULL on ENOMEM. */
char *rlock__latch_key(const char *prefix, size_t prefix_len, const char *rid, size_t *len);
/* "<client uuid>:<tid>" into buf (RLOCK__OWNER_MAX bytes). */
void rlock__owner(const rlock_client *c, uint64_t tid, char *buf);
/* The hash field of thread tid's holds of l: the owner, or owner ":" tag. */
void rlock__owner_field(const struct rlock *l, uint64_t tid, char *buf);

/* No answer for a renewal (its entry in a rlock__parse_renewal() result). */
#define RLOCK__RENEW_UNANSWERED INT64_MIN
/* A renewal reply for k keys: res[i] = 0 gone, else the key's TTL after the
 * renewal (-1: no expiry); left as it was (RLOCK__RENEW_UNANSWERED) when
 * the reply is of another shape (watchdog.c; fuzzed). */
void rlock__parse_renewal(const redisReply *r, size_t k, int64_t *res);

/* ---- a place in a name's local queue of waiters (wait.c) ------------- */

/* Shared by every wait on a lock name (the acquire loop,
 * rlock_wait_unlocked()): one waiter of the name's channel entry, watched
 * by the caller's token. Zeroed: not joined. */
typedef struct rlock__waitq {
    rlock__chan *ch;
    rlock__waiter *w;
    rlock_cancel *cancel; /* the token it is registered with, or NULL */
} rlock__waitq;

/* Joins l's queue (subscribing if first), registers the token and waits
 * until the subscription is confirmed, deadline_ms or subscribe_timeout_ms
 * (then it goes on: the caller sleeps on the holder's lease). *behind:
 * other local waiters were queued; *hint_ms: when the holder's lease ends
 * as their latest attempt saw it (-1 unknown); seen, *live: as
 * rlock__chan_join(). RLOCK_ECANCELED,
 * RLOCK_ECLOSED, RLOCK_EPERM (SUBSCRIBE refused), RLOCK_ENOMEM; on any
 * status the caller leaves with rlock__waitq_leave(). */
rlock_status rlock__waitq_join(struct rlock *l, rlock__waitq *q, rlock_cancel *cancel,
                               int64_t deadline_ms, bool *behind, int64_t *hint_ms,
                               const rlock__chan_seen *seen, bool *live);
/* Notes the state of the channel the calling thread would wait on for l
 * (rlock__chan_peek()), before an attempt; *live from rlock__waitq_join()
 * then tells whether the attempt after the join can be skipped. */
void rlock__waitq_peek(struct rlock *l, rlock__chan_seen *seen);
/* The channel's wake sequence before a probe or attempt (0 when not
 * joined), for rlock__waitq_saw_held() after it. */
uint64_t rlock__waitq_mark(rlock_client *c, const rlock__waitq *q);
/* The probe or attempt sent after mark found the lock held, the holder's
 * lease ending at lease_end_ms (-1 none): a wake-up from before the mark
 * was used; the lease is the hint for newcomers. No-op when not joined. */
void rlock__waitq_saw_held(rlock_client *c, rlock__waitq *q, uint64_t mark, int64_t lease_end_ms);
/* Sleeps until woken, a reconnect, the token or deadline_ms (< 0: none).
 * RLOCK_OK, RLOCK_ECLOSED, RLOCK_ECANCELED, RLOCK_EPERM. */
rlock_status rlock__waitq_sleep(rlock_client *c, rlock__waitq *q, int64_t deadline_ms);
/* Leaves the queue (no-op when not joined): see rlock__chan_leave(). */
void rlock__waitq_leave(rlock_client *c, rlock__waitq *q, bool acquired, int64_t lease_end_ms);
/* The next sleep of a polling waiter (RLOCK__WAIT_POLL) after tries failed
 * attempts, the last sleep having been last ms; seed: the caller's. */
int64_t rlock__spin_delay(const rlock_client *c, int64_t last, int64_t tries, unsigned *seed);
/* Sleeps until deadline_ms without a channel: RLOCK_OK, or RLOCK_ECANCELED
 * / RLOCK_ECLOSED as soon as the token fires or the client closes. */
rlock_status rlock__poll_sleep(rlock_client *c, rlock_cancel *cancel, int64_t deadline_ms);
/* Waits until nobody holds l, without taking it: RLOCK_OK when seen free,
 * RLOCK_EBUSY when still held after wait_ms (< 0 forever, 0 one probe),
 * RLOCK_EDEADLK when the calling thread holds it, RLOCK_ECANCELED, and
 * the statuses of a call that reaches Redis. */
rlock_status rlock__wait_unlocked(struct rlock *l, int64_t wait_ms, rlock_cancel *cancel);

/* ---- acquire and release (acquire.c, release.c) ---------------------- */

/* The shared acquire loop: attempt, subscribe, attempt again, sleep at most
 * min(holder's lease, remaining wait), retrying through connection errors
 * and checking the outcome of an attempt whose reply was lost. */
rlock_status rlock__acquire(struct rlock *l, int64_t wait_ms, int64_t lease_ms,
                            rlock_cancel *cancel, int64_t *holder_ttl_ms);
/* One release of the calling thread's hold, reusing the request id of an
 * earlier unanswered one. */
rlock_status rlock__release(struct rlock *l);
/* RLOCK_EKIND (nothing sent) when the calling thread's record v holds the
 * name (levels live or lost) with a kind of another layout than l's: the
 * two never share a field, and a count of one is no count of the other.
 * Else RLOCK_OK. */
rlock_status rlock__layout_check(const struct rlock *l, const rlock__hold_view *v);
/* Settles what earlier calls of thread tid on l's name left in doubt, each
 * with the scripts of its own kind (which may not be l's): a give-up (sent
 * again), an acquire that may have run (released if it did), with
 * pending_too an unanswered unlock (sent again with its id). Cheap when
 * nothing is in doubt. Every call of a thread on a name begins here: it
 * waits (until deadline_ms, then RLOCK_ETIMEDOUT) while the watchdog is
 * settling the record's give-up (docs/engine.md, I4). */
rlock_status rlock__settle(struct rlock *l, uint64_t tid, bool pending_too, int64_t deadline_ms);
/* At close: settles every (name, thread) with something in doubt.
 * background: the watchdog's share only: exited threads' doubts and live
 * threads' give-ups, each only if no other settler has claimed it and its
 * thread is not acquiring. Returns false when something of that share is
 * still in doubt. */
bool rlock__settle_all(struct rlock_client *c, int64_t deadline_ms, bool background);

/* ---- the watchdog (watchdog.c) --------------------------------------- */

rlock_status rlock__watchdog_start(struct rlock_client *c);
void rlock__watchdog_stop(struct rlock_client *c);
/* Queues a latch key for batched deletion; takes ownership of key. */
void rlock__latch_garbage(struct rlock_client *c, char *key, size_t len);

/* ---- user callbacks (callbacks.c) ------------------------------------ */

rlock_status rlock__callbacks_start(struct rlock_client *c);
/* Delivers what is queued, then stops the thread; later reports are
 * dropped. Call it once nothing reports any more (the watchdog stopped). */
void rlock__callbacks_stop(struct rlock_client *c);
/* Queues an on_lock_lost report (copies name): an rlock__lost_fn, whose arg
 * is the client. Not final: delivered only if the hold of that epoch is
 * still there, lost, when its turn comes. */
void rlock__lost_queue(void *arg, const char *name, size_t len, uint64_t tid, uint64_t epoch,
                       bool final);
/* The same for the hold (name, tid) as the registry has it now; called with
 * hold_mu held (the watchdog, right after marking it lost). */
void rlock__report_lost(struct rlock_client *c, const char *name, size_t len, uint64_t tid);

#endif
