/* Direct hiredis use by the rlock command, for what the library does not
 * offer: a read-only snapshot of a lock for `rlock status`, and a wait on
 * the lock's pub/sub channel that can be interrupted by a file descriptor
 * (the library's own waits cannot, and `rlock run` must react to signals
 * while it waits). Everything that changes a lock goes through the library. */
#include "cli.h"
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

/* Timeouts of the direct connections: the library's defaults, so that
 * `status` against a dead server fails as fast as `run` does. */
#define CONNECT_TIMEOUT_MS 2000
#define COMMAND_TIMEOUT_MS 3000
/* Longest single poll(); a wait longer than this just polls again (after
 * one more probe), which also keeps the ms count within an int. */
#define MAX_POLL_MS (3600 * 1000)

/* ---- connections --------------------------------------------------------- */

static bool reply_ok(redisReply *r)
{
    bool ok = r != NULL && r->type != REDIS_REPLY_ERROR;
    if (r != NULL) {
        freeReplyObject(r);
    }
    return ok;
}

rlock_status cli_connect(const char *url, redisContext **out)
{
    /* The library's own parser: status and wait reach exactly the server
     * that run does, and reject exactly the same URLs. */
    rlock__endpoint ep;
    rlock_status s = rlock__parse_url(url ? url : "redis://127.0.0.1:6379", &ep);
    if (s != RLOCK_OK) {
        return s;
    }
    struct timeval ct = {CONNECT_TIMEOUT_MS / 1000, 0};
    struct timeval rt = {COMMAND_TIMEOUT_MS / 1000, 0};
    redisContext *r = ep.path ? redisConnectUnixWithTimeout(ep.path, ct)
                              : redisConnectWithTimeout(ep.host, ep.port, ct);
    /* A refused AUTH or SELECT is reported as "cannot reach Redis", as the
     * library does: the server is not usable with this URL. */
    s = RLOCK_OK;
    if (r == NULL) {
        s = RLOCK_ENOMEM;
    } else if (r->err || redisSetTimeout(r, rt) != REDIS_OK) {
        s = RLOCK_EIO;
    } else if (ep.password != NULL &&
               !reply_ok(ep.user ? redisCommand(r, "AUTH %s %s", ep.user, ep.password)
                                 : redisCommand(r, "AUTH %s", ep.password))) {
        s = RLOCK_EIO;
    } else if (ep.db != 0 && !reply_ok(redisCommand(r, "SELECT %d", ep.db))) {
        s = RLOCK_EIO;
    }
    rlock__endpoint_free(&ep);
    if (s != RLOCK_OK) {
        if (r != NULL) {
            redisFree(r);
        }
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

static rlock_status subscribe(const char *url, const char *name, redisContext **out)
{
    char *ch = cli_channel(name);
    if (ch == NULL) {
        return RLOCK_ENOMEM;
    }
    redisContext *sub = NULL;
    rlock_status s = cli_connect(url, &sub);
    if (s == RLOCK_OK) {
        /* redisCommand returns the subscribe confirmation: from here on no
         * PUBLISH on the channel can be missed, so the probe that follows
         * closes the window between the first probe and the subscription. */
        redisReply *r = redisCommand(sub, "SUBSCRIBE %s", ch);
        if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
            s = r == NULL ? RLOCK_EIO : RLOCK_EPROTO;
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

cli_wait_result cli_wait_free(const char *url, const char *name, int64_t wait_ms, int intr_fd,
                              cli_probe probe, void *arg, rlock_status *err)
{
    int64_t deadline = wait_ms < 0 ? -1 : cli_now_ms() + wait_ms;
    bool done = false;
    int64_t ttl = -2;
    *err = probe(arg, &done, &ttl);
    if (*err != RLOCK_OK) {
        return CLI_WAIT_ERROR;
    }
    if (done) {
        return CLI_WAIT_DONE;
    }
    if (wait_ms == 0) {
        return CLI_WAIT_TIMEOUT;
    }
    redisContext *sub = NULL;
    *err = subscribe(url, name, &sub);
    if (*err != RLOCK_OK) {
        return CLI_WAIT_ERROR;
    }
    cli_wait_result res;
    for (;;) {
        done = false;
        ttl = -2;
        *err = probe(arg, &done, &ttl);
        if (*err != RLOCK_OK) {
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
            *err = RLOCK_EIO;
            res = CLI_WAIT_ERROR;
            break;
        }
    }
    redisFree(sub);
    return res;
}

/* ---- status -------------------------------------------------------------- */

static void json_string(const char *s, size_t n)
{
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            printf("\\%c", c);
        } else if (c < 0x20 || c == 0x7f) {
            printf("\\u%04x", c);
        } else {
            putchar(c);
        }
    }
    putchar('"');
}

/* A hold count is printed as a JSON number when it is one; a hash written
 * by something else (a read/write lock's "mode" field) may hold text. */
static bool is_integer(const char *s)
{
    size_t i = (s[0] == '-') ? 1 : 0;
    if (s[i] == '\0' || strlen(s + i) > 18) {
        return false;
    }
    return strspn(s + i, "0123456789") == strlen(s + i);
}

static void print_status(const char *name, bool locked, const char *type, long long ttl,
                         redisReply *fields, bool json)
{
    size_t nf = fields ? fields->elements / 2 : 0;
    if (!json) {
        printf("name: %s\nlocked: %s\ntype: %s\nttl_ms: %lld\nholders: %zu\n", name,
               locked ? "yes" : "no", type, ttl, nf);
        for (size_t i = 0; i < nf; i++) {
            printf("holder: %s count %s\n", fields->element[2 * i]->str,
                   fields->element[2 * i + 1]->str);
        }
        return;
    }
    printf("{\"name\":");
    json_string(name, strlen(name));
    printf(",\"locked\":%s,\"type\":", locked ? "true" : "false");
    json_string(type, strlen(type));
    printf(",\"ttl_ms\":%lld,\"holders\":[", ttl);
    for (size_t i = 0; i < nf; i++) {
        redisReply *f = fields->element[2 * i], *v = fields->element[2 * i + 1];
        printf("%s{\"owner\":", i ? "," : "");
        json_string(f->str, f->len);
        printf(",\"count\":");
        if (is_integer(v->str)) {
            printf("%s", v->str);
        } else {
            json_string(v->str, v->len);
        }
        putchar('}');
    }
    printf("]}\n");
}

static bool all_strings(redisReply *r)
{
    for (size_t i = 0; i < r->elements; i++) {
        if (r->element[i]->type != REDIS_REPLY_STRING) {
            return false;
        }
    }
    return r->elements % 2 == 0;
}

rlock_status cli_print_status(const char *url, const char *name, bool json, bool *locked)
{
    redisContext *r = NULL;
    rlock_status s = cli_connect(url, &r);
    if (s != RLOCK_OK) {
        return s;
    }
    /* One MULTI, so that the type, TTL and holders describe the same
     * moment. HGETALL on a key of another type fails inside EXEC alone. */
    redisAppendCommand(r, "MULTI");
    redisAppendCommand(r, "TYPE %s", name);
    redisAppendCommand(r, "PTTL %s", name);
    redisAppendCommand(r, "HGETALL %s", name);
    redisAppendCommand(r, "EXEC");
    redisReply *rep[5] = {NULL};
    for (int i = 0; i < 5 && s == RLOCK_OK; i++) {
        void *p = NULL;
        if (redisGetReply(r, &p) != REDIS_OK) {
            s = RLOCK_EIO; /* 0.14 reports a timeout as an I/O error too */
        }
        rep[i] = p;
    }
    redisReply *ex = rep[4];
    if (s == RLOCK_OK) {
        if (ex->type == REDIS_REPLY_ERROR) {
            s = RLOCK_EREDIS;
        } else if (ex->type != REDIS_REPLY_ARRAY || ex->elements != 3 ||
                   ex->element[0]->type != REDIS_REPLY_STATUS ||
                   ex->element[1]->type != REDIS_REPLY_INTEGER) {
            s = RLOCK_EPROTO;
        }
    }
    if (s == RLOCK_OK) {
        const char *type = ex->element[0]->str;
        redisReply *fields = ex->element[2];
        if (fields->type != REDIS_REPLY_ARRAY || !all_strings(fields)) {
            fields = NULL; /* not a hash: no holders to list */
        }
        /* "Locked" means what Redisson's isLocked() means: the key exists,
         * whatever it holds. */
        *locked = strcmp(type, "none") != 0;
        print_status(name, *locked, type, ex->element[1]->integer, fields, json);
        if (fflush(stdout) != 0) {
            s = RLOCK_EIO;
        }
    }
    for (int i = 0; i < 5; i++) {
        if (rep[i] != NULL) {
            freeReplyObject(rep[i]);
        }
    }
    redisFree(r);
    return s;
}
