/* Waiting for a lock name: the place in its local queue that every wait
 * shares (the acquire loop, and rlock_wait_unlocked()), and the wait until
 * a lock is free without taking it.
 *
 * A place is a waiter of the name's channel entry (pubsub.c): joined,
 * registered with the caller's cancellation token, and asleep until a
 * release message, a reconnect, the holder's lease as the latest probe saw
 * it, the caller's deadline or the token. The wake-up rules of I8 (engine.md)
 * hold for every wait alike: a wake-up that arrives while a probe or an
 * attempt is in flight is not taken as used by it (the mark), and one a
 * waiter leaves with unused is passed on, so a waiter that only watches
 * for a free lock never swallows the wake-up an acquirer behind it needs. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define IO_BACKOFF_MIN_MS 25
#define IO_BACKOFF_MAX_MS 1000
/* A polling waiter (RLOCK__WAIT_POLL) checks its token and the client's
 * close at least this often while it sleeps. */
#define POLL_SLICE_MS 10

/* The spin lock's back-off (Redisson's exponential one, spec 6): the first
 * delay is the minimum; then twice the last plus a random 0..tries-1 ms,
 * at most the maximum. */
int64_t rlock__spin_delay(const rlock_client *c, int64_t last, int64_t tries, unsigned *seed)
{
    if (tries == 0) {
        return c->cfg.spin_min_delay_ms;
    }
    int64_t d = last * 2 + (int64_t)(rand_r(seed) % (unsigned)tries);
    return d < c->cfg.spin_max_delay_ms ? d : c->cfg.spin_max_delay_ms;
}

/* Sleeps until deadline_ms for a waiter without messages; RLOCK_OK, or
 * RLOCK_ECANCELED / RLOCK_ECLOSED as soon as the token fires or the
 * client closes. */
rlock_status rlock__poll_sleep(rlock_client *c, rlock_cancel *cancel, int64_t deadline_ms)
{
    for (;;) {
        if (rlock__cancelled(cancel)) {
            return rlock__fail(RLOCK_ECANCELED, "the wait was cancelled");
        }
        if (rlock__closing(c)) {
            return rlock__fail(RLOCK_ECLOSED, "the client is closing");
        }
        int64_t left = deadline_ms - rlock__now_ms();
        if (left <= 0) {
            return RLOCK_OK;
        }
        rlock__sleep_ms(left < POLL_SLICE_MS ? left : POLL_SLICE_MS);
    }
}


/* The channel a waiter of l listens on: l's, or (RLOCK__WAIT_OWN) its own,
 * <channel>:<owner field>, built in buf when it fits in cap bytes, else in
 * *heap (malloc'd, for the caller to free); NULL on ENOMEM. *len: its
 * length. */
static const char *wait_channel(const rlock *l, char *buf, size_t cap, char **heap, size_t *len)
{
    *heap = NULL;
    if (l->kind->wait != RLOCK__WAIT_OWN) {
        *len = l->chanlen;
        return l->channel;
    }
    char *chan = buf;
    if (l->chanlen + 1 + RLOCK__OWNER_MAX > cap) {
        chan = *heap = malloc(l->chanlen + 1 + RLOCK__OWNER_MAX);
        if (!chan) {
            return NULL;
        }
    }
    memcpy(chan, l->channel, l->chanlen);
    chan[l->chanlen] = ':';
    rlock__owner_field(l, rlock_thread_id(), chan + l->chanlen + 1);
    *len = strlen(chan);
    return chan;
}

void rlock__waitq_peek(rlock *l, rlock__chan_seen *seen)
{
    char buf[256], *heap;
    size_t len;
    const char *chan = wait_channel(l, buf, sizeof buf, &heap, &len);
    if (!chan) {
        *seen = (rlock__chan_seen){0, 0}; /* not known to be subscribed */
        return;
    }
    rlock__chan_peek(l->c, chan, len, seen);
    free(heap);
}

rlock_status rlock__waitq_join(rlock *l, rlock__waitq *q, rlock_cancel *cancel, int64_t deadline_ms,
                               bool *behind, int64_t *hint_ms, const rlock__chan_seen *seen,
                               bool *live)
{
    rlock_client *c = l->c;
    rlock_status st;
    *live = false;
    /* The waiter's own channel (RLOCK__WAIT_OWN): <channel>:<owner>, which
     * the kind's release publishes to when this waiter heads Redis's
     * queue. */
    char buf[256], *heap;
    size_t len;
    const char *chan = wait_channel(l, buf, sizeof buf, &heap, &len);
    if (!chan) {
        q->ch = NULL;
        q->w = NULL;
        return rlock__fail(RLOCK_ENOMEM, "out of memory for a channel name");
    }
    st = rlock__chan_join(c, chan, len, l->kind->wake, &q->ch, &q->w, behind, hint_ms, seen, live);
    free(heap);
    if (st != RLOCK_OK) {
        q->ch = NULL;
        q->w = NULL;
        return st;
    }
    q->cancel = NULL;
    if (cancel) {
        if (!rlock__cancel_watch(cancel, c, q->ch, q->w)) {
            return rlock__fail(RLOCK_ECANCELED, "the wait was cancelled");
        }
        q->cancel = cancel;
    }
    rlock__waiter_set_cancel(q->w, cancel);
    /* A release published before the subscription took effect reaches
     * nobody: the caller probes again once this returns (unless *live:
     * the subscription was in place before its last attempt). Unconfirmed
     * within subscribe_timeout_ms, it sleeps on the holder's lease. */
    int64_t until = rlock__min_deadline(deadline_ms, rlock__now_ms() + c->cfg.subscribe_timeout_ms);
    st = rlock__chan_wait_subscribed(c, q->ch, q->w, until);
    return st == RLOCK_ETIMEDOUT ? RLOCK_OK : st; /* closed, cancelled, EPERM */
}

uint64_t rlock__waitq_mark(rlock_client *c, const rlock__waitq *q)
{
    return q->w ? rlock__chan_mark(c, q->ch) : 0;
}

void rlock__waitq_saw_held(rlock_client *c, rlock__waitq *q, uint64_t mark, int64_t lease_end_ms)
{
    if (q->w) {
        rlock__chan_used_wake(c, q->ch, q->w, mark);
        rlock__chan_saw_lease(c, q->ch, q->w, lease_end_ms);
    }
}

rlock_status rlock__waitq_sleep(rlock_client *c, rlock__waitq *q, int64_t deadline_ms)
{
    return rlock__chan_sleep(c, q->ch, q->w, deadline_ms);
}

void rlock__waitq_leave(rlock_client *c, rlock__waitq *q, bool acquired, int64_t lease_end_ms)
{
    if (!q->ch) {
        return;
    }
    if (q->cancel) {
        rlock__cancel_unwatch(q->cancel, q->w);
    }
    if (q->w) {
        rlock__chan_leave(c, q->ch, q->w, acquired, lease_end_ms);
    }
    q->ch = NULL;
    q->w = NULL;
    q->cancel = NULL;
}

/* ---- waiting until a lock is free ------------------------------------ */

/* Whether the held lock is held by the calling thread: its registry says
 * so and Redis has its field (a hold lost behind its back, then taken by
 * another owner, is another owner's to release). */
static rlock_status held_by_me(rlock *l, uint64_t tid, bool *mine, int64_t deadline_ms)
{
    rlock__hold_view v;
    rlock__hold_view_of(l->c, l->key, l->keylen, tid, &v);
    *mine = false;
    if (v.count == 0 || v.lost) {
        return RLOCK_OK;
    }
    char owner[RLOCK__OWNER_MAX];
    rlock__owner(l->c, tid, owner);
    int64_t n = 0;
    rlock_status st = l->kind->count(l, owner, &n, deadline_ms);
    *mine = st == RLOCK_OK && n > 0;
    return st;
}

rlock_status rlock__wait_unlocked(rlock *l, int64_t wait_ms, rlock_cancel *cancel)
{
    rlock_client *c = l->c;
    int64_t cmd_ms = c->cfg.command_timeout_ms;
    int64_t deadline = wait_ms < 0 ? -1 : rlock__now_ms() + wait_ms;
    if (rlock__cancelled(cancel)) {
        return rlock__fail(RLOCK_ECANCELED, "the wait was cancelled");
    }
    /* An earlier call of this thread on the name left in doubt is settled
     * first, as every call does (an acquire whose reply was lost may hold
     * the lock: waiting for it would wait on ourselves), within one command
     * timeout. */
    uint64_t tid = rlock_thread_id();
    rlock_status st = rlock__settle(l, tid, true, rlock__now_ms() + cmd_ms);
    if (st != RLOCK_OK) {
        rlock__hold_tidy(c, l->key, l->keylen, tid);
        return st;
    }
    rlock__waitq q = {NULL, NULL, NULL};
    int64_t io_since = -1, io_sleep = 0, lease_end = -1;
    /* As the acquire loop: a lost reply or a dropped link is retried with
     * backoff for retry_timeout_ms within the wait (a zero wait: none). */
    int64_t io_limit = wait_ms == 0 ? 0 : c->cfg.retry_timeout_ms;
    bool checked_self = false;
    for (;;) {
        /* A wake-up that comes while the probe is in flight was not used
         * by it: the release may have run after the probe. */
        uint64_t mark = rlock__waitq_mark(c, &q);
        int64_t ttl = 0;
        int64_t sent = rlock__now_ms();
        st = l->kind->holder_ttl(l, &ttl, sent + cmd_ms);
        if (st == RLOCK_OK && ttl == -2) {
            break; /* free */
        }
        if (st == RLOCK_OK) {
            if (!checked_self) {
                bool mine = false;
                st = held_by_me(l, tid, &mine, rlock__now_ms() + cmd_ms);
                if (st == RLOCK_OK && mine) {
                    st = rlock__fail(RLOCK_EDEADLK, "the calling thread holds the lock: it "
                                                    "cannot become free while it waits");
                    break;
                }
                checked_self = st == RLOCK_OK;
            }
            if (st == RLOCK_OK) {
                st = rlock__fail(RLOCK_EBUSY, "the lock was still held when the wait ran out");
                lease_end = ttl >= 0 ? rlock__now_ms() + ttl : -1;
                io_since = -1;
                io_sleep = 0;
                rlock__waitq_saw_held(c, &q, mark, lease_end);
            }
        }
        if (st == RLOCK_EIO || st == RLOCK_ETIMEDOUT) {
            if (io_since < 0) {
                io_since = sent;
            }
            if (rlock__now_ms() - io_since >= io_limit) {
                break;
            }
            io_sleep = io_sleep ? io_sleep * 2 : IO_BACKOFF_MIN_MS;
            if (io_sleep > IO_BACKOFF_MAX_MS) {
                io_sleep = IO_BACKOFF_MAX_MS;
            }
        } else if (st != RLOCK_EBUSY) {
            break; /* EREDIS, EPROTO, ECLOSED, EAUTH, EPOOL, ENOMEM, EPERM */
        }
        int64_t now = rlock__now_ms();
        if (deadline >= 0 && now >= deadline) {
            break; /* RLOCK_EBUSY, or the transport error */
        }
        if (l->kind->wait != RLOCK__WAIT_SHARED) {
            /* No channel tells a watcher of this kind (the fair lock wakes
             * only its queue's head, the spin lock publishes nothing):
             * probe again after the longest spin delay. */
            int64_t until = now + (st == RLOCK_EBUSY ? c->cfg.spin_max_delay_ms : io_sleep);
            if (st == RLOCK_EBUSY && lease_end >= 0 && lease_end < until) {
                until = lease_end;
            }
            rlock_status ss = rlock__poll_sleep(c, cancel, rlock__min_deadline(until, deadline));
            if (ss != RLOCK_OK) {
                st = ss;
                break;
            }
            continue;
        }
        if (!q.ch) {
            bool behind = false;
            int64_t hint = -1;
            bool live = false;
            rlock_status js =
                rlock__waitq_join(l, &q, cancel, deadline, &behind, &hint, NULL, &live);
            if (js != RLOCK_OK) {
                st = js;
                break;
            }
            continue; /* probe again: a release before the subscription */
        }
        int64_t until = st == RLOCK_EBUSY ? lease_end : now + io_sleep;
        rlock_status ss = rlock__waitq_sleep(c, &q, rlock__min_deadline(until, deadline));
        if (ss != RLOCK_OK) {
            st = ss;
            break;
        }
    }
    rlock__waitq_leave(c, &q, false, -1);
    return st;
}
