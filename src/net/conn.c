/* One connection to Redis: a link (link.c: our socket, TLS for rediss://,
 * hiredis's reply reader) and the exchanges on it. hiredis formats the
 * commands and parses the replies; the bytes go out and come in through
 * the link, which never raises SIGPIPE and reads against our own deadline:
 * a timeout is known from our clock, not from error text, which is
 * translated by the locale (a de_DE timeout once read as an I/O error and
 * made rlock_lock() resend an acquire that was still queued).
 *
 * A connection whose exchange failed half-way is marked broken: a reply may
 * still be in flight, and it would be read as the answer to the next
 * command. The pool closes it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static rlock_status broken(rlock__conn *conn, rlock_status st)
{
    conn->broken = true;
    return st; /* the detail is the link's */
}

static rlock_status read_one(rlock__conn *conn, redisReply **out, int64_t deadline_ms)
{
    redisReader *reader = conn->link->reader;
    for (;;) {
        void *r = NULL;
        if (redisReaderGetReply(reader, &r) != REDIS_OK) {
            conn->broken = true;
            return rlock__fail(RLOCK_EPROTO, "the server sent a reply that cannot be parsed");
        }
        if (r) {
            *out = r;
            return RLOCK_OK;
        }
        if (rlock__now_ms() >= deadline_ms) {
            conn->broken = true;
            return rlock__fail(RLOCK_ETIMEDOUT, "no reply within the command timeout");
        }
        rlock_status st = RLOCK_OK;
        if (rlock__link_read(conn->link, true, deadline_ms, &st) < 0) {
            return broken(conn, st);
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
    if (conn->broken || !conn->link) {
        return rlock__fail(RLOCK_EIO, "connection lost");
    }
    rlock_status st = RLOCK_OK;
    if (n == 1) {
        st = rlock__link_send(conn->link, cmds[0], (size_t)lens[0], deadline_ms);
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
        st = rlock__link_send(conn->link, buf, total, deadline_ms);
        free(buf);
    }
    if (st != RLOCK_OK) {
        conn->broken = true;
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
    /* The name holds a key of another type (from a script too, where an
     * older server wraps the code in its own text). */
    bool kind = strstr(s, "WRONGTYPE") != NULL;
    return rlock__fail(auth   ? RLOCK_EAUTH
                       : perm ? RLOCK_EPERM
                       : kind ? RLOCK_EKIND
                              : RLOCK_EREDIS,
                       "%.200s", s);
}

/* AUTH, SELECT and CLIENT SETNAME in one round trip, by deadline_ms. */
static rlock_status hello(rlock_client *c, rlock__link *link, int64_t deadline_ms)
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
    rlock__conn conn = {link, false, false};
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

rlock_status rlock__connect(rlock_client *c, rlock__link **out, int64_t deadline_ms)
{
    /* A reconnect made for a call (a renewal round, an acquire) must fit in
     * that call's bound: each step takes its own timeout or what is left
     * of the caller's, whichever is less. The TLS handshake is part of the
     * connect. */
    int64_t now = rlock__now_ms();
    if (deadline_ms >= 0 && deadline_ms <= now) {
        return rlock__fail(RLOCK_ETIMEDOUT, "no time left to connect");
    }
    rlock__link *link = NULL;
    rlock_status st = rlock__link_open(
        c, &link, rlock__min_deadline(now + c->cfg.connect_timeout_ms, deadline_ms));
    if (st != RLOCK_OK) {
        return st;
    }
    if ((st = hello(c, link,
                    rlock__min_deadline(rlock__now_ms() + c->cfg.command_timeout_ms,
                                        deadline_ms))) != RLOCK_OK) {
        if (st == RLOCK_EIO && link->ssl && !link->alert) {
            /* The send may have met the reset that followed an alert
             * still unread: read what arrived (never waiting). */
            rlock_status ignored;
            while (rlock__link_read(link, false, 0, &ignored) > 0) {
            }
        }
        if (st == RLOCK_EIO && link->alert) {
            /* TLS 1.3 ends the client's handshake before the server has
             * judged its certificate: its refusal, an alert, comes with
             * the first reply. Only an alert is a refusal; a close or a
             * reset without one is an outage (RLOCK_EIO, retried). */
            char why[256];
            snprintf(why, sizeof why, "%s", rlock_last_error());
            st = rlock__fail(RLOCK_ETLS, "TLS: the server refused the connection%s: %s",
                             link->cert_requested
                                 ? " (it asked for a client certificate, none is configured)"
                                 : "",
                             why);
        }
        rlock__link_close(link);
        return st;
    }
    *out = link;
    return RLOCK_OK;
}
