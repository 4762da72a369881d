/* The watchdog thread: renews every watchdog-mode hold of the client every
 * watchdog_timeout_ms / 3, many per script call (watchdog_batch_size, as
 * Redisson since 3.44), the calls of one round pipelined per key group (a
 * cluster slot: one script never spans two), and deletes the latch keys of
 * completed unlocks in batches, so unlocks pay no extra round trip. A
 * hold is in watchdog mode while a level of it taken with RLOCK_WATCHDOG is
 * still held (the unlock of a nested watchdog lock inside an explicit lease
 * ends it, as in Redisson), and is renewed with its kind's script.
 *
 * Issue #7272 of Redisson (a renewal outliving its unlock) cannot happen
 * here: the renewal script only touches a key that still carries our owner
 * field, and its "gone" answer is ignored when the hold it was about has
 * since ended (the epoch check). A round in flight could still cut a fresh
 * explicit lease of the same thread to the watchdog's, even after this
 * client gave up on it (a slow link delivers it late): the renewal script
 * never shortens a TTL, so it cannot; holds in a round are still flagged
 * (in_round), and an acquire waits for the round, for the deadline's sake.
 *
 * A hold is also reported lost, and no longer renewed, when no renewal
 * confirmed it in time: Redis may expire the key at the send time of the
 * request that last set its TTL (acquire, re-entry, partial unlock or
 * renewal) plus the TTL that request set, and another owner may take it
 * then (core/holds.c keeps that one clock). The holder is told a margin
 * before that instant (a stalled server, delayed requests, a link that
 * accepts and never answers), never after another owner could be in:
 * every step of a round and of a latch flush, reconnects included, ends
 * by the earliest such instant.
 *
 * Losses are reported through the callback thread: a user callback that
 * blocks must never stop renewals. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* Latch keys of completed unlocks are deleted in batches: at most this many
 * per DEL, and at most this long after. */
#define LATCH_BATCH 256
#define LATCH_FLUSH_MS 1000

/* How long before its lease can run out in Redis an unconfirmed hold is
 * reported lost: a tenth of the lease, time enough for the report to
 * reach the holder. */
static int64_t margin(const rlock_client *c)
{
    return rlock__lost_margin(c);
}

void rlock__latch_garbage(rlock_client *c, char *key, size_t len)
{
    pthread_mutex_lock(&c->hold_mu);
    if (c->nlatches == c->cap_latches) {
        size_t cap = c->cap_latches ? c->cap_latches * 2 : 64;
        char **k = realloc(c->latches, cap * sizeof *k);
        if (k) {
            c->latches = k;
        }
        size_t *l = realloc(c->latch_lens, cap * sizeof *l);
        if (l) {
            c->latch_lens = l;
        }
        if (!k || !l) {
            /* Out of memory: the key's PX TTL removes it anyway. */
            pthread_mutex_unlock(&c->hold_mu);
            free(key);
            return;
        }
        c->cap_latches = cap;
    }
    if (c->nlatches == 0) {
        c->latch_since_ms = rlock__now_ms();
    }
    c->latches[c->nlatches] = key;
    c->latch_lens[c->nlatches] = len;
    c->nlatches++;
    /* The first key arms the flush timer; a full batch is sent at once. */
    if (c->nlatches == 1 || c->nlatches >= LATCH_BATCH) {
        pthread_cond_signal(&c->wd_cv);
    }
    pthread_mutex_unlock(&c->hold_mu);
}

/* A renewal reply (the contract in sync.h's rlock__kind.renew). */
void rlock__parse_renewal(const redisReply *r, size_t k, int64_t *res)
{
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != k) {
        return;
    }
    for (size_t i = 0; i < k; i++) {
        const redisReply *e = r->element[i];
        if (e->type == REDIS_REPLY_INTEGER && e->integer >= -1 && e->integer <= RLOCK_MAX_TIME_MS) {
            res[i] = e->integer;
        }
    }
}

/* ---- a renewal round ------------------------------------------------- */

typedef struct renewal {
    char *name; /* the registry's key: the lock name, NUL, maybe a tag */
    size_t namelen, keylen;
    uint64_t tid;
    uint64_t epoch;
    unsigned group;
    const rlock__script *script; /* the kind's renewal script */
    char owner[RLOCK__OWNER_MAX];
} renewal;

typedef struct snapshot {
    renewal *v;
    size_t n, cap;
    rlock_client *c;
    int64_t earliest; /* earliest expires_ms of the holds collected */
} snapshot;

static void collect(rlock__map_node *node, void *arg)
{
    snapshot *s = arg;
    rlock__hold *h = (rlock__hold *)node;
    for (rlock__holder *x = h->holders; x; x = x->next) {
        if (x->wd_depth == 0 || x->lost || x->count == 0) {
            continue;
        }
        if (s->n == s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 64;
            renewal *v = realloc(s->v, cap * sizeof *v);
            if (!v) {
                return; /* the rest is renewed next round */
            }
            s->v = v;
            s->cap = cap;
        }
        renewal *r = &s->v[s->n];
        if (!(r->name = malloc(h->keylen + 1))) {
            return;
        }
        memcpy(r->name, h->name, h->keylen + 1);
        r->namelen = h->namelen;
        r->keylen = h->keylen;
        r->tid = x->tid;
        r->epoch = x->epoch;
        r->group = s->c->topo->group_of(h->name, h->namelen);
        r->script = x->kind->renew;
        rlock__owner(s->c, x->tid, r->owner);
        x->in_round = true;
        s->earliest = rlock__min_deadline(s->earliest, x->expires_ms);
        s->n++;
    }
}

/* One script call renews holds of one key group and one kind. */
static int by_group(const void *a, const void *b)
{
    const renewal *x = a, *y = b;
    if (x->group != y->group) {
        return x->group < y->group ? -1 : 1;
    }
    uintptr_t sx = (uintptr_t)x->script, sy = (uintptr_t)y->script;
    return sx < sy ? -1 : sx > sy;
}

/* Renews v[0..n) (one group, one script) with pipelined script calls of up
 * to bs keys each; res[i] becomes 0 (gone), the key's TTL after the
 * renewal, or stays RLOCK__RENEW_UNANSWERED (retried next round). Replies
 * are read until deadline_ms, and never after hard_ms. The members of a
 * call the server refused as a whole are flagged in refused[]. */
static void renew_calls(rlock_client *c, renewal *v, size_t n, size_t bs, int64_t *res,
                        int64_t deadline_ms, int64_t hard_ms, bool *refused)
{
    size_t nb = (n + bs - 1) / bs;
    char lease[24];
    snprintf(lease, sizeof lease, "%lld", (long long)c->cfg.watchdog_timeout_ms);
    rlock__call *calls = calloc(nb, sizeof *calls);
    redisReply **replies = calloc(nb, sizeof *replies);
    const char **args = malloc((2 * n + nb) * sizeof *args);
    size_t *lens = malloc((2 * n + nb) * sizeof *lens);
    if (calls && replies && args && lens) {
        size_t at = 0;
        for (size_t b = 0; b < nb; b++) {
            size_t lo = b * bs, k = (n - lo < bs) ? n - lo : bs;
            calls[b] = (rlock__call){v[lo].name,   v[lo].namelen, v[lo].script,
                                     (int)k,       (int)(2 * k + 1), args + at, lens + at};
            for (size_t i = 0; i < k; i++) {
                args[at + i] = v[lo + i].name;
                lens[at + i] = v[lo + i].namelen;
                args[at + k + 1 + i] = v[lo + i].owner;
                lens[at + k + 1 + i] = strlen(v[lo + i].owner);
            }
            args[at + k] = lease;
            lens[at + k] = strlen(lease);
            at += 2 * k + 1;
        }
        rlock__run_pipeline(c, calls, nb, replies, deadline_ms, hard_ms);
        for (size_t b = 0; b < nb; b++) {
            size_t lo = b * bs, k = (n - lo < bs) ? n - lo : bs;
            if (!replies[b]) {
                continue;
            }
            if (replies[b]->type == REDIS_REPLY_ERROR) {
                for (size_t i = 0; i < k; i++) {
                    refused[lo + i] = true;
                }
            } else {
                rlock__stat_add(c, RLOCK_STAT_RENEWAL_CALLS, 1);
                rlock__parse_renewal(replies[b], k, res + lo);
            }
            freeReplyObject(replies[b]);
        }
    }
    free(calls);
    free(replies);
    free(args);
    free(lens);
}

/* A call the server refuses as a whole (an ACL that denies one of its
 * keys: Redis checks every declared key before it runs a script) is tried
 * again key by key, so one refused name does not take the others'
 * renewals with it. v and res are reordered together. */
static void renew_group(rlock_client *c, renewal *v, size_t n, int64_t *res, int64_t deadline_ms,
                        int64_t hard_ms)
{
    size_t bs = (size_t)c->cfg.watchdog_batch_size;
    bool *refused = calloc(n, sizeof *refused);
    if (!refused) {
        return; /* renewed next round */
    }
    renew_calls(c, v, n, bs, res, deadline_ms, hard_ms, refused);
    size_t m = 0;
    for (size_t i = 0; i < n && bs > 1; i++) {
        if (refused[i]) {
            renewal t = v[m];
            v[m] = v[i];
            v[i] = t;
            int64_t r = res[m];
            res[m] = res[i];
            res[i] = r;
            m++;
        }
    }
    if (m > 0) {
        memset(refused, 0, n * sizeof *refused);
        renew_calls(c, v, m, 1, res, deadline_ms, hard_ms, refused);
    }
    free(refused);
}

/* Ends the round under hold_mu: clears the flags, marks the holds whose
 * renewal answered 0 (if they are still the holds the round was about) and
 * queues their reports. */
static void end_round(rlock_client *c, renewal *v, const int64_t *res, size_t n, int64_t sent_ms)
{
    pthread_mutex_lock(&c->hold_mu);
    for (size_t i = 0; i < n; i++) {
        rlock__hold *h = (rlock__hold *)rlock__map_get(&c->holds, v[i].name, v[i].keylen);
        rlock__holder *x = h ? h->holders : NULL;
        while (x && x->tid != v[i].tid) {
            x = x->next;
        }
        if (!x) {
            continue;
        }
        x->in_round = false;
        bool same = x->epoch == v[i].epoch && x->count > 0 && !x->lost;
        if (res && res[i] != 0 && res[i] != RLOCK__RENEW_UNANSWERED) {
            rlock__stat_add(c, RLOCK_STAT_RENEWED, 1);
            /* The key now lives at least the TTL the renewal saw (the
             * lease, or a longer one it left alone) from when it ran, no
             * earlier than this round's send (one clock: what Redis did,
             * never the longest lease we believe in). */
            if (same && res[i] > 0) {
                rlock__holder_told(x, sent_ms, res[i]);
            }
        }
        if (res && res[i] == 0 && same) {
            /* The field was gone when the renewal ran, and nothing of this
             * epoch puts it back: lost, even if a release has meanwhile
             * taken the hold out of watchdog mode. Only a watchdog-mode
             * hold is reported; any hold says RLOCK_ELOST at its unlock. */
            x->lost = true;
            if (x->wd_depth > 0) {
                rlock__report_lost(c, h->name, h->keylen, x->tid);
            }
            x->wd_depth = 0;
        }
        if (x->count == 0 && x->lost_levels == 0 && !x->suspect && !x->pending &&
            !x->giving_up && !x->acquiring && !x->settling) {
            /* Released during the round: the record waited for it (unless
             * its thread is acquiring again right now: then it is its). */
            rlock__holder_remove(c, h, x);
        }
    }
    pthread_cond_broadcast(&c->round_cv);
    pthread_mutex_unlock(&c->hold_mu);
}

/* Called with hold_mu held; drops it for the round trips. */
static void renewal_round(rlock_client *c)
{
    snapshot s = {.c = c, .earliest = -1};
    int64_t sent = rlock__now_ms();
    rlock__map_each(&c->holds, collect, &s);
    pthread_mutex_unlock(&c->hold_mu);
    /* A stalled round must not keep this thread from telling holders in
     * time: every step of it (waiting for a pooled connection, a
     * reconnect's connect and AUTH/SETNAME, the send, each reply) ends by
     * the earliest report deadline of the holds it renews. */
    int64_t hard = -1;
    if (s.earliest >= 0) {
        hard = s.earliest - margin(c) > sent ? s.earliest - margin(c) : sent + 1;
    }
    int64_t deadline = rlock__min_deadline(sent + c->cfg.command_timeout_ms, hard);

    int64_t *res = s.n ? malloc(s.n * sizeof *res) : NULL;
    if (res) {
        for (size_t i = 0; i < s.n; i++) {
            res[i] = RLOCK__RENEW_UNANSWERED;
        }
        qsort(s.v, s.n, sizeof *s.v, by_group);
        for (size_t lo = 0; lo < s.n;) {
            size_t hi = lo + 1;
            while (hi < s.n && s.v[hi].group == s.v[lo].group &&
                   s.v[hi].script == s.v[lo].script) {
                hi++;
            }
            renew_group(c, s.v + lo, hi - lo, res + lo, deadline, hard);
            lo = hi;
        }
    }
    if (s.n) {
        end_round(c, s.v, res, s.n, sent);
    }
    for (size_t i = 0; i < s.n; i++) {
        free(s.v[i].name);
    }
    free(s.v);
    free(res);
    pthread_mutex_lock(&c->hold_mu);
}

/* Reports the watchdog holds whose lease may run out before a renewal can
 * confirm them, and returns the earliest deadline left (-1: none). Called
 * with hold_mu held. */
typedef struct overdue {
    rlock_client *c;
    int64_t now, next;
} overdue;

static void overdue_one(rlock__map_node *node, void *arg)
{
    overdue *o = arg;
    rlock__hold *h = (rlock__hold *)node;
    for (rlock__holder *x = h->holders; x; x = x->next) {
        if (x->wd_depth == 0 || x->lost || x->count == 0 || x->expires_ms < 0) {
            continue;
        }
        int64_t tell_at = x->expires_ms - margin(o->c);
        if (o->now >= tell_at) {
            x->lost = true;
            x->wd_depth = 0;
            rlock__report_lost(o->c, h->name, h->keylen, x->tid);
        } else {
            o->next = rlock__min_deadline(o->next, tell_at);
        }
    }
}

static int64_t tell_overdue(rlock_client *c)
{
    overdue o = {c, rlock__now_ms(), -1};
    rlock__map_each(&c->holds, overdue_one, &o);
    return o.next;
}

/* ---- latch keys ------------------------------------------------------ */

/* Deletes up to LATCH_BATCH queued latch keys with one DEL per key group,
 * by deadline_ms at the latest (a report is due then; the keys left expire
 * by their TTL). Called with hold_mu held; drops it for the round trip. */
static void flush_latches(rlock_client *c, bool all, int64_t deadline_ms)
{
    size_t n = c->nlatches;
    if (!all && n > LATCH_BATCH) {
        n = LATCH_BATCH;
    }
    char **keys = malloc((n + 1) * sizeof *keys);
    size_t *lens = malloc((n + 1) * sizeof *lens);
    if (!keys || !lens) {
        free(keys);
        free(lens);
        return;
    }
    keys[0] = NULL;
    lens[0] = 0;
    memcpy(keys + 1, c->latches + c->nlatches - n, n * sizeof *keys);
    memcpy(lens + 1, c->latch_lens + c->nlatches - n, n * sizeof *lens);
    c->nlatches -= n;
    c->latch_since_ms = rlock__now_ms();
    pthread_mutex_unlock(&c->hold_mu);

    /* One DEL per group: keys of one DEL must share a node (a slot). */
    for (size_t lo = 1; lo <= n;) {
        unsigned g = c->topo->group_of(keys[lo], lens[lo]);
        size_t hi = lo;
        for (size_t i = lo; i <= n; i++) {
            if (c->topo->group_of(keys[i], lens[i]) == g) {
                char *tk = keys[hi];
                size_t tl = lens[hi];
                keys[hi] = keys[i];
                lens[hi] = lens[i];
                keys[i] = tk;
                lens[i] = tl;
                hi++;
            }
        }
        char *del = keys[lo - 1];
        size_t dell = lens[lo - 1];
        keys[lo - 1] = "DEL";
        lens[lo - 1] = 3;
        rlock__call call = {keys[lo], lens[lo], NULL, 0, (int)(hi - lo + 1),
                            (const char **)keys + lo - 1, lens + lo - 1};
        redisReply *r = NULL;
        int64_t until =
            rlock__min_deadline(rlock__now_ms() + c->cfg.command_timeout_ms, deadline_ms);
        if (rlock__now_ms() < until && rlock__run(c, &call, &r, until) == RLOCK_OK) {
            freeReplyObject(r);
        }
        keys[lo - 1] = del;
        lens[lo - 1] = dell;
        lo = hi;
    }
    for (size_t i = 1; i <= n; i++) {
        free(keys[i]);
    }
    free(keys);
    free(lens);
    pthread_mutex_lock(&c->hold_mu);
}

static void *watchdog_main(void *arg)
{
    rlock_client *c = arg;
    int64_t period = c->cfg.watchdog_timeout_ms / 3;
    pthread_mutex_lock(&c->hold_mu);
    int64_t next_round = rlock__now_ms() + period;
    while (!c->wd_stop) {
        int64_t tell = tell_overdue(c);
        int64_t now = rlock__now_ms();
        if (now >= next_round) {
            renewal_round(c);
            /* The next round is timed from the end of this one, as in
             * Redisson, so a slow round never overlaps the next. */
            next_round = rlock__now_ms() + period;
            continue;
        }
        if (c->wd_doubts && now >= c->doubts_at) {
            /* Exited threads' doubts, live threads' give-ups: settled
             * within the report deadline this thread owes, else again a
             * second later. */
            c->wd_doubts = false;
            pthread_mutex_unlock(&c->hold_mu);
            int64_t by = rlock__min_deadline(now + c->cfg.command_timeout_ms, tell);
            bool done = rlock__settle_all(c, by, true);
            pthread_mutex_lock(&c->hold_mu);
            if (!done && !c->wd_doubts) {
                c->wd_doubts = true;
                c->doubts_at = rlock__now_ms() + RLOCK__DOUBT_RETRY_MS;
            }
            continue;
        }
        if (c->nlatches > 0 &&
            (c->nlatches >= LATCH_BATCH || now - c->latch_since_ms >= LATCH_FLUSH_MS)) {
            /* The flush never keeps this thread from a report it owes. */
            flush_latches(c, false, tell);
            continue;
        }
        int64_t until = rlock__min_deadline(next_round, tell);
        if (c->wd_doubts) {
            until = rlock__min_deadline(until, c->doubts_at);
        }
        if (c->nlatches > 0 && c->latch_since_ms + LATCH_FLUSH_MS < until) {
            until = c->latch_since_ms + LATCH_FLUSH_MS;
        }
        c->wd_sleep_until = until < 0 ? INT64_MAX : until;
        rlock__cond_wait_until(&c->wd_cv, &c->hold_mu, until);
        c->wd_sleep_until = -1;
    }
    /* At close, the latch keys still queued go too, so a program that
     * unlocks and exits leaves nothing behind. */
    if (c->nlatches > 0) {
        flush_latches(c, true, -1);
    }
    pthread_mutex_unlock(&c->hold_mu);
    return NULL;
}

rlock_status rlock__watchdog_start(rlock_client *c)
{
    if (rlock__thread_start(&c->wd_thread, watchdog_main, c) != 0) {
        return rlock__fail(RLOCK_ENOMEM, "cannot start the watchdog thread");
    }
    c->wd_running = true;
    return RLOCK_OK;
}

void rlock__watchdog_stop(rlock_client *c)
{
    if (c->wd_running) {
        pthread_mutex_lock(&c->hold_mu);
        c->wd_stop = true;
        pthread_cond_signal(&c->wd_cv);
        pthread_cond_broadcast(&c->round_cv);
        pthread_mutex_unlock(&c->hold_mu);
        pthread_join(c->wd_thread, NULL);
        c->wd_running = false;
    }
    for (size_t i = 0; i < c->nlatches; i++) {
        free(c->latches[i]);
    }
    free(c->latches);
    free(c->latch_lens);
    c->latches = NULL;
    c->nlatches = 0;
}
