/* One connection to Redis. hiredis makes the connection and parses the
 * replies; the bytes go out and come in here:
 *
 * - send() with MSG_NOSIGNAL: writing to a connection the server closed
 *   must never raise SIGPIPE in the application (hiredis writes with
 *   write(), which does), whichever thread writes.
 * - poll() against our own deadline before every read: a timeout is known
 *   from our clock, not from hiredis's error text, which is translated by
 *   the locale (a de_DE timeout once read as an I/O error and made
 *   rlock_lock() resend an acquire that was still queued).
 *
 * A connection whose exchange failed half-way is marked broken: a reply may
 * still be in flight, and it would be read as the answer to the next
 * command. The pool closes it. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "internal.h"

static int poll_ms(int64_t deadline_ms)
{
    int64_t left = deadline_ms - rlock__now_ms();
    if (left <= 0) {
        return 0;
    }
    return left > INT_MAX ? INT_MAX : (int)left;
}

static rlock_status broken(rlock__conn *conn, rlock_status st, const char *what)
{
    conn->broken = true;
    return rlock__fail(st, "%s", what);
}

static rlock_status send_all(rlock__conn *conn, const char *buf, size_t len, int64_t deadline_ms)
{
    int fd = conn->ctx->fd;
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd p = {fd, POLLOUT, 0};
            int ms = poll_ms(deadline_ms);
            if (ms == 0 || (poll(&p, 1, ms) == 0 && rlock__now_ms() >= deadline_ms)) {
                return broken(conn, RLOCK_ETIMEDOUT, "the server did not take the request in time");
            }
            continue;
        }
        char what[160];
        snprintf(what, sizeof what, "connection lost while sending: %s", strerror(errno));
        return broken(conn, RLOCK_EIO, what);
    }
    return RLOCK_OK;
}

/* The socket's receive timeout is short (RECV_SLICE_MS), so a blocking
 * recv() returns in time to check our own deadline: one system call per
 * reply in the common case, and a timeout known from EAGAIN and our clock. */
#define RECV_SLICE_MS 100

static rlock_status read_one(rlock__conn *conn, redisReply **out, int64_t deadline_ms)
{
    redisContext *ctx = conn->ctx;
    for (;;) {
        void *r = NULL;
        if (redisGetReplyFromReader(ctx, &r) != REDIS_OK) {
            return broken(conn, RLOCK_EPROTO, "the server sent a reply that cannot be parsed");
        }
        if (r) {
            *out = r;
            return RLOCK_OK;
        }
        if (rlock__now_ms() >= deadline_ms) {
            return broken(conn, RLOCK_ETIMEDOUT, "no reply within the command timeout");
        }
        char buf[16384];
        ssize_t n = recv(ctx->fd, buf, sizeof buf, 0);
        if (n > 0) {
            if (redisReaderFeed(ctx->reader, buf, (size_t)n) != REDIS_OK) {
                return broken(conn, RLOCK_ENOMEM, "out of memory for a reply");
            }
            continue;
        }
        if (n == 0) {
            return broken(conn, RLOCK_EIO, "the server closed the connection");
        }
        if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
            char what[160];
            snprintf(what, sizeof what, "connection lost: %s", strerror(errno));
            return broken(conn, RLOCK_EIO, what);
        }
    }
}

rlock_status rlock__conn_exchange(rlock__conn *conn, int n, char *const *cmds,
                                  const long long *lens, redisReply **replies,
                                  int64_t deadline_ms, int64_t hard_ms)
{
    deadline_ms = rlock__min_deadline(deadline_ms, hard_ms);
    for (int i = 0; i < n; i++) {
        replies[i] = NULL;
    }
    if (conn->broken || !conn->ctx) {
        return rlock__fail(RLOCK_EIO, "connection lost");
    }
    rlock_status st = RLOCK_OK;
    if (n == 1) {
        st = send_all(conn, cmds[0], (size_t)lens[0], deadline_ms);
    } else {
        /* One buffer, one send: a pipeline costs one system call. */
        size_t total = 0;
        for (int i = 0; i < n; i++) {
            total += (size_t)lens[i];
        }
        char *buf = malloc(total);
        if (!buf) {
            return rlock__fail(RLOCK_ENOMEM, "out of memory for a pipeline");
        }
        size_t at = 0;
        for (int i = 0; i < n; i++) {
            memcpy(buf + at, cmds[i], (size_t)lens[i]);
            at += (size_t)lens[i];
        }
        st = send_all(conn, buf, total, deadline_ms);
        free(buf);
    }
    /* In a pipeline each reply gets the whole budget from the one before:
     * a long round of renewals is not cut short while replies keep coming,
     * up to the caller's hard bound. */
    int64_t budget = deadline_ms - rlock__now_ms();
    for (int i = 0; i < n && st == RLOCK_OK; i++) {
        st = read_one(conn, &replies[i], deadline_ms);
        int64_t next = rlock__now_ms() + budget;
        deadline_ms = rlock__min_deadline(next > deadline_ms ? next : deadline_ms, hard_ms);
    }
    return st;
}

rlock_status rlock__conn_call(rlock__conn *conn, int argc, const char **argv,
                              const size_t *argvlen, redisReply **reply, int64_t deadline_ms)
{
    char *cmd = NULL;
    long long len = redisFormatCommandArgv(&cmd, argc, argv, argvlen);
    if (len < 0 || !cmd) {
        return rlock__fail(RLOCK_ENOMEM, "out of memory for a command");
    }
    rlock_status st = rlock__conn_exchange(conn, 1, &cmd, &len, reply, deadline_ms, deadline_ms);
    redisFreeCommand(cmd);
    return st;
}

static bool starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

bool rlock__transient(const redisReply *r)
{
    if (!r || r->type != REDIS_REPLY_ERROR || !r->str) {
        return false;
    }
    return starts(r->str, "LOADING") || starts(r->str, "BUSY ") || starts(r->str, "TRYAGAIN") ||
           starts(r->str, "CLUSTERDOWN") || starts(r->str, "MASTERDOWN");
}

rlock_status rlock__error_reply(const redisReply *r)
{
    const char *s = r && r->str ? r->str : "";
    bool auth = starts(s, "NOAUTH") || starts(s, "WRONGPASS") || starts(s, "ERR invalid password") ||
                starts(s, "ERR AUTH") || starts(s, "ERR Client sent AUTH");
    /* An ACL refusal: NOPERM for a command, and, from inside a script,
     * Redis 7.0's "ERR The user executing the script can't ..." (7.2 says
     * NOPERM there too). Either way the command did not run. */
    bool perm = starts(s, "NOPERM") || starts(s, "ERR The user executing the script can't");
    return rlock__fail(auth ? RLOCK_EAUTH : perm ? RLOCK_EPERM : RLOCK_EREDIS, "%.200s", s);
}

/* AUTH, SELECT and CLIENT SETNAME in one round trip, by deadline_ms. */
static rlock_status hello(rlock_client *c, redisContext *ctx, int64_t deadline_ms)
{
    const char *argv[3][4];
    size_t argvlen[3][4];
    int argc[3], n = 0, auth_at = -1, select_at = -1;
    char db[16];
    if (c->ep.password) {
        auth_at = n;
        argv[n][0] = "AUTH";
        argv[n][1] = c->ep.user ? c->ep.user : c->ep.password;
        argv[n][2] = c->ep.password;
        argc[n++] = c->ep.user ? 3 : 2;
    }
    if (c->ep.db != 0) {
        snprintf(db, sizeof db, "%d", c->ep.db);
        select_at = n;
        argv[n][0] = "SELECT";
        argv[n][1] = db;
        argc[n++] = 2;
    }
    argv[n][0] = "CLIENT";
    argv[n][1] = "SETNAME";
    argv[n][2] = c->conn_name;
    argc[n++] = 3;
    char *cmds[3] = {NULL, NULL, NULL};
    long long lens[3];
    redisReply *replies[3] = {NULL, NULL, NULL};
    rlock_status st = RLOCK_OK;
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < argc[i]; k++) {
            argvlen[i][k] = strlen(argv[i][k]);
        }
        lens[i] = redisFormatCommandArgv(&cmds[i], argc[i], argv[i], argvlen[i]);
        if (lens[i] < 0 || !cmds[i]) {
            st = rlock__fail(RLOCK_ENOMEM, "out of memory");
        }
    }
    rlock__conn conn = {ctx, false, false};
    if (st == RLOCK_OK) {
        st = rlock__conn_exchange(&conn, n, cmds, lens, replies, deadline_ms, deadline_ms);
    }
    for (int i = 0; st == RLOCK_OK && i < n; i++) {
        if (replies[i]->type != REDIS_REPLY_ERROR) {
            continue;
        }
        if (i == auth_at) {
            st = rlock__error_reply(replies[i]);
            if (st != RLOCK_EAUTH) { /* e.g. AUTH on a server without one */
                st = rlock__fail(RLOCK_EAUTH, "AUTH: %.200s", replies[i]->str);
            }
        } else if (i == select_at) {
            /* The db of the URL is configuration the server refuses. */
            st = rlock__error_reply(replies[i]);
            if (st != RLOCK_EAUTH && st != RLOCK_EPERM) {
                st = rlock__fail(RLOCK_EINVAL, "SELECT %s: %.200s", db, replies[i]->str);
            }
        } else if (starts(replies[i]->str, "NOAUTH")) {
            /* The server wants a password the URL does not give. */
            st = rlock__error_reply(replies[i]);
        }
        /* Any other refusal of CLIENT SETNAME (an old server, an ACL user
         * without the permission) leaves the connection unnamed. */
    }
    for (int i = 0; i < n; i++) {
        if (replies[i]) {
            freeReplyObject(replies[i]);
        }
        if (cmds[i]) {
            redisFreeCommand(cmds[i]);
        }
    }
    return st;
}

rlock_status rlock__connect(rlock_client *c, redisContext **out, int64_t deadline_ms)
{
    /* A reconnect made for a call (a renewal round, an acquire) must fit in
     * that call's bound: each step takes its own timeout or what is left
     * of the caller's, whichever is less. */
    int64_t ms = c->cfg.connect_timeout_ms;
    if (deadline_ms >= 0 && deadline_ms - rlock__now_ms() < ms) {
        ms = deadline_ms - rlock__now_ms();
        if (ms <= 0) {
            return rlock__fail(RLOCK_ETIMEDOUT, "no time left to connect");
        }
    }
    /* hiredis 0.14 keeps the connect timeout in an int of milliseconds and
     * treats larger values as no timeout at all: clamp (24.8 days). */
    ms = ms < INT_MAX ? ms : INT_MAX;
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000)};
    redisContext *ctx = c->ep.path ? redisConnectUnixWithTimeout(c->ep.path, tv)
                                   : redisConnectWithTimeout(c->ep.host, c->ep.port, tv);
    if (!ctx) {
        return rlock__fail(RLOCK_ENOMEM, "out of memory for a connection");
    }
    rlock_status st = RLOCK_OK;
    if (ctx->err) {
        char label[300];
        rlock__endpoint_label(&c->ep, label, sizeof label);
        st = rlock__fail(ctx->err == REDIS_ERR_OOM ? RLOCK_ENOMEM : RLOCK_EIO, "connect to %s: %s",
                         label, ctx->errstr);
        redisFree(ctx);
        return st;
    }
    /* hiredis 0.14 does not set close-on-exec: without it every program the
     * application fork()s and exec()s would inherit our Redis sockets. */
    int fl = fcntl(ctx->fd, F_GETFD);
    if (fl >= 0) {
        fcntl(ctx->fd, F_SETFD, fl | FD_CLOEXEC);
    }
    if (!c->ep.path) {
        redisEnableKeepAlive(ctx);
    }
    struct timeval slice = {0, RECV_SLICE_MS * 1000};
    if (redisSetTimeout(ctx, slice) != REDIS_OK) {
        redisFree(ctx);
        return rlock__fail(RLOCK_EIO, "cannot set the socket timeout");
    }
    if ((st = hello(c, ctx,
                    rlock__min_deadline(rlock__now_ms() + c->cfg.command_timeout_ms,
                                        deadline_ms))) != RLOCK_OK) {
        redisFree(ctx);
        return st;
    }
    *out = ctx;
    return RLOCK_OK;
}
