/* The pool of command connections shared by every thread of a client, and
 * the one place that runs commands and scripts on them.
 *
 * A hiredis context is not thread-safe, so each caller borrows one for the
 * length of one command. A broken context (I/O error, timeout, EOF) is never
 * reused: hiredis cannot tell whether a reply is still in flight, and a late
 * reply would be read as the answer to the next command. It is freed on
 * return and re-made on a later borrow, with a pool-wide backoff so that a
 * dead server is not hammered by every waiting thread. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "internal.h"

#define BACKOFF_MIN_MS 20
#define BACKOFF_MAX_MS 1000

static struct timeval ms_tv(int64_t ms)
{
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000)};
    return tv;
}

rlock_status rlock__ctx_status(const redisContext *ctx)
{
    switch (ctx->err) {
#ifdef REDIS_ERR_TIMEOUT
    case REDIS_ERR_TIMEOUT:
        return RLOCK_ETIMEDOUT;
#endif
    case REDIS_ERR_OOM:
        return RLOCK_ENOMEM;
    case REDIS_ERR_PROTOCOL:
        return RLOCK_EPROTO;
    case REDIS_ERR_IO:
        /* hiredis 0.14 reports a read timeout (SO_RCVTIMEO) as an I/O error
         * carrying strerror(EAGAIN), and a connect timeout as ETIMEDOUT. */
        if (strstr(ctx->errstr, "temporarily unavailable") || strstr(ctx->errstr, "timed out") ||
            strstr(ctx->errstr, "Timeout")) {
            return RLOCK_ETIMEDOUT;
        }
        return RLOCK_EIO;
    default:
        return RLOCK_EIO;
    }
}

static rlock_status hello(redisContext *ctx, int argc, const char **argv)
{
    redisReply *r = redisCommandArgv(ctx, argc, argv, NULL);
    if (!r) {
        return rlock__ctx_status(ctx);
    }
    /* A refused AUTH or an out-of-range SELECT means this endpoint cannot
     * be used as configured: the caller sees a connection failure. */
    rlock_status st = r->type == REDIS_REPLY_ERROR ? RLOCK_EIO : RLOCK_OK;
    freeReplyObject(r);
    return st;
}

rlock_status rlock__connect(rlock_client *c, redisContext **out)
{
    struct timeval ct = ms_tv(c->cfg.connect_timeout_ms);
    redisContext *ctx = c->ep.path ? redisConnectUnixWithTimeout(c->ep.path, ct)
                                   : redisConnectWithTimeout(c->ep.host, c->ep.port, ct);
    if (!ctx) {
        return RLOCK_ENOMEM;
    }
    rlock_status st = RLOCK_OK;
    if (ctx->err) {
        st = rlock__ctx_status(ctx);
        goto fail;
    }
    /* hiredis 0.14 does not set close-on-exec: without it every program the
     * application fork()s and exec()s would inherit our Redis sockets. */
    int fl = fcntl(ctx->fd, F_GETFD);
    if (fl >= 0) {
        fcntl(ctx->fd, F_SETFD, fl | FD_CLOEXEC);
    }
    if (redisSetTimeout(ctx, ms_tv(c->cfg.command_timeout_ms)) != REDIS_OK) {
        st = RLOCK_EIO;
        goto fail;
    }
    if (!c->ep.path) {
        redisEnableKeepAlive(ctx);
    }
    if (c->ep.password) {
        const char *argv[3] = {"AUTH", c->ep.user ? c->ep.user : c->ep.password, c->ep.password};
        if ((st = hello(ctx, c->ep.user ? 3 : 2, argv)) != RLOCK_OK) {
            goto fail;
        }
    }
    if (c->ep.db != 0) {
        char db[16];
        snprintf(db, sizeof db, "%d", c->ep.db);
        const char *argv[2] = {"SELECT", db};
        if ((st = hello(ctx, 2, argv)) != RLOCK_OK) {
            goto fail;
        }
    }
    *out = ctx;
    return RLOCK_OK;
fail:
    redisFree(ctx);
    return st;
}

rlock_status rlock__pool_init(rlock_client *c)
{
    rlock__pool *p = &c->pool;
    p->conns = calloc((size_t)c->cfg.pool_size, sizeof *p->conns);
    if (!p->conns) {
        return RLOCK_ENOMEM;
    }
    p->size = c->cfg.pool_size;
    p->free_count = p->size;
    pthread_mutex_init(&p->mu, NULL);
    rlock__cond_init(&p->cv);
    return RLOCK_OK;
}

void rlock__pool_destroy(rlock_client *c)
{
    rlock__pool *p = &c->pool;
    if (!p->conns) {
        return;
    }
    for (int i = 0; i < p->size; i++) {
        if (p->conns[i].ctx) {
            redisFree(p->conns[i].ctx);
        }
    }
    free(p->conns);
    p->conns = NULL;
    if (c->pid == getpid()) {
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
    }
}

/* An idle connection has nothing to say: if its socket is readable or hung
 * up, the server closed it (CLIENT KILL, restart, idle timeout) while it sat
 * in the pool. Checking costs one poll() and saves the caller an RLOCK_EIO
 * for a link that was dead before it was used. */
static bool idle_conn_ok(redisContext *ctx)
{
    struct pollfd pfd = {ctx->fd, POLLIN, 0};
    return !ctx->err && poll(&pfd, 1, 0) == 0;
}

rlock_status rlock__pool_borrow(rlock_client *c, rlock__conn **out)
{
    rlock__pool *p = &c->pool;
    int64_t deadline = rlock__now_ms() + c->cfg.command_timeout_ms;
    pthread_mutex_lock(&p->mu);
    while (p->free_count == 0 && !p->closing) {
        if (!rlock__cond_wait_until(&p->cv, &p->mu, deadline)) {
            pthread_mutex_unlock(&p->mu);
            return RLOCK_ETIMEDOUT;
        }
    }
    if (p->closing) {
        pthread_mutex_unlock(&p->mu);
        return RLOCK_ECLOSED;
    }
    /* Prefer a connected context; take an empty slot only if none is. */
    rlock__conn *conn = NULL;
    for (int i = 0; i < p->size; i++) {
        if (!p->conns[i].busy && (!conn || (!conn->ctx && p->conns[i].ctx))) {
            conn = &p->conns[i];
            if (conn->ctx) {
                break;
            }
        }
    }
    conn->busy = true;
    p->free_count--;
    redisContext *stale = NULL;
    if (conn->ctx && !idle_conn_ok(conn->ctx)) {
        stale = conn->ctx;
        conn->ctx = NULL;
    }
    if (conn->ctx) {
        pthread_mutex_unlock(&p->mu);
        *out = conn;
        return RLOCK_OK;
    }
    if (stale) {
        rlock__stat_add(c, RLOCK_STAT_RECONNECTS, 1);
        redisFree(stale);
    }
    int64_t now = rlock__now_ms();
    if (now < p->retry_at_ms) {
        rlock_status st = p->last_connect_error;
        conn->busy = false;
        p->free_count++;
        pthread_cond_signal(&p->cv);
        pthread_mutex_unlock(&p->mu);
        return st;
    }
    pthread_mutex_unlock(&p->mu);

    redisContext *ctx = NULL;
    rlock_status st = rlock__connect(c, &ctx);

    pthread_mutex_lock(&p->mu);
    if (st == RLOCK_OK) {
        conn->ctx = ctx;
        p->backoff_ms = 0;
        p->retry_at_ms = 0;
        p->last_connect_error = RLOCK_OK;
        pthread_mutex_unlock(&p->mu);
        *out = conn;
        return RLOCK_OK;
    }
    p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : BACKOFF_MIN_MS;
    if (p->backoff_ms > BACKOFF_MAX_MS) {
        p->backoff_ms = BACKOFF_MAX_MS;
    }
    p->retry_at_ms = rlock__now_ms() + p->backoff_ms;
    p->last_connect_error = st;
    conn->busy = false;
    p->free_count++;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return st;
}

void rlock__pool_return(rlock_client *c, rlock__conn *conn)
{
    rlock__pool *p = &c->pool;
    redisContext *dead = NULL;
    if (conn->ctx && conn->ctx->err) {
        dead = conn->ctx;
        conn->ctx = NULL;
        rlock__stat_add(c, RLOCK_STAT_RECONNECTS, 1);
    }
    pthread_mutex_lock(&p->mu);
    conn->busy = false;
    p->free_count++;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (dead) {
        redisFree(dead);
    }
}

rlock_status rlock__conn_command(rlock_client *c, rlock__conn *conn, int argc, const char **argv,
                                 const size_t *argvlen, redisReply **reply)
{
    rlock__stat_add(c, RLOCK_STAT_COMMANDS, 1);
    redisReply *r = redisCommandArgv(conn->ctx, argc, argv, argvlen);
    if (!r) {
        return rlock__ctx_status(conn->ctx);
    }
    *reply = r;
    return RLOCK_OK;
}

rlock_status rlock__conn_eval(rlock_client *c, rlock__conn *conn, const rlock__script *s, int nkeys,
                              int nargs, const char **args, const size_t *lens, redisReply **reply)
{
    enum { SMALL = 16 };
    const char *sv[SMALL];
    size_t sl[SMALL];
    int argc = 3 + nargs;
    const char **argv = sv;
    size_t *argvlen = sl;
    if (argc > SMALL) {
        argv = malloc((size_t)argc * sizeof *argv);
        argvlen = malloc((size_t)argc * sizeof *argvlen);
        if (!argv || !argvlen) {
            free(argv);
            free(argvlen);
            return RLOCK_ENOMEM;
        }
    }
    char nk[16];
    snprintf(nk, sizeof nk, "%d", nkeys);
    argv[0] = "EVALSHA";
    argvlen[0] = 7;
    argv[1] = s->sha;
    argvlen[1] = 40;
    argv[2] = nk;
    argvlen[2] = strlen(nk);
    for (int i = 0; i < nargs; i++) {
        argv[3 + i] = args[i];
        argvlen[3 + i] = lens ? lens[i] : strlen(args[i]);
    }
    rlock_status st = rlock__conn_command(c, conn, argc, argv, argvlen, reply);
    /* After a server restart or SCRIPT FLUSH the cache is empty: NOSCRIPT
     * means the script did not run, so sending the body is always safe,
     * even for the non-idempotent acquire. EVAL also caches it again. */
    if (st == RLOCK_OK && (*reply)->type == REDIS_REPLY_ERROR &&
        strncmp((*reply)->str, "NOSCRIPT", 8) == 0) {
        freeReplyObject(*reply);
        *reply = NULL;
        argv[0] = "EVAL";
        argvlen[0] = 4;
        argv[1] = s->body;
        argvlen[1] = strlen(s->body);
        st = rlock__conn_command(c, conn, argc, argv, argvlen, reply);
    }
    if (argv != sv) {
        free(argv);
        free(argvlen);
    }
    return st;
}

rlock_status rlock__command(rlock_client *c, int argc, const char **argv, const size_t *argvlen,
                            redisReply **reply)
{
    rlock__conn *conn;
    rlock_status st = rlock__pool_borrow(c, &conn);
    if (st != RLOCK_OK) {
        return st;
    }
    st = rlock__conn_command(c, conn, argc, argv, argvlen, reply);
    rlock__pool_return(c, conn);
    return st;
}

rlock_status rlock__eval(rlock_client *c, const rlock__script *s, int nkeys, int nargs,
                         const char **args, const size_t *lens, redisReply **reply)
{
    rlock__conn *conn;
    rlock_status st = rlock__pool_borrow(c, &conn);
    if (st != RLOCK_OK) {
        return st;
    }
    st = rlock__conn_eval(c, conn, s, nkeys, nargs, args, lens, reply);
    rlock__pool_return(c, conn);
    return st;
}
