/* rlock-bench: the lock loops shared by the runner protocol and the
 * standalone scenarios, and the start gate that lines their workers up. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

rlock_client *bench_client(const bench_target *t, int64_t watchdog_ms, int pool_size)
{
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = t->url;
    if (watchdog_ms > 0) {
        cfg.watchdog_timeout_ms = watchdog_ms;
    }
    if (pool_size > 0) {
        cfg.pool_size = pool_size;
    }
    rlock_client *c = NULL;
    rlock_status s = rlock_client_new(&cfg, &c);
    if (s != RLOCK_OK) {
        bench_die("rlock_client_new(%s): %s", t->url, rlock_status_name(s));
    }
    return c;
}

uint64_t bench_stat(rlock_client *c, rlock_stat which)
{
    uint64_t v = 0;
    rlock_status s = rlock_client_stat(c, which, &v);
    if (s != RLOCK_OK) {
        bench_die("rlock_client_stat(%d): %s", (int)which, rlock_status_name(s));
    }
    return v;
}

/* ---- the start gate ------------------------------------------------------ */

void bench_gate_init(bench_gate *g)
{
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
}

void bench_gate_destroy(bench_gate *g)
{
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
}

void bench_gate_wait_ready(bench_gate *g, int n)
{
    pthread_mutex_lock(&g->mu);
    while (g->ready < n) {
        pthread_cond_wait(&g->cv, &g->mu);
    }
    pthread_mutex_unlock(&g->mu);
}

void bench_gate_open(bench_gate *g, int64_t deadline_ns, int64_t hard_stop_ns)
{
    pthread_mutex_lock(&g->mu);
    g->deadline_ns = deadline_ns;
    g->hard_stop_ns = hard_stop_ns;
    g->open = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* Reports this worker ready and waits for the gate; returns the deadlines
 * (read under the mutex, so every worker sees the controller's values). */
static void gate_pass(bench_gate *g, int64_t *deadline, int64_t *hard_stop)
{
    pthread_mutex_lock(&g->mu);
    g->ready++;
    pthread_cond_broadcast(&g->cv);
    while (!g->open) {
        pthread_cond_wait(&g->cv, &g->mu);
    }
    *deadline = g->deadline_ns;
    *hard_stop = g->hard_stop_ns;
    pthread_mutex_unlock(&g->mu);
}

/* ---- the loops ------------------------------------------------------------ */

/* Warns about the first few failures only: a broken run would otherwise
 * flood stderr, and the counts are in the result anyway. */
static void warn_status(bench_worker *w, const char *what, rlock_status s)
{
    if (w->errors + w->unlock_errors <= 3) {
        bench_warn("%s(%s) in thread %llu: %s", what, w->lock_name,
                   (unsigned long long)rlock_thread_id(), rlock_status_name(s));
    }
}

static void warm_up(bench_worker *w, rlock *l)
{
    for (int i = 0; i < w->warmup; i++) {
        rlock_status s = rlock_lock(l, RLOCK_WATCHDOG);
        if (s != RLOCK_OK) {
            bench_die("warm-up rlock_lock(%s): %s", w->lock_name, rlock_status_name(s));
        }
        s = rlock_unlock(l);
        if (s != RLOCK_OK) {
            bench_die("warm-up rlock_unlock(%s): %s", w->lock_name, rlock_status_name(s));
        }
    }
}

/* The critical section of the anchor protocol: GET counter; SET counter+1,
 * on the worker's own connection so that it measures the lock, not a
 * shared socket. */
static void critical_section(bench_worker *w, redisContext *cs)
{
    redisReply *rep = bench_cmd(cs, "GET %s", w->counter_key);
    long long v = rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
    freeReplyObject(rep);
    bench_cmd_void(cs, "SET %s %lld", w->counter_key, v + 1);
    w->cs_cmds += 2;
}

static void loop_contended(bench_worker *w, rlock *l, redisContext *cs, int64_t deadline,
                           int64_t hard_stop)
{
    while (bench_now_ns() < deadline) {
        int64_t t0 = bench_now_ns();
        rlock_status s = rlock_lock(l, RLOCK_WATCHDOG);
        int64_t t1 = bench_now_ns();
        if (s != RLOCK_OK) {
            /* As the anchor runners do with an acquire timeout: count it
             * and stop this worker rather than spin on a failing call. */
            w->errors++;
            warn_status(w, "rlock_lock", s);
            break;
        }
        if (t1 >= hard_stop) {
            /* Past the protocol's hard stop the driver is reading the
             * counter: release without touching it. */
            rlock_unlock(l);
            break;
        }
        critical_section(w, cs);
        int64_t t2 = bench_now_ns();
        s = rlock_unlock(l);
        if (s != RLOCK_OK) {
            w->unlock_errors++;
            warn_status(w, "rlock_unlock", s);
        }
        bench_vec_push(&w->lat, t1 - t0);
        bench_vec_push(&w->acq_at, t1);
        bench_vec_push(&w->rel_at, t2);
        w->ops++;
    }
}

static void loop_pairs(bench_worker *w, rlock *l, int64_t deadline)
{
    while (w->max_ops == 0 || w->ops < w->max_ops) {
        int64_t t0 = bench_now_ns();
        rlock_status s = rlock_lock(l, RLOCK_WATCHDOG);
        if (s != RLOCK_OK) {
            w->errors++;
            warn_status(w, "rlock_lock", s);
            break;
        }
        s = rlock_unlock(l);
        int64_t t1 = bench_now_ns();
        if (s != RLOCK_OK) {
            w->unlock_errors++;
            warn_status(w, "rlock_unlock", s);
        }
        bench_vec_push(&w->lat, t1 - t0);
        w->ops++;
        /* Checked after the pair, as the anchor runners do: N pairs or the
         * duration, whichever comes first. */
        if (t1 >= deadline) {
            break;
        }
    }
}

void *bench_worker_main(void *arg)
{
    bench_worker *w = arg;
    rlock *l = NULL;
    rlock_status s = rlock_new(w->client, w->lock_name, &l);
    if (s != RLOCK_OK) {
        bench_die("rlock_new(%s): %s", w->lock_name, rlock_status_name(s));
    }
    bool contended = w->counter_key[0] != '\0';
    redisContext *cs = contended ? bench_connect(w->target) : NULL;
    warm_up(w, l);

    int64_t deadline, hard_stop;
    gate_pass(w->gate, &deadline, &hard_stop);
    if (contended) {
        loop_contended(w, l, cs, deadline, hard_stop);
    } else {
        loop_pairs(w, l, deadline);
    }

    if (cs) {
        redisFree(cs);
    }
    rlock_free(l);
    return NULL;
}

bool bench_worker_join_until(bench_worker *w, int64_t mono_deadline_ns)
{
    /* pthread_timedjoin_np takes a CLOCK_REALTIME time: convert the
     * monotonic deadline to a remaining time and add it to the wall clock
     * read now (a wall-clock step during the wait only shifts it). */
    int64_t left = mono_deadline_ns - bench_now_ns();
    if (left < 0) {
        left = 0;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t abs_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + left;
    ts.tv_sec = abs_ns / 1000000000;
    ts.tv_nsec = abs_ns % 1000000000;
    w->finished = pthread_timedjoin_np(w->thread, NULL, &ts) == 0;
    return w->finished;
}

void bench_worker_free(bench_worker *w)
{
    bench_vec_free(&w->lat);
    bench_vec_free(&w->acq_at);
    bench_vec_free(&w->rel_at);
}

/* ---- hand-off ---------------------------------------------------------------- */

typedef struct hold_iv {
    int64_t acq;
    int64_t rel;
} hold_iv;

static int cmp_iv(const void *x, const void *y)
{
    const hold_iv *a = x, *b = y;
    return (a->acq > b->acq) - (a->acq < b->acq);
}

void bench_handoffs(bench_vec *const *acq, bench_vec *const *rel, size_t n, bench_vec *out)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        total += acq[i]->n;
    }
    if (total < 2) {
        return;
    }
    hold_iv *iv = bench_xcalloc(total, sizeof *iv);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < acq[i]->n; j++) {
            iv[k].acq = acq[i]->v[j];
            iv[k].rel = rel[i]->v[j];
            k++;
        }
    }
    qsort(iv, total, sizeof *iv, cmp_iv);
    size_t overlaps = 0;
    for (size_t i = 1; i < total; i++) {
        int64_t d = iv[i].acq - iv[i - 1].rel;
        if (d < 0) {
            /* A hold that began before the previous one ended would be a
             * mutual-exclusion failure; the counter check reports it. */
            overlaps++;
            continue;
        }
        bench_vec_push(out, d);
    }
    if (overlaps) {
        bench_warn("%zu hold intervals overlap", overlaps);
    }
    free(iv);
}
