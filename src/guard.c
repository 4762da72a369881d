/* Writes guarded by a lock, for every kind: a command that Redis runs only
 * if the calling thread still holds the lock (lua/guarded.lua), and the
 * fenced writes of a fenced lock, which also refuse a write once a newer
 * token has written the key (lua/fenced_write.lua). The check and the
 * write are one script, so nothing can come between them: a holder paused
 * past its lease (a stopped process, a long GC-like stall, a slow link)
 * finds its field gone and writes nothing. The reply of the command is
 * handed to the caller as an rlock_reply, which is hiredis's reply object
 * behind an opaque type (rlock.h names no hiredis type). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- replies ----------------------------------------------------------- */

static const redisReply *rr(const rlock_reply *r)
{
    return (const redisReply *)r;
}

RLOCK_API rlock_reply_type rlock_reply_type_of(const rlock_reply *r)
{
    if (!r) {
        return RLOCK_REPLY_NIL;
    }
    switch (rr(r)->type) {
    case REDIS_REPLY_INTEGER:
        return RLOCK_REPLY_INTEGER;
    case REDIS_REPLY_STRING:
        return RLOCK_REPLY_STRING;
    case REDIS_REPLY_STATUS:
        return RLOCK_REPLY_STATUS;
    case REDIS_REPLY_ARRAY:
        return RLOCK_REPLY_ARRAY;
    case REDIS_REPLY_ERROR:
        return RLOCK_REPLY_ERROR;
    default:
        return RLOCK_REPLY_NIL;
    }
}

RLOCK_API int64_t rlock_reply_integer(const rlock_reply *r)
{
    return r && rr(r)->type == REDIS_REPLY_INTEGER ? (int64_t)rr(r)->integer : 0;
}

RLOCK_API const char *rlock_reply_string(const rlock_reply *r, size_t *len)
{
    int t = r ? rr(r)->type : REDIS_REPLY_NIL;
    if (t != REDIS_REPLY_STRING && t != REDIS_REPLY_STATUS && t != REDIS_REPLY_ERROR) {
        if (len) {
            *len = 0;
        }
        return NULL;
    }
    if (len) {
        *len = rr(r)->len;
    }
    return rr(r)->str;
}

RLOCK_API size_t rlock_reply_elements(const rlock_reply *r)
{
    return r && rr(r)->type == REDIS_REPLY_ARRAY ? rr(r)->elements : 0;
}

RLOCK_API const rlock_reply *rlock_reply_element(const rlock_reply *r, size_t i)
{
    if (!r || rr(r)->type != REDIS_REPLY_ARRAY || i >= rr(r)->elements) {
        return NULL;
    }
    return (const rlock_reply *)rr(r)->element[i];
}

RLOCK_API void rlock_reply_free(rlock_reply *r)
{
    if (r) {
        freeReplyObject((redisReply *)r);
    }
}

/* ---- the shared steps ---------------------------------------------------- */

/* What the calling thread's registry record says when Redis found no
 * field of it: as rlock_unlock() names that answer. A hold the registry
 * still counts is marked lost (no longer renewed; each level unwinds with
 * RLOCK_ELOST from rlock_unlock()). */
static rlock_status not_held(rlock *l, uint64_t tid, const rlock__hold_view *v)
{
    if (v->count > 0 && !v->lost) {
        rlock__hold_mark_lost(l->c, l->key, l->keylen, tid);
    }
    if (v->count > 0 || v->lost || v->lost_levels > 0) {
        return rlock__fail(RLOCK_ELOST, "this thread's hold of the lock was lost: nothing written");
    }
    return rlock__fail(RLOCK_ENOTOWNER, "the calling thread does not hold the lock: nothing "
                                        "written");
}

/* Settles what earlier calls of this thread on l left in doubt (an
 * acquire that may have run, an unanswered unlock), so that the registry
 * and Redis agree on its holds, then copies its record. */
static rlock_status prepare(rlock *l, uint64_t tid, rlock__hold_view *v, int64_t deadline_ms)
{
    rlock_status st = rlock__settle(l, tid, true, deadline_ms);
    if (st != RLOCK_OK) {
        rlock__hold_tidy(l->c, l->key, l->keylen, tid);
        return st;
    }
    rlock__hold_view_of(l->c, l->key, l->keylen, tid, v);
    return RLOCK_OK;
}

/* Whether r is {code, ...} with an integer code. */
static bool coded(const redisReply *r, long long *code)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
        return false;
    }
    *code = r->element[0]->integer;
    return true;
}

/* ---- guarded commands ---------------------------------------------------- */

RLOCK_API rlock_status rlock_guarded(rlock *l, int argc, const char *const *argv,
                                     const size_t *argvlen, rlock_reply **reply)
{
    bool ok = l && argv && argc >= 1 && argc <= RLOCK_GUARDED_ARGS_MAX;
    for (int i = 0; ok && i < argc; i++) {
        ok = argv[i] != NULL;
    }
    if (!ok) {
        rlock__error_clear();
        return rlock__fail(RLOCK_EINVAL, "NULL argument, or argc not 1..%d",
                           RLOCK_GUARDED_ARGS_MAX);
    }
    rlock_status st = rlock__enter(l->c);
    if (st != RLOCK_OK) {
        return st;
    }
    uint64_t tid = rlock_thread_id();
    int64_t deadline = rlock__now_ms() + l->c->cfg.command_timeout_ms;
    rlock__hold_view v;
    const char **args = NULL;
    size_t *lens = NULL;
    if ((st = prepare(l, tid, &v, deadline)) != RLOCK_OK) {
        goto out;
    }
    int n = argc + 2;
    args = malloc((size_t)n * sizeof *args);
    lens = malloc((size_t)n * sizeof *lens);
    if (!args || !lens) {
        st = rlock__fail(RLOCK_ENOMEM, "out of memory for a command");
        goto out;
    }
    char field[RLOCK__OWNER_MAX];
    rlock__owner_field(l, tid, field);
    args[0] = l->name;
    lens[0] = l->namelen;
    args[1] = field;
    lens[1] = strlen(field);
    for (int i = 0; i < argc; i++) {
        args[2 + i] = argv[i];
        lens[2 + i] = argvlen ? argvlen[i] : strlen(argv[i]);
    }
    rlock__call call = {l->name, l->namelen, &rlock__script_guarded, 1, n, args, lens};
    redisReply *r = NULL;
    /* Not sent again without an answer: the command may have run, and
     * only the caller knows whether running it twice is harmless. */
    st = rlock__run(l->c, &call, &r, rlock__now_ms() + l->c->cfg.command_timeout_ms);
    if (st != RLOCK_OK) {
        goto out;
    }
    long long code = -1;
    if (r->type == REDIS_REPLY_ERROR) {
        st = rlock__error_reply(r); /* the lock's key of another type: EKIND */
    } else if (!coded(r, &code) || (code == 0) != (r->elements == 1) || code < 0 || code > 2 ||
               (code == 2 && r->element[1]->type != REDIS_REPLY_ERROR)) {
        st = rlock__fail(RLOCK_EPROTO, "unexpected reply to a guarded command");
    } else if (code == 0) {
        st = not_held(l, tid, &v);
    } else if (code == 2) {
        st = rlock__error_reply(r->element[1]);
    } else if (reply) {
        /* The command's reply is the caller's: detached from the array
         * (freeReplyObject() skips a NULL element). */
        *reply = (rlock_reply *)r->element[1];
        r->element[1] = NULL;
    }
    freeReplyObject(r);
out:
    free(args);
    free(lens);
    rlock__leave(l->c);
    return st;
}

/* ---- fenced writes ------------------------------------------------------- */

static rlock_status fenced_write(rlock *l, const char *key, const char *hfield, const void *value,
                                 size_t len)
{
    rlock_status st = rlock__enter(l->c);
    if (st != RLOCK_OK) {
        return st;
    }
    uint64_t tid = rlock_thread_id();
    int64_t deadline = rlock__now_ms() + l->c->cfg.command_timeout_ms;
    rlock__hold_view v;
    char *rec = NULL, *kfield = NULL;
    if ((st = prepare(l, tid, &v, deadline)) != RLOCK_OK) {
        goto out;
    }
    if (v.count == 0 || v.token < 1) {
        /* No hold, so no token to write with: Redis is not asked. */
        st = not_held(l, tid, &v);
        goto out;
    }
    size_t reclen, keylen = strlen(key);
    rec = rlock__prefixed("rlock_fence", l->name, l->namelen, "", &reclen);
    kfield = malloc(keylen + 3);
    if (!rec || !kfield) {
        st = rlock__fail(RLOCK_ENOMEM, "out of memory for a fenced write");
        goto out;
    }
    memcpy(kfield, "k:", 2);
    memcpy(kfield + 2, key, keylen + 1);
    char field[RLOCK__OWNER_MAX], token[24];
    rlock__owner_field(l, tid, field);
    size_t token_n = rlock__fmt_i64(token, v.token);
    const char *args[10] = {l->name, rec, key, field, token, kfield, hfield ? "HSET" : "SET", key};
    size_t lens[10] = {l->namelen, reclen, keylen, strlen(field), token_n, keylen + 2,
                       hfield ? 4 : 3, keylen};
    int n = 8;
    if (hfield) {
        args[n] = hfield;
        lens[n++] = strlen(hfield);
    }
    args[n] = len ? value : "";
    lens[n++] = len;
    rlock__call call = {l->name, l->namelen, &rlock__script_fenced_write, 3, n, args, lens};
    redisReply *r = NULL;
    st = rlock__run(l->c, &call, &r, rlock__now_ms() + l->c->cfg.command_timeout_ms);
    if (st != RLOCK_OK) {
        goto out;
    }
    long long code = -1;
    if (r->type == REDIS_REPLY_ERROR) {
        st = rlock__error_reply(r);
    } else if (!coded(r, &code) || (code == 0) != (r->elements == 1) || code < 0 || code > 3 ||
               (code == 2 && r->element[1]->type != REDIS_REPLY_INTEGER) ||
               (code == 3 && r->element[1]->type != REDIS_REPLY_ERROR)) {
        st = rlock__fail(RLOCK_EPROTO, "unexpected reply to a fenced write");
    } else if (code == 0) {
        st = not_held(l, tid, &v);
    } else if (code == 2) {
        st = rlock__fail(RLOCK_ESTALE, "token %lld has written the key, this thread's is %lld: "
                                       "nothing written",
                         r->element[1]->integer, (long long)v.token);
    } else if (code == 3) {
        st = rlock__error_reply(r->element[1]);
    }
    freeReplyObject(r);
out:
    free(rec);
    free(kfield);
    rlock__leave(l->c);
    return st;
}

static bool fenced_args_ok(const rlock *l, const char *key, const void *value, size_t len)
{
    return l && key && (value || len == 0) && l->kind == &rlock__kind_fenced;
}

static rlock_status fenced_bad_args(const rlock *l)
{
    rlock__error_clear();
    return rlock__fail(RLOCK_EINVAL, l && l->kind != &rlock__kind_fenced
                                         ? "not a fenced lock"
                                         : "NULL argument");
}

RLOCK_API rlock_status rlock_fenced_set(rlock *l, const char *key, const void *value, size_t len)
{
    if (!fenced_args_ok(l, key, value, len)) {
        return fenced_bad_args(l);
    }
    return fenced_write(l, key, NULL, value, len);
}

RLOCK_API rlock_status rlock_fenced_hset(rlock *l, const char *key, const char *field,
                                         const void *value, size_t len)
{
    if (!fenced_args_ok(l, key, value, len) || !field) {
        return fenced_bad_args(l);
    }
    return fenced_write(l, key, field, value, len);
}
