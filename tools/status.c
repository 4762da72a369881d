/* rlock status: a read-only snapshot of a lock. The library's public
 * calls answer one question each and cannot name the connection of a
 * holder, so the snapshot is read with src/tool.h on a pooled connection
 * of the command's client: the client's URL, password, database, timeouts
 * and transport, as `run` uses.
 *
 * The type, TTL and holder fields come from one MULTI, so they describe the
 * same moment. Then, for holders, CLIENT LIST: Redis cannot map a hash field
 * to a connection, but the library names its connections
 * "rlock:<client-id>:<host>:<pid>" (CLIENT SETNAME), and a holder field is
 * "<client-id>:<thread>", so a connection whose name carries a prefix of at
 * least 8 characters of the holder's client id is the holder's. A holder
 * that names no connection (Redisson by default, or an rlock older than
 * that naming) shows none. */
#include "cli.h"
#include "tool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- output of arbitrary bytes --------------------------------------- */

/* The length of the valid UTF-8 sequence at s (at most n bytes), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf; /* range of the second byte */
    if (c < 0x80) {
        return 1;
    } else if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        lo = c == 0xe0 ? 0xa0 : 0x80; /* no overlong forms */
        hi = c == 0xed ? 0x9f : 0xbf; /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        lo = c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xf4 ? 0x8f : 0xbf; /* nothing above U+10FFFF */
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi) {
        return 0;
    }
    for (size_t i = 2; i < len; i++) {
        if (s[i] < 0x80 || s[i] > 0xbf) {
            return 0;
        }
    }
    return len;
}

/* A JSON string for any bytes: control characters escaped, valid UTF-8 as
 * is, every byte of invalid UTF-8 as U+FFFD, so that any JSON parser
 * accepts the output whatever a lock name holds. */
static void json_string(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    putchar('"');
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t len = utf8_len(s + i, n - i);
        if (c == '"' || c == '\\') {
            printf("\\%c", c);
        } else if (c == '\n') {
            fputs("\\n", stdout);
        } else if (c == '\t') {
            fputs("\\t", stdout);
        } else if (c < 0x20 || c == 0x7f) {
            printf("\\u%04x", c);
        } else if (len == 0) {
            fputs("\\ufffd", stdout);
            len = 1;
        } else {
            fwrite(s + i, 1, len, stdout);
        }
        i += len ? len : 1;
    }
    putchar('"');
}

/* Text output: control bytes as \xNN, so a name cannot move the cursor or
 * forge a line of output. */
static void text_string(const char *str, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)str[i];
        if (c < 0x20 || c == 0x7f) {
            printf("\\x%02x", c);
        } else {
            putchar(c);
        }
    }
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

/* ---- the holder's connection ------------------------------------------ */

typedef struct conn {
    char name[256];
    char addr[80];
    char host[256];
    long pid;
    int count; /* connections of that process */
} conn;

/* The value of "key=" in one CLIENT LIST line, copied into out. */
static bool field(const char *line, size_t len, const char *key, char *out, size_t size)
{
    size_t klen = strlen(key);
    for (const char *p = line; p < line + len;) {
        const char *sp = memchr(p, ' ', (size_t)(line + len - p));
        const char *end = sp ? sp : line + len;
        if ((size_t)(end - p) > klen && memcmp(p, key, klen) == 0 && p[klen] == '=') {
            size_t n = (size_t)(end - p) - klen - 1;
            if (n >= size) {
                n = size - 1;
            }
            memcpy(out, p + klen + 1, n);
            out[n] = '\0';
            return true;
        }
        p = end + 1;
    }
    return false;
}

/* Whether a connection name "rlock:<id>:<host>:<pid>" belongs to the
 * client of holder field owner; fills host and pid. */
static bool name_matches(const char *name, const char *owner, conn *c)
{
    if (strncmp(name, "rlock:", 6) != 0) {
        return false;
    }
    const char *id = name + 6;
    const char *id_end = strchr(id, ':');
    const char *pid = strrchr(name, ':');
    if (id_end == NULL || pid == id_end) {
        return false;
    }
    size_t n = (size_t)(id_end - id);
    if (n < 8 || strncmp(owner, id, n) != 0) {
        return false;
    }
    size_t hn = (size_t)(pid - id_end - 1);
    if (hn >= sizeof c->host) {
        hn = sizeof c->host - 1;
    }
    memcpy(c->host, id_end + 1, hn);
    c->host[hn] = '\0';
    c->pid = atol(pid + 1);
    return true;
}

static void find_conn(const redisReply *list, const char *owner, conn *c)
{
    memset(c, 0, sizeof *c);
    if (list == NULL) {
        return;
    }
    for (const char *line = list->str; line < list->str + list->len;) {
        const char *nl = memchr(line, '\n', (size_t)(list->str + list->len - line));
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char name[256];
        conn cand;
        if (field(line, len, "name", name, sizeof name) && name_matches(name, owner, &cand)) {
            if (c->count++ == 0) {
                snprintf(c->name, sizeof c->name, "%s", name);
                field(line, len, "addr", c->addr, sizeof c->addr);
                memcpy(c->host, cand.host, sizeof c->host);
                c->pid = cand.pid;
            }
        }
        line += len + 1;
    }
}

/* ---- printing ----------------------------------------------------------- */

typedef struct snapshot {
    const char *name;
    bool locked;
    const char *type;
    const char *kind;        /* "read/write", "fair", "fenced", "lock", "none" or type */
    const char *mode;        /* a read/write lock's mode field, or NULL */
    size_t readers;          /* read/write: reader fields */
    redisReply *queue;       /* fair: LRANGE of the queue, or NULL */
    redisReply *deadlines;   /* fair: ZRANGE of the timeouts WITHSCORES, or NULL */
    long long now_ms;        /* the server's clock at the snapshot (TIME) */
    const char *token;       /* fenced: the token key's value, or NULL */
    long long ttl;
    redisReply *fields;      /* HGETALL, or NULL */
    redisReply *clients;     /* CLIENT LIST, or NULL */
    const char *clients_err; /* why there is no CLIENT LIST, or NULL */
} snapshot;

/* ---- the kind ----------------------------------------------------------- */

/* Redisson's prefix(P, N): P:N when N has a '{' (its own hash tag), else
 * P:{N} (spec 0.1). malloc'd, NULL on ENOMEM. */
static char *prefixed(const char *p, const char *name)
{
    char *out = NULL;
    int n = strchr(name, '{') ? asprintf(&out, "%s:%s", p, name)
                              : asprintf(&out, "%s:{%s}", p, name);
    return n < 0 ? NULL : out;
}

/* The deadline of queued owner (score of the timeouts set), or -1. */
static long long deadline_of(const snapshot *st, const redisReply *owner)
{
    const redisReply *d = st->deadlines;
    for (size_t i = 0; d != NULL && i + 1 < d->elements; i += 2) {
        if (d->element[i]->len == owner->len &&
            memcmp(d->element[i]->str, owner->str, owner->len) == 0) {
            return atoll(d->element[i + 1]->str);
        }
    }
    return -1;
}

static bool ends_with(const redisReply *f, const char *tail)
{
    size_t n = strlen(tail);
    return f->len >= n && memcmp(f->str + f->len - n, tail, n) == 0;
}

/* Works out the kind from what the name's keys hold. */
static void find_kind(snapshot *st)
{
    size_t nf = st->fields ? st->fields->elements / 2 : 0;
    for (size_t i = 0; i < nf; i++) {
        redisReply *f = st->fields->element[2 * i];
        if (f->len == 4 && memcmp(f->str, "mode", 4) == 0) {
            st->mode = st->fields->element[2 * i + 1]->str;
        }
    }
    for (size_t i = 0; st->mode != NULL && i < nf; i++) {
        redisReply *f = st->fields->element[2 * i];
        if (!(f->len == 4 && memcmp(f->str, "mode", 4) == 0) && !ends_with(f, ":write")) {
            st->readers++;
        }
    }
    bool queued = st->queue != NULL && st->queue->elements > 0;
    if (st->mode != NULL) {
        st->kind = "read/write";
    } else if (queued) {
        st->kind = "fair";
    } else if (st->token != NULL && (strcmp(st->type, "hash") == 0 ||
                                     strcmp(st->type, "none") == 0)) {
        st->kind = "fenced";
    } else if (strcmp(st->type, "hash") == 0) {
        st->kind = "lock";
    } else {
        st->kind = st->type;
    }
}


static void print_text(const snapshot *st)
{
    size_t nf = st->fields ? st->fields->elements / 2 : 0;
    fputs("name: ", stdout);
    text_string(st->name, strlen(st->name));
    printf("\nlocked: %s\ntype: %s\nkind: %s\n", st->locked ? "yes" : "no", st->type, st->kind);
    if (st->mode != NULL) {
        fputs("mode: ", stdout);
        text_string(st->mode, strlen(st->mode));
        printf("\nreaders: %zu\n", st->readers);
    }
    if (st->token != NULL) {
        fputs("token: ", stdout);
        text_string(st->token, strlen(st->token));
        putchar('\n');
    }
    printf("ttl_ms: %lld\nholders: %zu\n", st->ttl, nf - (st->mode != NULL ? 1 : 0));
    for (size_t i = 0; i < nf; i++) {
        redisReply *f = st->fields->element[2 * i], *v = st->fields->element[2 * i + 1];
        if (st->mode != NULL && f->len == 4 && memcmp(f->str, "mode", 4) == 0) {
            continue;
        }
        fputs("holder: ", stdout);
        text_string(f->str, f->len);
        fputs(" count ", stdout);
        text_string(v->str, v->len);
        putchar('\n');
        conn c;
        find_conn(st->clients, f->str, &c);
        if (c.count > 0) {
            fputs("  connection: ", stdout);
            text_string(c.name, strlen(c.name));
            printf(" from %s (host ", c.addr);
            text_string(c.host, strlen(c.host));
            printf(", pid %ld, %d connection%s)\n", c.pid, c.count, c.count == 1 ? "" : "s");
        } else if (st->clients_err != NULL) {
            printf("  connection: unknown (CLIENT LIST: %s)\n", st->clients_err);
        } else {
            printf("  connection: none named for this holder\n");
        }
    }
    size_t nq = st->queue != NULL ? st->queue->elements : 0;
    if (nq > 0 || strcmp(st->kind, "fair") == 0) {
        printf("queue: %zu\n", nq);
    }
    for (size_t i = 0; i < nq; i++) {
        fputs("waiter: ", stdout);
        text_string(st->queue->element[i]->str, st->queue->element[i]->len);
        long long d = deadline_of(st, st->queue->element[i]);
        if (d >= 0) {
            printf(" deadline %lld (in %lld ms)\n", d, d - st->now_ms);
        } else {
            printf(" deadline none\n");
        }
    }
}

static void print_json(const snapshot *st)
{
    size_t nf = st->fields ? st->fields->elements / 2 : 0;
    printf("{\"name\":");
    json_string(st->name, strlen(st->name));
    printf(",\"locked\":%s,\"type\":", st->locked ? "true" : "false");
    json_string(st->type, strlen(st->type));
    printf(",\"kind\":");
    json_string(st->kind, strlen(st->kind));
    if (st->mode != NULL) {
        printf(",\"mode\":");
        json_string(st->mode, strlen(st->mode));
        printf(",\"readers\":%zu", st->readers);
    }
    if (st->token != NULL) {
        printf(",\"token\":");
        if (is_integer(st->token)) {
            printf("%s", st->token);
        } else {
            json_string(st->token, strlen(st->token));
        }
    }
    size_t nq = st->queue != NULL ? st->queue->elements : 0;
    if (nq > 0 || strcmp(st->kind, "fair") == 0) {
        printf(",\"queue\":[");
        for (size_t i = 0; i < nq; i++) {
            printf("%s{\"owner\":", i ? "," : "");
            json_string(st->queue->element[i]->str, st->queue->element[i]->len);
            long long d = deadline_of(st, st->queue->element[i]);
            if (d >= 0) {
                printf(",\"deadline_ms\":%lld,\"in_ms\":%lld}", d, d - st->now_ms);
            } else {
                printf(",\"deadline_ms\":null,\"in_ms\":null}");
            }
        }
        putchar(']');
    }
    printf(",\"ttl_ms\":%lld,\"holders\":[", st->ttl);
    bool first = true;
    for (size_t i = 0; i < nf; i++) {
        redisReply *f = st->fields->element[2 * i], *v = st->fields->element[2 * i + 1];
        if (st->mode != NULL && f->len == 4 && memcmp(f->str, "mode", 4) == 0) {
            continue;
        }
        printf("%s{\"owner\":", first ? "" : ",");
        first = false;
        json_string(f->str, f->len);
        printf(",\"count\":");
        if (is_integer(v->str)) {
            printf("%s", v->str);
        } else {
            json_string(v->str, v->len);
        }
        conn c;
        find_conn(st->clients, f->str, &c);
        printf(",\"connection\":");
        if (c.count > 0) {
            printf("{\"name\":");
            json_string(c.name, strlen(c.name));
            printf(",\"addr\":");
            json_string(c.addr, strlen(c.addr));
            printf(",\"host\":");
            json_string(c.host, strlen(c.host));
            printf(",\"pid\":%ld,\"connections\":%d}", c.pid, c.count);
        } else {
            printf("null");
        }
        putchar('}');
    }
    putchar(']');
    if (st->clients_err != NULL) {
        printf(",\"client_list_error\":");
        json_string(st->clients_err, strlen(st->clients_err));
    }
    printf("}\n");
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

/* ---- the command -------------------------------------------------------- */

/* An error reply among rep[0..n) as a status, its text as the detail. */
static rlock_status error_reply(redisReply **rep, int n)
{
    for (int i = 0; i < n; i++) {
        if (rep[i]->type == REDIS_REPLY_ERROR) {
            cli_detail_set(CLI_CAUSE_NONE, "%s", rep[i]->str);
            return RLOCK_EREDIS;
        }
    }
    return RLOCK_OK;
}

/* CLIENT LIST, or NULL with why in err. */
static redisReply *client_list(rlock_client *c, char *err, size_t size)
{
    const char *argv[] = {"CLIENT", "LIST", "TYPE", "normal"};
    const size_t lens[] = {6, 4, 4, 6};
    redisReply *r = NULL;
    rlock_status s = rlock__client_command(c, 4, argv, lens, &r);
    if (s != RLOCK_OK) {
        snprintf(err, size, "%s", rlock_last_error()[0] ? rlock_last_error() : rlock_strerror(s));
        return NULL;
    }
    if (r->type != REDIS_REPLY_STRING) {
        snprintf(err, size, "%s", r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

int cli_status(const cli_opts *o, const char *name, bool json)
{
    rlock_client *c = NULL;
    int rc = cli_client(o, NULL, NULL, &c);
    if (rc >= 0) {
        return rc;
    }
    cli_verbose(o, "connected to %s", o->shown);
    /* One MULTI, so that type, TTL, holders and the other kinds' keys (the
     * fair lock's queue and deadlines, the fenced lock's token) describe
     * the same moment, with the server's clock for the deadlines; a
     * command on a key of another type fails inside EXEC alone. */
    char *q = prefixed("redisson_lock_queue", name);
    char *t = prefixed("redisson_lock_timeout", name);
    char *tk = prefixed("redisson_lock_token", name);
    enum { NCMD = 10 };
    char *cmds[NCMD] = {NULL};
    long long lens[NCMD];
    for (int i = 0; i < NCMD; i++) {
        lens[i] = -1;
    }
    if (q != NULL && t != NULL && tk != NULL) {
        lens[0] = redisFormatCommand(&cmds[0], "MULTI");
        lens[1] = redisFormatCommand(&cmds[1], "TYPE %s", name);
        lens[2] = redisFormatCommand(&cmds[2], "PTTL %s", name);
        lens[3] = redisFormatCommand(&cmds[3], "HGETALL %s", name);
        lens[4] = redisFormatCommand(&cmds[4], "LRANGE %s 0 -1", q);
        lens[5] = redisFormatCommand(&cmds[5], "ZRANGE %s 0 -1 WITHSCORES", t);
        lens[6] = redisFormatCommand(&cmds[6], "GET %s", tk);
        lens[7] = redisFormatCommand(&cmds[7], "TIME");
        lens[8] = redisFormatCommand(&cmds[8], "EXEC");
    }
    const int n = 9;
    free(q);
    free(t);
    free(tk);
    redisReply *rep[NCMD] = {NULL};
    rlock_status s = RLOCK_OK;
    for (int i = 0; i < n; i++) {
        if (lens[i] < 0) {
            s = RLOCK_ENOMEM;
        }
    }
    if (s == RLOCK_OK) {
        s = rlock__client_pipeline(c, name, strlen(name), n, cmds, lens, rep);
        if (s != RLOCK_OK) {
            cli_detail_from_library();
        }
    }
    for (int i = 0; i < n; i++) {
        redisFreeCommand(cmds[i]);
    }
    if (s == RLOCK_OK) {
        s = error_reply(rep, n);
    }
    redisReply *ex = rep[n - 1];
    if (s == RLOCK_OK && (ex->type != REDIS_REPLY_ARRAY || ex->elements != (size_t)n - 2 ||
                          ex->element[0]->type != REDIS_REPLY_STATUS ||
                          ex->element[1]->type != REDIS_REPLY_INTEGER)) {
        cli_detail_set(CLI_CAUSE_NONE, "unexpected reply to EXEC");
        s = RLOCK_EPROTO;
    }
    redisReply *clients = NULL;
    bool write_failed = false;
    char clients_err[256] = "";
    snapshot st = {name, false, "none", "none", NULL, 0, NULL, NULL, 0, NULL, -2, NULL, NULL, NULL};
    if (s == RLOCK_OK) {
        st.type = ex->element[0]->str;
        st.ttl = ex->element[1]->integer;
        st.fields = ex->element[2];
        if (st.fields->type != REDIS_REPLY_ARRAY || !all_strings(st.fields)) {
            st.fields = NULL; /* not a hash: no holders to list */
        }
        redisReply *e;
        if ((e = ex->element[3])->type == REDIS_REPLY_ARRAY) {
            bool ok = true;
            for (size_t i = 0; i < e->elements; i++) {
                ok = ok && e->element[i]->type == REDIS_REPLY_STRING;
            }
            st.queue = ok ? e : NULL;
        }
        if ((e = ex->element[4])->type == REDIS_REPLY_ARRAY && all_strings(e)) {
            st.deadlines = e;
        }
        if ((e = ex->element[5])->type == REDIS_REPLY_STRING) {
            st.token = e->str;
        }
        if ((e = ex->element[6])->type == REDIS_REPLY_ARRAY && e->elements == 2 &&
            e->element[0]->type == REDIS_REPLY_STRING && e->element[1]->type == REDIS_REPLY_STRING) {
            st.now_ms = atoll(e->element[0]->str) * 1000 + atoll(e->element[1]->str) / 1000;
        }
        find_kind(&st);
        /* "Locked" means what Redisson's isLocked() means: the key exists,
         * whatever it holds. */
        st.locked = strcmp(st.type, "none") != 0;
        if (st.fields != NULL && st.fields->elements > 0 && st.fields->elements / 2 > (st.mode ? 1u : 0u)) {
            /* Without CLIENT LIST (an ACL may deny it) the rest stands. */
            clients = client_list(c, clients_err, sizeof clients_err);
            st.clients = clients;
            st.clients_err = clients_err[0] ? clients_err : NULL;
        }
        if (json) {
            print_json(&st);
        } else {
            print_text(&st);
        }
        if (fflush(stdout) != 0) {
            cli_error("standard output: %s", strerror(errno));
            write_failed = true;
        }
    }
    for (int i = 0; i < n; i++) {
        if (rep[i] != NULL) {
            freeReplyObject(rep[i]);
        }
    }
    if (clients != NULL) {
        freeReplyObject(clients);
    }
    rlock_client_free(c);
    if (write_failed) {
        return CLI_EXIT_SOFTWARE;
    }
    if (s != RLOCK_OK) {
        return cli_fail(s, name);
    }
    /* Exit 0 and 1 only for an answer, as test(1) does: locked, not locked.
     * Every failure is 2 or more, so no outage reads as "free". With
     * --json the answer is in "locked": exit 0 whenever the server
     * answered. */
    return json || st.locked ? CLI_EXIT_OK : CLI_EXIT_FREE;
}
