/* The client object every layer shares (each field says whose it is), with
 * what it is made of: core/ and net/. The files of core/ include this and
 * not internal.h, so that the compiler refuses a call from core/ up into
 * sync/ or kinds/ (an undeclared function under -Werror). */
#ifndef RLOCK_OBJECT_H
#define RLOCK_OBJECT_H

#include "core/core.h"
#include "net/net.h"

typedef struct rlock__chan rlock__chan;
typedef struct rlock__lost_note rlock__lost_note;
typedef struct rlock__sent rlock__sent;

struct rlock_client {
    rlock_config cfg; /* copy, defaults filled; cfg.url points to url */
    char *url;
    rlock__endpoint ep;
    /* TLS (net/link.c), for rediss:// only: the SSL_CTX made from cfg and
     * the name the server's certificate must carry (and SNI). */
    void *tls_ctx;
    char *tls_name;
    atomic_bool tls_seen; /* a handshake with the server has succeeded */
    char id[37];
    char conn_name[128]; /* CLIENT SETNAME value */
    pid_t pid;           /* creator; any other pid is a fork()ed child */
    uint64_t fork_gen;   /* rlock__fork_generation() at creation */
    struct rlock_client *next_live; /* in the process's list of clients */

    const rlock__topology *topo;
    rlock__pool pool; /* the standalone topology's one pool */

    /* Calls in progress, so that free() waits for them. */
    pthread_mutex_t life_mu;
    pthread_cond_t life_cv;
    atomic_int active; /* calls, and a flag once closing (core/client.c) */

    /* Hold registry (core/holds.c) and watchdog (sync/watchdog.c). */
    rlock__lost_fn lost_fn; /* where core reports a lost hold, and its arg */
    void *lost_arg;
    pthread_mutex_t hold_mu;
    pthread_cond_t wd_cv;    /* wakes the watchdog */
    pthread_cond_t round_cv; /* a renewal round ended */
    pthread_cond_t claim_cv; /* a record's claim ended (core/holds.c) */
    rlock__map holds;   /* lock name -> rlock__hold */
    rlock__map threads; /* thread id -> rlock__thread_holds */
    uint64_t next_epoch;
    char **latches;
    size_t *latch_lens;
    size_t nlatches;
    size_t cap_latches;
    int64_t latch_since_ms;
    bool wd_stop;
    /* Records the watchdog settles (an exited thread's doubt, a live
     * thread's give-up in doubt) may be there: tried at doubts_at. */
    bool wd_doubts;
    int64_t doubts_at;
    bool wd_running;
    pthread_t wd_thread;
    /* The end of the watchdog's current wait, or -1 while it is not
     * waiting (it looks at every hold before it waits again). A deadline
     * brought before it is the only reason to wake it: waking it for every
     * new hold cost an uncontended lock two futex calls. */
    int64_t wd_sleep_until;

    /* Callbacks (sync/callbacks.c). */
    pthread_mutex_t cb_mu;
    pthread_cond_t cb_cv;
    rlock__lost_note *cb_head, *cb_tail;
    bool cb_stop;    /* under cb_mu */
    bool cb_open;    /* under cb_mu: reports are queued, not dropped */
    bool cb_running; /* the closer's own: whether to join the thread */
    pthread_t cb_thread;

    /* Pub/sub (sync/pubsub.c). */
    pthread_mutex_t ps_mu;
    rlock__map chans;
    rlock__chan *dirty; /* entries with a (un)subscribe to send */
    uint64_t ps_epoch;  /* the last subscription epoch given (pubsub.c) */
    int wake_pipe[2];
    /* The pub/sub thread's connection, mirrored here under ps_mu only so
     * that a fork()ed child can free it (the thread is gone there). */
    rlock__link *ps_link;
    /* The (un)subscribes sent and not yet answered, oldest first (a ring):
     * an error reply names no channel, only its place in this order. */
    rlock__sent *ps_sent;
    size_t ps_sent_head, ps_sent_n, ps_sent_cap;
    bool ps_stop;
    bool ps_running;
    pthread_t ps_thread;

    atomic_uint_fast64_t stat[RLOCK_STAT_HELD + 1];
};

#endif
