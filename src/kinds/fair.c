/* The fair lock (Redisson getFairLock, spec 3) and its non-reentrant form
 * (3.8): the reentrant lock's hash at the name, plus Redis's queue of
 * waiting owners (redisson_lock_queue:{N}, a list) and their deadlines
 * (redisson_lock_timeout:{N}, a sorted set of wall-clock ms). The queue's
 * head is the only owner that may take a free lock, and a release wakes
 * only it, on its own channel (<lock channel>:<owner>): the engine waits
 * with RLOCK__WAIT_OWN. A waiter that stops waiting leaves the queue
 * (give_up). Renewal, the hold count and the holder's lease are the
 * reentrant lock's: the hash is the same. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The queue and deadline keys of l (malloc'd; false on ENOMEM). */
typedef struct fair_keys {
    char *q, *t;
    size_t qlen, tlen;
} fair_keys;

static bool keys_of(const rlock *l, fair_keys *k)
{
    k->q = rlock__prefixed("redisson_lock_queue", l->name, l->namelen, "", &k->qlen);
    k->t = rlock__prefixed("redisson_lock_timeout", l->name, l->namelen, "", &k->tlen);
    if (!k->q || !k->t) {
        free(k->q);
        free(k->t);
        return false;
    }
    return true;
}

static void keys_free(fair_keys *k)
{
    free(k->q);
    free(k->t);
}

/* The waiter's slot in the queue: its own wait, or Redisson's
 * fairLockWaitTimeout when it gives none (forever, or no wait at all). */
static int64_t slot_of(const rlock *l, int64_t wait_ms)
{
    return wait_ms > 0 ? wait_ms : l->c->cfg.fair_wait_timeout_ms;
}

static rlock_status attempt_as(rlock *l, const char *owner, int64_t lease_ms, int64_t held,
                               int64_t wait_ms, const char *rid, bool resend, rlock__attempt *out,
                               int64_t deadline_ms, bool reentrant)
{
    fair_keys k;
    if (!keys_of(l, &k)) {
        return rlock__fail(RLOCK_ENOMEM, "out of memory for the queue's names");
    }
    size_t latchlen;
    char *latch = rlock__latch_key(l->acq_latch_prefix, l->acq_latch_prefix_len, rid, &latchlen);
    if (!latch) {
        keys_free(&k);
        return rlock__fail(RLOCK_ENOMEM, "out of memory for a latch key");
    }
    char lease[24], have[24], latch_ttl[24], slot[24], now[24];
    size_t lease_n = rlock__fmt_i64(lease, lease_ms);
    size_t have_n = rlock__fmt_i64(have, held);
    size_t ttl_n = rlock__fmt_i64(latch_ttl, rlock__acquire_latch_ttl(l->c));
    size_t slot_n = rlock__fmt_i64(slot, slot_of(l, wait_ms));
    size_t now_n = rlock__fmt_i64(now, rlock__wall_ms());
    /* wait_ms 0 (try once): Redisson's tryLock() variant, which never
     * queues. */
    const char *args[13] = {l->name,
                            k.q,
                            k.t,
                            latch,
                            lease,
                            owner,
                            have,
                            latch_ttl,
                            resend ? "1" : "0",
                            slot,
                            now,
                            wait_ms != 0 ? "1" : "0",
                            reentrant ? "1" : "0"};
    size_t lens[13] = {l->namelen, k.qlen, k.tlen, latchlen, lease_n, strlen(owner), have_n, ttl_n,
                       1,          slot_n, now_n,  1,        1};
    rlock__call call = {l->name, l->namelen, &rlock__script_fair_acquire, 4, 13, args, lens};
    redisReply *r = NULL;
    rlock_status st = rlock__run(l->c, &call, &r, deadline_ms);
    free(latch);
    keys_free(&k);
    if (st == RLOCK_OK) {
        st = rlock__parse_attempt(r, out);
        freeReplyObject(r);
    }
    return st;
}

static rlock_status attempt(rlock *l, const char *owner, int64_t lease_ms, int64_t held,
                            int64_t wait_ms, const char *rid, bool resend, rlock__attempt *out,
                            int64_t deadline_ms)
{
    return attempt_as(l, owner, lease_ms, held, wait_ms, rid, resend, out, deadline_ms,
                      !l->kind->no_reentry);
}

static rlock_status give_up(rlock *l, const char *owner, int64_t wait_ms, int64_t deadline_ms)
{
    if (wait_ms == 0) {
        return RLOCK_OK; /* the attempt that does not wait never queues */
    }
    fair_keys k;
    if (!keys_of(l, &k)) {
        return rlock__fail(RLOCK_ENOMEM, "out of memory for the queue's names");
    }
    char slot[24], now[24];
    size_t slot_n = rlock__fmt_i64(slot, slot_of(l, wait_ms));
    size_t now_n = rlock__fmt_i64(now, rlock__wall_ms());
    const char *args[9] = {l->name, k.q, k.t, l->channel, owner, slot, now, "0", "publish"};
    size_t lens[9] = {l->namelen, k.qlen, k.tlen, l->chanlen, strlen(owner), slot_n, now_n, 1, 7};
    rlock__call call = {l->name, l->namelen, &rlock__script_fair_give_up, 4, 9, args, lens};
    int64_t v;
    rlock_status st = rlock__run_int(l->c, &call, &v, deadline_ms);
    keys_free(&k);
    return st;
}

static rlock_status abandon(rlock *l, const char *owner, const char *rid, int64_t held,
                            int64_t lease_ms, int *out, int64_t deadline_ms)
{
    fair_keys k;
    if (!keys_of(l, &k)) {
        return rlock__fail(RLOCK_ENOMEM, "out of memory for the queue's names");
    }
    size_t latchlen;
    char *latch = rlock__latch_key(l->acq_latch_prefix, l->acq_latch_prefix_len, rid, &latchlen);
    if (!latch) {
        keys_free(&k);
        return rlock__fail(RLOCK_ENOMEM, "out of memory for a latch key");
    }
    char lease[24], latch_ttl[24], have[24], now[24];
    size_t lease_n = rlock__fmt_i64(lease, lease_ms);
    size_t ttl_n = rlock__fmt_i64(latch_ttl, rlock__acquire_latch_ttl(l->c));
    size_t have_n = rlock__fmt_i64(have, held);
    size_t now_n = rlock__fmt_i64(now, rlock__wall_ms());
    const char *args[12] = {l->name,   k.q,   k.t, l->channel, latch, owner,
                            latch_ttl, lease, "0", "publish",  have,  now};
    size_t lens[12] = {l->namelen, k.qlen,  k.tlen, l->chanlen, latchlen, strlen(owner),
                       ttl_n,      lease_n, 1,      7,          have_n,   now_n};
    rlock__call call = {l->name, l->namelen, &rlock__script_fair_abandon, 5, 12, args, lens};
    int64_t v = -1;
    rlock_status st = rlock__run_int(l->c, &call, &v, deadline_ms);
    free(latch);
    keys_free(&k);
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
    fair_keys k;
    if (!keys_of(l, &k)) {
        return rlock__fail(RLOCK_ENOMEM, "out of memory for the queue's names");
    }
    size_t latchlen;
    char *latch = rlock__latch_key(l->latch_prefix, l->latch_prefix_len, rid, &latchlen);
    if (!latch) {
        keys_free(&k);
        return rlock__fail(RLOCK_ENOMEM, "out of memory for a latch key");
    }
    char lease[24], latch_ttl[24], now[24];
    size_t lease_n = rlock__fmt_i64(lease, lease_ms);
    size_t ttl_n = rlock__fmt_i64(latch_ttl, RLOCK__LATCH_TTL_MS);
    size_t now_n = rlock__fmt_i64(now, rlock__wall_ms());
    const char *args[11] = {l->name, k.q,   k.t, l->channel, latch,    "0",
                            lease,   owner, now, "publish",  latch_ttl};
    size_t lens[11] = {l->namelen, k.qlen,        k.tlen, l->chanlen, latchlen, 1,
                       lease_n,    strlen(owner), now_n,  7,          ttl_n};
    rlock__call call = {l->name, l->namelen, &rlock__script_fair_unlock, 5, 11, args, lens};
    redisReply *r = NULL;
    rlock_status st = rlock__run(l->c, &call, &r, deadline_ms);
    free(latch);
    keys_free(&k);
    if (st == RLOCK_OK) {
        st = rlock__parse_release(r, out);
        freeReplyObject(r);
    }
    return st;
}

static rlock_status force_release(rlock *l, bool *was_locked, int64_t deadline_ms)
{
    fair_keys k;
    if (!keys_of(l, &k)) {
        return rlock__fail(RLOCK_ENOMEM, "out of memory for the queue's names");
    }
    char now[24];
    size_t now_n = rlock__fmt_i64(now, rlock__wall_ms());
    const char *args[7] = {l->name, k.q, k.t, l->channel, "0", now, "publish"};
    size_t lens[7] = {l->namelen, k.qlen, k.tlen, l->chanlen, 1, now_n, 7};
    rlock__call call = {l->name, l->namelen, &rlock__script_fair_force_unlock, 4, 7, args, lens};
    int64_t v;
    rlock_status st = rlock__run_int(l->c, &call, &v, deadline_ms);
    keys_free(&k);
    if (st == RLOCK_OK) {
        st = rlock__force_reply(l, v, was_locked);
    }
    return st;
}

const rlock__kind rlock__kind_fair = {
    .name = "fair",
    .chan_prefix = "redisson_lock__channel",
    .wait = RLOCK__WAIT_OWN,
    .attempt = attempt,
    .give_up = give_up,
    .abandon = abandon,
    .release = release,
    .force_release = force_release,
    .count = rlock__reentrant_count,
    .holder_ttl = rlock__reentrant_holder_ttl,
    .renew = &rlock__script_renew,
    .wake = RLOCK__WAKE_ONE,
};

const rlock__kind rlock__kind_fair_nonreentrant = {
    .name = "fair-nonreentrant",
    .chan_prefix = "redisson_lock__channel",
    .wait = RLOCK__WAIT_OWN,
    .no_reentry = true,
    .attempt = attempt,
    .give_up = give_up,
    .abandon = abandon,
    .release = release,
    .force_release = force_release,
    .count = rlock__reentrant_count,
    .holder_ttl = rlock__reentrant_holder_ttl,
    .renew = &rlock__script_renew,
    .wake = RLOCK__WAKE_ONE,
};

RLOCK_API rlock_status rlock_new_fair(rlock_client *c, const char *name, rlock **out)
{
    return rlock__handle_new(c, name, &rlock__kind_fair, out);
}

RLOCK_API rlock_status rlock_new_fair_nonreentrant(rlock_client *c, const char *name, rlock **out)
{
    return rlock__handle_new(c, name, &rlock__kind_fair_nonreentrant, out);
}
