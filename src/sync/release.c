/* Release, and settling what earlier calls left in doubt.
 *
 * An unlock whose reply was lost keeps its request id in the hold registry.
 * The caller's retry (its next unlock of the name) sends that same id
 * again: if the first one ran, the unlock latch answers with its result and
 * nothing is released twice; if not, it runs now. A new id would release a
 * second hold, the outer one of a nested lock (the overlap the randomized
 * fault run found). The latch lives RLOCK__LATCH_TTL_MS from when the
 * request ran, so while a copy sent now arrives inside that time, counted
 * from the first send (rlock__latch_trusted()), the answer is exact.
 * Later only the hold count in Redis is left, and it is read
 * conservatively: a count one lower proves the unlock ran only while a hold
 * is left; a hold that is gone may have been released or lost, and is
 * reported lost (RLOCK_ELOST), never released (RLOCK_OK).
 *
 * An acquire whose reply was lost keeps its request id and the count it
 * was sent with, and is settled by abandoning it (lua/abandon.lua): only
 * this thread's own requests change its field and every other one was
 * answered or settled, so Redis's count says exactly whether it ran, and
 * the latch it leaves stops a copy still on its way. An acquire answered
 * with a count other than ours + 1 (a copy that ran beyond the latch's
 * life) is settled by giving back Redis's count minus ours. */
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
    size_t len;
    char *latch = rlock__latch_key(l->latch_prefix, l->latch_prefix_len, rid, &len);
    if (latch) {
        rlock__latch_garbage(l->c, latch, len);
    }
}

/* The unlock sent at sent_ms ran with result r (a partial one reset the
 * key's TTL: the registry's deadline follows it). */
static void apply(rlock *l, uint64_t tid, rlock__released r, const char *rid, int64_t sent_ms)
{
    if (r == RLOCK__NOT_HELD) {
        /* Nothing of ours in Redis: the caller is told RLOCK_ELOST (when
         * it had a hold) and the levels left unwind with RLOCK_ELOST. */
        rlock__hold_unwound_lost(l->c, l->key, l->keylen, tid, true);
        return;
    }
    rlock__hold_released(l->c, l->key, l->keylen, tid, r == RLOCK__FREED, sent_ms);
    if (rid) {
        queue_latch(l, rid);
    }
}

/* Whether an unlock first sent at first_sent can still be resent with its
 * id: its latch lives RLOCK__LATCH_TTL_MS from when it ran. */
static bool trusted(rlock_client *c, int64_t first_sent)
{
    return rlock__latch_trusted(c, first_sent, RLOCK__LATCH_TTL_MS);
}

rlock_status rlock__layout_check(const rlock *l, const rlock__hold_view *v)
{
    if ((v->count > 0 || v->lost_levels > 0) && v->kind && v->kind->layout != l->kind->layout) {
        return rlock__fail(RLOCK_EKIND,
                           "the calling thread holds the name with another kind of lock (%s) "
                           "than %s",
                           v->kind->name, l->kind->name);
    }
    return RLOCK_OK;
}

/* A handle of kind k (NULL: l's) on l's name, for a request in doubt that
 * another kind sent: l itself, or *tmp made here (as_kind_done frees it).
 * Kinds that share a record share the name and its key tag. */
static rlock_status as_kind(rlock *l, const rlock__kind *k, rlock *tmp, rlock **out)
{
    *out = l;
    if (!k || k == l->kind) {
        return RLOCK_OK;
    }
    rlock_status st = rlock__handle_init(tmp, l->c, k, l->name, l->namelen);
    if (st == RLOCK_OK) {
        *out = tmp;
    }
    return st;
}

static void as_kind_done(rlock *l, rlock *h)
{
    if (h != l) {
        rlock__handle_fini(h);
    }
}

/* Whether a request that failed with st may have reached Redis (and may
 * still run): not when it never left the pool (RLOCK_EPOOL, RLOCK_ENOMEM)
 * or the ACL refused it (RLOCK_EPERM: the scripts publish before writing,
 * so a refusal ran nothing). */
static bool may_have_left(rlock_status st)
{
    return st != RLOCK_EPOOL && st != RLOCK_ENOMEM && st != RLOCK_EPERM;
}

/* Sends the release with rid; after a transport error once more with the
 * same id (the latch makes that safe). *once: answered at the first send;
 * *left: a copy may have run (RLOCK_EPOOL and RLOCK_ENOMEM mean it never
 * left; RLOCK_EPERM, an ACL refusal, that it ran nothing: the unlock
 * scripts publish before any write). */
static rlock_status send_release(rlock *l, const char *owner, const char *rid, int64_t lease_ms,
                                 rlock__released *out, bool *once, bool *left)
{
    rlock_status st = RLOCK_EIO;
    *left = false;
    for (int tries = 0; tries < 2; tries++) {
        st = l->kind->release(l, owner, rid, lease_ms, out,
                              rlock__now_ms() + l->c->cfg.command_timeout_ms);
        *once = tries == 0;
        *left = *left || may_have_left(st);
        if (st != RLOCK_EIO && st != RLOCK_ETIMEDOUT) {
            break;
        }
    }
    return st;
}

/* What an unlock unanswered for longer than its latch can be trusted did,
 * from the hold count in Redis (n) against ours. */
typedef enum judged { RAN, NOT_RUN, GONE } judged;

static rlock_status judge_old_pending(rlock *l, const char *owner, const rlock__hold_view *v,
                                      judged *j, int64_t deadline_ms)
{
    int64_t n;
    rlock_status st = l->kind->count(l, owner, &n, deadline_ms);
    if (st != RLOCK_OK) {
        return st;
    }
    if (n > 0 && n == v->count - 1) {
        *j = RAN; /* a hold is left, one fewer: only our unlock does that */
    } else if (n > 0 && n == v->count) {
        *j = NOT_RUN;
    } else {
        *j = GONE; /* released or lost: cannot be told apart, so lost */
    }
    return RLOCK_OK;
}

static rlock_status release(rlock *l, uint64_t tid, const char *owner,
                            const rlock__hold_view *v, int64_t deadline);

rlock_status rlock__release(rlock *l)
{
    rlock_client *c = l->c;
    uint64_t tid = rlock_thread_id();
    char owner[RLOCK__OWNER_MAX];
    rlock__owner(c, tid, owner);
    int64_t deadline = rlock__now_ms() + c->cfg.command_timeout_ms;
    rlock_status st = rlock__settle(l, tid, false, deadline);
    if (st != RLOCK_OK) {
        return st;
    }
    rlock__hold_view v;
    rlock__hold_view_of(c, l->key, l->keylen, tid, &v);
    if ((st = rlock__layout_check(l, &v)) != RLOCK_OK) {
        return st; /* its script would release the other kind's hold */
    }
    /* An unlock left unanswered is retried by this one, with its own id
     * and its own kind's script (a release through another kind of the
     * same layout). */
    rlock tmp;
    rlock *h;
    if ((st = as_kind(l, v.pending ? v.pending_kind : NULL, &tmp, &h)) != RLOCK_OK) {
        return st;
    }
    st = release(h, tid, owner, &v, deadline);
    as_kind_done(l, h);
    return st;
}

/* rlock__release() on the handle h of the kind that sends it. */
static rlock_status release(rlock *l, uint64_t tid, const char *owner, const rlock__hold_view *v,
                            int64_t deadline)
{
    rlock_client *c = l->c;
    rlock_status st;
    char rid[33];
    bool resend = v->pending && trusted(c, v->pending_sent_ms);
    if (resend) {
        memcpy(rid, v->pending_rid, sizeof rid); /* the retry of that unlock */
    } else {
        if (v->pending) {
            judged j;
            st = judge_old_pending(l, owner, v, &j, deadline);
            if (st != RLOCK_OK) {
                return st;
            }
            if (j == RAN) {
                apply(l, tid, RLOCK__PARTIAL, NULL, rlock__now_ms()); /* its first send */
                return RLOCK_OK;
            }
            if (j == GONE) {
                apply(l, tid, RLOCK__NOT_HELD, NULL, rlock__now_ms());
                return rlock__fail(RLOCK_ELOST,
                                   "the hold is gone, and its unlock went unanswered for too "
                                   "long to tell whether it ran: reported lost");
            }
        }
        rlock__request_id(rid);
    }
    if (v->ends_watchdog && v->in_round) {
        /* A renewal in flight could run after this unlock and cut the
         * explicit lease left to the watchdog's, with nothing renewing it
         * any more. Let it finish first (rare, one round trip). */
        rlock__hold_wait_round(c, l->key, l->keylen, tid, deadline);
    }
    rlock__released r;
    bool once = false, left = false;
    int64_t sent = rlock__now_ms();
    if (v->count > 1) {
        /* A partial unlock sets the TTL of the levels left if it runs. */
        rlock__hold_ttl_may(c, l->key, l->keylen, tid, resend ? v->pending_sent_ms : sent,
                            v->lease_ms);
    }
    st = send_release(l, owner, rid, v->lease_ms, &r, &once, &left);
    if (st == RLOCK_OK) {
        apply(l, tid, r, once && !resend ? rid : NULL, sent);
        if (r == RLOCK__NOT_HELD) {
            st = (v->count > 0 || v->lost || v->lost_levels > 0)
                     ? rlock__fail(RLOCK_ELOST, "this thread's hold of the lock was lost")
                     : rlock__fail(RLOCK_ENOTOWNER, "the calling thread does not hold the lock");
        }
    } else if (v->count > 0 && (left || resend)) {
        rlock__hold_set_pending(c, l->key, l->keylen, tid, rid, resend ? v->pending_sent_ms : sent,
                                l->kind);
    }
    return st;
}

/* Settles an acquire left in doubt: abandons its request (exact), or past
 * the latch's horizon gives back what Redis counts beyond our count. */
static rlock_status settle_acquire(rlock *l, uint64_t tid, const char *owner,
                                   const rlock__hold_view *v, int64_t deadline_ms)
{
    rlock_client *c = l->c;
    if (!v->suspect_count) {
        int what;
        int64_t sent = rlock__now_ms();
        rlock_status st = l->kind->abandon(l, owner, v->suspect_rid, v->suspect_held,
                                           v->lease_ms, &what, deadline_ms);
        if (st != RLOCK_OK) {
            return st;
        }
        if (what == RLOCK__GAVE_BACK) {
            /* It reset the TTL of the levels we hold. */
            rlock__hold_ttl_set(c, l->key, l->keylen, tid, sent, v->lease_ms);
        }
        if (what == RLOCK__TOOK_LOST && v->count > 0) {
            rlock__hold_mark_lost(c, l->key, l->keylen, tid);
        }
        rlock__hold_set_suspect(c, l->key, l->keylen, tid, NULL, 0, 0, NULL);
        return RLOCK_OK;
    }
    /* A give-back that got no reply is sent again first, as it was (I3):
     * its latch answers if a copy ran, and stops a copy still on its way.
     * Only then are the counts compared again, and each level still
     * beyond ours goes back under a fresh id. An id is never derived from
     * a count: the fault that made the surplus (a late acquire copy) can
     * raise the count again to one seen before. */
    rlock_status st;
    rlock__released r;
    if (v->suspect_rid[0]) {
        /* Past its latch's horizon it is not sent: a copy that ran shows
         * in the count, one still on its way cannot be stopped (I5). */
        if (trusted(c, v->giveback_sent_ms)) {
            st = l->kind->release(l, owner, v->suspect_rid, v->lease_ms, &r, deadline_ms);
            if (st != RLOCK_OK) {
                return st; /* still in doubt */
            }
            if (r == RLOCK__PARTIAL) {
                /* The copy that ran set the TTL, no earlier than the
                 * first send. */
                rlock__hold_ttl_set(c, l->key, l->keylen, tid, v->giveback_sent_ms,
                                    v->lease_ms);
            }
        }
        rlock__hold_set_giveback(c, l->key, l->keylen, tid, NULL, 0);
    }
    int64_t in_redis;
    if ((st = l->kind->count(l, owner, &in_redis, deadline_ms)) != RLOCK_OK) {
        return st;
    }
    int64_t extra = v->lost ? in_redis : in_redis - v->count;
    for (; extra > 0; extra--) {
        char rid[33];
        rlock__request_id(rid);
        int64_t sent = rlock__now_ms();
        if ((st = l->kind->release(l, owner, rid, v->lease_ms, &r, deadline_ms)) != RLOCK_OK) {
            if (may_have_left(st)) {
                rlock__hold_set_giveback(c, l->key, l->keylen, tid, rid, sent);
            }
            return st; /* stays suspect */
        }
        if (r == RLOCK__PARTIAL) {
            rlock__hold_ttl_set(c, l->key, l->keylen, tid, sent, v->lease_ms);
        }
        queue_latch(l, rid); /* answered at its only send */
    }
    rlock__hold_set_suspect(c, l->key, l->keylen, tid, NULL, 0, 0, NULL);
    return RLOCK_OK;
}

/* Completes the unanswered unlock of v (l: a handle of the kind that sent
 * it): the same request again while its latch answers for it, else judged
 * from the counts. */
static rlock_status settle_pending(rlock *l, uint64_t tid, const char *owner,
                                   const rlock__hold_view *v, int64_t deadline_ms)
{
    rlock_client *c = l->c;
    rlock__released r;
    int64_t sent = rlock__now_ms();
    rlock_status st;
    if (trusted(c, v->pending_sent_ms)) {
        st = l->kind->release(l, owner, v->pending_rid, v->lease_ms, &r, deadline_ms);
        if (st == RLOCK_OK) {
            apply(l, tid, r, NULL, sent); /* a resend: its latch stays */
        }
        return st;
    }
    judged j;
    if ((st = judge_old_pending(l, owner, v, &j, deadline_ms)) != RLOCK_OK) {
        return st;
    }
    if (j == NOT_RUN) {
        /* Sent again under a new id, which becomes the request in doubt
         * if this send goes unanswered too, as in release(): a copy of it
         * may still run, and only its own latch can stop that copy, so
         * the next settling resends it rather than judge the counts
         * again (judged "not run" while it is on its way, a third unlock
         * would release a second level). */
        char rid[33];
        rlock__request_id(rid);
        sent = rlock__now_ms();
        if (v->count > 1) {
            rlock__hold_ttl_may(c, l->key, l->keylen, tid, sent, v->lease_ms);
        }
        st = l->kind->release(l, owner, rid, v->lease_ms, &r, deadline_ms);
        if (st == RLOCK_OK) {
            apply(l, tid, r, rid, sent);
        } else if (may_have_left(st)) {
            rlock__hold_set_pending(c, l->key, l->keylen, tid, rid, sent, l->kind);
        }
        return st;
    }
    apply(l, tid, j == RAN ? RLOCK__PARTIAL : RLOCK__NOT_HELD, NULL, rlock__now_ms());
    return RLOCK_OK;
}

static rlock_status settle_claimed(rlock *l, uint64_t tid, bool pending_too,
                                   rlock__hold_view v, int64_t deadline_ms);

/* rlock__settle() by who: the record is claimed first, so that no two
 * settlers send its doubts at once, and its thread sends nothing on the
 * name (its next call begins here) until the watchdog's give-up has been
 * answered or its send has ended (docs/engine.md, I4). */
static rlock_status settle(rlock *l, uint64_t tid, bool pending_too, rlock__claimer who,
                           int64_t deadline_ms)
{
    rlock_client *c = l->c;
    rlock__hold_view v;
    bool claimed;
    rlock_status st =
        rlock__hold_claim(c, l->key, l->keylen, tid, who, pending_too, deadline_ms, &v, &claimed);
    if (st != RLOCK_OK || !claimed) {
        return st; /* the common case: one lookup, nothing in doubt */
    }
    if (who == RLOCK__CLAIM_TRY && !v.orphan) {
        /* A live thread's give-up (and the acquire in doubt it follows):
         * an unanswered unlock is its thread's to retry, with its id. */
        pending_too = false;
    }
    st = settle_claimed(l, tid, pending_too, v, deadline_ms);
    rlock__hold_unclaim(c, l->key, l->keylen, tid);
    return st;
}

/* Whether the registry holds a doubt of (kind k's key of l's name, tid):
 * one lookup, no allocation for names of usual length. */
static bool sibling_in_doubt(rlock *l, const rlock__kind *k, uint64_t tid)
{
    size_t len = rlock__registry_key_len(k, l->namelen);
    char small[256];
    char *key = len < sizeof small ? small : malloc(len + 1);
    if (!key) {
        return true; /* the full settle reports the shortage */
    }
    rlock__registry_key(k, l->name, l->namelen, key);
    rlock__hold_view v;
    rlock__hold_view_of(l->c, key, len, tid, &v);
    if (key != small) {
        free(key);
    }
    return v.suspect || v.pending || v.giving_up;
}

rlock_status rlock__settle(rlock *l, uint64_t tid, bool pending_too, int64_t deadline_ms)
{
    rlock_status st = settle(l, tid, pending_too, RLOCK__CLAIM_WAIT, deadline_ms);
    const rlock__kind *sib = l->kind->sibling;
    if (st != RLOCK_OK || !sib || !sibling_in_doubt(l, sib, tid)) {
        return st;
    }
    /* The other half's doubt of the name (an acquire or unlock of the
     * thread through it whose reply was lost) is settled before this call
     * sends anything: an acquire that ran is given back, an unlock that
     * did not is completed, as that half's own next call would. */
    rlock tmp;
    if ((st = rlock__handle_init(&tmp, l->c, sib, l->name, l->namelen)) != RLOCK_OK) {
        return st;
    }
    st = settle(&tmp, tid, true, RLOCK__CLAIM_WAIT, deadline_ms);
    rlock__handle_fini(&tmp);
    return st;
}

/* The record of (l's name, tid) is claimed, v its view. */
static rlock_status settle_claimed(rlock *l, uint64_t tid, bool pending_too,
                                   rlock__hold_view v, int64_t deadline_ms)
{
    rlock_client *c = l->c;
    char owner[RLOCK__OWNER_MAX];
    rlock__owner(c, tid, owner);
    rlock_status st = RLOCK_OK;
    rlock tmp;
    rlock *h;
    if (pending_too && v.pending) {
        /* The caller asked for this unlock: complete it (the same request
         * again while its latch answers for it), then go on. */
        if ((st = as_kind(l, v.pending_kind, &tmp, &h)) != RLOCK_OK) {
            return st;
        }
        st = settle_pending(h, tid, owner, &v, deadline_ms);
        as_kind_done(l, h);
        if (st != RLOCK_OK) {
            return st;
        }
        rlock__hold_view_of(c, l->key, l->keylen, tid, &v);
    }
    if (v.giving_up) {
        /* A waiter's give-up that got no answer: sent again (it leaves the
         * queue once, and moves the places behind it forward once; a
         * second run finds nothing to leave). Before an acquire in doubt
         * is abandoned: the give-up moves the deadlines behind, the
         * abandon would not, and then stops a late copy of the attempt
         * from queueing again. */
        if ((st = as_kind(l, v.give_up_kind, &tmp, &h)) != RLOCK_OK) {
            return st;
        }
        st = h->kind->give_up ? h->kind->give_up(h, owner, v.give_up_wait_ms, deadline_ms)
                              : RLOCK_OK;
        as_kind_done(l, h);
        if (st != RLOCK_OK) {
            return st;
        }
        rlock__hold_set_give_up(c, l->key, l->keylen, tid, false, 0, NULL);
    }
    if (v.suspect) {
        /* Abandoned with the scripts of the kind that sent it. */
        if ((st = as_kind(l, v.suspect_kind, &tmp, &h)) != RLOCK_OK) {
            return st;
        }
        st = settle_acquire(h, tid, owner, &v, deadline_ms);
        as_kind_done(l, h);
    }
    return st;
}

/* ---- at close -------------------------------------------------------- */

typedef struct doubt {
    char *name;
    size_t len;
    uint64_t tid;
    const rlock__kind *kind;
} doubt;

typedef struct doubts {
    doubt *v;
    size_t n, cap;
    bool background; /* the watchdog's share */
} doubts;

static void collect_doubt(rlock__map_node *node, void *arg)
{
    doubts *d = arg;
    rlock__hold *h = (rlock__hold *)node;
    for (rlock__holder *x = h->holders; x; x = x->next) {
        /* The handle rlock__settle() gets: of a doubt's kind (it settles
         * each doubt with its own kind's scripts anyway). */
        const rlock__kind *k = x->suspect && x->suspect_kind       ? x->suspect_kind
                               : x->pending && x->pending_kind     ? x->pending_kind
                               : x->giving_up && x->give_up_kind ? x->give_up_kind
                                                                   : x->kind;
        /* The watchdog's share: exited threads' doubts, live threads'
         * give-ups (rlock__hold_claim() decides, under the mutex, at the
         * moment of sending). */
        if ((!x->suspect && !x->pending && !x->giving_up) || !k ||
            (d->background && !x->orphan && !x->giving_up)) {
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
        d->v[d->n++] = (doubt){name, h->namelen, x->tid, k};
    }
}

static bool settle_once(rlock_client *c, int64_t deadline_ms, bool background)
{
    doubts d = {NULL, 0, 0, background};
    pthread_mutex_lock(&c->hold_mu);
    rlock__map_each(&c->holds, collect_doubt, &d);
    pthread_mutex_unlock(&c->hold_mu);
    bool settled = true;
    for (size_t i = 0; i < d.n; i++) {
        rlock l;
        if (rlock__now_ms() < deadline_ms &&
            rlock__handle_init(&l, c, d.v[i].kind, d.v[i].name, d.v[i].len) == RLOCK_OK) {
            settle(&l, d.v[i].tid, true, background ? RLOCK__CLAIM_TRY : RLOCK__CLAIM_WAIT,
                   deadline_ms);
            rlock__hold_view v;
            rlock__hold_view_of(c, l.key, l.keylen, d.v[i].tid, &v);
            /* A live thread's other doubts are not the watchdog's. */
            bool mine = !background || v.orphan;
            settled = settled && !v.giving_up && !(mine && (v.suspect || v.pending));
            rlock__handle_fini(&l);
        } else {
            settled = false;
        }
        free(d.v[i].name);
    }
    free(d.v);
    return settled;
}

bool rlock__settle_all(rlock_client *c, int64_t deadline_ms, bool background)
{
    /* The watchdog tries again on its own (every second); the close uses
     * its whole budget, since a pool backing off after a failed connect,
     * or a link just back, answers a moment later. */
    for (;;) {
        bool settled = settle_once(c, deadline_ms, background);
        int64_t left = deadline_ms - rlock__now_ms();
        if (settled || background || left <= 0) {
            return settled;
        }
        rlock__sleep_ms(left < 50 ? left : 50);
    }
}
