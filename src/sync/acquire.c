/* The acquire loop every lock kind shares:
 *
 *   attempt -> (held elsewhere) join the local queue and subscribe ->
 *   attempt again (a release published before the subscription took effect
 *   is caught by it) -> sleep until a release message, a reconnect, the
 *   holder's lease as the last attempt saw it, or the end of the wait ->
 *   attempt again ...
 *
 * Every attempt carries a request id. An attempt whose reply was lost is
 * sent again with the same id: only this thread's own requests change its
 * field and every earlier one was answered or settled, so the resend finds
 * exactly whether the first copy ran (the count is one more than ours) and
 * answers that, never a second hold; it leaves the outcome in the
 * request's acquire latch, which stops a copy of the first send still on
 * its way. A first send only reads the latch: the common path writes
 * nothing but the lock.
 * Connection errors and timeouts are retried so, with backoff, for
 * retry_timeout_ms (a call that does not wait: for one command timeout).
 * An id still unanswered when the call must return is recorded with the
 * hold; the thread's next call for the name, or rlock_client_free(),
 * abandons it (lua/abandon.lua: no copy can take a hold afterwards, and a
 * hold it took is given back). A cancellation token or the client's close
 * ends the wait at once. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define IO_BACKOFF_MIN_MS 25
#define IO_BACKOFF_MAX_MS 1000

/* A request that got no answer from Redis (it may or may not have run, or
 * never left): not a refusal, which sending it again would not change. */
static bool unanswered(rlock_status st)
{
    return st == RLOCK_EIO || st == RLOCK_ETIMEDOUT || st == RLOCK_EPOOL || st == RLOCK_ENOMEM ||
           st == RLOCK_ECLOSED || st == RLOCK_EAUTH || st == RLOCK_ETLS;
}
rlock_status rlock__acquire(rlock *l, int64_t wait_ms, int64_t lease_ms, rlock_cancel *cancel,
                            int64_t *holder_ttl_ms)
{
    rlock_client *c = l->c;
    const rlock__kind *k = l->kind;
    uint64_t tid = rlock_thread_id();
    char owner[RLOCK__OWNER_MAX];
    rlock__owner(c, tid, owner);
    int64_t cmd_ms = c->cfg.command_timeout_ms;
    int64_t lease = lease_ms == RLOCK_WATCHDOG ? c->cfg.watchdog_timeout_ms : lease_ms;
    int64_t deadline = wait_ms < 0 ? -1 : rlock__now_ms() + wait_ms;
    /* What an acquire that may have run can do to the hold's TTL: set it
     * to the lease, or (-1) only lengthen it (rlock__hold_set_suspect). */
    int64_t may_ttl = k->reentry == RLOCK__REENTRY_SETS ? lease : -1;

    if (rlock__cancelled(cancel)) {
        return rlock__fail(RLOCK_ECANCELED, "the wait was cancelled");
    }
    rlock_status st = rlock__hold_prepare(c, l->key, l->keylen, tid, k);
    if (st != RLOCK_OK) {
        return st;
    }
    /* Settling an earlier doubt and waiting out a renewal in flight share
     * one command timeout: the steps before the first attempt never add up
     * to more (finding 15). */
    int64_t prelude_end = rlock__now_ms() + cmd_ms;
    if ((st = rlock__settle(l, tid, true, prelude_end)) != RLOCK_OK) {
        rlock__hold_tidy(c, l->key, l->keylen, tid);
        /* A token fired while the doubt could not be settled: the caller
         * asked to stop, and that is the answer (the doubt stays). */
        return rlock__cancelled(cancel) ? rlock__fail(RLOCK_ECANCELED, "the wait was cancelled")
                                        : st;
    }
    rlock__hold_view v;
    rlock__hold_view_of(c, l->key, l->keylen, tid, &v);
    if ((st = rlock__layout_check(l, &v)) != RLOCK_OK) {
        /* Nothing is sent: the scripts would refuse it too, but the
         * count this thread holds is of the other kind's field. */
        rlock__hold_tidy(c, l->key, l->keylen, tid);
        return st;
    }
    if (v.count > 0 && v.lost) {
        /* Re-entering a hold this client already knows is gone: nothing to
         * take. The thread is told now; its levels unwind with RLOCK_ELOST,
         * and its next lock takes a fresh hold above them. */
        rlock__hold_unwound_lost(c, l->key, l->keylen, tid, false);
        rlock__hold_tidy(c, l->key, l->keylen, tid);
        return rlock__fail(RLOCK_ELOST, "this thread's hold of the lock was lost");
    }
    int64_t held = v.count;
    if (held == 0 && lease_ms != RLOCK_WATCHDOG && v.in_round) {
        /* A renewal of this thread's previous hold is in flight; if it ran
         * after this acquire it would stretch the new lease to the
         * watchdog's. Let it finish first (rare, one round trip). */
        rlock__hold_wait_round(c, l->key, l->keylen, tid, prelude_end);
    }
    if (rlock__cancelled(cancel)) {
        rlock__hold_tidy(c, l->key, l->keylen, tid);
        return rlock__fail(RLOCK_ECANCELED, "the wait was cancelled");
    }

    rlock__waitq q = {NULL, NULL, NULL}; /* the place in the queue (wait.c) */
    int64_t io_since = -1, io_sleep = 0, lease_end = -1, ttl = -1;
    bool saw_ttl = false;
    /* The request id of the current attempt; resend: it went out before
     * and got no answer, so it may have run or may still run. */
    char rid[33];
    rlock__request_id(rid);
    bool resend = false;
    int64_t first_sent = -1; /* of the current request id */
    int64_t latch_ttl = rlock__acquire_latch_ttl(c);
    /* A call that does not wait still retries a lost reply (or a request
     * that never left: a reconnect's handshake timed out) for one command
     * timeout; one that waits, for retry_timeout_ms within its wait. */
    int64_t io_limit = wait_ms == 0 ? cmd_ms : c->cfg.retry_timeout_ms;
    /* No barging: while other threads of this client queue for the name, a
     * newcomer that does not hold it queues behind them instead of racing
     * them (or the thread that just released would win again and again).
     * Not for a kind whose holds share the lock: a reader goes in beside
     * the readers that hold it, as Redisson's does. */
    bool skip = k->wait == RLOCK__WAIT_SHARED && !k->shared && wait_ms != 0 && held == 0 &&
                rlock__chan_queued(c, l->channel, l->chanlen);
    /* An attempt answered "held elsewhere", or went unanswered: the kind
     * may have queued this waiter (the fair lock's queue in Redis). The
     * other answers (taken, gone, spent, self, foreign) queue nobody. */
    bool maybe_queued = false;
    int64_t spin_last = 0, spin_tries = 0;
    /* The waiter's channel as it was right before the latest attempt, while
     * not joined; peeked: that attempt answered "held elsewhere". */
    rlock__chan_seen seen = {0, 0};
    bool peeked = false;
    unsigned seed = (unsigned)(tid * 2654435761u) ^ (unsigned)rlock__now_ms();
    st = RLOCK_EBUSY;
    for (;;) {
        if (!skip) {
            rlock__attempt a;
            int64_t sent = rlock__now_ms();
            if (!resend) {
                first_sent = sent;
                if (held > 0 && !k->no_reentry) {
                    /* A re-entry of the reentrant lock's kinds sets the TTL
                     * to its lease if it runs; the read/write halves' never
                     * shorten the hold's life, and their deadline counts
                     * from the one noted now (a kind without re-entry
                     * refuses it, changing nothing). */
                    rlock__hold_reentry_sent(c, l->key, l->keylen, tid, sent, lease, k->reentry);
                }
            }
            /* A wake-up that arrives while this attempt is in flight was
             * not used by it (Redis may have run it before the release). */
            uint64_t mark = rlock__waitq_mark(c, &q);
            peeked = false;
            if (!q.ch && wait_ms != 0 && k->wait != RLOCK__WAIT_POLL) {
                rlock__waitq_peek(l, &seen);
            }
            st = k->attempt(l, owner, lease, held, wait_ms, rid, resend, &a, sent + cmd_ms);
            if (st == RLOCK_OK && a.what == RLOCK__TAKEN) {
                /* The TTL was set by whichever copy ran: no earlier than
                 * the first send. */
                rlock__hold_acquired(c, l->key, l->keylen, tid, lease_ms, first_sent, k, a.token,
                                     k->reentry);
                resend = false;
                if (a.count != held + 1) {
                    /* Redis counts other than we do: an acquire of ours ran
                     * beyond the latch's horizon. The next call compares
                     * the counts and gives the surplus back. */
                    rlock__hold_set_suspect(c, l->key, l->keylen, tid, "", sent, may_ttl, k);
                }
                break;
            }
            if (st == RLOCK_OK) {
                /* Answered without a hold: the id is used up. */
                resend = false;
                rlock__request_id(rid);
            }
            if (st == RLOCK_OK && a.what == RLOCK__GONE) {
                rlock__hold_unwound_lost(c, l->key, l->keylen, tid, false);
                st = rlock__fail(RLOCK_ELOST, "this thread's hold of the lock was lost");
                break;
            }
            if (st == RLOCK_OK && a.what == RLOCK__SPENT) {
                continue; /* an earlier copy took nothing: try again now */
            }
            if (st == RLOCK_OK && a.what == RLOCK__SELF) {
                st = rlock__fail(RLOCK_EDEADLK, held > 0 ? "the lock is not reentrant and the "
                                                           "calling thread holds it"
                                                         : "only the calling thread's own hold "
                                                           "stands in the way (a read lock "
                                                           "cannot become a write lock)");
                break;
            }
            if (st == RLOCK_OK && a.what == RLOCK__FOREIGN) {
                st = rlock__fail(RLOCK_EKIND, "the name holds another kind of lock than %s",
                                 k->name);
                break;
            }
            if ((st == RLOCK_OK && a.what == RLOCK__HELD) || st == RLOCK_EIO ||
                st == RLOCK_ETIMEDOUT) {
                maybe_queued = true;
            }
            if (st == RLOCK_OK) { /* RLOCK__HELD */
                st = rlock__fail(RLOCK_EBUSY, "the lock is held by another owner");
                ttl = a.ttl;
                saw_ttl = true;
                lease_end = ttl >= 0 ? rlock__now_ms() + ttl : -1;
                io_since = -1;
                io_sleep = 0;
                peeked = !q.ch && wait_ms != 0;
                rlock__waitq_saw_held(c, &q, mark, lease_end);
            } else if (st == RLOCK_EIO || st == RLOCK_ETIMEDOUT) {
                /* No answer (Redis restarting, the link dropped, a stalled
                 * server): send the same request again, with backoff. */
                resend = true;
                int64_t now = rlock__now_ms();
                if (io_since < 0) {
                    io_since = sent;
                }
                if (now - io_since >= io_limit || !rlock__latch_trusted(c, first_sent, latch_ttl)) {
                    break;
                }
                io_sleep = io_sleep ? io_sleep * 2 : IO_BACKOFF_MIN_MS;
                if (io_sleep > IO_BACKOFF_MAX_MS) {
                    io_sleep = IO_BACKOFF_MAX_MS;
                }
                if (wait_ms == 0) {
                    if (rlock__cancelled(cancel)) {
                        st = rlock__fail(RLOCK_ECANCELED, "the wait was cancelled");
                        break;
                    }
                    rlock__sleep_ms(io_sleep);
                    continue;
                }
            } else {
                break;
            }
        }
        skip = false;
        int64_t now = rlock__now_ms();
        if (deadline >= 0 && now >= deadline) {
            break; /* st is RLOCK_EBUSY, or the transport error */
        }
        if (k->wait == RLOCK__WAIT_POLL) {
            /* No messages: sleep and try again, the back-off growing while
             * the lock stays held (spin lock, spec 6). */
            int64_t until = now + io_sleep;
            if (st == RLOCK_EBUSY) {
                spin_last = rlock__spin_delay(c, spin_last, spin_tries++, &seed);
                until = now + spin_last;
            }
            rlock_status ss = rlock__poll_sleep(c, cancel, rlock__min_deadline(until, deadline));
            if (ss != RLOCK_OK) {
                st = ss;
                break;
            }
            continue;
        }
        if (!q.ch) {
            bool behind = false, live = false;
            int64_t hint = -1;
            rlock_status js = rlock__waitq_join(l, &q, cancel, deadline, &behind, &hint,
                                                peeked ? &seen : NULL, &live);
            if (js != RLOCK_OK) { /* closed, cancelled, EPERM, ENOMEM */
                st = js;
                break;
            }
            now = rlock__now_ms();
            if (live && !k->shared) {
                /* The channel was subscribed before the attempt went out
                 * (lingering from this thread's last wait) and no message
                 * came since: a release that runs after the attempt
                 * publishes to this subscription, and its message finds
                 * this waiter queued. The attempt that would close the
                 * lost-wake-up window finds nothing new: sleep on the
                 * lease the attempt saw. */
            } else if (!(behind && held == 0 && hint > now) || k->shared) {
                /* Queued behind other local waiters: sleep until woken in
                 * turn, at the latest when the holder's lease ends as their
                 * last attempt saw it. Without that knowledge, try again
                 * now. A shared kind (the read half) always tries again:
                 * readers do not queue behind each other, and a "0" wakes
                 * only one local waiter. */
                continue;
            } else {
                lease_end = hint;
            }
        }
        int64_t until = io_sleep > 0 && st != RLOCK_EBUSY ? now + io_sleep : lease_end;
        rlock_status ss = rlock__waitq_sleep(c, &q, rlock__min_deadline(until, deadline));
        if (ss != RLOCK_OK) {
            st = ss;
            break;
        }
    }
    rlock__waitq_leave(c, &q, st == RLOCK_OK, rlock__now_ms() + lease);
    if (st != RLOCK_OK && maybe_queued && k->give_up) {
        /* The kind's queue in Redis (the fair lock's) lets the others
         * behind go first. A give-up that gets no answer is kept in doubt
         * and sent again once Redis answers (rlock__settle: this thread's
         * next call on the name, the close, the watchdog after the
         * thread's exit), or its place would hold up every waiter behind
         * it until its deadline. */
        rlock_status gs = k->give_up(l, owner, wait_ms, rlock__now_ms() + cmd_ms);
        if (unanswered(gs)) {
            rlock__hold_set_give_up(c, l->key, l->keylen, tid, true, wait_ms, k);
        }
    }
    if (resend) {
        /* The last request sent got no answer: settled (abandoned) by this
         * thread's next call for the name or at close. */
        rlock__hold_set_suspect(c, l->key, l->keylen, tid, rid, first_sent, may_ttl, k);
    }
    if (st != RLOCK_OK) {
        rlock__hold_tidy(c, l->key, l->keylen, tid);
    }
    if (st == RLOCK_EBUSY && holder_ttl_ms && saw_ttl) {
        *holder_ttl_ms = ttl;
    }
    return st;
}
