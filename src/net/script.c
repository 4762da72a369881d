/* The one place that runs scripts and commands: routes by key through the
 * topology, sends EVALSHA and falls back to EVAL on NOSCRIPT, retries error
 * replies that say the server did not run the call and will soon be able
 * to (LOADING after a restart, BUSY while another script runs, ...), for
 * single calls and for pipelines alike.
 *
 * NOSCRIPT and the transient replies both mean "not run", so resending is
 * safe even for the non-idempotent acquire. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define TRANSIENT_BACKOFF_MIN_MS 10
#define TRANSIENT_BACKOFF_MAX_MS 250

/* The argv of a call: the command itself, or EVALSHA/EVAL + script + n. */
typedef struct argv_buf {
    const char *small_v[20];
    size_t small_l[20];
    const char **v;
    size_t *l;
    int argc;
    char nk[24];
} argv_buf;

static rlock_status build(argv_buf *b, const rlock__call *call, bool body)
{
    int extra = call->script ? 3 : 0;
    b->argc = extra + call->nargs;
    b->v = b->small_v;
    b->l = b->small_l;
    if (b->argc > 20) {
        b->v = malloc((size_t)b->argc * sizeof *b->v);
        b->l = malloc((size_t)b->argc * sizeof *b->l);
        if (!b->v || !b->l) {
            free(b->v);
            free(b->l);
            b->v = NULL;
            return rlock__fail(RLOCK_ENOMEM, "out of memory for a command");
        }
    }
    if (call->script) {
        rlock__fmt_i64(b->nk, call->nkeys);
        b->v[0] = body ? "EVAL" : "EVALSHA";
        b->l[0] = body ? 4 : 7;
        b->v[1] = body ? call->script->body : call->script->sha;
        b->l[1] = body ? strlen(call->script->body) : 40;
        b->v[2] = b->nk;
        b->l[2] = strlen(b->nk);
    }
    for (int i = 0; i < call->nargs; i++) {
        b->v[extra + i] = call->args[i];
        b->l[extra + i] = call->lens ? call->lens[i] : strlen(call->args[i]);
    }
    return RLOCK_OK;
}

static void unbuild(argv_buf *b)
{
    if (b->v && b->v != b->small_v) {
        free(b->v);
        free(b->l);
    }
}

static bool noscript(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_ERROR && r->str && strncmp(r->str, "NOSCRIPT", 8) == 0;
}

/* One exchange on conn, with the NOSCRIPT fallback. */
static rlock_status run_on(rlock_client *c, rlock__conn *conn, const rlock__call *call,
                           redisReply **reply, int64_t deadline_ms)
{
    argv_buf b;
    rlock_status st = build(&b, call, false);
    if (st != RLOCK_OK) {
        return st;
    }
    rlock__stat_add(c, RLOCK_STAT_COMMANDS, 1);
    st = rlock__conn_call(conn, b.argc, b.v, b.l, reply, deadline_ms);
    if (st == RLOCK_OK && call->script && noscript(*reply)) {
        /* After a restart or SCRIPT FLUSH the cache is empty; EVAL also
         * caches the script again. */
        freeReplyObject(*reply);
        *reply = NULL;
        b.v[0] = "EVAL";
        b.l[0] = 4;
        b.v[1] = call->script->body;
        b.l[1] = strlen(call->script->body);
        rlock__stat_add(c, RLOCK_STAT_COMMANDS, 1);
        st = rlock__conn_call(conn, b.argc, b.v, b.l, reply, deadline_ms);
    }
    unbuild(&b);
    return st;
}

rlock_status rlock__run(rlock_client *c, const rlock__call *call, redisReply **reply,
                        int64_t deadline_ms)
{
    int64_t backoff = TRANSIENT_BACKOFF_MIN_MS;
    for (;;) {
        rlock__conn *conn;
        rlock_status st = c->topo->borrow(c, call->key, call->keylen, &conn, deadline_ms);
        if (st != RLOCK_OK) {
            return st;
        }
        st = run_on(c, conn, call, reply, deadline_ms);
        c->topo->give_back(c, conn);
        if (st != RLOCK_OK || !rlock__transient(*reply)) {
            return st;
        }
        /* Not run: wait and send again while the budget lasts. Past it,
         * the server could not run commands for that long: that is
         * RLOCK_EIO, the status the acquire loop retries for
         * retry_timeout_ms as it does a dropped link (a restart loading a
         * large dataset outlasts any command timeout), with the server's
         * text as the detail. The call provably did not run, so a resend
         * (an unlock with the same request id) is safe. */
        if (rlock__now_ms() + backoff >= deadline_ms || rlock__closing(c)) {
            st = rlock__fail(RLOCK_EIO, "%.200s", (*reply)->str);
            freeReplyObject(*reply);
            *reply = NULL;
            return st;
        }
        freeReplyObject(*reply);
        *reply = NULL;
        rlock__sleep_ms(backoff);
        backoff = backoff * 2 > TRANSIENT_BACKOFF_MAX_MS ? TRANSIENT_BACKOFF_MAX_MS : backoff * 2;
    }
}

void rlock__run_pipeline(rlock_client *c, const rlock__call *calls, size_t n, redisReply **replies,
                         int64_t deadline_ms, int64_t hard_ms)
{
    memset(replies, 0, n * sizeof *replies);
    if (n == 0) {
        return;
    }
    int64_t budget = deadline_ms - rlock__now_ms(); /* for each resend below */
    char **cmds = calloc(n, sizeof *cmds);
    long long *lens = calloc(n, sizeof *lens);
    rlock__conn *conn = NULL;
    if (!cmds || !lens ||
        c->topo->borrow(c, calls[0].key, calls[0].keylen, &conn, deadline_ms) != RLOCK_OK) {
        free(cmds);
        free(lens);
        return;
    }
    size_t built = 0;
    for (; built < n; built++) {
        argv_buf b;
        if (build(&b, &calls[built], false) != RLOCK_OK) {
            break;
        }
        lens[built] = redisFormatCommandArgv(&cmds[built], b.argc, b.v, b.l);
        unbuild(&b);
        if (lens[built] < 0 || !cmds[built]) {
            break;
        }
    }
    if (built > 0 && built <= INT32_MAX) {
        rlock__stat_add(c, RLOCK_STAT_COMMANDS, built);
        rlock__conn_exchange(conn, (int)built, cmds, lens, replies, deadline_ms, hard_ms);
    }
    /* A flushed script cache answers NOSCRIPT to each call: send those
     * again one by one, the first with the body (which caches it). */
    for (size_t i = 0; i < built && !conn->broken; i++) {
        if (noscript(replies[i])) {
            freeReplyObject(replies[i]);
            replies[i] = NULL;
            int64_t until = rlock__min_deadline(rlock__now_ms() + budget, hard_ms);
            if (run_on(c, conn, &calls[i], &replies[i], until) != RLOCK_OK) {
                replies[i] = NULL;
            }
        }
    }
    c->topo->give_back(c, conn);
    for (size_t i = 0; i < n; i++) {
        if (cmds[i]) {
            redisFreeCommand(cmds[i]);
        }
    }
    free(cmds);
    free(lens);
}
