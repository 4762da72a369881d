/* The public calls on handles, for every lock kind: argument checks, the
 * call-in-progress guard, then the engine (sync/) and the handle's kind
 * (kinds/). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static bool time_ok(int64_t v, bool allow_zero)
{
    return v == -1 || (v >= (allow_zero ? 0 : 1) && v <= RLOCK_MAX_TIME_MS);
}

RLOCK_API rlock_status rlock_new(rlock_client *c, const char *name, rlock **out)
{
    return rlock__handle_new(c, name, &rlock__kind_reentrant, out);
}

RLOCK_API void rlock_free(rlock *l)
{
    if (l) {
        rlock__handle_fini(l);
        free(l);
    }
}

RLOCK_API const char *rlock_kind(const rlock *l)
{
    return l ? l->kind->name : NULL;
}

RLOCK_API const char *rlock_name(const rlock *l)
{
    return l ? l->name : NULL;
}

static rlock_status bad_args(void)
{
    rlock__error_clear();
    return rlock__fail(RLOCK_EINVAL, "NULL argument or time out of range");
}

RLOCK_API rlock_status rlock_lock_ex(rlock *l, int64_t wait_ms, int64_t lease_ms,
                                     rlock_cancel *cancel, int64_t *holder_ttl_ms)
{
    if (!l || !time_ok(wait_ms, true) || !time_ok(lease_ms, false)) {
        return bad_args();
    }
    rlock_status st = rlock__enter(l->c);
    if (st == RLOCK_OK) {
        st = rlock__acquire(l, wait_ms, lease_ms, cancel, holder_ttl_ms);
        rlock__leave(l->c);
    }
    return st;
}

RLOCK_API rlock_status rlock_lock(rlock *l, int64_t lease_ms)
{
    return rlock_lock_ex(l, RLOCK_WAIT_FOREVER, lease_ms, NULL, NULL);
}

RLOCK_API rlock_status rlock_try_lock(rlock *l, int64_t wait_ms, int64_t lease_ms)
{
    return rlock_lock_ex(l, wait_ms, lease_ms, NULL, NULL);
}

RLOCK_API rlock_status rlock_wait_unlocked(rlock *l, int64_t wait_ms, rlock_cancel *cancel)
{
    if (!l || !time_ok(wait_ms, true)) {
        return bad_args();
    }
    rlock_status st = rlock__enter(l->c);
    if (st == RLOCK_OK) {
        st = rlock__wait_unlocked(l, wait_ms, cancel);
        rlock__leave(l->c);
    }
    return st;
}

RLOCK_API rlock_status rlock_unlock(rlock *l)
{
    if (!l) {
        return bad_args();
    }
    rlock_status st = rlock__enter(l->c);
    if (st == RLOCK_OK) {
        st = rlock__release(l);
        rlock__leave(l->c);
    }
    return st;
}

RLOCK_API rlock_status rlock_force_unlock(rlock *l, bool *was_locked)
{
    if (!l) {
        return bad_args();
    }
    rlock_status st = rlock__enter(l->c);
    if (st != RLOCK_OK) {
        return st;
    }
    /* Local holders are not touched: they learn of the delete from Redis
     * (renewal, unlock, re-entry), exactly like holders elsewhere. Marking
     * them after the reply would also mark a thread that acquired the lock
     * after the delete, whose hold would then go unrenewed. */
    bool was = false;
    st = l->kind->force_release(l, &was, rlock__now_ms() + l->c->cfg.command_timeout_ms);
    if (st == RLOCK_OK && was_locked) {
        *was_locked = was;
    }
    rlock__leave(l->c);
    return st;
}

/* ---- queries --------------------------------------------------------- */

/* Runs CMD name [owner of tid] (one round trip) and reads an integer. */
static rlock_status query_int(rlock *l, const char *cmd, bool with_owner, uint64_t tid,
                              int64_t *out)
{
    rlock_status st = rlock__enter(l->c);
    if (st != RLOCK_OK) {
        return st;
    }
    char owner[RLOCK__OWNER_MAX];
    rlock__owner_field(l, tid, owner);
    const char *args[3] = {cmd, l->name, owner};
    size_t lens[3] = {strlen(cmd), l->namelen, strlen(owner)};
    rlock__call call = {l->name, l->namelen, NULL, 0, with_owner ? 3 : 2, args, lens};
    st = rlock__run_int(l->c, &call, out, rlock__now_ms() + l->c->cfg.command_timeout_ms);
    rlock__leave(l->c);
    return st;
}

RLOCK_API rlock_status rlock_is_locked(rlock *l, bool *locked)
{
    if (!l || !locked) {
        return bad_args();
    }
    if (l->kind->is_locked) {
        rlock_status st = rlock__enter(l->c);
        if (st == RLOCK_OK) {
            st = l->kind->is_locked(l, locked, rlock__now_ms() + l->c->cfg.command_timeout_ms);
            rlock__leave(l->c);
        }
        return st;
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
        return bad_args();
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
        return bad_args();
    }
    return query_int(l, "HGET", true, rlock_thread_id(), count);
}

RLOCK_API rlock_status rlock_remain_ttl(rlock *l, int64_t *ttl_ms)
{
    if (!l || !ttl_ms) {
        return bad_args();
    }
    return query_int(l, "PTTL", false, 0, ttl_ms);
}
