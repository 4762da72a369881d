/* Direct hiredis use by the rlock command, for what the library does not
 * offer yet: a wait on the lock's pub/sub channel that can be interrupted by
 * a file descriptor (`rlock wait`), and the second look at a server whose
 * client could not be made (client.c). The URL is the library's, parsed by
 * its parser. Everything that changes a lock goes through the library, and
 * `rlock status` reads through the client's pool (status.c). */
#include "cli.h"
#include "tool.h" /* rlock__parse_url(): the library's parser */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

/* Timeouts of the direct connections without --redis-timeout: the
 * library's defaults, so that they fail as fast as the library does. */
#define CONNECT_TIMEOUT_MS 2000
#define COMMAND_TIMEOUT_MS 3000
/* Longest single poll(); a wait longer than this just polls again (after
 * one more probe), which also keeps the ms count within an int. */
#define MAX_POLL_MS (3600 * 1000)

/* ---- connections --------------------------------------------------------- */

/* The status and detail of a context whose err is set. hiredis 0.14
 * reports a read timeout (SO_RCVTIMEO) as an I/O error carrying
 * strerror(EAGAIN), and a connect timeout as ETIMEDOUT. */
static rlock_status ctx_failed(const redisContext *r, const char *step)
{
    const char *e = r->errstr;
    if (strstr(e, "temporarily unavailable") || strstr(e, "timed out") || strstr(e, "Timeout")) {
        cli_detail_set(CLI_CAUSE_TIMEOUT, "%s: %s", step, e);
        return RLOCK_ETIMEDOUT;
    }
    cli_detail_set(CLI_CAUSE_UNREACHABLE, "%s: %s", step, e[0] ? e : "connection lost");
    return RLOCK_EIO;
}

rlock_status cli_reply(redisContext *r, redisReply **out)
{
    void *p = NULL;
    if (redisGetReply(r, &p) != REDIS_OK || p == NULL) {
        return ctx_failed(r, "read");
    }
    redisReply *rep = p;
    if (rep->type == REDIS_REPLY_ERROR) {
        cli_detail_set(CLI_CAUSE_NONE, "%s", rep->str);
        freeReplyObject(rep);
        return RLOCK_EREDIS;
    }
    *out = rep;
    return RLOCK_OK;
}

rlock_status cli_connect(const cli_opts *o, redisContext **out)
{
    cli_detail_clear();
    rlock__endpoint parsed;
    if (rlock__parse_url(o->url, &parsed) != RLOCK_OK) {
        cli_detail_set(CLI_CAUSE_NONE, "%s", rlock_last_error());
        return RLOCK_EINVAL;
    }
    const rlock__endpoint *ep = &parsed;
    if (ep->tls) {
        /* These connections are hiredis 0.14's own, which has no TLS: never
         * send a password in clear text to a rediss:// server. */
        rlock__endpoint_free(&parsed);
        cli_detail_set(CLI_CAUSE_NONE, "wait does not speak TLS (rediss://) yet");
        return RLOCK_EINVAL;
    }
    int64_t cms = o->connect_timeout_ms > 0 ? o->connect_timeout_ms : CONNECT_TIMEOUT_MS;
    int64_t rms = o->command_timeout_ms > 0 ? o->command_timeout_ms : COMMAND_TIMEOUT_MS;
    struct timeval ct = {(time_t)(cms / 1000), (suseconds_t)(cms % 1000 * 1000)};
    struct timeval rt = {(time_t)(rms / 1000), (suseconds_t)(rms % 1000 * 1000)};
    redisContext *r = ep->path ? redisConnectUnixWithTimeout(ep->path, ct)
                               : redisConnectWithTimeout(ep->host, ep->port, ct);
    if (r == NULL) {
        rlock__endpoint_free(&parsed);
        return RLOCK_ENOMEM;
    }
    rlock_status s = RLOCK_OK;
    if (r->err || redisSetTimeout(r, rt) != REDIS_OK) {
        s = ctx_failed(r, "connect");
    } else {
        /* hiredis 0.14 does not set close-on-exec; COMMAND must not
         * inherit the socket. */
        int fl = fcntl(r->fd, F_GETFD);
        if (fl >= 0) {
            fcntl(r->fd, F_SETFD, fl | FD_CLOEXEC);
        }
    }
    /* One round trip: AUTH, SELECT, the name and a PING are pipelined, and
     * the first refusal is the one reported, charged to its step. */
    bool auth = ep->password != NULL && (ep->password[0] != '\0' || ep->user != NULL);
    if (s == RLOCK_OK) {
        if (auth) {
            if (ep->user != NULL) {
                redisAppendCommand(r, "AUTH %s %s", ep->user, ep->password);
            } else {
                redisAppendCommand(r, "AUTH %s", ep->password);
            }
        }
        if (ep->db != 0) {
            redisAppendCommand(r, "SELECT %d", ep->db);
        }
        char host[256] = "unknown";
        gethostname(host, sizeof host - 1);
        redisAppendCommand(r, "CLIENT SETNAME rlock-cli:%s:%d", host, (int)getpid());
        /* The library's own check (rlock_client_new sends PING), so that
         * both refuse the same users. */
        redisAppendCommand(r, "PING");
    }
    struct {
        bool sent;
        cli_cause cause;
    } steps[4] = {{auth, CLI_CAUSE_AUTH},
                  {ep->db != 0, CLI_CAUSE_DB},
                  {true, CLI_CAUSE_NONE},
                  {true, CLI_CAUSE_NONE}};
    for (int i = 0; i < 4 && s == RLOCK_OK; i++) {
        if (!steps[i].sent) {
            continue;
        }
        redisReply *rep = NULL;
        s = cli_reply(r, &rep);
        if (s == RLOCK_OK) {
            freeReplyObject(rep);
        } else if (s == RLOCK_EREDIS) {
            /* Charged to the step (AUTH, SELECT) unless the server's code
             * names the cause itself: NOAUTH to SELECT or CLIENT SETNAME
             * means no password was sent. Any other refusal of the name
             * (an ACL without CLIENT) is no reason to fail. */
            if (strncmp(cli_detail_text(), "NOAUTH", 6) != 0 && i != 3) {
                if (i == 2) {
                    cli_detail_clear();
                    s = RLOCK_OK;
                } else {
                    cli_detail_recause(steps[i].cause);
                }
            }
        }
    }
    rlock__endpoint_free(&parsed);
    if (s != RLOCK_OK) {
        redisFree(r);
        return s;
    }
    *out = r;
    return RLOCK_OK;
}

char *cli_channel(const char *name)
{
    char *ch = NULL;
    int n = strchr(name, '{') ? asprintf(&ch, "redisson_lock__channel:%s", name)
                              : asprintf(&ch, "redisson_lock__channel:{%s}", name);
    return n < 0 ? NULL : ch;
}

/* ---- waiting on the channel ---------------------------------------------- */

typedef enum { MSG_GOT, MSG_TIMEOUT, MSG_INTR, MSG_ERROR } msg_result;

/* Takes every complete reply out of the reader; true if one was a message
 * (its payload does not matter: "0" and "1" both mean "retry now"). */
static bool drain_messages(redisContext *sub, bool *broken)
{
    bool got = false;
    for (;;) {
        void *rep = NULL;
        if (redisGetReplyFromReader(sub, &rep) != REDIS_OK) {
            *broken = true;
            return got;
        }
        if (rep == NULL) {
            return got;
        }
        redisReply *r = rep;
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
            r->element[0]->type == REDIS_REPLY_STRING &&
            strcmp(r->element[0]->str, "message") == 0) {
            got = true;
        }
        freeReplyObject(r);
    }
}

/* Sleeps until a message arrives on sub, timeout_ms passes (-1: never), or
 * intr_fd becomes readable. */
static msg_result wait_message(redisContext *sub, int intr_fd, int64_t timeout_ms)
{
    int64_t deadline = timeout_ms < 0 ? -1 : cli_now_ms() + timeout_ms;
    bool broken = false;
    for (;;) {
        if (drain_messages(sub, &broken)) {
            return MSG_GOT;
        }
        if (broken) {
            return MSG_ERROR;
        }
        int64_t left = deadline < 0 ? -1 : deadline - cli_now_ms();
        if (deadline >= 0 && left <= 0) {
            return MSG_TIMEOUT;
        }
        if (left < 0 || left > MAX_POLL_MS) {
            left = MAX_POLL_MS;
        }
        struct pollfd p[2] = {{sub->fd, POLLIN, 0}, {intr_fd, POLLIN, 0}};
        int n = poll(p, intr_fd >= 0 ? 2 : 1, (int)left);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return MSG_ERROR;
        }
        if (n == 0) {
            if (deadline < 0) {
                return MSG_TIMEOUT; /* probe again after MAX_POLL_MS */
            }
            continue;
        }
        if (intr_fd >= 0 && (p[1].revents & POLLIN)) {
            return MSG_INTR;
        }
        if (p[0].revents != 0 && redisBufferRead(sub) != REDIS_OK) {
            return MSG_ERROR;
        }
    }
}

static rlock_status subscribe(const cli_opts *o, const char *name, redisContext **out)
{
    char *ch = cli_channel(name);
    if (ch == NULL) {
        return RLOCK_ENOMEM;
    }
    redisContext *sub = NULL;
    rlock_status s = cli_connect(o, &sub);
    if (s == RLOCK_OK) {
        /* redisCommand returns the subscribe confirmation: from here on no
         * PUBLISH on the channel can be missed, so the probe that follows
         * closes the window between the first probe and the subscription. */
        redisReply *r = redisCommand(sub, "SUBSCRIBE %s", ch);
        if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
            if (r == NULL) {
                s = ctx_failed(sub, "SUBSCRIBE");
            } else {
                s = r->type == REDIS_REPLY_ERROR ? RLOCK_EREDIS : RLOCK_EPROTO;
                cli_detail_set(CLI_CAUSE_NONE, "SUBSCRIBE: %s",
                               r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
            }
            redisFree(sub);
            sub = NULL;
        }
        if (r != NULL) {
            freeReplyObject(r);
        }
    }
    free(ch);
    *out = sub;
    return s;
}

cli_wait_result cli_wait_free(const cli_opts *o, const char *name, int64_t wait_ms, int intr_fd,
                              cli_probe probe, void *arg, rlock_status *err)
{
    int64_t deadline = wait_ms < 0 ? -1 : cli_now_ms() + wait_ms;
    bool done = false;
    int64_t ttl = -2;
    *err = probe(arg, &done, &ttl);
    if (*err != RLOCK_OK) {
        cli_detail_from_library();
        return CLI_WAIT_ERROR;
    }
    if (done) {
        return CLI_WAIT_DONE;
    }
    if (wait_ms == 0) {
        return CLI_WAIT_TIMEOUT;
    }
    redisContext *sub = NULL;
    *err = subscribe(o, name, &sub);
    if (*err != RLOCK_OK) {
        return CLI_WAIT_ERROR;
    }
    cli_wait_result res;
    for (;;) {
        done = false;
        ttl = -2;
        *err = probe(arg, &done, &ttl);
        if (*err != RLOCK_OK) {
            cli_detail_from_library();
            res = CLI_WAIT_ERROR;
            break;
        }
        if (done) {
            res = CLI_WAIT_DONE;
            break;
        }
        int64_t left = deadline < 0 ? -1 : deadline - cli_now_ms();
        if (deadline >= 0 && left <= 0) {
            res = CLI_WAIT_TIMEOUT;
            break;
        }
        /* Sleep until the holder's lease runs out (a silent holder that
         * died never publishes), or forever for a key without TTL, but
         * never past our own deadline. ttl -2 means the key vanished
         * between the two round trips of the probe: retry at once. */
        int64_t sleep = ttl == -2 ? 0 : ttl;
        if (left >= 0 && (sleep < 0 || sleep > left)) {
            sleep = left;
        }
        msg_result m = wait_message(sub, intr_fd, sleep);
        if (m == MSG_INTR) {
            res = CLI_WAIT_SIGNAL;
            break;
        }
        if (m == MSG_ERROR) {
            *err = ctx_failed(sub, "subscription");
            res = CLI_WAIT_ERROR;
            break;
        }
    }
    redisFree(sub);
    return res;
}
