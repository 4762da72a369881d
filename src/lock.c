/* The reentrant lock: handles, acquire with waiting, unlock, force unlock
 * and the read-only queries. Redis state changes only through the scripts
 * in lua/ (spec 2.2-2.5); this file decides when to run them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "internal.h"

struct rlock {
    rlock_client *c;
    char *name;
    size_t namelen;
    char *channel; /* redisson_lock__channel:{name} */
    size_t chanlen;
    char *latch_prefix; /* redisson_unlock_latch:{name}: */
    size_t latch_prefix_len;
};

#define OWNER_MAX 64

/* spec 0.1: wrap the name in braces unless it already has a hash tag, so
 * every derived key lands in the name's cluster slot. */
static char *prefixed(const char *prefix, const char *name, size_t len, const char *tail,
                      size_t *outlen)
{
    bool tagged = memchr(name, '{', len) != NULL;
    size_t plen = strlen(prefix), tlen = strlen(tail);
    size_t n = plen + 1 + len + (tagged ? 0 : 2) + tlen;
    char *s = malloc(n + 1);
    if (!s) {
        return NULL;
    }
    char *p = s;
    memcpy(p, prefix, plen);
    p += plen;
    *p++ = ':';
    if (!tagged) {
        *p++ = '{';
    }
    memcpy(p, name, len);
    p += len;
    if (!tagged) {
        *p++ = '}';
    }
    memcpy(p, tail, tlen);
    p += tlen;
    *p = '\0';
    *outlen = n;
    return s;
}

static bool time_ok(int64_t v, bool allow_zero)
{
    return v == -1 || (v >= (allow_zero ? 0 : 1) && v <= RLOCK_MAX_TIME_MS);
}

RLOCK_API rlock_status rlock_new(rlock_client *c, const char *name, rlock **out)
{
    if (!c || !name || !out || name[0] == '\0') {
        return RLOCK_EINVAL;
    }
    rlock_status st = rlock__enter(c);
    if (st != RLOCK_OK) {
        return st;
    }
    rlock *l = calloc(1, sizeof *l);
    if (l) {
        l->c = c;
        l->namelen = strlen(name);
        l->name = strdup(name);
        l->channel = prefixed("redisson_lock__channel", name, l->namelen, "", &l->chanlen);
        l->latch_prefix =
            prefixed("redisson_unlock_latch", name, l->namelen, ":", &l->latch_prefix_len);
    }
    if (!l || !l->name || !l->channel || !l->latch_prefix) {
        rlock_free(l);
        st = RLOCK_ENOMEM;
    } else {
        *out = l;
    }
    rlock__leave(c);
    return st;
}

RLOCK_API void rlock_free(rlock *l)
{
    if (!l) {
        return;
    }
    free(l->name);
    free(l->channel);
    free(l->latch_prefix);
    free(l);
}

RLOCK_API const char *rlock_name(const rlock *l)
{
    return l ? l->name : NULL;
}

static void owner_of(const rlock_client *c, uint64_t tid, char *buf)
{
    snprintf(buf, OWNER_MAX, "%s:%llu", c->id, (unsigned long long)tid);
}

/* Runs CMD name [owner of tid] and returns its reply (or a status). */
static rlock_status query(rlock *l, const char *cmd, bool with_owner, uint64_t tid, redisReply **r)
{
    rlock_status st = rlock__enter(l->c);
    if (st != RLOCK_OK) {
        return st;
    }
    char owner[OWNER_MAX];
    owner_of(l->c, tid, owner);
    const char *argv[3] = {cmd, l->name, owner};
    size_t lens[3] = {strlen(cmd), l->namelen, strlen(owner)};
    st = rlock__command(l->c, with_owner ? 3 : 2, argv, lens, r);
    if (st == RLOCK_OK && (*r)->type == REDIS_REPLY_ERROR) {
        freeReplyObject(*r);
        st = RLOCK_EREDIS;
    }
    rlock__leave(l->c);
    return st;
}

static rlock_status query_int(rlock *l, const char *cmd, bool with_owner, uint64_t tid,
                              int64_t *out)
{
    redisReply *r = NULL;
    rlock_status st = query(l, cmd, with_owner, tid, &r);
    if (st != RLOCK_OK) {
        return st;
    }
    if (r->type == REDIS_REPLY_INTEGER) {
        *out = r->integer;
    } else if (r->type == REDIS_REPLY_NIL) {
        *out = 0; /* HGET of a missing field: no hold */
    } else if (r->type == REDIS_REPLY_STRING) {
        char *end;
        *out = strtoll(r->str, &end, 10);
        if (end == r->str || *end != '\0') {
            st = RLOCK_EPROTO;
        }
    } else {
        st = RLOCK_EPROTO;
    }
    freeReplyObject(r);
    return st;
}

/* ---- acquire --------------------------------------------------------- */

/* One run of the acquire script. RLOCK_OK: acquired; RLOCK_EBUSY: held
 * elsewhere for *ttl more ms (-1: no TTL). */
static rlock_status attempt(rlock *l, const char *owner, const char *lease, int64_t *ttl)
{
    const char *args[3] = {l->name, lease, owner};
    size_t lens[3] = {l->namelen, strlen(lease), strlen(owner)};
    redisReply *r = NULL;
    rlock_status st = rlock__eval(l->c, &rlock__script_acquire, 1, 3, args, lens, &r);
    if (st != RLOCK_OK) {
        return st;
    }
    if (r->type == REDIS_REPLY_NIL) {
        st = RLOCK_OK;
    } else if (r->type == REDIS_REPLY_INTEGER) {
        *ttl = r->integer;
        st = RLOCK_EBUSY;
    } else if (r->type == REDIS_REPLY_ERROR) {
        st = RLOCK_EREDIS;
    } else {
        st = RLOCK_EPROTO;
    }
    freeReplyObject(r);
    return st;
}

typedef enum outcome { OUTCOME_RAN, OUTCOME_NOT_RAN, OUTCOME_UNKNOWN } outcome;

/* The acquire script got no reply (timeout or broken link): it may have
 * run, may run later, or never. Resending it would count a re-entry twice
 * (spec 2.2), so look instead: if the owner's count is one more than this
 * thread held, it ran. */
static outcome acquire_outcome(rlock *l, uint64_t tid, int64_t before)
{
    int64_t now;
    if (query_int(l, "HGET", true, tid, &now) != RLOCK_OK) {
        return OUTCOME_UNKNOWN;
    }
    return now == before + 1 ? OUTCOME_RAN : OUTCOME_NOT_RAN;
}

static rlock_status run_unlock(rlock *l, const char *owner, const char *lease, redisReply **r,
                               char **latch_out, size_t *latch_len);

/* An earlier acquire of this thread got no reply and could not be checked
 * (the server was stalled): it may have run after all, leaving a hold this
 * client does not count. Only this thread changes its own field, so here,
 * on its next call for the name, Redis's count minus ours is exactly the
 * orphaned part, and it is released (publishing if that frees the lock). */
static void reconcile(rlock *l, uint64_t tid, const char *owner)
{
    rlock_client *c = l->c;
    if (!rlock__suspect_take(c, l->name, l->namelen, tid)) {
        return;
    }
    int64_t in_redis;
    if (query_int(l, "HGET", true, tid, &in_redis) != RLOCK_OK) {
        rlock__suspect_add(c, l->name, l->namelen, tid); /* still unknown */
        return;
    }
    int64_t held, lease_ms;
    bool lost;
    rlock__hold_query(c, l->name, l->namelen, tid, &held, &lost, &lease_ms);
    char lease[24];
    snprintf(lease, sizeof lease, "%lld", (long long)lease_ms);
    for (int64_t k = lost ? in_redis : in_redis - held; k > 0; k--) {
        char *latch = NULL;
        size_t latchlen = 0;
        redisReply *r = NULL;
        if (run_unlock(l, owner, lease, &r, &latch, &latchlen) != RLOCK_OK) {
            free(latch);
            break;
        }
        freeReplyObject(r);
        rlock__latch_garbage(c, latch, latchlen);
    }
}

static int64_t min_deadline(int64_t a, int64_t b)
{
    if (a < 0) {
        return b;
    }
    if (b < 0) {
        return a;
    }
    return a < b ? a : b;
}

static rlock_status lock_impl(rlock *l, int64_t wait_ms, int64_t lease_ms)
{
    rlock_client *c = l->c;
    rlock_status st = rlock__enter(c);
    if (st != RLOCK_OK) {
        return st;
    }
    uint64_t tid = rlock_thread_id();
    char owner[OWNER_MAX], lease[24];
    owner_of(c, tid, owner);
    snprintf(lease, sizeof lease, "%lld",
             (long long)(lease_ms == RLOCK_WATCHDOG ? c->cfg.watchdog_timeout_ms : lease_ms));
    reconcile(l, tid, owner);
    int64_t held, unused_lease;
    bool lost;
    rlock__hold_query(c, l->name, l->namelen, tid, &held, &lost, &unused_lease);
    if (lost) {
        held = 0;
    }

    int64_t deadline = wait_ms < 0 ? -1 : rlock__now_ms() + wait_ms;
    int64_t io_since = -1, io_sleep = 0, ttl = -1;
    rlock__chan *ch = NULL;
    rlock__waiter *w = NULL;
    /* No barging: while other threads of this client queue for the name, a
     * newcomer that does not hold it queues behind them instead of racing
     * them. Otherwise the thread that just released would win again and
     * again, and every woken waiter's attempt would be wasted. */
    bool skip_attempt = wait_ms != 0 && held == 0 && rlock__chan_queued(c, l->channel, l->chanlen);
    if (skip_attempt) {
        st = RLOCK_EBUSY;
    }
    for (;;) {
        if (!skip_attempt) {
            st = attempt(l, owner, lease, &ttl);
            if (st == RLOCK_ETIMEDOUT || st == RLOCK_EIO) {
                outcome o = acquire_outcome(l, tid, held);
                if (o == OUTCOME_RAN) {
                    st = RLOCK_OK;
                } else if (o == OUTCOME_UNKNOWN || st == RLOCK_ETIMEDOUT) {
                    /* A timed-out request may still run (its bytes can sit
                     * in a stalled server's buffer); a broken link's cannot,
                     * so only an unanswered check leaves it in doubt. */
                    rlock__suspect_add(c, l->name, l->namelen, tid);
                }
            }
            if (st == RLOCK_OK) {
                st = rlock__hold_acquired(c, l->name, l->namelen, tid, lease_ms);
                break;
            }
            if (st == RLOCK_EIO && wait_ms != 0) {
                /* Redis restarting or the link dropped: keep waiting, with
                 * backoff, for up to retry_timeout_ms. */
                int64_t now = rlock__now_ms();
                if (io_since < 0) {
                    io_since = now;
                }
                if (now - io_since >= c->cfg.retry_timeout_ms) {
                    break;
                }
                io_sleep = io_sleep ? io_sleep * 2 : 25;
                if (io_sleep > 1000) {
                    io_sleep = 1000;
                }
            } else if (st == RLOCK_EBUSY) {
                io_since = -1;
                io_sleep = 0;
            } else {
                break;
            }
        }
        int64_t now = rlock__now_ms();
        if (deadline >= 0 && now >= deadline) {
            break; /* st is RLOCK_EBUSY, or the transport error */
        }
        if (!ch) {
            bool behind = false;
            int64_t hint = -1;
            if ((st = rlock__chan_ref(c, l->channel, l->chanlen, &ch)) != RLOCK_OK) {
                break;
            }
            if ((st = rlock__chan_join(c, ch, &w, &behind, &hint)) != RLOCK_OK) {
                rlock__chan_unref(c, ch);
                ch = NULL;
                break;
            }
            /* Subscribe, then try again: a release published before the
             * subscription took effect is caught by that attempt. If the
             * confirmation does not come, carry on sleeping on the TTL. */
            st = rlock__chan_wait_subscribed(
                c, ch, min_deadline(deadline, now + c->cfg.subscribe_timeout_ms));
            if (st == RLOCK_ECLOSED) {
                break;
            }
            st = RLOCK_EBUSY;
            /* Queued behind other local waiters: sleep until woken in turn,
             * at the latest when the lease they last saw runs out (or a
             * watchdog lease, if they saw none). Otherwise try again now. */
            if (!(behind && held == 0)) {
                skip_attempt = false;
                continue;
            }
            now = rlock__now_ms();
            ttl = hint > now ? hint - now : c->cfg.watchdog_timeout_ms;
        }
        skip_attempt = false;
        int64_t until;
        if (io_sleep > 0 && st != RLOCK_EBUSY) {
            until = now + io_sleep;
        } else {
            until = ttl >= 0 ? now + ttl : -1;
        }
        until = min_deadline(until, deadline);
        if ((st = rlock__chan_sleep(c, ch, w, until)) != RLOCK_OK) {
            break;
        }
        st = RLOCK_EBUSY;
    }
    if (ch) {
        rlock__chan_leave(c, ch, w, st == RLOCK_OK);
    }
    rlock__leave(c);
    return st;
}

RLOCK_API rlock_status rlock_lock(rlock *l, int64_t lease_ms)
{
    if (!l || !time_ok(lease_ms, false)) {
        return RLOCK_EINVAL;
    }
    return lock_impl(l, RLOCK_WAIT_FOREVER, lease_ms);
}

RLOCK_API rlock_status rlock_try_lock(rlock *l, int64_t wait_ms, int64_t lease_ms)
{
    if (!l || !time_ok(wait_ms, true) || !time_ok(lease_ms, false)) {
        return RLOCK_EINVAL;
    }
    return lock_impl(l, wait_ms, lease_ms);
}

/* ---- unlock ---------------------------------------------------------- */

/* 16 random bytes as 32 hex digits (spec 1): xorshift per thread, seeded
 * from the kernel once, so an unlock costs no system call. */
static void request_id(char out[33])
{
    static __thread uint64_t s[2];
    if (s[0] == 0 && s[1] == 0) {
        if (getrandom(s, sizeof s, 0) != sizeof s) {
            s[0] = (uint64_t)rlock__now_ms() | 1;
            s[1] = (uint64_t)(uintptr_t)&s;
        }
        s[0] |= 1;
    }
    for (int k = 0; k < 2; k++) {
        uint64_t x = s[0], y = s[1];
        s[0] = y;
        x ^= x << 23;
        s[1] = x ^ y ^ (x >> 17) ^ (y >> 26);
        uint64_t v = s[1] + y;
        snprintf(out + 16 * k, 17, "%016llx", (unsigned long long)v);
    }
}

/* Runs the unlock script once for owner, with a fresh request id; on a
 * transport error it is sent once more with the same id (the latch makes
 * that safe even if the first run is still queued somewhere). The latch
 * key comes back for batched deletion. */
static rlock_status run_unlock(rlock *l, const char *owner, const char *lease, redisReply **r,
                               char **latch_out, size_t *latch_len)
{
    char rid[33], latch_ttl[16];
    request_id(rid);
    size_t latchlen = l->latch_prefix_len + 32;
    char *latch = malloc(latchlen + 1);
    if (!latch) {
        return RLOCK_ENOMEM;
    }
    memcpy(latch, l->latch_prefix, l->latch_prefix_len);
    memcpy(latch + l->latch_prefix_len, rid, 33);
    snprintf(latch_ttl, sizeof latch_ttl, "%d", RLOCK__LATCH_TTL_MS);
    const char *args[8] = {l->name, l->channel, latch, "0", lease, owner, "publish", latch_ttl};
    size_t lens[8] = {l->namelen,    l->chanlen,    latchlen, 1,
                      strlen(lease), strlen(owner), 7,        strlen(latch_ttl)};
    rlock_status st = RLOCK_EIO;
    for (int tries = 0; tries < 2; tries++) {
        st = rlock__eval(l->c, &rlock__script_unlock, 3, 8, args, lens, r);
        if (st != RLOCK_EIO && st != RLOCK_ETIMEDOUT) {
            break;
        }
    }
    *latch_out = latch;
    *latch_len = latchlen;
    return st;
}

RLOCK_API rlock_status rlock_unlock(rlock *l)
{
    if (!l) {
        return RLOCK_EINVAL;
    }
    rlock_client *c = l->c;
    rlock_status st = rlock__enter(c);
    if (st != RLOCK_OK) {
        return st;
    }
    uint64_t tid = rlock_thread_id();
    char owner[OWNER_MAX], lease[24];
    owner_of(c, tid, owner);
    reconcile(l, tid, owner);
    int64_t held, lease_ms;
    bool lost;
    rlock__hold_query(c, l->name, l->namelen, tid, &held, &lost, &lease_ms);
    snprintf(lease, sizeof lease, "%lld", (long long)lease_ms);
    redisReply *r = NULL;
    char *latch = NULL;
    size_t latchlen = 0;
    st = run_unlock(l, owner, lease, &r, &latch, &latchlen);
    if (st == RLOCK_OK) {
        if (r->type == REDIS_REPLY_NIL) {
            st = (held > 0 || lost) ? RLOCK_ELOST : RLOCK_ENOTOWNER;
            rlock__hold_released(c, l->name, l->namelen, tid, true);
        } else if (r->type == REDIS_REPLY_INTEGER && (r->integer == 0 || r->integer == 1)) {
            rlock__hold_released(c, l->name, l->namelen, tid, r->integer == 1);
            rlock__latch_garbage(c, latch, latchlen);
            latch = NULL;
        } else if (r->type == REDIS_REPLY_ERROR) {
            st = RLOCK_EREDIS;
        } else {
            st = RLOCK_EPROTO;
        }
        freeReplyObject(r);
    }
    free(latch);
    rlock__leave(c);
    return st;
}

RLOCK_API rlock_status rlock_force_unlock(rlock *l, bool *was_locked)
{
    if (!l) {
        return RLOCK_EINVAL;
    }
    rlock_client *c = l->c;
    rlock_status st = rlock__enter(c);
    if (st != RLOCK_OK) {
        return st;
    }
    const char *args[4] = {l->name, l->channel, "0", "publish"};
    size_t lens[4] = {l->namelen, l->chanlen, 1, 7};
    redisReply *r = NULL;
    st = rlock__eval(c, &rlock__script_force_unlock, 2, 4, args, lens, &r);
    if (st == RLOCK_OK) {
        if (r->type == REDIS_REPLY_INTEGER) {
            rlock__hold_forget_all(c, l->name, l->namelen);
            if (was_locked) {
                *was_locked = r->integer == 1;
            }
        } else {
            st = r->type == REDIS_REPLY_ERROR ? RLOCK_EREDIS : RLOCK_EPROTO;
        }
        freeReplyObject(r);
    }
    rlock__leave(c);
    return st;
}

/* ---- queries --------------------------------------------------------- */

RLOCK_API rlock_status rlock_is_locked(rlock *l, bool *locked)
{
    if (!l || !locked) {
        return RLOCK_EINVAL;
    }
    int64_t v;
    rlock_status st = query_int(l, "EXISTS", false, 0, &v);
    if (st == RLOCK_OK) {
        *locked = v != 0;
    }
    return st;
}

RLOCK_API rlock_status rlock_is_held_by_thread(rlock *l, uint64_t thread_id, bool *held)
{
    if (!l || !held) {
        return RLOCK_EINVAL;
    }
    int64_t v;
    rlock_status st = query_int(l, "HEXISTS", true, thread_id, &v);
    if (st == RLOCK_OK) {
        *held = v != 0;
    }
    return st;
}

RLOCK_API rlock_status rlock_is_held_by_current_thread(rlock *l, bool *held)
{
    return rlock_is_held_by_thread(l, rlock_thread_id(), held);
}

RLOCK_API rlock_status rlock_hold_count(rlock *l, int64_t *count)
{
    if (!l || !count) {
        return RLOCK_EINVAL;
    }
    return query_int(l, "HGET", true, rlock_thread_id(), count);
}

RLOCK_API rlock_status rlock_remain_ttl(rlock *l, int64_t *ttl_ms)
{
    if (!l || !ttl_ms) {
        return RLOCK_EINVAL;
    }
    return query_int(l, "PTTL", false, 0, ttl_ms);
}
