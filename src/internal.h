/* Internal declarations shared by the files of src/. Nothing here is
 * installed. Internal non-static names carry the rlock__ prefix. */
#ifndef RLOCK_INTERNAL_H
#define RLOCK_INTERNAL_H

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rlock.h"

/* Connections are made lazily, so a large pool costs nothing until that
 * many threads talk to Redis at once; then it saves them queueing. */
#define RLOCK__DEFAULT_POOL 32
#define RLOCK__DEFAULT_CONNECT_MS 2000
#define RLOCK__DEFAULT_COMMAND_MS 3000
#define RLOCK__DEFAULT_WATCHDOG_MS 30000
#define RLOCK__DEFAULT_BATCH 100
#define RLOCK__DEFAULT_SUBSCRIBE_MS 7500
#define RLOCK__DEFAULT_RETRY_MS 30000
/* Redisson's latch TTL is 16-20 s with its defaults; a fixed 20 s covers our
 * own retries (spec 0.3). */
#define RLOCK__LATCH_TTL_MS 20000
/* Latch keys of completed unlocks are deleted in batches by the watchdog
 * thread: at most this many per DEL, and at most this long after. */
#define RLOCK__LATCH_BATCH 256
#define RLOCK__LATCH_FLUSH_MS 1000

/* ---- time (time.c) --------------------------------------------------- */

/* CLOCK_MONOTONIC in ms: never jumps with wall-clock changes. */
int64_t rlock__now_ms(void);
/* A CLOCK_MONOTONIC deadline as a timespec for pthread_cond_timedwait on a
 * condvar created with rlock__cond_init(). */
void rlock__deadline_ts(int64_t deadline_ms, struct timespec *ts);
int rlock__cond_init(pthread_cond_t *cv);
/* Waits on cv until deadline_ms (monotonic ms; < 0: no deadline). Returns
 * false when the deadline passed. */
bool rlock__cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ms);

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

/* ---- configuration and URL (client.c) ------------------------------- */

typedef struct rlock__endpoint {
    char *host; /* TCP host, or NULL for a unix socket */
    int port;
    char *path;     /* unix socket path, or NULL */
    char *user;     /* ACL user, or NULL */
    char *password; /* or NULL */
    int db;
} rlock__endpoint;

rlock_status rlock__parse_url(const char *url, rlock__endpoint *ep);
void rlock__endpoint_free(rlock__endpoint *ep);

/* ---- scripts (script.c + generated lua_scripts.c) -------------------- */

typedef struct rlock__script {
    const char *name;
    const char *sha;
    const char *body;
} rlock__script;

extern const rlock__script rlock__script_acquire;
extern const rlock__script rlock__script_unlock;
extern const rlock__script rlock__script_force_unlock;
extern const rlock__script rlock__script_renew;

/* ---- connection pool (pool.c) ---------------------------------------- */

typedef struct rlock__conn {
    redisContext *ctx;
    /* Replies of fire-and-forget commands still to be read and dropped
     * before the next reply that belongs to a caller. */
    int discard;
    bool busy;
} rlock__conn;

typedef struct rlock__pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    rlock__conn *conns;
    int size;
    int free_count;
    /* Reconnect backoff shared by the pool: after a failed connect, new
     * attempts wait until retry_at_ms, doubling backoff_ms up to a cap. */
    int64_t retry_at_ms;
    int64_t backoff_ms;
    rlock_status last_connect_error;
    bool closing;
} rlock__pool;

struct rlock_client;

rlock_status rlock__pool_init(struct rlock_client *c);
void rlock__pool_destroy(struct rlock_client *c);
/* Borrows a connected connection, connecting if needed. Blocks while every
 * connection is busy, up to command_timeout_ms. */
rlock_status rlock__pool_borrow(struct rlock_client *c, rlock__conn **out);
/* Returns a connection; a broken one is closed and re-made on next use. */
void rlock__pool_return(struct rlock_client *c, rlock__conn *conn);
/* Opens a new context to the client's endpoint (AUTH, SELECT, timeouts). */
rlock_status rlock__connect(struct rlock_client *c, redisContext **out);
/* The status for a context whose err is set. */
rlock_status rlock__ctx_status(const redisContext *ctx);

/* Runs one command on a borrowed connection and reads its reply.
 * *reply is set on RLOCK_OK (also for error replies: the caller maps them). */
rlock_status rlock__conn_command(struct rlock_client *c, rlock__conn *conn, int argc,
                                 const char **argv, const size_t *argvlen, redisReply **reply);
/* Runs a script with EVALSHA, falling back to EVAL on NOSCRIPT. */
rlock_status rlock__conn_eval(struct rlock_client *c, rlock__conn *conn, const rlock__script *s,
                              int nkeys, int nargs, const char **args, const size_t *lens,
                              redisReply **reply);
/* Borrow + command + return. */
rlock_status rlock__command(struct rlock_client *c, int argc, const char **argv,
                            const size_t *argvlen, redisReply **reply);
rlock_status rlock__eval(struct rlock_client *c, const rlock__script *s, int nkeys, int nargs,
                         const char **args, const size_t *lens, redisReply **reply);

/* ---- holds and the watchdog (watchdog.c) ----------------------------- */

/* One thread's hold on one lock name, as this client knows it. */
typedef struct rlock__holder {
    struct rlock__holder *next;
    uint64_t tid;
    int64_t count;    /* holds taken and not yet released */
    int64_t lease_ms; /* last explicit lease, for partial unlocks */
    uint64_t epoch;   /* changes with every first acquisition */
    bool watchdog;    /* renewed by the watchdog */
    bool lost;        /* a renewal found it gone */
} rlock__holder;

typedef struct rlock__hold {
    rlock__map_node node; /* key = lock name */
    rlock__holder *holders;
    char *name;
    size_t namelen;
} rlock__hold;

rlock_status rlock__watchdog_start(struct rlock_client *c);
void rlock__watchdog_stop(struct rlock_client *c);
/* Records a successful acquire (count + 1) before it is reported. */
rlock_status rlock__hold_acquired(struct rlock_client *c, const char *name, size_t namelen,
                                  uint64_t tid, int64_t lease_ms);
/* What this client knows of tid's hold: count (0 when none), lost flag and
 * the lease for a partial unlock. */
void rlock__hold_query(struct rlock_client *c, const char *name, size_t namelen, uint64_t tid,
                       int64_t *count, bool *lost, int64_t *lease_ms);
/* After an unlock reply: released = the key was deleted or the hold is gone
 * (forget tid), else count - 1. */
void rlock__hold_released(struct rlock_client *c, const char *name, size_t namelen, uint64_t tid,
                          bool all);
/* Forgets every local holder of name (force unlock); their next unlock
 * returns RLOCK_ELOST. */
void rlock__hold_forget_all(struct rlock_client *c, const char *name, size_t namelen);
/* An acquire of (name, tid) got no reply and may still run in Redis. */
typedef struct rlock__suspect {
    struct rlock__suspect *next;
    uint64_t tid;
    size_t namelen;
    char name[];
} rlock__suspect;
void rlock__suspect_add(struct rlock_client *c, const char *name, size_t namelen, uint64_t tid);
/* Removes (name, tid) from the suspects; true if it was there. */
bool rlock__suspect_take(struct rlock_client *c, const char *name, size_t namelen, uint64_t tid);
/* Queues a latch key for batched deletion; takes ownership of key. */
void rlock__latch_garbage(struct rlock_client *c, char *key, size_t len);

/* ---- pub/sub (pubsub.c) ---------------------------------------------- */

typedef struct rlock__chan rlock__chan;
typedef struct rlock__waiter rlock__waiter;

rlock_status rlock__pubsub_start(struct rlock_client *c);
/* Stops the thread and wakes every waiter (they return RLOCK_ECLOSED). */
void rlock__pubsub_stop(struct rlock_client *c);
/* Frees the entries once no caller is left. */
void rlock__pubsub_free(struct rlock_client *c);
/* Takes a reference on channel's entry, subscribing if it is the first. */
rlock_status rlock__chan_ref(struct rlock_client *c, const char *channel, size_t len,
                             rlock__chan **out);
void rlock__chan_unref(struct rlock_client *c, rlock__chan *ch);
/* Waits until the subscription is confirmed or deadline_ms passes.
 * Returns RLOCK_OK, RLOCK_ETIMEDOUT or RLOCK_ECLOSED. */
rlock_status rlock__chan_wait_subscribed(struct rlock_client *c, rlock__chan *ch,
                                         int64_t deadline_ms);
/* Whether local threads are queued on channel right now. */
bool rlock__chan_queued(struct rlock_client *c, const char *channel, size_t len);
/* Queues the calling thread as a waiter of a referenced entry;
 * *queued_behind tells whether other local waiters were already queued,
 * and *hint_until the latest time they planned to sleep to (-1: none). */
rlock_status rlock__chan_join(struct rlock_client *c, rlock__chan *ch, rlock__waiter **out,
                              bool *queued_behind, int64_t *hint_until);
/* Sleeps until a release message wakes this waiter, a reconnect, or
 * deadline_ms (< 0: none). Returns RLOCK_OK or RLOCK_ECLOSED. */
rlock_status rlock__chan_sleep(struct rlock_client *c, rlock__chan *ch, rlock__waiter *w,
                               int64_t deadline_ms);
/* Dequeues and drops the reference taken by rlock__chan_ref(). */
void rlock__chan_leave(struct rlock_client *c, rlock__chan *ch, rlock__waiter *w, bool acquired);

/* ---- the client (client.c) ------------------------------------------- */

struct rlock_client {
    rlock_config cfg; /* copy, defaults filled; cfg.url points to url */
    char *url;
    rlock__endpoint ep;
    char id[37];
    pid_t pid; /* creator; any other pid is a fork()ed child */

    rlock__pool pool;

    /* Calls in progress, so that free() waits for them. */
    pthread_mutex_t life_mu;
    pthread_cond_t life_cv;
    int active;
    atomic_bool closing;

    /* Holds and watchdog (watchdog.c). */
    pthread_mutex_t hold_mu;
    pthread_cond_t wd_cv;
    rlock__map holds;
    size_t holders_count;
    /* Acquires whose reply never came and whose outcome could not be
     * checked: (name, thread) pairs to reconcile on that thread's next
     * call for the name (lock.c). */
    struct rlock__suspect *suspects;
    atomic_int nsuspects;
    uint64_t next_epoch;
    char **latches;
    size_t *latch_lens;
    size_t nlatches;
    size_t cap_latches;
    int64_t latch_since_ms;
    bool wd_stop;
    bool wd_running;
    pthread_t wd_thread;

    /* Pub/sub (pubsub.c). */
    pthread_mutex_t ps_mu;
    rlock__map chans;
    rlock__chan *dirty; /* entries with a (un)subscribe to send */
    int wake_pipe[2];
    /* The pub/sub thread's connection, mirrored here under ps_mu only so
     * that a fork()ed child can free it (the thread is gone there). */
    redisContext *ps_ctx;
    bool ps_stop;
    bool ps_running;
    pthread_t ps_thread;

    atomic_uint_fast64_t stat[RLOCK_STAT_HELD + 1];
};

/* Marks a public call in progress; RLOCK_ECLOSED when closing or in a
 * fork()ed child. Pair with rlock__leave(). */
rlock_status rlock__enter(struct rlock_client *c);
void rlock__leave(struct rlock_client *c);
bool rlock__closing(struct rlock_client *c);
void rlock__stat_add(struct rlock_client *c, rlock_stat s, uint64_t n);

#endif
