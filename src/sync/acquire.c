/* The acquire loop every lock kind shares:
 *
 *   attempt -> (held elsewhere) join the local queue and subscribe ->
 *   attempt again (a release published before the subscription took effect
 *   is caught by it) -> sleep until a release message, a reconnect, the
 *   holder's lease as the last attempt saw it, or the end of the wait ->
 *   attempt again ...
 *
 * An attempt whose reply was lost is never resent blindly (a re-entry
 * would count twice, spec 2.2): the hold count in Redis says whether it
 * ran. Connection errors are retried with backoff for retry_timeout_ms. A
 * cancellation token or the client's close ends the wait at once. */
#include "internal.h"

#define IO_BACKOFF_MIN_MS 25
#define IO_BACKOFF_MAX_MS 1000

typedef struct waiting {
    rlock__chan *ch;
    rlock__waiter *w;
} waiting;

/* The attempt got no reply (timeout or broken link): it may have run, may
 * still run, or never will. Look instead of resending: held + 1 means it
 * ran. Returns RLOCK_OK with *a filled when the answer is known. */
static rlock_status outcome(rlock *l, const char *owner, int64_t held, rlock_status st,
                            uint64_t tid, rlock__attempt *a)
{
    rlock_client *c = l->c;
    int64_t n;
    if (l->kind->count(l, owner, &n, rlock__now_ms() + c->cfg.command_timeout_ms) == RLOCK_OK) {
        if (n == held + 1) {
            *a = (rlock__attempt){RLOCK__TAKEN, n, -1};
            return RLOCK_OK;
        }
        if (held > 0 && n == 0) {
            *a = (rlock__attempt){RLOCK__GONE, 0, -1};
            return RLOCK_OK;
        }
        if (st == RLOCK_EIO) {
            return st; /* a broken link's request cannot run later */
        }
    }
    /* A timed-out request may still run (its bytes can sit in a stalled
     * server's buffer): this thread's next call for the name, or the
     * client's close, compares the counts again and releases an orphan. */
    rlock__hold_set_suspect(c, l->name, l->namelen, tid, true);
    return st;
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

    if (rlock__cancelled(cancel)) {
        return rlock__fail(RLOCK_ECANCELED, "the wait was cancelled");
    }
    rlock_status st = rlock__hold_prepare(c, l->name, l->namelen, tid);
    if (st != RLOCK_OK) {
        return st;
    }
    if ((st = rlock__settle(l, tid, true, rlock__now_ms() + cmd_ms)) != RLOCK_OK) {
        rlock__hold_tidy(c, l->name, l->namelen, tid);
        return st;
    }
    rlock__hold_view v;
    rlock__hold_view_of(c, l->name, l->namelen, tid, &v);
    if (v.count > 0 && v.lost) {
        /* Re-entering a hold this client already knows is gone: nothing to
         * take, the thread must unwind (its outer unlock says so too). */
        rlock__hold_mark_lost(c, l->name, l->namelen, tid);
        rlock__hold_tidy(c, l->name, l->namelen, tid);
        return rlock__fail(RLOCK_ELOST, "this thread's hold of the lock was lost");
    }
    int64_t held = v.count;
    if (held == 0 && lease_ms != RLOCK_WATCHDOG && v.in_round) {
        /* A renewal of this thread's previous hold is in flight; if it ran
         * after this acquire it would stretch the new lease to the
         * watchdog's. Let it finish first (rare, one round trip). */
        rlock__hold_wait_round(c, l->name, l->namelen, tid, rlock__now_ms() + cmd_ms);
    }

    waiting q = {NULL, NULL};
    int64_t io_since = -1, io_sleep = 0, lease_end = -1, ttl = -1;
    /* No barging: while other threads of this client queue for the name, a
     * newcomer that does not hold it queues behind them instead of racing
     * them (or the thread that just released would win again and again). */
    bool skip = wait_ms != 0 && held == 0 && rlock__chan_queued(c, l->channel, l->chanlen);
    st = RLOCK_EBUSY;
    for (;;) {
        if (!skip) {
            rlock__attempt a;
            int64_t sent = rlock__now_ms();
            uint64_t mark = q.w ? rlock__chan_mark(c, q.ch) : 0;
            st = k->attempt(l, owner, lease, held, &a, sent + cmd_ms);
            if ((st == RLOCK_ETIMEDOUT || st == RLOCK_EIO) && !rlock__run_refused()) {
                st = outcome(l, owner, held, st, tid, &a);
            }
            if (st == RLOCK_OK && a.what == RLOCK__TAKEN) {
                rlock__hold_acquired(c, l->name, l->namelen, tid, lease_ms, sent);
                if (a.count != held + 1) {
                    /* Redis counts more than we do: an earlier acquire ran
                     * after its reply was lost. Settled at the next call. */
                    rlock__hold_set_suspect(c, l->name, l->namelen, tid, true);
                }
                break;
            }
            if (st == RLOCK_OK && a.what == RLOCK__GONE) {
                rlock__hold_mark_lost(c, l->name, l->namelen, tid);
                st = rlock__fail(RLOCK_ELOST, "this thread's hold of the lock was lost");
                break;
            }
            if (st == RLOCK_OK) { /* RLOCK__HELD */
                st = rlock__fail(RLOCK_EBUSY, "the lock is held by another owner");
                ttl = a.ttl;
                lease_end = ttl >= 0 ? rlock__now_ms() + ttl : -1;
                io_since = -1;
                io_sleep = 0;
                if (q.w) {
                    rlock__chan_used_wake(c, q.ch, q.w, mark);
                    rlock__chan_saw_lease(c, q.ch, q.w, lease_end);
                }
            } else if (st == RLOCK_EIO && wait_ms != 0) {
                /* Redis restarting or the link dropped: keep waiting, with
                 * backoff, for up to retry_timeout_ms. */
                int64_t now = rlock__now_ms();
                if (io_since < 0) {
                    io_since = now;
                }
                if (now - io_since >= c->cfg.retry_timeout_ms) {
                    break;
                }
                io_sleep = io_sleep ? io_sleep * 2 : IO_BACKOFF_MIN_MS;
                if (io_sleep > IO_BACKOFF_MAX_MS) {
                    io_sleep = IO_BACKOFF_MAX_MS;
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
        if (!q.ch) {
            bool behind = false;
            int64_t hint = -1;
            rlock_status js = rlock__chan_join(c, l->channel, l->chanlen, k->wake, &q.ch, &q.w,
                                               &behind, &hint);
            if (js != RLOCK_OK) {
                st = js;
                break;
            }
            if (cancel && !rlock__cancel_watch(cancel, c, q.ch, q.w)) {
                st = rlock__fail(RLOCK_ECANCELED, "the wait was cancelled");
                break;
            }
            rlock__waiter_set_cancel(q.w, cancel);
            rlock_status ws = rlock__chan_wait_subscribed(
                c, q.ch, q.w, rlock__min_deadline(deadline, now + c->cfg.subscribe_timeout_ms));
            if (ws != RLOCK_OK && ws != RLOCK_ETIMEDOUT) { /* closed, cancelled, EPERM */
                st = ws;
                break;
            }
            /* Queued behind other local waiters: sleep until woken in turn,
             * at the latest when the holder's lease ends as their last
             * attempt saw it. Without that knowledge, try again now. */
            now = rlock__now_ms();
            if (!(behind && held == 0 && hint > now)) {
                continue;
            }
            lease_end = hint;
        }
        int64_t until = io_sleep > 0 && st != RLOCK_EBUSY ? now + io_sleep : lease_end;
        rlock_status ss = rlock__chan_sleep(c, q.ch, q.w, rlock__min_deadline(until, deadline));
        if (ss != RLOCK_OK) {
            st = ss;
            break;
        }
    }
    if (q.ch) {
        if (cancel) {
            rlock__cancel_unwatch(cancel, q.w);
        }
        rlock__chan_leave(c, q.ch, q.w, st == RLOCK_OK, rlock__now_ms() + lease);
    }
    if (st != RLOCK_OK) {
        rlock__hold_tidy(c, l->name, l->namelen, tid);
    }
    if (st == RLOCK_EBUSY && holder_ttl_ms) {
        *holder_ttl_ms = ttl;
    }
    return st;
}
