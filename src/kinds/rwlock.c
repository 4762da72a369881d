/* The read/write lock (Redisson RReadWriteLock, spec 4): one hash at the
 * lock name for both halves, field 'mode' ('read' or 'write'), a field per
 * reader "<uuid>:<tid>" and per writer "<uuid>:<tid>:write" with its hold
 * count, and a string key per read hold,
 * <tag>:<uuid>:<tid>:rwlock_timeout:<k> (<tag> the name, braced unless it
 * has a '{'), whose own TTL lets the name's TTL follow the longest-lived
 * reader. Both halves publish on redisson_rwlock:{name}: "0" from the read
 * unlock (one local waiter retries: a writer), "1" from the write unlock
 * (every local waiter: the readers).
 *
 * The engine hands every operation the owner "<uuid>:<tid>"; the write
 * half's scripts append ":write" themselves. Its holds are kept in the
 * registry under the tag "write", apart from the same thread's read holds
 * of the name. Readers share: the read half's newcomers never queue behind
 * local waiters without an attempt (the kind's "shared"), so a reader is
 * let in beside the readers that hold the lock while a writer waits, as
 * in Redisson. A thread that holds the read lock and asks for the write
 * lock gets RLOCK_EDEADLK at once (Redisson's would wait on itself
 * forever); the downgrade, write then read, stays allowed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Generated from lua/ at build time (scripts/embed-lua.sh). */
extern const rlock__script rlock__script_read_acquire;
extern const rlock__script rlock__script_read_abandon;
extern const rlock__script rlock__script_read_unlock;
extern const rlock__script rlock__script_read_renew;
extern const rlock__script rlock__script_write_acquire;
extern const rlock__script rlock__script_write_abandon;
extern const rlock__script rlock__script_write_unlock;
extern const rlock__script rlock__script_write_renew;
extern const rlock__script rlock__script_rw_force_unlock;
extern const rlock__script rlock__script_rw_locked;

static bool is_write(const rlock *l)
{
    return l->kind == &rlock__kind_write;
}

static rlock_status attempt(rlock *l, const char *owner, int64_t lease_ms, int64_t held,
                            int64_t wait_ms, const char *rid, bool resend, rlock__attempt *out,
                            int64_t deadline_ms)
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
    const char *args[7] = {l->name, latch, lease, owner, have, latch_ttl, resend ? "1" : "0"};
    size_t lens[7] = {l->namelen, latchlen, lease_n, strlen(owner), have_n, ttl_n, 1};
    rlock__call call = {l->name,
                        l->namelen,
                        is_write(l) ? &rlock__script_write_acquire : &rlock__script_read_acquire,
                        2,
                        7,
                        args,
                        lens};
    redisReply *r = NULL;
    rlock_status st = rlock__run(l->c, &call, &r, deadline_ms);
    free(latch);
    if (st == RLOCK_OK) {
        st = rlock__parse_attempt(r, out);
        freeReplyObject(r);
    }
    return st;
}

static rlock_status abandon(rlock *l, const char *owner, const char *rid, int64_t held,
                            int64_t lease_ms, int *out, int64_t deadline_ms)
{
    size_t latchlen;
    char *latch = rlock__latch_key(l->acq_latch_prefix, l->acq_latch_prefix_len, rid, &latchlen);
    if (!latch) {
        return rlock__fail(RLOCK_ENOMEM, "out of memory for a latch key");
    }
    char lease[24], latch_ttl[24], have[24];
    size_t lease_n = rlock__fmt_i64(lease, lease_ms);
    size_t ttl_n = rlock__fmt_i64(latch_ttl, rlock__acquire_latch_ttl(l->c));
    size_t have_n = rlock__fmt_i64(have, held);
    const char *msg = is_write(l) ? "1" : "0";
    const char *args[9] = {l->name, l->channel, latch, owner, latch_ttl,
                           lease,   msg,        "publish", have};
    size_t lens[9] = {l->namelen, l->chanlen, latchlen, strlen(owner), ttl_n,
                      lease_n,    1,          7,        have_n};
    rlock__call call = {l->name,
                        l->namelen,
                        is_write(l) ? &rlock__script_write_abandon : &rlock__script_read_abandon,
                        3,
                        9,
                        args,
                        lens};
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

static rlock_status release(rlock *l, const char *owner, const char *rid, int64_t lease_ms,
                            rlock__released *out, int64_t deadline_ms)
{
    size_t latchlen;
    char *latch = rlock__latch_key(l->latch_prefix, l->latch_prefix_len, rid, &latchlen);
    if (!latch) {
        return rlock__fail(RLOCK_ENOMEM, "out of memory for a latch key");
    }
    char lease[24], latch_ttl[24];
    size_t lease_n = rlock__fmt_i64(lease, lease_ms);
    size_t ttl_n = rlock__fmt_i64(latch_ttl, RLOCK__LATCH_TTL_MS);
    const char *args[7] = {l->name, l->channel, latch, lease, owner, "publish", latch_ttl};
    size_t lens[7] = {l->namelen, l->chanlen, latchlen, lease_n, strlen(owner), 7, ttl_n};
    rlock__call call = {l->name,
                        l->namelen,
                        is_write(l) ? &rlock__script_write_unlock : &rlock__script_read_unlock,
                        3,
                        7,
                        args,
                        lens};
    redisReply *r = NULL;
    rlock_status st = rlock__run(l->c, &call, &r, deadline_ms);
    free(latch);
    if (st == RLOCK_OK) {
        st = rlock__parse_release(r, out);
        freeReplyObject(r);
    }
    return st;
}

static rlock_status force_release(rlock *l, bool *was_locked, int64_t deadline_ms)
{
    const char *mode = is_write(l) ? "write" : "read";
    const char *args[5] = {l->name, l->channel, mode, is_write(l) ? "1" : "0", "publish"};
    size_t lens[5] = {l->namelen, l->chanlen, strlen(mode), 1, 7};
    rlock__call call = {l->name, l->namelen, &rlock__script_rw_force_unlock, 2, 5, args, lens};
    int64_t v;
    rlock_status st = rlock__run_int(l->c, &call, &v, deadline_ms);
    if (st == RLOCK_OK) {
        *was_locked = v == 1;
    }
    return st;
}

static rlock_status count(rlock *l, const char *owner, int64_t *out, int64_t deadline_ms)
{
    char field[RLOCK__OWNER_MAX + 8];
    size_t n = strlen(owner);
    memcpy(field, owner, n + 1);
    if (is_write(l)) {
        memcpy(field + n, ":write", 7);
        n += 6;
    }
    const char *args[3] = {"HGET", l->name, field};
    size_t lens[3] = {4, l->namelen, n};
    rlock__call call = {l->name, l->namelen, NULL, 0, 3, args, lens};
    return rlock__run_int(l->c, &call, out, deadline_ms);
}

static rlock_status holder_ttl(rlock *l, int64_t *ttl, int64_t deadline_ms)
{
    const char *half = is_write(l) ? "write" : "read";
    const char *args[2] = {l->name, half};
    size_t lens[2] = {l->namelen, strlen(half)};
    rlock__call call = {l->name, l->namelen, &rlock__script_rw_locked, 1, 2, args, lens};
    return rlock__run_int(l->c, &call, ttl, deadline_ms);
}

static rlock_status is_locked(rlock *l, bool *locked, int64_t deadline_ms)
{
    int64_t ttl;
    rlock_status st = holder_ttl(l, &ttl, deadline_ms);
    if (st == RLOCK_OK) {
        *locked = ttl != -2;
    }
    return st;
}

const rlock__kind rlock__kind_read = {
    .name = "read",
    .sibling = &rlock__kind_write,
    .layout = RLOCK__LAYOUT_RW,
    .chan_prefix = "redisson_rwlock",
    .wait = RLOCK__WAIT_SHARED,
    .shared = true,
    .reentry = RLOCK__REENTRY_KEEPS,
    .attempt = attempt,
    .abandon = abandon,
    .release = release,
    .force_release = force_release,
    .count = count,
    .holder_ttl = holder_ttl,
    .is_locked = is_locked,
    .renew = &rlock__script_read_renew,
    .wake = RLOCK__WAKE_ONE,
};

const rlock__kind rlock__kind_write = {
    .name = "write",
    .sibling = &rlock__kind_read,
    .layout = RLOCK__LAYOUT_RW,
    .chan_prefix = "redisson_rwlock",
    .key_tag = "write",
    .wait = RLOCK__WAIT_SHARED,
    .reentry = RLOCK__REENTRY_ADDS,
    .attempt = attempt,
    .abandon = abandon,
    .release = release,
    .force_release = force_release,
    .count = count,
    .holder_ttl = holder_ttl,
    .is_locked = is_locked,
    .renew = &rlock__script_write_renew,
    .wake = RLOCK__WAKE_ONE,
};

RLOCK_API rlock_status rlock_new_read(rlock_client *c, const char *name, rlock **out)
{
    return rlock__handle_new(c, name, &rlock__kind_read, out);
}

RLOCK_API rlock_status rlock_new_write(rlock_client *c, const char *name, rlock **out)
{
    return rlock__handle_new(c, name, &rlock__kind_write, out);
}
