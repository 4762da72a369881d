/* The hold registry and the watchdog thread.
 *
 * The registry records, per lock name, which threads of this client hold it
 * and how often. It answers "did this thread hold it?" (ELOST versus
 * ENOTOWNER) and tells the watchdog what to renew.
 *
 * Issue #7272 of Redisson (a renewal outliving its unlock) cannot happen
 * here: a hold is registered under hold_mu before rlock_lock() returns, and
 * the unlock that drops it to zero removes it under the same mutex. A round
 * that was already in flight may still renew once, but the renewal script
 * only touches a key that still carries our owner field, so it can never
 * extend another owner's lock, and its "gone" answer is ignored when the
 * hold it was about has since ended (the epoch check below).
 *
 * The same thread deletes the latch keys of completed unlocks in batches,
 * so unlocks pay no extra round trip and latch keys do not pile up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static rlock__hold *find_hold(rlock_client *c, const char *name, size_t len)
{
    rlock__map_node *n = rlock__map_get(&c->holds, name, len);
    return (rlock__hold *)n;
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

static void remove_holder(rlock_client *c, rlock__hold *h, rlock__holder *x)
{
    rlock__holder **p = &h->holders;
    while (*p != x) {
        p = &(*p)->next;
    }
    *p = x->next;
    free(x);
    c->holders_count--;
    if (!h->holders) {
        rlock__map_del(&c->holds, &h->node);
        free(h);
    }
}

rlock_status rlock__hold_acquired(rlock_client *c, const char *name, size_t len, uint64_t tid,
                                  int64_t lease_ms)
{
    pthread_mutex_lock(&c->hold_mu);
    rlock__hold *h = find_hold(c, name, len);
    if (!h) {
        /* The name is stored right after the struct: one allocation. */
        h = malloc(sizeof *h + len + 1);
        if (!h) {
            pthread_mutex_unlock(&c->hold_mu);
            return RLOCK_ENOMEM;
        }
        h->holders = NULL;
        h->name = (char *)(h + 1);
        memcpy(h->name, name, len);
        h->name[len] = '\0';
        h->namelen = len;
        h->node.key = h->name;
        h->node.keylen = len;
        rlock__map_put(&c->holds, &h->node);
    }
    rlock__holder *x = find_holder(h, tid);
    if (!x) {
        x = calloc(1, sizeof *x);
        if (!x) {
            if (!h->holders) {
                rlock__map_del(&c->holds, &h->node);
                free(h);
            }
            pthread_mutex_unlock(&c->hold_mu);
            return RLOCK_ENOMEM;
        }
        x->tid = tid;
        x->next = h->holders;
        h->holders = x;
        c->holders_count++;
    }
    if (x->lost) {
        /* A fresh acquisition after a loss starts a new hold. */
        x->count = 0;
        x->lost = false;
    }
    if (x->count == 0) {
        x->epoch = ++c->next_epoch;
        x->watchdog = false;
    }
    x->count++;
    if (lease_ms == RLOCK_WATCHDOG) {
        x->watchdog = true;
    } else {
        x->lease_ms = lease_ms;
    }
    pthread_mutex_unlock(&c->hold_mu);
    return RLOCK_OK;
}

void rlock__hold_query(rlock_client *c, const char *name, size_t len, uint64_t tid, int64_t *count,
                       bool *lost, int64_t *lease_ms)
{
    pthread_mutex_lock(&c->hold_mu);
    rlock__holder *x = find_holder(find_hold(c, name, len), tid);
    *count = x ? x->count : 0;
    *lost = x ? x->lost : false;
    *lease_ms = (x && !x->watchdog && x->lease_ms > 0) ? x->lease_ms : c->cfg.watchdog_timeout_ms;
    pthread_mutex_unlock(&c->hold_mu);
}

void rlock__hold_released(rlock_client *c, const char *name, size_t len, uint64_t tid, bool all)
{
    pthread_mutex_lock(&c->hold_mu);
    rlock__hold *h = find_hold(c, name, len);
    rlock__holder *x = find_holder(h, tid);
    if (x) {
        if (all || x->count <= 1) {
            remove_holder(c, h, x);
        } else {
            x->count--;
        }
    }
    pthread_mutex_unlock(&c->hold_mu);
}

void rlock__hold_forget_all(rlock_client *c, const char *name, size_t len)
{
    pthread_mutex_lock(&c->hold_mu);
    rlock__hold *h = find_hold(c, name, len);
    for (rlock__holder *x = h ? h->holders : NULL; x; x = x->next) {
        x->lost = true;
        x->watchdog = false;
    }
    pthread_mutex_unlock(&c->hold_mu);
}

void rlock__suspect_add(rlock_client *c, const char *name, size_t namelen, uint64_t tid)
{
    rlock__suspect *x = malloc(sizeof *x + namelen);
    if (!x) {
        return; /* the hold, if any, still ends with its lease */
    }
    x->tid = tid;
    x->namelen = namelen;
    memcpy(x->name, name, namelen);
    pthread_mutex_lock(&c->hold_mu);
    for (rlock__suspect *y = c->suspects; y; y = y->next) {
        if (y->tid == tid && y->namelen == namelen && memcmp(y->name, name, namelen) == 0) {
            pthread_mutex_unlock(&c->hold_mu);
            free(x); /* already in doubt: one reconciliation covers both */
            return;
        }
    }
    x->next = c->suspects;
    c->suspects = x;
    atomic_fetch_add(&c->nsuspects, 1);
    pthread_mutex_unlock(&c->hold_mu);
}

bool rlock__suspect_take(rlock_client *c, const char *name, size_t namelen, uint64_t tid)
{
    if (atomic_load(&c->nsuspects) == 0) {
        return false; /* the common case costs one load */
    }
    bool found = false;
    pthread_mutex_lock(&c->hold_mu);
    for (rlock__suspect **p = &c->suspects; *p; p = &(*p)->next) {
        rlock__suspect *x = *p;
        if (x->tid == tid && x->namelen == namelen && memcmp(x->name, name, namelen) == 0) {
            *p = x->next;
            free(x);
            atomic_fetch_sub(&c->nsuspects, 1);
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&c->hold_mu);
    return found;
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
    if (c->nlatches == 1 || c->nlatches >= RLOCK__LATCH_BATCH) {
        pthread_cond_signal(&c->wd_cv);
    }
    pthread_mutex_unlock(&c->hold_mu);
}

/* ---- the thread ------------------------------------------------------ */

typedef struct renewal {
    char *name;
    size_t namelen;
    uint64_t tid;
    uint64_t epoch;
    char owner[64];
} renewal;

typedef struct snapshot {
    renewal *v;
    size_t n, cap;
    rlock_client *c;
    bool oom;
} snapshot;

static void collect(rlock__map_node *node, void *arg)
{
    snapshot *s = arg;
    rlock__hold *h = (rlock__hold *)node;
    for (rlock__holder *x = h->holders; x; x = x->next) {
        if (!x->watchdog || x->lost || x->count == 0) {
            continue;
        }
        if (s->n == s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 64;
            renewal *v = realloc(s->v, cap * sizeof *v);
            if (!v) {
                s->oom = true;
                return;
            }
            s->v = v;
            s->cap = cap;
        }
        renewal *r = &s->v[s->n];
        r->name = malloc(h->namelen + 1);
        if (!r->name) {
            s->oom = true;
            return;
        }
        memcpy(r->name, h->name, h->namelen + 1);
        r->namelen = h->namelen;
        r->tid = x->tid;
        r->epoch = x->epoch;
        snprintf(r->owner, sizeof r->owner, "%s:%llu", s->c->id, (unsigned long long)x->tid);
        s->n++;
    }
}

typedef struct lost_note {
    char *name;
    uint64_t tid;
} lost_note;

/* Marks the holds whose renewal answered 0, if they are still the holds
 * the round was about. Called with hold_mu held. */
static size_t mark_lost(rlock_client *c, renewal *v, const int8_t *res, size_t n, lost_note *notes)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (res[i] != 0) {
            continue;
        }
        rlock__holder *x = find_holder(find_hold(c, v[i].name, v[i].namelen), v[i].tid);
        if (!x || x->epoch != v[i].epoch || x->lost || !x->watchdog) {
            continue;
        }
        x->lost = true;
        x->watchdog = false;
        notes[k].name = v[i].name;
        notes[k].tid = v[i].tid;
        v[i].name = NULL; /* ownership moves to the note */
        k++;
    }
    return k;
}

/* Stores a renewal reply's answers for v[lo .. lo+k) and frees it; an
 * answer of another shape stays -1 (retried next round). */
static void record_results(rlock_client *c, redisReply *r, size_t lo, size_t k, int8_t *res)
{
    if (r->type == REDIS_REPLY_ARRAY && r->elements == k) {
        for (size_t i = 0; i < k; i++) {
            if (r->element[i]->type == REDIS_REPLY_INTEGER) {
                res[lo + i] = r->element[i]->integer ? 1 : 0;
                rlock__stat_add(c, RLOCK_STAT_RENEWED, (uint64_t)res[lo + i]);
            }
        }
    }
    freeReplyObject(r);
}

/* Renews v[lo .. lo+k) with one script call through the NOSCRIPT fallback.
 * False on a transport error. */
static bool eval_batch(rlock_client *c, rlock__conn *conn, renewal *v, size_t lo, size_t k,
                       const char *lease, const char **argv, size_t *lens, int8_t *res)
{
    for (size_t i = 0; i < k; i++) {
        argv[i] = v[lo + i].name;
        lens[i] = v[lo + i].namelen;
        argv[k + 1 + i] = v[lo + i].owner;
        lens[k + 1 + i] = strlen(v[lo + i].owner);
    }
    argv[k] = lease;
    lens[k] = strlen(lease);
    redisReply *r = NULL;
    if (rlock__conn_eval(c, conn, &rlock__script_renew, (int)k, (int)(2 * k + 1), argv, lens, &r) !=
        RLOCK_OK) {
        return false;
    }
    rlock__stat_add(c, RLOCK_STAT_RENEWAL_CALLS, 1);
    record_results(c, r, lo, k, res);
    return true;
}

/* Sends the renewal scripts, pipelined, one per batch. res[i] is 1 (kept),
 * 0 (gone) or -1 (no answer: retried next round). */
static void renew_all(rlock_client *c, renewal *v, size_t n, int8_t *res)
{
    memset(res, -1, n);
    rlock__conn *conn;
    if (rlock__pool_borrow(c, &conn) != RLOCK_OK) {
        return;
    }
    size_t bs = (size_t)c->cfg.watchdog_batch_size;
    size_t nb = (n + bs - 1) / bs;
    char lease[24];
    snprintf(lease, sizeof lease, "%lld", (long long)c->cfg.watchdog_timeout_ms);
    size_t maxargs = 2 * bs + 4;
    const char **argv = malloc(maxargs * sizeof *argv);
    size_t *lens = malloc(maxargs * sizeof *lens);
    if (!argv || !lens) {
        goto out;
    }
    /* The first batch goes alone through the NOSCRIPT fallback, so that
     * after a server restart the script is cached again before the rest
     * is pipelined (otherwise every pipelined call would fail and be sent
     * twice). Then the pipeline: append every other batch, read every
     * reply. */
    if (!eval_batch(c, conn, v, 0, n < bs ? n : bs, lease, argv, lens, res)) {
        goto out;
    }
    size_t sent = 0;
    for (size_t b = 1; b < nb; b++) {
        size_t lo = b * bs, k = (n - lo < bs) ? n - lo : bs;
        char nk[16];
        snprintf(nk, sizeof nk, "%zu", k);
        argv[0] = "EVALSHA";
        lens[0] = 7;
        argv[1] = rlock__script_renew.sha;
        lens[1] = 40;
        argv[2] = nk;
        lens[2] = strlen(nk);
        for (size_t i = 0; i < k; i++) {
            argv[3 + i] = v[lo + i].name;
            lens[3 + i] = v[lo + i].namelen;
            argv[3 + k + 1 + i] = v[lo + i].owner;
            lens[3 + k + 1 + i] = strlen(v[lo + i].owner);
        }
        argv[3 + k] = lease;
        lens[3 + k] = strlen(lease);
        if (redisAppendCommandArgv(conn->ctx, (int)(4 + 2 * k), argv, lens) != REDIS_OK) {
            break;
        }
        sent++;
    }
    for (size_t b = 1; b <= sent; b++) {
        size_t lo = b * bs, k = (n - lo < bs) ? n - lo : bs;
        redisReply *r = NULL;
        if (redisGetReply(conn->ctx, (void **)&r) != REDIS_OK || !r) {
            break;
        }
        rlock__stat_add(c, RLOCK_STAT_COMMANDS, 1);
        rlock__stat_add(c, RLOCK_STAT_RENEWAL_CALLS, 1);
        if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0) {
            /* The cache was flushed mid-round: redo this batch with the
             * body once the pipeline is drained. */
            freeReplyObject(r);
            continue;
        }
        record_results(c, r, lo, k, res);
    }
    /* Batches that hit NOSCRIPT anyway (SCRIPT FLUSH mid-round): one call
     * each, through the fallback path. */
    for (size_t b = 1; b < nb && !conn->ctx->err; b++) {
        size_t lo = b * bs, k = (n - lo < bs) ? n - lo : bs;
        if (res[lo] == -1 && !eval_batch(c, conn, v, lo, k, lease, argv, lens, res)) {
            break;
        }
    }
out:
    free(argv);
    free(lens);
    rlock__pool_return(c, conn);
}

static void renewal_round(rlock_client *c)
{
    snapshot s = {.c = c};
    rlock__map_each(&c->holds, collect, &s);
    pthread_mutex_unlock(&c->hold_mu);

    if (s.n > 0) {
        int8_t *res = malloc(s.n);
        lost_note *notes = malloc(s.n * sizeof *notes);
        size_t nlost = 0;
        if (res && notes) {
            renew_all(c, s.v, s.n, res);
            pthread_mutex_lock(&c->hold_mu);
            nlost = mark_lost(c, s.v, res, s.n, notes);
            pthread_mutex_unlock(&c->hold_mu);
        }
        /* The callback runs with no rlock mutex held, so it may call into
         * the library (even unlock the lost lock to clear it). */
        for (size_t i = 0; i < nlost; i++) {
            if (c->cfg.on_lock_lost) {
                c->cfg.on_lock_lost(notes[i].name, notes[i].tid, c->cfg.on_lock_lost_arg);
            }
            free(notes[i].name);
        }
        free(res);
        free(notes);
    }
    for (size_t i = 0; i < s.n; i++) {
        free(s.v[i].name);
    }
    free(s.v);
    pthread_mutex_lock(&c->hold_mu);
}

/* Deletes queued latch keys with one DEL. Called with hold_mu held; drops
 * it for the round trip. */
static void flush_latches(rlock_client *c)
{
    size_t n = c->nlatches;
    if (n > RLOCK__LATCH_BATCH) {
        n = RLOCK__LATCH_BATCH;
    }
    char **keys = malloc((n + 1) * sizeof *keys);
    size_t *lens = malloc((n + 1) * sizeof *lens);
    if (!keys || !lens) {
        free(keys);
        free(lens);
        return;
    }
    keys[0] = "DEL";
    lens[0] = 3;
    memcpy(keys + 1, c->latches + c->nlatches - n, n * sizeof *keys);
    memcpy(lens + 1, c->latch_lens + c->nlatches - n, n * sizeof *lens);
    c->nlatches -= n;
    c->latch_since_ms = rlock__now_ms();
    pthread_mutex_unlock(&c->hold_mu);

    redisReply *r = NULL;
    if (rlock__command(c, (int)n + 1, (const char **)keys, lens, &r) == RLOCK_OK) {
        freeReplyObject(r);
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
        int64_t now = rlock__now_ms();
        if (now >= next_round) {
            renewal_round(c);
            /* The next round is timed from the end of this one, as in
             * Redisson, so a slow round never overlaps the next. */
            next_round = rlock__now_ms() + period;
            continue;
        }
        if (c->nlatches > 0 && (c->nlatches >= RLOCK__LATCH_BATCH ||
                                now - c->latch_since_ms >= RLOCK__LATCH_FLUSH_MS)) {
            flush_latches(c);
            continue;
        }
        int64_t until = next_round;
        if (c->nlatches > 0 && c->latch_since_ms + RLOCK__LATCH_FLUSH_MS < until) {
            until = c->latch_since_ms + RLOCK__LATCH_FLUSH_MS;
        }
        rlock__cond_wait_until(&c->wd_cv, &c->hold_mu, until);
    }
    pthread_mutex_unlock(&c->hold_mu);
    return NULL;
}

rlock_status rlock__watchdog_start(rlock_client *c)
{
    atomic_init(&c->nsuspects, 0);
    pthread_mutex_init(&c->hold_mu, NULL);
    rlock__cond_init(&c->wd_cv);
    if (rlock__map_init(&c->holds) != RLOCK_OK) {
        return RLOCK_ENOMEM;
    }
    if (pthread_create(&c->wd_thread, NULL, watchdog_main, c) != 0) {
        rlock__map_destroy(&c->holds);
        return RLOCK_ENOMEM;
    }
    c->wd_running = true;
    return RLOCK_OK;
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

/* At close, delete the latch keys still queued on any live connection, so
 * a program that unlocks and exits leaves nothing behind. Every other
 * thread has stopped, so the pool is used without its mutex. */
static void final_flush(rlock_client *c)
{
    for (int i = 0; i < c->pool.size && c->nlatches > 0; i++) {
        redisContext *ctx = c->pool.conns ? c->pool.conns[i].ctx : NULL;
        if (!ctx || ctx->err) {
            continue;
        }
        size_t n = c->nlatches;
        const char **argv = malloc((n + 1) * sizeof *argv);
        size_t *lens = malloc((n + 1) * sizeof *lens);
        if (argv && lens) {
            argv[0] = "DEL";
            lens[0] = 3;
            memcpy(argv + 1, c->latches, n * sizeof *argv);
            memcpy(lens + 1, c->latch_lens, n * sizeof *lens);
            redisReply *r = redisCommandArgv(ctx, (int)n + 1, argv, lens);
            if (r) {
                freeReplyObject(r);
            }
        }
        free(argv);
        free(lens);
        break;
    }
}

void rlock__watchdog_stop(rlock_client *c)
{
    if (c->wd_running) {
        pthread_mutex_lock(&c->hold_mu);
        c->wd_stop = true;
        pthread_cond_signal(&c->wd_cv);
        pthread_mutex_unlock(&c->hold_mu);
        pthread_join(c->wd_thread, NULL);
        c->wd_running = false;
        final_flush(c);
    }
    if (!c->holds.slots) {
        return;
    }
    /* Holds are nodes of the map: collect them first, then free. */
    rlock__map_each(&c->holds, free_hold, NULL);
    for (size_t i = 0; i < c->holds.nslots; i++) {
        rlock__map_node *n = c->holds.slots[i];
        while (n) {
            rlock__map_node *next = n->next;
            free(n);
            n = next;
        }
    }
    rlock__map_destroy(&c->holds);
    while (c->suspects) {
        rlock__suspect *x = c->suspects;
        c->suspects = x->next;
        free(x);
    }
    for (size_t i = 0; i < c->nlatches; i++) {
        free(c->latches[i]);
    }
    free(c->latches);
    free(c->latch_lens);
    c->latches = NULL;
    c->nlatches = 0;
    if (c->pid == getpid()) {
        pthread_mutex_destroy(&c->hold_mu);
        pthread_cond_destroy(&c->wd_cv);
    }
}
