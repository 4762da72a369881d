/* Release, and settling what earlier calls left in doubt.
 *
 * An unlock whose reply was lost keeps its request id in the hold registry.
 * The caller's retry (its next unlock of the name) sends that same id
 * again: if the first one ran, the unlock latch answers with its result and
 * nothing is released twice; if not, it runs now. A new id would release a
 * second hold, the outer one of a nested lock (the overlap the randomized
 * fault run found). The latch lives RLOCK__LATCH_TTL_MS; after
 * RLOCK__LATCH_TRUST_MS the hold count in Redis decides instead.
 *
 * An acquire whose reply was lost and whose outcome could not be checked
 * is "suspect": if it ran, Redis counts one more hold than we do. Only this
 * thread changes its own field, so on its next call for the name Redis's
 * count minus ours is exactly the orphaned part, and it is released. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The latch key of a completed unlock goes to the watchdog's batched DEL
 * (out of memory, its PX TTL removes it). Only that of a request sent once
 * and answered: a copy of a resent request may still be on its way (a
 * stalled server, a slow link), and without its latch it would run again
 * and release a hold taken since. Those latches live out their TTL. */
static void queue_latch(rlock *l, const char *rid)
{
    size_t len = l->latch_prefix_len + 32;
    char *latch = malloc(len + 1);
    if (latch) {
        memcpy(latch, l->latch_prefix, l->latch_prefix_len);
        memcpy(latch + l->latch_prefix_len, rid, 33);
        rlock__latch_garbage(l->c, latch, len);
    }
}

static void apply(rlock *l, uint64_t tid, rlock__released r, const char *rid)
{
    rlock__hold_released(l->c, l->name, l->namelen, tid, r != RLOCK__PARTIAL);
    if (r != RLOCK__NOT_HELD && rid) {
        queue_latch(l, rid);
    }
}

/* Sends the release with rid; after a transport error once more with the
 * same id (the latch makes that safe). *once: answered at the first send. */
static rlock_status send_release(rlock *l, const char *owner, const char *rid, int64_t lease_ms,
                                 rlock__released *out, bool *once)
{
    rlock_status st = RLOCK_EIO;
    for (int tries = 0; tries < 2; tries++) {
        st = l->kind->release(l, owner, rid, lease_ms, out,
                              rlock__now_ms() + l->c->cfg.command_timeout_ms);
        *once = tries == 0;
        if (st != RLOCK_EIO && st != RLOCK_ETIMEDOUT) {
            break;
        }
    }
    return st;
}

/* The pending unlock is older than its latch can be trusted: did it run?
 * Compare the count in Redis with ours. */
static rlock_status judge_old_pending(rlock *l, const char *owner, const rlock__hold_view *v,
                                      bool *ran, rlock__released *r, int64_t deadline_ms)
{
    int64_t n;
    rlock_status st = l->kind->count(l, owner, &n, deadline_ms);
    if (st != RLOCK_OK) {
        return st;
    }
    *ran = n == v->count - 1;
    *r = n == 0 ? RLOCK__FREED : RLOCK__PARTIAL;
    return RLOCK_OK;
}

rlock_status rlock__release(rlock *l)
{
    rlock_client *c = l->c;
    uint64_t tid = rlock_thread_id();
    char owner[RLOCK__OWNER_MAX];
    rlock__owner(c, tid, owner);
    rlock_status st = rlock__settle(l, tid, false, rlock__now_ms() + c->cfg.command_timeout_ms);
    if (st != RLOCK_OK) {
        return st;
    }
    rlock__hold_view v;
    rlock__hold_view_of(c, l->name, l->namelen, tid, &v);
    char rid[33];
    bool resend = v.pending && rlock__now_ms() - v.pending_since < RLOCK__LATCH_TRUST_MS;
    if (resend) {
        memcpy(rid, v.pending_rid, sizeof rid); /* the retry of that unlock */
    } else {
        if (v.pending) {
            bool ran = false;
            rlock__released r;
            st = judge_old_pending(l, owner, &v, &ran, &r,
                                   rlock__now_ms() + c->cfg.command_timeout_ms);
            if (st != RLOCK_OK) {
                return st;
            }
            if (ran) {
                apply(l, tid, r, NULL);
                return RLOCK_OK;
            }
        }
        rlock__request_id(rid);
    }
    rlock__released r;
    bool once = false;
    st = send_release(l, owner, rid, v.lease_ms, &r, &once);
    if (st == RLOCK_OK) {
        apply(l, tid, r, once && !resend ? rid : NULL);
        if (r == RLOCK__NOT_HELD) {
            st = (v.count > 0 || v.lost)
                     ? rlock__fail(RLOCK_ELOST, "this thread's hold of the lock was lost")
                     : rlock__fail(RLOCK_ENOTOWNER, "the calling thread does not hold the lock");
        }
    } else if (v.count > 0 && st != RLOCK_ENOMEM && st != RLOCK_EPERM) {
        /* (An ACL refusal ran nothing: the hold stays as it was, renewed.) */
        rlock__hold_set_pending(c, l->name, l->namelen, tid, rid);
    }
    return st;
}

rlock_status rlock__settle(rlock *l, uint64_t tid, bool pending_too, int64_t deadline_ms)
{
    rlock_client *c = l->c;
    rlock__hold_view v;
    rlock__hold_view_of(c, l->name, l->namelen, tid, &v);
    if (!v.suspect && !(pending_too && v.pending)) {
        return RLOCK_OK; /* the common case: one lookup */
    }
    char owner[RLOCK__OWNER_MAX];
    rlock__owner(c, tid, owner);
    rlock_status st = RLOCK_OK;
    if (pending_too && v.pending) {
        rlock__released r;
        bool ran = true;
        if (rlock__now_ms() - v.pending_since < RLOCK__LATCH_TRUST_MS) {
            st = l->kind->release(l, owner, v.pending_rid, v.lease_ms, &r, deadline_ms);
            if (st == RLOCK_OK) {
                apply(l, tid, r, NULL); /* a resend: its latch stays */
            }
        } else if ((st = judge_old_pending(l, owner, &v, &ran, &r, deadline_ms)) == RLOCK_OK) {
            if (ran) {
                apply(l, tid, r, NULL);
            } else {
                rlock__hold_set_pending(c, l->name, l->namelen, tid, NULL);
                /* It never ran: the caller's unlock is still owed. Send it
                 * now under a fresh id, as the caller asked. */
                char rid[33];
                rlock__request_id(rid);
                st = l->kind->release(l, owner, rid, v.lease_ms, &r, deadline_ms);
                if (st == RLOCK_OK) {
                    apply(l, tid, r, rid);
                }
            }
        }
        if (st != RLOCK_OK) {
            return st;
        }
        rlock__hold_view_of(c, l->name, l->namelen, tid, &v);
    }
    if (v.suspect) {
        int64_t in_redis;
        if (l->kind->count(l, owner, &in_redis, deadline_ms) != RLOCK_OK) {
            return RLOCK_OK; /* still unknown: try again at the next call */
        }
        int64_t extra = v.lost ? in_redis : in_redis - v.count;
        for (; extra > 0; extra--) {
            char rid[33];
            rlock__released r;
            rlock__request_id(rid);
            if (l->kind->release(l, owner, rid, v.lease_ms, &r, deadline_ms) != RLOCK_OK) {
                return RLOCK_OK; /* stays suspect */
            }
            queue_latch(l, rid);
        }
        rlock__hold_set_suspect(c, l->name, l->namelen, tid, false);
    }
    return RLOCK_OK;
}

/* ---- at close -------------------------------------------------------- */

typedef struct doubt {
    char *name;
    size_t len;
    uint64_t tid;
} doubt;

typedef struct doubts {
    doubt *v;
    size_t n, cap;
} doubts;

static void collect_doubt(rlock__map_node *node, void *arg)
{
    doubts *d = arg;
    rlock__hold *h = (rlock__hold *)node;
    for (rlock__holder *x = h->holders; x; x = x->next) {
        if (!x->suspect && !x->pending) {
            continue;
        }
        if (d->n == d->cap) {
            size_t cap = d->cap ? d->cap * 2 : 8;
            doubt *v = realloc(d->v, cap * sizeof *v);
            if (!v) {
                return;
            }
            d->v = v;
            d->cap = cap;
        }
        char *name = malloc(h->namelen + 1);
        if (!name) {
            return;
        }
        memcpy(name, h->name, h->namelen + 1);
        d->v[d->n++] = (doubt){name, h->namelen, x->tid};
    }
}

void rlock__settle_all(rlock_client *c, int64_t deadline_ms)
{
    doubts d = {NULL, 0, 0};
    pthread_mutex_lock(&c->hold_mu);
    rlock__map_each(&c->holds, collect_doubt, &d);
    pthread_mutex_unlock(&c->hold_mu);
    for (size_t i = 0; i < d.n; i++) {
        rlock l;
        if (rlock__now_ms() < deadline_ms &&
            rlock__handle_init(&l, c, &rlock__kind_reentrant, d.v[i].name, d.v[i].len) ==
                RLOCK_OK) {
            rlock__settle(&l, d.v[i].tid, true, deadline_ms);
            rlock__handle_fini(&l);
        }
        free(d.v[i].name);
    }
    free(d.v);
}
