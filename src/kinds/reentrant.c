/* The reentrant lock (Redisson RLock, spec 2): a hash at the lock name of
 * owner -> hold count, changed only by the scripts in lua/. This file says
 * how to run them and what their replies mean; the engine (sync/) decides
 * when. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- reply parsers (fuzzed by fuzz/fuzz_replies.c) -------------------- */

static rlock_status shape(const redisReply *r)
{
    if (r->type == REDIS_REPLY_ERROR) {
        return rlock__error_reply(r);
    }
    return rlock__fail(RLOCK_EPROTO, "unexpected reply of type %d", r->type);
}

rlock_status rlock__parse_attempt(const redisReply *r, rlock__attempt *out)
{
    /* {what, value} or, from a fenced kind's acquisition, {1, n, token}. */
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 || r->elements > 3 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_INTEGER ||
        (r->elements == 3 && r->element[2]->type != REDIS_REPLY_INTEGER)) {
        return shape(r);
    }
    long long kind = r->element[0]->integer, v = r->element[1]->integer;
    long long token = r->elements == 3 ? r->element[2]->integer : -1;
    if (kind == 1 && v >= 1 && (r->elements == 2 || token >= 0)) {
        *out = (rlock__attempt){RLOCK__TAKEN, v, -1, token};
    } else if (r->elements == 3) {
        return rlock__fail(RLOCK_EPROTO, "unexpected acquire reply {%lld, %lld, %lld}", kind, v,
                           token);
    } else if (kind == 0 && v >= -1) {
        /* -2 (no key) cannot come from a script that just saw the key. */
        *out = (rlock__attempt){RLOCK__HELD, 0, v, -1};
    } else if (kind == 2) {
        *out = (rlock__attempt){RLOCK__GONE, 0, -1, -1};
    } else if (kind == 3) {
        *out = (rlock__attempt){RLOCK__SPENT, 0, -1, -1};
    } else if (kind == 4) {
        *out = (rlock__attempt){RLOCK__SELF, 0, -1, -1};
    } else if (kind == 5) {
        *out = (rlock__attempt){RLOCK__FOREIGN, 0, -1, -1};
    } else {
        return rlock__fail(RLOCK_EPROTO, "unexpected acquire reply {%lld, %lld}", kind, v);
    }
    return RLOCK_OK;
}

rlock_status rlock__parse_release(const redisReply *r, rlock__released *out)
{
    if (r->type == REDIS_REPLY_NIL) {
        *out = RLOCK__NOT_HELD;
    } else if (r->type == REDIS_REPLY_INTEGER && (r->integer == 0 || r->integer == 1)) {
        *out = r->integer == 1 ? RLOCK__FREED : RLOCK__PARTIAL;
    } else {
        return shape(r);
    }
    return RLOCK_OK;
}

rlock_status rlock__parse_int(const redisReply *r, int64_t *out)
{
    if (r->type == REDIS_REPLY_INTEGER) {
        *out = r->integer;
    } else if (r->type == REDIS_REPLY_NIL) {
        *out = 0; /* HGET of a missing field: no hold */
    } else if (r->type == REDIS_REPLY_STRING) {
        /* A hold count written by hand may be anything: only a whole
         * decimal number within int64 is one. Accumulated as a negative
         * number, whose range reaches INT64_MIN, and checked before each
         * step, so no value overflows. */
        bool neg = r->len > 0 && r->str[0] == '-';
        size_t i = neg ? 1 : 0;
        if (r->len == i || r->len > 19 + i) {
            return rlock__fail(RLOCK_EPROTO, "not a number: %.40s", r->str);
        }
        int64_t v = 0;
        for (size_t k = i; k < r->len; k++) {
            int d = r->str[k] - '0';
            if (d < 0 || d > 9) {
                return rlock__fail(RLOCK_EPROTO, "not a number: %.40s", r->str);
            }
            if (v < (INT64_MIN + d) / 10) {
                return rlock__fail(RLOCK_EPROTO, "hold count out of range: %.40s", r->str);
            }
            v = v * 10 - d;
        }
        if (!neg && v == INT64_MIN) {
            return rlock__fail(RLOCK_EPROTO, "hold count out of range: %.40s", r->str);
        }
        *out = neg ? v : -v;
    } else {
        return shape(r);
    }
    return RLOCK_OK;
}

/* ---- operations ------------------------------------------------------ */

/* The arguments of unlock.lua or abandon.lua (KEYS name, channel, latch,
 * then ARGV) for a kind without a channel: KEYS name, latch (the scripts
 * publish only when given a channel). The n arguments after the first
 * move down one; the call has one key and one argument fewer. */
static void drop_channel(const char **args, size_t *lens, int n, rlock__call *call)
{
    for (int i = 1; i + 1 < n; i++) {
        args[i] = args[i + 1];
        lens[i] = lens[i + 1];
    }
    call->nkeys--;
    call->nargs--;
}

rlock_status rlock__reentrant_attempt(rlock *l, const char *owner, int64_t lease_ms,
                                      int64_t held, int64_t wait_ms, const char *rid, bool resend,
                                      rlock__attempt *out, int64_t deadline_ms)
{
    (void)wait_ms;
    size_t latchlen;
    char *latch = rlock__latch_key(l->acq_latch_prefix, l->acq_latch_prefix_len, rid, &latchlen);
    if (!latch) {
        return rlock__fail(RLOCK_ENOMEM, "out of memory for a latch key");
    }
    char lease[24], have[24], latch_ttl[24];
    size_t lease_n = rlock__fmt_i64(lease, lease_ms);
    size_t have_n = rlock__fmt_i64(have, held);
    size_t ttl_n = rlock__fmt_i64(latch_ttl, rlock__acquire_latch_ttl(l->c));
    /* ARGV[6]: a kind without re-entry has its holder refused ({4,0}). */
    const char *args[8] = {l->name,   latch,     lease, owner, have, latch_ttl, resend ? "1" : "0",
                           l->kind->no_reentry ? "1" : "0"};
    size_t lens[8] = {l->namelen, latchlen, lease_n, strlen(owner), have_n, ttl_n, 1, 1};
    rlock__call call = {l->name, l->namelen, &rlock__script_acquire, 2, 8, args, lens};
    redisReply *r = NULL;
    rlock_status st = rlock__run(l->c, &call, &r, deadline_ms);
    free(latch);
    if (st == RLOCK_OK) {
        st = rlock__parse_attempt(r, out);
        freeReplyObject(r);
    }
    return st;
}

rlock_status rlock__reentrant_abandon(rlock *l, const char *owner, const char *rid,
                                      int64_t held, int64_t lease_ms, int *out,
                                      int64_t deadline_ms)
{
    size_t latchlen;
    char *latch = rlock__latch_key(l->acq_latch_prefix, l->acq_latch_prefix_len, rid, &latchlen);
    if (!latch) {
        return rlock__fail(RLOCK_ENOMEM, "out of memory for a latch key");
    }
    char lease[24], latch_ttl[24], have[24];
    snprintf(lease, sizeof lease, "%lld", (long long)lease_ms);
    snprintf(latch_ttl, sizeof latch_ttl, "%lld", (long long)rlock__acquire_latch_ttl(l->c));
    snprintf(have, sizeof have, "%lld", (long long)held);
    const char *args[9] = {l->name,   l->channel, latch, owner, latch_ttl,
                           lease,     "0",        "publish", have};
    size_t lens[9] = {l->namelen,    l->chanlen, latchlen, strlen(owner), strlen(latch_ttl),
                      strlen(lease), 1,          7,        strlen(have)};
    rlock__call call = {l->name, l->namelen, &rlock__script_abandon, 3, 9, args, lens};
    if (!l->channel) {
        /* A kind that publishes nothing (spin): no channel among the keys,
         * and the script gives a hold back without a message. */
        drop_channel(args, lens, call.nargs, &call);
    }
    int64_t v = -1;
    rlock_status st = rlock__run_int(l->c, &call, &v, deadline_ms);
    free(latch);
    if (st == RLOCK_OK) {
        if (v < RLOCK__TOOK_NOTHING || v > RLOCK__TOOK_LOST) {
            return rlock__fail(RLOCK_EPROTO, "unexpected abandon reply %lld", (long long)v);
        }
        *out = (int)v;
    }
    return st;
}

rlock_status rlock__reentrant_release(rlock *l, const char *owner, const char *rid,
                                      int64_t lease_ms, rlock__released *out, int64_t deadline_ms)
{
    size_t latchlen;
    char *latch = rlock__latch_key(l->latch_prefix, l->latch_prefix_len, rid, &latchlen);
    if (!latch) {
        return rlock__fail(RLOCK_ENOMEM, "out of memory for a latch key");
    }
    char lease[24], latch_ttl[24];
    size_t lease_n = rlock__fmt_i64(lease, lease_ms);
    size_t ttl_n = rlock__fmt_i64(latch_ttl, RLOCK__LATCH_TTL_MS);
    const char *args[8] = {l->name, l->channel, latch, "0", lease, owner, "publish", latch_ttl};
    size_t lens[8] = {l->namelen, l->chanlen, latchlen, 1, lease_n, strlen(owner), 7, ttl_n};
    rlock__call call = {l->name, l->namelen, &rlock__script_unlock, 3, 8, args, lens};
    if (!l->channel) {
        /* The spin lock's unlock (spec 6): KEYS = [name, latch], as
         * Redisson's, and the last hold's release publishes nothing. */
        drop_channel(args, lens, call.nargs, &call);
    }
    redisReply *r = NULL;
    rlock_status st = rlock__run(l->c, &call, &r, deadline_ms);
    free(latch);
    if (st == RLOCK_OK) {
        st = rlock__parse_release(r, out);
        freeReplyObject(r);
    }
    return st;
}

rlock_status rlock__run_int(rlock_client *c, const rlock__call *call, int64_t *out,
                           int64_t deadline_ms)
{
    redisReply *r = NULL;
    rlock_status st = rlock__run(c, call, &r, deadline_ms);
    if (st == RLOCK_OK) {
        int64_t v;
        st = rlock__parse_int(r, &v);
        if (st == RLOCK_OK) {
            *out = v;
        }
        freeReplyObject(r);
    }
    return st;
}

rlock_status rlock__force_reply(const rlock *l, int64_t v, bool *was_locked)
{
    if (v == 2) {
        return rlock__fail(RLOCK_EKIND,
                           "the name holds a read/write lock: the %s lock's force unlock leaves it "
                           "alone (force-unlock it through its read or write half)",
                           l->kind->name);
    }
    *was_locked = v == 1;
    return RLOCK_OK;
}

/* force_unlock.lua; a kind without a channel (spin) publishes nothing. */
rlock_status rlock__reentrant_force_release(rlock *l, bool *was_locked, int64_t deadline_ms)
{
    const char *args[4] = {l->name, l->channel, "0", "publish"};
    size_t lens[4] = {l->namelen, l->chanlen, 1, 7};
    bool quiet = l->kind->chan_prefix == NULL;
    rlock__call call = {
        l->name, l->namelen, &rlock__script_force_unlock, quiet ? 1 : 2, quiet ? 1 : 4, args, lens};
    int64_t v;
    rlock_status st = rlock__run_int(l->c, &call, &v, deadline_ms);
    if (st == RLOCK_OK) {
        st = rlock__force_reply(l, v, was_locked);
    }
    return st;
}

rlock_status rlock__reentrant_count(rlock *l, const char *owner, int64_t *out, int64_t deadline_ms)
{
    const char *args[3] = {"HGET", l->name, owner};
    size_t lens[3] = {4, l->namelen, strlen(owner)};
    rlock__call call = {l->name, l->namelen, NULL, 0, 3, args, lens};
    return rlock__run_int(l->c, &call, out, deadline_ms);
}

rlock_status rlock__reentrant_holder_ttl(rlock *l, int64_t *ttl, int64_t deadline_ms)
{
    const char *args[2] = {"PTTL", l->name};
    size_t lens[2] = {4, l->namelen};
    rlock__call call = {l->name, l->namelen, NULL, 0, 2, args, lens};
    return rlock__run_int(l->c, &call, ttl, deadline_ms);
}

const rlock__kind rlock__kind_reentrant = {
    .name = "reentrant",
    .chan_prefix = "redisson_lock__channel",
    .wait = RLOCK__WAIT_SHARED,
    .attempt = rlock__reentrant_attempt,
    .abandon = rlock__reentrant_abandon,
    .release = rlock__reentrant_release,
    .force_release = rlock__reentrant_force_release,
    .count = rlock__reentrant_count,
    .holder_ttl = rlock__reentrant_holder_ttl,
    .renew = &rlock__script_renew,
    .wake = RLOCK__WAKE_ONE,
};
