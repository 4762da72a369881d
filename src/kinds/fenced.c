/* The fenced lock (Redisson RFencedLock, spec 5): the reentrant lock's
 * hash, channel, unlock, renewal and force unlock (reentrant.c's, shared
 * through kind.h), and an attempt that also hands out a token from
 * redisson_lock_token:{name} (lua/fenced_acquire.lua). The engine keeps
 * each hold's token in the registry; rlock_fence_token() reads it there.
 * rlock's fence record, rlock_fence:{name}, keeps the largest token handed
 * out, so that a lost token key never makes tokens go back, and the tokens
 * of fenced writes (src/guard.c). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The token key (KEYS[3]) and the fence record (KEYS[4]) of l, malloc'd;
 * false on ENOMEM (both freed). */
static bool fence_keys(const rlock *l, char **tk, size_t *tklen, char **rec, size_t *reclen)
{
    *tk = rlock__prefixed("redisson_lock_token", l->name, l->namelen, "", tklen);
    *rec = rlock__prefixed("rlock_fence", l->name, l->namelen, "", reclen);
    if (!*tk || !*rec) {
        free(*tk);
        free(*rec);
        return false;
    }
    return true;
}

static rlock_status attempt(rlock *l, const char *owner, int64_t lease_ms, int64_t held,
                            int64_t wait_ms, const char *rid, bool resend, rlock__attempt *out,
                            int64_t deadline_ms)
{
    (void)wait_ms;
    size_t latchlen, tklen, reclen;
    char *tk, *rec;
    if (!fence_keys(l, &tk, &tklen, &rec, &reclen)) {
        return rlock__fail(RLOCK_ENOMEM, "out of memory for the token key");
    }
    char *latch = rlock__latch_key(l->acq_latch_prefix, l->acq_latch_prefix_len, rid, &latchlen);
    if (!latch) {
        free(tk);
        free(rec);
        return rlock__fail(RLOCK_ENOMEM, "out of memory for a latch key");
    }
    char lease[24], have[24], latch_ttl[24];
    size_t lease_n = rlock__fmt_i64(lease, lease_ms);
    size_t have_n = rlock__fmt_i64(have, held);
    size_t ttl_n = rlock__fmt_i64(latch_ttl, rlock__acquire_latch_ttl(l->c));
    const char *args[9] = {l->name, latch, tk,        rec, lease, owner, have,
                           latch_ttl, resend ? "1" : "0"};
    size_t lens[9] = {l->namelen, latchlen, tklen, reclen, lease_n, strlen(owner), have_n,
                      ttl_n,      1};
    rlock__call call = {l->name, l->namelen, &rlock__script_fenced_acquire, 4, 9, args, lens};
    redisReply *r = NULL;
    rlock_status st = rlock__run(l->c, &call, &r, deadline_ms);
    free(latch);
    free(tk);
    free(rec);
    if (st == RLOCK_OK) {
        st = rlock__parse_attempt(r, out);
        if (st == RLOCK_OK && out->what == RLOCK__TAKEN && out->token < 1) {
            /* Every acquisition of a fenced lock carries a token (>= 1). */
            st = rlock__fail(RLOCK_EPROTO, "a fenced acquire answered without a token");
        }
        freeReplyObject(r);
    }
    return st;
}

const rlock__kind rlock__kind_fenced = {
    .name = "fenced",
    .chan_prefix = "redisson_lock__channel",
    .wait = RLOCK__WAIT_SHARED,
    .attempt = attempt,
    .abandon = rlock__reentrant_abandon,
    .release = rlock__reentrant_release,
    .force_release = rlock__reentrant_force_release,
    .count = rlock__reentrant_count,
    .holder_ttl = rlock__reentrant_holder_ttl,
    .renew = &rlock__script_renew,
    .wake = RLOCK__WAKE_ONE,
};

RLOCK_API rlock_status rlock_new_fenced(rlock_client *c, const char *name, rlock **out)
{
    return rlock__handle_new(c, name, &rlock__kind_fenced, out);
}

RLOCK_API rlock_status rlock_fence_token(rlock *l, int64_t *token)
{
    if (!l || !token || l->kind != &rlock__kind_fenced) {
        rlock__error_clear();
        return rlock__fail(RLOCK_EINVAL, l && token ? "not a fenced lock" : "NULL argument");
    }
    rlock_status st = rlock__enter(l->c);
    if (st != RLOCK_OK) {
        return st;
    }
    rlock__hold_view v;
    rlock__hold_view_of(l->c, l->key, l->keylen, rlock_thread_id(), &v);
    if (v.count > 0 && v.lost) {
        st = rlock__fail(RLOCK_ELOST, "this thread's hold of the lock was lost");
    } else if (v.count > 0 && v.token >= 1) {
        *token = v.token;
    } else if (v.lost_levels > 0) {
        st = rlock__fail(RLOCK_ELOST, "this thread's hold of the lock was lost");
    } else {
        st = rlock__fail(RLOCK_ENOTOWNER, "the calling thread does not hold the lock");
    }
    rlock__leave(l->c);
    return st;
}

RLOCK_API rlock_status rlock_fence_token_latest(rlock *l, int64_t *token)
{
    if (!l || !token || l->kind != &rlock__kind_fenced) {
        rlock__error_clear();
        return rlock__fail(RLOCK_EINVAL, l && token ? "not a fenced lock" : "NULL argument");
    }
    rlock_status st = rlock__enter(l->c);
    if (st != RLOCK_OK) {
        return st;
    }
    size_t tklen;
    char *tk = rlock__prefixed("redisson_lock_token", l->name, l->namelen, "", &tklen);
    if (!tk) {
        rlock__leave(l->c);
        return rlock__fail(RLOCK_ENOMEM, "out of memory for the token key");
    }
    const char *args[2] = {"GET", tk};
    size_t lens[2] = {3, tklen};
    rlock__call call = {l->name, l->namelen, NULL, 0, 2, args, lens};
    int64_t v = 0;
    /* A missing key is 0, as Redisson's getToken() answers (spec 11, 26);
     * the value is a decimal string, read as a hold count is. */
    st = rlock__run_int(l->c, &call, &v, rlock__now_ms() + l->c->cfg.command_timeout_ms);
    free(tk);
    if (st == RLOCK_OK) {
        *token = v;
    }
    rlock__leave(l->c);
    return st;
}
