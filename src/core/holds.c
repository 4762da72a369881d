/* The hold registry: per lock name, which threads of this client hold it,
 * how often, with which lease, and what is in doubt (an acquire whose reply
 * was lost, an unlock whose reply was lost). It answers "did this thread
 * hold it?" (RLOCK_ELOST versus RLOCK_ENOTOWNER), tells the watchdog what
 * to renew, and keeps the request id an unanswered unlock must be resent
 * with.
 *
 * Every record is read and changed under hold_mu and found by (name,
 * thread) each time, so whoever holds the mutex may free one: its own
 * thread after a release, the thread-exit hook, the client at close. Each
 * record is in two lists: its name's (c->holds) and its thread's
 * (c->threads), so that a thread's exit, which runs with hold_mu held and
 * stalls every lock, unlock and renewal meanwhile, costs that thread's
 * records only, however many other threads hold locks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "object.h"

static rlock__hold *find_hold(rlock_client *c, const char *name, size_t len)
{
    return (rlock__hold *)rlock__map_get(&c->holds, name, len);
}

static rlock__holder *find_holder(rlock__hold *h, uint64_t tid)
{
    for (rlock__holder *x = h ? h->holders : NULL; x; x = x->next) {
        if (x->tid == tid) {
            return x;
        }
    }
    return NULL;
}

static rlock__holder *find(rlock_client *c, const char *name, size_t len, uint64_t tid)
{
    return find_holder(find_hold(c, name, len), tid);
}

static rlock__thread_holds *find_thread(rlock_client *c, uint64_t tid)
{
    return (rlock__thread_holds *)rlock__map_get(&c->threads, (const char *)&tid, sizeof tid);
}

/* Puts x first in its thread's list, making the list if needed. */
static rlock_status link_thread(rlock_client *c, rlock__holder *x)
{
    rlock__thread_holds *t = find_thread(c, x->tid);
    if (!t) {
        if (!(t = malloc(sizeof *t))) {
            return RLOCK_ENOMEM;
        }
        t->tid = x->tid;
        t->first = NULL;
        t->node.key = (const char *)&t->tid;
        t->node.keylen = sizeof t->tid;
        if (rlock__map_put(&c->threads, &t->node) != RLOCK_OK) {
            free(t);
            return RLOCK_ENOMEM;
        }
    }
    x->tprev = NULL;
    x->tnext = t->first;
    if (t->first) {
        t->first->tprev = x;
    }
    t->first = x;
    return RLOCK_OK;
}

static void unlink_thread(rlock_client *c, rlock__holder *x)
{
    if (x->tnext) {
        x->tnext->tprev = x->tprev;
    }
    if (x->tprev) {
        x->tprev->tnext = x->tnext;
        return;
    }
    rlock__thread_holds *t = find_thread(c, x->tid);
    if (t) { /* always: x is in it */
        t->first = x->tnext;
        if (!t->first) {
            rlock__map_del(&c->threads, &t->node);
            free(t);
        }
    }
}

void rlock__holder_remove(rlock_client *c, rlock__hold *h, rlock__holder *x)
{
    rlock__holder **p = &h->holders;
    while (*p != x) {
        p = &(*p)->next;
    }
    *p = x->next;
    unlink_thread(c, x);
    free(x);
    if (!h->holders) {
        rlock__map_del(&c->holds, &h->node);
        free(h);
    }
}

/* A record with nothing to remember goes, unless a renewal round still
 * refers to it (then the round's end tidies it), its thread is in the
 * middle of an acquire (the record must be there for the outcome) or a
 * settler has claimed it (its unclaim tidies it). */
static void tidy(rlock_client *c, rlock__hold *h, rlock__holder *x)
{
    if (x->count == 0 && x->lost_levels == 0 && !x->suspect && !x->pending && !x->giving_up &&
        !x->in_round && !x->acquiring && !x->settling) {
        rlock__holder_remove(c, h, x);
    }
}

rlock_status rlock__holds_init(rlock_client *c)
{
    pthread_mutex_init(&c->hold_mu, NULL);
    rlock__cond_init(&c->wd_cv);
    rlock__cond_init(&c->round_cv);
    rlock__cond_init(&c->claim_cv);
    c->wd_sleep_until = -1;
    rlock_status st = rlock__map_init(&c->holds);
    if (st == RLOCK_OK && (st = rlock__map_init(&c->threads)) != RLOCK_OK) {
        rlock__map_destroy(&c->holds);
    }
    return st;
}

static void free_hold(rlock__map_node *n, void *arg)
{
    (void)arg;
    rlock__hold *h = (rlock__hold *)n;
    rlock__holder *x = h->holders;
    while (x) {
        rlock__holder *next = x->next;
        free(x);
        x = next;
    }
}

/* Frees every node of m (each is the first member of its malloc'd entry)
 * and the table. */
static void free_nodes(rlock__map *m)
{
    for (size_t i = 0; i < m->nslots; i++) {
        rlock__map_node *n = m->slots[i];
        while (n) {
            rlock__map_node *next = n->next;
            free(n);
            n = next;
        }
    }
    rlock__map_destroy(m);
}

void rlock__holds_free(rlock_client *c)
{
    if (!c->holds.slots) {
        return;
    }
    rlock__map_each(&c->holds, free_hold, NULL);
    free_nodes(&c->holds);
    free_nodes(&c->threads);
    if (c->pid == getpid()) {
        pthread_mutex_destroy(&c->hold_mu);
        pthread_cond_destroy(&c->wd_cv);
        pthread_cond_destroy(&c->round_cv);
        pthread_cond_destroy(&c->claim_cv);
    }
}

rlock_status rlock__hold_prepare(rlock_client *c, const char *name, size_t len, uint64_t tid,
                                 const struct rlock__kind *kind)
{
    pthread_mutex_lock(&c->hold_mu);
    rlock__hold *h = find_hold(c, name, len);
    if (!h) {
        /* The name is stored right after the struct: one allocation. */
        h = malloc(sizeof *h + len + 1);
        if (!h) {
            pthread_mutex_unlock(&c->hold_mu);
            return rlock__fail(RLOCK_ENOMEM, "out of memory for the hold record");
        }
        h->holders = NULL;
        h->name = (char *)(h + 1);
        memcpy(h->name, name, len);
        h->name[len] = '\0';
        h->namelen = strnlen(name, len);
        h->keylen = len;
        h->node.key = h->name;
        h->node.keylen = len;
        if (rlock__map_put(&c->holds, &h->node) != RLOCK_OK) {
            free(h);
            pthread_mutex_unlock(&c->hold_mu);
            return rlock__fail(RLOCK_ENOMEM, "out of memory for the hold record");
        }
    }
    rlock__holder *found = find_holder(h, tid);
    if (found) {
        /* Its kind stays: this attempt may yet be refused (another kind
         * at the name) or go unanswered (then its own kind settles it:
         * suspect_kind). Only a first hold taken relabels the record. */
        found->acquiring = true;
    } else {
        rlock__holder *x = calloc(1, sizeof *x);
        if (!x) {
            if (!h->holders) {
                rlock__map_del(&c->holds, &h->node);
                free(h);
            }
            pthread_mutex_unlock(&c->hold_mu);
            return rlock__fail(RLOCK_ENOMEM, "out of memory for the hold record");
        }
        x->tid = tid;
        x->expires_ms = -1;
        x->reentry_from_ms = -1;
        x->acquiring = true;
        x->kind = kind;
        x->hold = h;
        if (link_thread(c, x) != RLOCK_OK) {
            free(x);
            if (!h->holders) {
                rlock__map_del(&c->holds, &h->node);
                free(h);
            }
            pthread_mutex_unlock(&c->hold_mu);
            return rlock__fail(RLOCK_ENOMEM, "out of memory for the hold record");
        }
        x->next = h->holders;
        h->holders = x;
    }
    pthread_mutex_unlock(&c->hold_mu);
    return RLOCK_OK;
}

/* The TTL that keeps the lowest `left` levels of x: the watchdog's lease
 * while one of them was taken in watchdog mode, else the explicit lease
 * (that of the latest explicit acquire, as Redisson's unlock uses the
 * lease of the latest acquire). */
static int64_t ttl_below(const rlock_client *c, const rlock__holder *x, int64_t left)
{
    bool watchdog = x->wd_depth > 0 && x->wd_depth <= left;
    return !watchdog && x->lease_ms > 0 ? x->lease_ms : c->cfg.watchdog_timeout_ms;
}

void rlock__holder_told(rlock__holder *x, int64_t sent_ms, int64_t ttl_ms)
{
    int64_t now = rlock__now_ms();
    if (x->expires_ms < 0 || sent_ms > x->settled_ms) {
        /* Sent after every earlier one was confirmed: Redis ran it last. */
        x->expires_ms = sent_ms + ttl_ms;
        x->told_ms = sent_ms;
    } else {
        /* In flight together with the one applied before (a renewal and
         * the thread's own re-entry or unlock, on two connections): Redis
         * may have run either last, and whichever did ran after both were
         * sent. Keep the earlier of the two deadlines. */
        int64_t from = sent_ms > x->told_ms ? sent_ms : x->told_ms;
        if (from + ttl_ms < x->expires_ms) {
            x->expires_ms = from + ttl_ms;
        }
        x->told_ms = from;
    }
    x->settled_ms = now;
}

int64_t rlock__lost_margin(const rlock_client *c)
{
    int64_t m = c->cfg.watchdog_timeout_ms / 10;
    return m > 0 ? m : 1;
}

/* Wakes the watchdog when x's report (a watchdog-mode hold is reported
 * lost rlock__lost_margin() before its deadline) now falls before the end
 * of the watchdog's current wait; a watchdog that is not waiting sees it
 * before it waits again. Called with hold_mu held. */
static void wake_if_due_sooner(rlock_client *c, const rlock__holder *x)
{
    if (x->wd_depth > 0 && x->expires_ms >= 0 && c->wd_sleep_until >= 0 &&
        x->expires_ms - rlock__lost_margin(c) < c->wd_sleep_until) {
        pthread_cond_signal(&c->wd_cv);
    }
}

/* A request of x's own thread set a TTL (sent_ms, ttl_ms): the deadline
 * follows it. When that brings a watchdog hold's report nearer (a
 * re-entry with a lease shorter than what the last renewal set), the
 * watchdog is woken to re-time its wait. */
static void thread_told(rlock_client *c, rlock__holder *x, int64_t sent_ms, int64_t ttl_ms)
{
    rlock__holder_told(x, sent_ms, ttl_ms);
    wake_if_due_sooner(c, x);
}

/* The view of x (NULL: no record). hold_mu held. */
static void view_locked(rlock_client *c, const rlock__holder *x, rlock__hold_view *v)
{
    memset(v, 0, sizeof *v);
    v->token = -1;
    if (x) {
        v->count = x->count;
        v->token = x->count > 0 ? x->token : -1;
        v->lost_levels = x->lost_levels;
        v->lost = x->lost;
        /* An explicit lease that ran out is lost as surely as a renewal
         * that found the field gone; say so before Redis has to. */
        if (x->count > 0 && x->expires_ms >= 0 && rlock__now_ms() >= x->expires_ms) {
            v->lost = true;
        }
        v->suspect = x->suspect;
        v->pending = x->pending;
        v->in_round = x->in_round;
        v->ends_watchdog = x->count > 1 && x->wd_depth == x->count;
        v->pending_sent_ms = x->pending_sent_ms;
        memcpy(v->pending_rid, x->pending_rid, sizeof v->pending_rid);
        v->suspect_held = x->suspect_held;
        memcpy(v->suspect_rid, x->suspect_rid, sizeof v->suspect_rid);
        v->suspect_count = x->suspect_count;
        v->giveback_sent_ms = x->giveback_sent_ms;
        v->kind = x->kind;
        v->suspect_kind = x->suspect ? x->suspect_kind : NULL;
        v->pending_kind = x->pending ? x->pending_kind : NULL;
        v->giving_up = x->giving_up;
        v->give_up_wait_ms = x->give_up_wait_ms;
        v->give_up_kind = x->giving_up ? x->give_up_kind : NULL;
        v->orphan = x->orphan;
    }
    v->lease_ms = x ? ttl_below(c, x, x->count - 1) : c->cfg.watchdog_timeout_ms;
}

void rlock__hold_view_of(rlock_client *c, const char *name, size_t len, uint64_t tid,
                         rlock__hold_view *v)
{
    pthread_mutex_lock(&c->hold_mu);
    view_locked(c, find(c, name, len, tid), v);
    pthread_mutex_unlock(&c->hold_mu);
}

rlock_status rlock__hold_claim(rlock_client *c, const char *name, size_t len, uint64_t tid,
                               rlock__claimer who, bool pending_too, int64_t deadline_ms,
                               rlock__hold_view *v, bool *claimed)
{
    *claimed = false;
    pthread_mutex_lock(&c->hold_mu);
    rlock__holder *x = find(c, name, len, tid);
    while (x && x->settling) {
        if (who == RLOCK__CLAIM_TRY) {
            view_locked(c, x, v);
            pthread_mutex_unlock(&c->hold_mu);
            return RLOCK_OK; /* another settler's: it is being settled */
        }
        /* The other settler's sends end by its deadline (a command
         * timeout): this wait is as bounded. */
        if (!rlock__cond_wait_until(&c->claim_cv, &c->hold_mu, deadline_ms)) {
            pthread_mutex_unlock(&c->hold_mu);
            return rlock__fail(RLOCK_ETIMEDOUT, "the client's watchdog is still settling this "
                                                "thread's earlier request on the name");
        }
        x = find(c, name, len, tid); /* its unclaim may have dropped it */
    }
    view_locked(c, x, v);
    bool doubt = x && (x->suspect || x->giving_up || (pending_too && x->pending));
    if (doubt && who == RLOCK__CLAIM_TRY && !x->orphan) {
        /* A live thread's: only a give-up (the place it holds up in
         * Redis's queue), and never while the thread is in an acquire,
         * whose own settling came before its attempts. Its other doubts
         * wait for its next call, which they concern. */
        doubt = x->giving_up && !x->acquiring;
    }
    if (doubt) {
        x->settling = true;
        *claimed = true;
    }
    pthread_mutex_unlock(&c->hold_mu);
    return RLOCK_OK;
}

void rlock__hold_unclaim(rlock_client *c, const char *name, size_t len, uint64_t tid)
{
    pthread_mutex_lock(&c->hold_mu);
    rlock__hold *h = find_hold(c, name, len);
    rlock__holder *x = find_holder(h, tid);
    if (x) { /* always: a claimed record stays */
        x->settling = false;
        tidy(c, h, x);
    }
    pthread_cond_broadcast(&c->claim_cv);
    pthread_mutex_unlock(&c->hold_mu);
}

/* The re-entry of rule sent at sent_ms with lease ttl_ms ran (x holds
 * levels below it, not lost): a kind whose re-entry adds or keeps never
 * shortens the hold's life. Every value compared is a lower bound of when
 * Redis can let the hold go, so their max is one too: the deadline now
 * (it may be a renewal's answer that came meanwhile, which holds in
 * either order: neither a renewal nor the re-entry shortens anything),
 * and what the re-entry gives from the deadline noted when it was sent
 * (the levels below lived at least that long when it ran, no earlier
 * than sent_ms): ADDS, from + lease (the TTL left, + the lease: Redis's
 * key then lives at least lease past the old deadline); KEEPS, the new
 * level's key lives the lease from sent_ms, the older ones their own.
 * Never from the deadline now plus the lease: a renewal that ran after
 * the re-entry has answered the sum already. */
static void reentry_told(rlock_client *c, rlock__holder *x, int64_t sent_ms, int64_t ttl_ms,
                         rlock__reentry rule)
{
    int64_t from = x->reentry_from_ms;
    int64_t d = rule == RLOCK__REENTRY_ADDS ? (from > sent_ms ? from : sent_ms) + ttl_ms
                                            : (from > sent_ms + ttl_ms ? from : sent_ms + ttl_ms);
    if (x->expires_ms < d) {
        x->expires_ms = d;
    }
    if (sent_ms > x->told_ms) {
        x->told_ms = sent_ms;
    }
    x->settled_ms = rlock__now_ms();
    x->reentry_from_ms = -1;
    wake_if_due_sooner(c, x);
}

void rlock__hold_acquired(rlock_client *c, const char *name, size_t len, uint64_t tid,
                          int64_t lease_ms, int64_t sent_ms, const struct rlock__kind *kind,
                          int64_t token, rlock__reentry rule)
{
    pthread_mutex_lock(&c->hold_mu);
    rlock__holder *x = find(c, name, len, tid);
    if (x) { /* always: rlock__hold_prepare() made it, and kept it */
        x->acquiring = false;
        if (x->lost) {
            /* A fresh acquisition after a loss (the watchdog found it
             * while this thread was acquiring): the old levels unwind
             * below the new hold. */
            x->lost_levels += x->count;
            x->count = 0;
            x->lost = false;
        }
        bool reentry = x->count > 0 && x->expires_ms >= 0;
        if (x->count == 0) {
            x->epoch = ++c->next_epoch;
            x->wd_depth = 0;
            x->lease_ms = 0;
            x->expires_ms = -1; /* a new hold: nothing before it counts */
            x->reentry_from_ms = -1;
            x->kind = kind;     /* the one thing that relabels a record */
        }
        x->count++;
        x->token = token;
        if (lease_ms == RLOCK_WATCHDOG) {
            /* Renewed while this level or one below it is held. */
            if (x->wd_depth == 0) {
                x->wd_depth = x->count;
            }
        } else {
            x->lease_ms = lease_ms;
        }
        int64_t ttl = lease_ms == RLOCK_WATCHDOG ? c->cfg.watchdog_timeout_ms : lease_ms;
        if (reentry && rule != RLOCK__REENTRY_SETS) {
            reentry_told(c, x, sent_ms, ttl, rule);
        } else {
            /* The script PEXPIREd the key with this lease, re-entries of
             * the reentrant lock's kinds too: from now on the key lives by
             * it, whatever it lived by before. */
            thread_told(c, x, sent_ms, ttl);
        }
    }
    pthread_mutex_unlock(&c->hold_mu);
}

void rlock__hold_released(rlock_client *c, const char *name, size_t len, uint64_t tid, bool all,
                          int64_t sent_ms)
{
    pthread_mutex_lock(&c->hold_mu);
    rlock__hold *h = find_hold(c, name, len);
    rlock__holder *x = find_holder(h, tid);
    if (x) {
        /* The answer to an unanswered unlock sent again: it may have run at
         * its first send. */
        if (x->pending && x->pending_sent_ms < sent_ms) {
            sent_ms = x->pending_sent_ms;
        }
        x->pending = false;
        if (x->count == 0 && x->lost_levels > 0) {
            /* Redis released a hold this record had counted as lost (the
             * loss was this client's guess by the clock): one level. */
            x->lost_levels--;
        }
        if (all || x->count <= 1) {
            x->count = 0;
            x->lost = false;
            x->wd_depth = 0;
            x->expires_ms = -1;
        } else {
            x->count--;
            if (x->count < x->wd_depth) {
                x->wd_depth = 0; /* the watchdog-mode level was released */
            }
            /* unlock.lua PEXPIREd the key with the view's lease_ms. */
            if (!x->lost) {
                thread_told(c, x, sent_ms, ttl_below(c, x, x->count));
            }
        }
        tidy(c, h, x);
    }
    pthread_mutex_unlock(&c->hold_mu);
}

void rlock__hold_ttl_set(rlock_client *c, const char *name, size_t len, uint64_t tid,
                         int64_t sent_ms, int64_t ttl_ms)
{
    pthread_mutex_lock(&c->hold_mu);
    rlock__holder *x = find(c, name, len, tid);
    if (x && x->count > 0 && !x->lost) {
        thread_told(c, x, sent_ms, ttl_ms);
    }
    pthread_mutex_unlock(&c->hold_mu);
}

void rlock__hold_mark_lost(rlock_client *c, const char *name, size_t len, uint64_t tid)
{
    pthread_mutex_lock(&c->hold_mu);
    rlock__holder *x = find(c, name, len, tid);
    if (x && x->count > 0) {
        x->lost = true;
        x->wd_depth = 0;
    }
    pthread_mutex_unlock(&c->hold_mu);
}

void rlock__hold_unwound_lost(rlock_client *c, const char *name, size_t len, uint64_t tid,
                              bool by_unlock)
{
    pthread_mutex_lock(&c->hold_mu);
    rlock__hold *h = find_hold(c, name, len);
    rlock__holder *x = find_holder(h, tid);
    if (x) {
        /* Newest first: an unlock takes a live level before a lost one
         * (the caller sent it to Redis, which found neither). */
        x->lost_levels += x->count;
        if (by_unlock && x->lost_levels > 0) {
            x->lost_levels--;
        }
        x->count = 0;
        x->lost = false;
        x->pending = false;
        x->wd_depth = 0;
        x->expires_ms = -1;
        tidy(c, h, x);
    }
    pthread_mutex_unlock(&c->hold_mu);
}

/* A request that may have run (or may still run) set the key's TTL to
 * ttl_ms no earlier than sent_ms: the deadline comes no later than that. */
static void may_have_told(rlock_client *c, rlock__holder *x, int64_t sent_ms, int64_t ttl_ms)
{
    if (x->count > 0 && !x->lost && x->expires_ms >= 0 && sent_ms + ttl_ms < x->expires_ms) {
        x->expires_ms = sent_ms + ttl_ms;
        wake_if_due_sooner(c, x); /* the report is nearer */
    }
}

void rlock__hold_ttl_may(rlock_client *c, const char *name, size_t len, uint64_t tid,
                         int64_t sent_ms, int64_t ttl_ms)
{
    pthread_mutex_lock(&c->hold_mu);
    rlock__holder *x = find(c, name, len, tid);
    if (x) {
        may_have_told(c, x, sent_ms, ttl_ms);
    }
    pthread_mutex_unlock(&c->hold_mu);
}

void rlock__hold_reentry_sent(rlock_client *c, const char *name, size_t len, uint64_t tid,
                              int64_t sent_ms, int64_t ttl_ms, rlock__reentry rule)
{
    pthread_mutex_lock(&c->hold_mu);
    rlock__holder *x = find(c, name, len, tid);
    if (x) {
        if (rule == RLOCK__REENTRY_SETS) {
            may_have_told(c, x, sent_ms, ttl_ms);
        } else {
            x->reentry_from_ms = x->count > 0 && !x->lost ? x->expires_ms : -1;
        }
    }
    pthread_mutex_unlock(&c->hold_mu);
}

void rlock__hold_set_giveback(rlock_client *c, const char *name, size_t len, uint64_t tid,
                              const char *rid, int64_t sent_ms)
{
    pthread_mutex_lock(&c->hold_mu);
    rlock__holder *x = find_holder(find_hold(c, name, len), tid);
    if (x && x->suspect_count) {
        snprintf(x->suspect_rid, sizeof x->suspect_rid, "%s", rid ? rid : "");
        x->giveback_sent_ms = sent_ms;
    }
    pthread_mutex_unlock(&c->hold_mu);
}

void rlock__hold_set_suspect(rlock_client *c, const char *name, size_t len, uint64_t tid,
                             const char *rid, int64_t sent_ms, int64_t ttl_ms,
                             const struct rlock__kind *kind)
{
    pthread_mutex_lock(&c->hold_mu);
    rlock__hold *h = find_hold(c, name, len);
    rlock__holder *x = find_holder(h, tid);
    if (x) {
        x->suspect = rid != NULL;
        x->suspect_kind = rid ? kind : NULL;
        x->suspect_count = rid && !rid[0];
        if (x->suspect_count) {
            x->suspect_rid[0] = '\0'; /* no give-back in doubt yet */
        } else if (rid) {
            x->suspect_held = x->count;
            snprintf(x->suspect_rid, sizeof x->suspect_rid, "%s", rid);
            if (ttl_ms >= 0) {
                may_have_told(c, x, sent_ms, ttl_ms);
            }
        }
        tidy(c, h, x);
    }
    pthread_mutex_unlock(&c->hold_mu);
}

void rlock__hold_set_pending(rlock_client *c, const char *name, size_t len, uint64_t tid,
                             const char *rid, int64_t sent_ms, const struct rlock__kind *kind)
{
    pthread_mutex_lock(&c->hold_mu);
    rlock__hold *h = find_hold(c, name, len);
    rlock__holder *x = find_holder(h, tid);
    if (x) {
        if (rid) {
            if (!x->pending || strcmp(x->pending_rid, rid) != 0) {
                x->pending_sent_ms = sent_ms;
            }
            x->pending = true;
            x->pending_kind = kind;
            memcpy(x->pending_rid, rid, 33);
            /* The caller meant to let go of its last hold: whatever the
             * unanswered unlock did, the watchdog must not keep it. An
             * inner one may have run and set the TTL of the levels left. */
            if (x->count <= 1) {
                x->wd_depth = 0;
            } else {
                may_have_told(c, x, x->pending_sent_ms, ttl_below(c, x, x->count - 1));
            }
        } else {
            x->pending = false;
        }
        tidy(c, h, x);
    }
    pthread_mutex_unlock(&c->hold_mu);
}

void rlock__hold_set_give_up(rlock_client *c, const char *name, size_t len, uint64_t tid,
                             bool on, int64_t wait_ms, const struct rlock__kind *kind)
{
    pthread_mutex_lock(&c->hold_mu);
    rlock__hold *h = find_hold(c, name, len);
    rlock__holder *x = find_holder(h, tid);
    if (x) {
        x->giving_up = on;
        x->give_up_wait_ms = on ? wait_ms : 0;
        x->give_up_kind = on ? kind : NULL;
        if (on && !c->wd_doubts) {
            /* The watchdog sends it again a second later, and every
             * second until Redis answers, if the thread's own next call
             * on the name has not (I4): its place holds up every waiter
             * behind it. */
            c->wd_doubts = true;
            c->doubts_at = rlock__now_ms() + RLOCK__DOUBT_RETRY_MS;
            pthread_cond_signal(&c->wd_cv);
        }
        tidy(c, h, x);
    }
    pthread_mutex_unlock(&c->hold_mu);
}

void rlock__hold_tidy(rlock_client *c, const char *name, size_t len, uint64_t tid)
{
    pthread_mutex_lock(&c->hold_mu);
    rlock__hold *h = find_hold(c, name, len);
    rlock__holder *x = find_holder(h, tid);
    if (x) {
        x->acquiring = false;
        tidy(c, h, x);
    }
    pthread_mutex_unlock(&c->hold_mu);
}

void rlock__hold_wait_round(rlock_client *c, const char *name, size_t len, uint64_t tid,
                            int64_t deadline_ms)
{
    pthread_mutex_lock(&c->hold_mu);
    for (;;) {
        rlock__holder *x = find(c, name, len, tid);
        if (!x || !x->in_round || c->wd_stop) {
            break;
        }
        if (!rlock__cond_wait_until(&c->round_cv, &c->hold_mu, deadline_ms)) {
            break;
        }
    }
    pthread_mutex_unlock(&c->hold_mu);
}

typedef struct counting {
    int64_t now;
    uint64_t n;
} counting;

static void count_one(rlock__map_node *n, void *arg)
{
    counting *k = arg;
    for (rlock__holder *x = ((rlock__hold *)n)->holders; x; x = x->next) {
        if (x->count > 0 && !x->lost && (x->expires_ms < 0 || k->now < x->expires_ms)) {
            k->n++;
        }
    }
}

uint64_t rlock__holds_count(rlock_client *c)
{
    counting k = {rlock__now_ms(), 0};
    pthread_mutex_lock(&c->hold_mu);
    rlock__map_each(&c->holds, count_one, &k);
    pthread_mutex_unlock(&c->hold_mu);
    return k.n;
}

void rlock__holds_thread_exit(rlock_client *c, uint64_t tid)
{
    pthread_mutex_lock(&c->hold_mu);
    rlock__thread_holds *t = find_thread(c, tid);
    rlock__holder *next;
    for (rlock__holder *x = t ? t->first : NULL; x; x = next) {
        next = x->tnext; /* removing the last record frees t: read first */
        rlock__hold *h = x->hold;
        if (x->count > 0 && x->wd_depth > 0 && !x->lost && c->lost_fn) {
            c->lost_fn(c->lost_arg, h->name, h->namelen, x->tid, x->epoch, true);
        }
        if (x->suspect || x->pending || x->giving_up || x->settling) {
            /* An acquire that may have run, an unlock that may not have,
             * a give-up that may not have: rlock_client_free() settles
             * them (it finds them here), or the first would stay held for
             * its lease after a clean shutdown (the last, queued until its
             * deadline). The thread holds nothing any more. A record the
             * watchdog has claimed stays until its unclaim. */
            x->count = 0;
            x->wd_depth = 0;
            x->expires_ms = -1;
            /* No thread will come back for it: the watchdog settles it
             * now, not only the close (a late acquire of a long explicit
             * lease would hold the lock that long). */
            x->orphan = true;
            if (!c->wd_doubts || c->doubts_at > rlock__now_ms()) {
                c->wd_doubts = true;
                c->doubts_at = rlock__now_ms();
                pthread_cond_signal(&c->wd_cv);
            }
            continue;
        }
        rlock__holder_remove(c, h, x);
    }
    pthread_mutex_unlock(&c->hold_mu);
}

uint64_t rlock__hold_epoch_locked(rlock_client *c, const char *name, size_t len, uint64_t tid)
{
    rlock__holder *x = find(c, name, len, tid);
    return x ? x->epoch : 0;
}

bool rlock__hold_still_lost(rlock_client *c, const char *name, size_t len, uint64_t tid,
                            uint64_t epoch)
{
    pthread_mutex_lock(&c->hold_mu);
    rlock__holder *x = find(c, name, len, tid);
    bool yes = x && x->epoch == epoch && x->count > 0 && x->lost;
    pthread_mutex_unlock(&c->hold_mu);
    return yes;
}
