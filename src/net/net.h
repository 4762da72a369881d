/* net: talking to Redis. One link (link.c: a socket of our own, TLS on it
 * for rediss://, hiredis's reply reader; sent with MSG_NOSIGNAL, read
 * against our own deadline, close-on-exec), so that no call raises SIGPIPE
 * and a timeout is known from our clock, never from error text; one
 * connection on it (conn.c: AUTH, SELECT, CLIENT SETNAME, exchanges); the
 * pool of such connections; the topology that routes every
 * call by its key; and the script runner (EVALSHA with the NOSCRIPT
 * fallback and the retry of transient error replies, written once for
 * single calls and pipelines). */
#ifndef RLOCK_NET_H
#define RLOCK_NET_H

#include <hiredis/hiredis.h>

#include "core/core.h"

/* ---- one link (link.c) ------------------------------------------------ */

struct ssl_st;

typedef struct rlock__link {
    int fd;
    struct ssl_st *ssl;  /* NULL: plain */
    redisReader *reader; /* the replies read so far */
    pid_t pid;           /* the process that opened it (fork rules) */
    uint64_t rx;         /* bytes received */
    bool wants_read;     /* a TLS write must first read */
    bool wants_write;    /* a TLS read must first write */
    int sys_err;         /* TLS: the errno of the socket call that failed */
    bool alert;          /* TLS: the server sent a fatal alert */
    bool cert_requested; /* the server asked for a client certificate */
} rlock__link;

/* Builds the client's TLS context from its config for a rediss:// URL
 * (c->tls_ctx, c->tls_name): RLOCK_EINVAL with a detail for files that do
 * not load, or TLS settings given for a URL without TLS. Nothing for
 * redis:// and unix://. */
rlock_status rlock__tls_init(struct rlock_client *c);
/* Frees them; in a fork()ed child the context is left allocated. */
void rlock__tls_free(struct rlock_client *c);
/* Opens a socket to the client's endpoint and, with TLS, makes the
 * handshake, all by deadline_ms: RLOCK_EIO (cannot connect, no answer in
 * time, closed or reset without a TLS alert), RLOCK_ETLS (certificate
 * refused, TLS alert, an answer that is not TLS, silence from a server no
 * handshake ever succeeded with), RLOCK_EINVAL, RLOCK_ENOMEM. */
rlock_status rlock__link_open(struct rlock_client *c, rlock__link **out, int64_t deadline_ms);
/* Closes and frees. In a process other than the opener (a fork()ed
 * child) only the descriptor is closed: nothing is sent, and the SSL
 * object is left allocated. NULL: nothing. */
void rlock__link_close(rlock__link *l);
/* Sends all of buf by deadline_ms (RLOCK_ETIMEDOUT), never raising
 * SIGPIPE; RLOCK_EIO with a detail when the link broke. */
rlock_status rlock__link_send(rlock__link *l, const char *buf, size_t len, int64_t deadline_ms);
/* Sends what the socket takes now: bytes sent (0: none), -1 (*st set)
 * when the link broke. With TLS, the bytes not taken must be offered
 * again first (they may be in a record already). */
int rlock__link_send_some(rlock__link *l, const char *buf, size_t len, rlock_status *st);
/* Reads what has arrived into the reader. wait: plain, a blocking recv()
 * of up to a slice of 100 ms; TLS, poll() until deadline_ms at most, then
 * a read that never blocks (part of a record is 0). !wait: no waiting at
 * all, deadline_ms unused. Either way the caller checks its own deadline
 * between calls. Bytes read (0: none yet; with TLS, data may still be
 * buffered after a read, so read until 0), -1 (*st set: closed, broken,
 * or a TLS answer on a plain link, RLOCK_ETLS). */
int rlock__link_read(rlock__link *l, bool wait, int64_t deadline_ms, rlock_status *st);
/* Whether an idle link is still usable: nothing arrived but TLS
 * housekeeping, no hang-up. */
bool rlock__link_idle_ok(rlock__link *l);

/* ---- one connection (conn.c) ----------------------------------------- */

typedef struct rlock__conn {
    rlock__link *link;
    bool busy;   /* lent out by the pool */
    bool broken; /* a reply may still be in flight: never reuse */
} rlock__conn;

/* Opens a connection to ep: connect (and the TLS handshake) within
 * connect_timeout_ms, then AUTH, SELECT and CLIENT SETNAME within
 * command_timeout_ms; both steps end by the caller's deadline_ms too
 * (< 0: none), so a reconnect made for a call fits inside the call's own
 * bound. */
rlock_status rlock__connect(struct rlock_client *c, rlock__link **out, int64_t deadline_ms);
/* Sends n commands (cmds[i] formatted by redisFormatCommandArgv) and reads
 * their replies into replies[]: the first by deadline_ms, each later one
 * within the same budget after the one before, but never after hard_ms
 * (< 0: no such bound). On a failure the connection is marked broken;
 * replies already read are kept (the rest NULL). */
rlock_status rlock__conn_exchange(rlock__conn *conn, int n, char *const *cmds,
                                  const long long *lens, redisReply **replies, int64_t deadline_ms,
                                  int64_t hard_ms);
/* One command: format, exchange. The reply may be an error reply. */
rlock_status rlock__conn_call(rlock__conn *conn, int argc, const char **argv, const size_t *argvlen,
                              redisReply **reply, int64_t deadline_ms);

/* Whether an error reply says the server did not run the command and will
 * be able to soon (LOADING, BUSY, TRYAGAIN, CLUSTERDOWN, MASTERDOWN). */
bool rlock__transient(const redisReply *r);
/* RLOCK_EAUTH for NOAUTH/WRONGPASS-like replies, RLOCK_EPERM for ACL
 * refusals (NOPERM, or a script's command refused), else RLOCK_EREDIS; the
 * reply's text becomes the error detail. */
rlock_status rlock__error_reply(const redisReply *r);

/* ---- the pool (pool.c) ----------------------------------------------- */

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

rlock_status rlock__pool_init(rlock__pool *p, int size);
void rlock__pool_destroy(struct rlock_client *c, rlock__pool *p);
/* Borrows a connected connection, connecting if needed (rlock__connect,
 * bounded by deadline_ms too). Blocks while every connection is busy, up to
 * command_timeout_ms or deadline_ms, whichever comes first (then
 * RLOCK_EPOOL). deadline_ms < 0: no bound but the configured ones. */
rlock_status rlock__pool_borrow(struct rlock_client *c, rlock__pool *p, rlock__conn **out,
                                int64_t deadline_ms);
/* Returns a connection; a broken one is closed and re-made on next use. */
void rlock__pool_return(struct rlock_client *c, rlock__pool *p, rlock__conn *conn);
/* Wakes borrowers and refuses new ones (client closing). */
void rlock__pool_close(rlock__pool *p);

/* ---- topology (standalone.c) ----------------------------------------- */

/* Routes calls by key. Standalone: one node, one pool, every key in one
 * group. Sentinel and Cluster plug in here (one file each): they resolve
 * the node that owns a key, follow MOVED/ASK, and name the node a channel
 * is subscribed on. */
typedef struct rlock__topology {
    const char *kind;
    /* Borrows a connection to the node that owns key, by deadline_ms at
     * the latest (< 0: the configured timeouts alone). */
    rlock_status (*borrow)(struct rlock_client *c, const char *key, size_t keylen,
                           rlock__conn **out, int64_t deadline_ms);
    void (*give_back)(struct rlock_client *c, rlock__conn *conn);
    /* Calls on keys of one group may share a script or a pipeline (one
     * cluster slot); groups are compared by this number. */
    unsigned (*group_of)(const char *key, size_t keylen);
    void (*close)(struct rlock_client *c);
    void (*destroy)(struct rlock_client *c);
} rlock__topology;

extern const rlock__topology rlock__standalone;

/* ---- the script runner (script.c) ------------------------------------ */

typedef struct rlock__script {
    const char *name;
    const char *sha;
    const char *body;
} rlock__script;

/* Generated from lua/ at build time. */
extern const rlock__script rlock__script_acquire;
extern const rlock__script rlock__script_abandon;
extern const rlock__script rlock__script_unlock;
extern const rlock__script rlock__script_force_unlock;
extern const rlock__script rlock__script_renew;
extern const rlock__script rlock__script_fenced_acquire;
extern const rlock__script rlock__script_fenced_write;
extern const rlock__script rlock__script_guarded;
extern const rlock__script rlock__script_fair_acquire;
extern const rlock__script rlock__script_fair_abandon;
extern const rlock__script rlock__script_fair_unlock;
extern const rlock__script rlock__script_fair_force_unlock;
extern const rlock__script rlock__script_fair_give_up;

/* One call of a script or command. */
typedef struct rlock__call {
    const char *key; /* the key it routes by */
    size_t keylen;
    const rlock__script *script; /* NULL: args is a plain command */
    int nkeys;
    int nargs; /* keys included */
    const char **args;
    const size_t *lens;
} rlock__call;

/* Runs one call on the node of its key: borrows (a reconnect included),
 * sends (EVALSHA, then EVAL on NOSCRIPT), and retries transient error
 * replies with backoff until deadline_ms; still transient then, it returns
 * RLOCK_EIO (the server's text as the detail). On RLOCK_OK *reply is set;
 * it may be an error reply other than a transient one, for the caller to
 * map (rlock__error_reply). */
rlock_status rlock__run(struct rlock_client *c, const rlock__call *call, redisReply **reply,
                        int64_t deadline_ms);
/* Runs n calls of one group pipelined on one connection (the watchdog's
 * renewal batches): replies[i] is the reply of calls[i], or NULL when it
 * got none (retried by the caller later). NOSCRIPT replies are sent again
 * one by one with the body. The borrow, a reconnect and the first reply
 * end by deadline_ms; each later reply gets that budget again after the
 * one before, but nothing runs past hard_ms (< 0: no such bound). */
void rlock__run_pipeline(struct rlock_client *c, const rlock__call *calls, size_t n,
                         redisReply **replies, int64_t deadline_ms, int64_t hard_ms);

#endif
