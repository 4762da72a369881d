/* rlock-bench: the lock kinds of issue 16, each measured against its own
 * limit in the same round:
 *
 *   uncontended  each kind's lock(WATCHDOG) + unlock pairs on one thread,
 *                in slices alternating with its floor (floor.c: the same
 *                scripts, keys and arguments from a bare loop);
 *   contended    T threads of one client on one name, lock, GET + SET of a
 *                counter on the thread's own connection, unlock; every kind
 *                in turn, its rate as a ratio to the reentrant lock's of
 *                the same round;
 *   readers      R threads of one client taking and releasing one read
 *                lock, against R bare loops of the read lock's scripts on
 *                R connections on the same name (the parallel limit), and
 *                one thread of each, in alternating slices.
 *
 * The threaded scenarios run unpinned (with --pin only the server stays
 * on CPU 0): R threads on the server's CPU would measure one CPU. */
#include "bench.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef BENCH_NO_LIB_KINDS
#define BK_READ_OR_0 BK_REENTRANT /* the readers scenario does not run */
const bench_kind_info bench_kinds[BK_COUNT] = {
    [BK_REENTRANT] = {"reentrant", "rlock_new", rlock_new, false},
};
#else
#define BK_READ_OR_0 BK_READ
const bench_kind_info bench_kinds[BK_COUNT] = {
    [BK_REENTRANT] = {"reentrant", "rlock_new", rlock_new, false},
    [BK_NONREENTRANT] = {"nonreentrant", "rlock_new_nonreentrant", rlock_new_nonreentrant, false},
    [BK_FAIR] = {"fair", "rlock_new_fair", rlock_new_fair, false},
    [BK_FAIR_NONREENTRANT] = {"fair-nonreentrant", "rlock_new_fair_nonreentrant",
                              rlock_new_fair_nonreentrant, false},
    [BK_FENCED] = {"fenced", "rlock_new_fenced", rlock_new_fenced, false},
    [BK_SPIN] = {"spin", "rlock_new_spin", rlock_new_spin, false},
    [BK_READ] = {"read", "rlock_new_read", rlock_new_read, true},
    [BK_WRITE] = {"write", "rlock_new_write", rlock_new_write, false},
};
#endif

bench_kind bench_kind_named(const char *name)
{
    for (int k = 0; k < BK_COUNT; k++) {
        if (strcmp(name, bench_kinds[k].name) == 0) {
            return (bench_kind)k;
        }
    }
    bench_die("no lock kind '%s' (reentrant, nonreentrant, fair, fair-nonreentrant, fenced, "
              "spin, read, write)",
              name);
}

rlock *bench_lock_kind(rlock_client *c, bench_kind k, const char *name)
{
    rlock *l = NULL;
    rlock_status s = bench_kinds[k].make(c, name, &l);
    if (s != RLOCK_OK) {
        bench_die("%s(%s): %s", bench_kinds[k].ctor, name, rlock_status_name(s));
    }
    return l;
}

static double per(double a, double b)
{
    return b > 0 ? a / b : NAN;
}

/* ---- uncontended, against each kind's floor ----------------------------- */

void bench_kinds_open(bench_ctx *x)
{
    int warm = x->smoke ? 20 : 300;
    char name[128];
    for (int k = 0; k < BK_COUNT; k++) {
        snprintf(name, sizeof name, "%s:kind:%s", x->prefix, bench_kinds[k].name);
        x->klock[k] = bench_lock_kind(x->c, (bench_kind)k, name);
        snprintf(name, sizeof name, "%s:kind:%s:floor", x->prefix, bench_kinds[k].name);
        x->kfloor[k] = bench_floor_new(x->host, x->port, NULL, name, (bench_kind)k);
        uint64_t errors = 0;
        bench_pairs(x->klock[k], (uint64_t)warm, 0, NULL, &errors);
        bench_floor_pairs(x->kfloor[k], (uint64_t)warm, NULL);
        if (errors) {
            bench_die("warm-up of the %s lock failed", bench_kinds[k].name);
        }
    }
    if (x->readers > 0) {
        x->rfloor = bench_xcalloc((size_t)x->readers, sizeof *x->rfloor);
        snprintf(name, sizeof name, "%s:readers:floor", x->prefix);
        for (int i = 0; i < x->readers; i++) {
            x->rfloor[i] = bench_floor_new(x->host, x->port, NULL, name, BK_READ_OR_0);
            bench_floor_pairs(x->rfloor[i], (uint64_t)warm, NULL);
        }
    }
}

void bench_kinds_close(bench_ctx *x)
{
    for (int k = 0; k < BK_COUNT; k++) {
        rlock_free(x->klock[k]);
        bench_floor_free(x->kfloor[k]);
        x->klock[k] = NULL;
        x->kfloor[k] = NULL;
    }
    for (int i = 0; x->rfloor && i < x->readers; i++) {
        bench_floor_free(x->rfloor[i]);
    }
    free(x->rfloor);
    x->rfloor = NULL;
}

void bench_scn_kinds(bench_ctx *x, int round, bench_round *out)
{
    int slices = x->smoke ? 1 : x->quick ? 3 : 5;
    int n = x->smoke ? 50 : x->quick ? 500 : 1500;
    for (int k = 0; k < BK_COUNT; k++) {
        bench_side f, p;
        memset(&f, 0, sizeof f);
        memset(&p, 0, sizeof p);
        for (int s = 0; s < slices; s++) {
            /* floor first in even slices of even rounds, and so on */
            if ((s + round) % 2 == 0) {
                bench_slice_floor_on(x, x->kfloor[k], n, &f);
                bench_slice_pairs_on(x, x->c, x->klock[k], n, &p);
            } else {
                bench_slice_pairs_on(x, x->c, x->klock[k], n, &p);
                bench_slice_floor_on(x, x->kfloor[k], n, &f);
            }
        }
        out->k_floor_pps[k] = per(f.pairs, f.s);
        out->k_pps[k] = per(p.pairs, p.s);
        out->k_ratio[k] = per(out->k_pps[k], out->k_floor_pps[k]);
        out->k_floor_p50_us[k] = bench_quantile(f.lat, f.nlat, 0.5);
        out->k_p50_us[k] = bench_quantile(p.lat, p.nlat, 0.5);
        out->k_floor_cpu_us[k] = per(f.cpu_s * 1e6, f.pairs);
        out->k_cpu_us[k] = per(p.cpu_s * 1e6, p.pairs);
        out->k_floor_cmds[k] = per(f.cmds, f.pairs);
        out->k_cmds[k] = per(p.cmds, p.pairs);
        out->k_floor_usec[k] = per(f.srv_usec, f.srv_calls);
        out->k_usec[k] = per(p.srv_usec, p.srv_calls);
        free(f.lat);
        free(p.lat);
    }
}

/* ---- threads for a while: contended and parallel readers ---------------- */

typedef struct group group;

typedef struct worker {
    group *g;
    pthread_t th;
    bench_floor *f; /* the floor's loop, or NULL: rlock's */
    uint64_t n, errors;
} worker;

struct group {
    bench_ctx *x;
    bench_kind k;
    char name[128], counter[160];
    bool cs; /* GET + SET of the counter while holding the lock */
    int n;
    worker *w;
    pthread_barrier_t ready, go;
    _Atomic int64_t end_ns;
};

static void *worker_main(void *arg)
{
    worker *w = arg;
    group *g = w->g;
    rlock *l = w->f ? NULL : bench_lock_kind(g->x->c, g->k, g->name);
    redisContext *r = g->cs ? bench_connect(g->x->host, g->x->port) : NULL;
    /* Warm: the handle's first pair (and a subscription the kind keeps). */
    uint64_t warm_errors = 0;
    if (w->f) {
        bench_floor_pairs(w->f, 1, NULL);
    } else if (bench_pairs(l, 1, 0, NULL, &warm_errors) != 1) {
        bench_die("warm-up of a %s lock failed", bench_kinds[g->k].name);
    }
    pthread_barrier_wait(&g->ready);
    pthread_barrier_wait(&g->go);
    int64_t end = atomic_load(&g->end_ns);
    while (bench_now_ns() < end) {
        if (w->f) {
            bench_floor_pairs(w->f, 1, NULL);
            w->n++;
            continue;
        }
        rlock_status s = rlock_lock(l, RLOCK_WATCHDOG);
        if (s != RLOCK_OK) {
            if (++w->errors <= 3) {
                fprintf(stderr, "rlock-bench: lock(%s): %s\n", g->name, rlock_status_name(s));
            }
            break;
        }
        if (r) {
            redisReply *rep = bench_cmd(r, "GET %s", g->counter);
            long long v = rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
            freeReplyObject(rep);
            freeReplyObject(bench_cmd(r, "SET %s %lld", g->counter, v + 1));
        }
        s = rlock_unlock(l);
        if (s != RLOCK_OK) {
            if (++w->errors <= 3) {
                fprintf(stderr, "rlock-bench: unlock(%s): %s\n", g->name, rlock_status_name(s));
            }
            break;
        }
        w->n++;
    }
    rlock_free(l);
    if (r) {
        redisFree(r);
    }
    return NULL;
}

/* What one run of a group measured. */
typedef struct run_out {
    double total, s, per_s, minmax, cmds, calls, errors;
} run_out;

static double script_calls(redisContext *r)
{
    double a = bench_info(r, "commandstats", "cmdstat_evalsha", "calls");
    double b = bench_info(r, "commandstats", "cmdstat_eval", "calls");
    return (isnan(a) ? 0 : a) + (isnan(b) ? 0 : b);
}

/* Runs g's n threads (floors: f[i] each; NULL: rlock) for seconds. */
static void run_group(group *g, bench_floor **f, double seconds, run_out *o)
{
    bench_ctx *x = g->x;
    g->w = bench_xcalloc((size_t)g->n, sizeof *g->w);
    pthread_barrier_init(&g->ready, NULL, (unsigned)g->n + 1);
    pthread_barrier_init(&g->go, NULL, (unsigned)g->n + 1);
    for (int i = 0; i < g->n; i++) {
        g->w[i].g = g;
        g->w[i].f = f ? f[i] : NULL;
        if (pthread_create(&g->w[i].th, NULL, worker_main, &g->w[i]) != 0) {
            bench_die("pthread_create failed");
        }
    }
    pthread_barrier_wait(&g->ready);
    freeReplyObject(bench_cmd(x->r, "CONFIG RESETSTAT"));
    uint64_t cmds0 = bench_stat(x->c, RLOCK_STAT_COMMANDS);
    int64_t t0 = bench_now_ns();
    atomic_store(&g->end_ns, t0 + (int64_t)(seconds * 1e9));
    pthread_barrier_wait(&g->go);
    uint64_t lo = UINT64_MAX, hi = 0, total = 0, errors = 0;
    for (int i = 0; i < g->n; i++) {
        pthread_join(g->w[i].th, NULL);
        uint64_t n = g->w[i].n;
        lo = n < lo ? n : lo;
        hi = n > hi ? n : hi;
        total += n;
        errors += g->w[i].errors;
    }
    o->s = (double)(bench_now_ns() - t0) / 1e9;
    o->total = (double)total;
    o->per_s = per(o->total, o->s);
    o->minmax = per((double)lo, (double)hi);
    o->cmds = f ? NAN : per((double)(bench_stat(x->c, RLOCK_STAT_COMMANDS) - cmds0), o->total);
    o->calls = per(script_calls(x->r), o->total);
    o->errors = (double)errors;
    pthread_barrier_destroy(&g->ready);
    pthread_barrier_destroy(&g->go);
    free(g->w);
    g->w = NULL;
}

static void unpin(bench_ctx *x, bool on)
{
    if (x->pin) {
        bench_pin_self(on ? -1 : 0);
    }
}

static double slice_s(const bench_ctx *x, double full)
{
    return x->smoke ? 0.05 : x->quick ? full / 2 : full;
}

/* ---- contended ---------------------------------------------------------- */

void bench_scn_contended(bench_ctx *x, int round, bench_round *out)
{
    unpin(x, true);
    double secs = slice_s(x, 0.3);
    /* Per kind: acquisitions, seconds, commands and script calls (as
     * per-acquisition figures times acquisitions), min/max (summed),
     * lost updates, errors. */
    double acq[BK_COUNT] = {0}, s[BK_COUNT] = {0}, cmds[BK_COUNT] = {0}, calls[BK_COUNT] = {0};
    double mm[BK_COUNT] = {0}, lost[BK_COUNT] = {0}, errors[BK_COUNT] = {0};
    int passes = x->smoke ? 1 : 2;
    for (int pass = 0; pass < passes; pass++) {
        for (int i = 0; i < BK_COUNT; i++) {
            /* The kinds in turn, then back: each kind's two slices lie at
             * mirrored moments of the round (the next round the other way
             * round). */
            int k = (round + pass) % 2 ? BK_COUNT - 1 - i : i;
            group g;
            memset(&g, 0, sizeof g);
            g.x = x;
            g.k = (bench_kind)k;
            g.cs = true;
            g.n = x->contenders;
            snprintf(g.name, sizeof g.name, "%s:cont:%s:%d", x->prefix, bench_kinds[k].name, round);
            snprintf(g.counter, sizeof g.counter, "%s:counter", g.name);
            freeReplyObject(bench_cmd(x->r, "DEL %s", g.counter));
            run_out o;
            run_group(&g, NULL, secs, &o);
            redisReply *rep = bench_cmd(x->r, "GET %s", g.counter);
            double counter = rep->type == REDIS_REPLY_STRING ? atof(rep->str) : 0;
            freeReplyObject(rep);
            freeReplyObject(bench_cmd(x->r, "DEL %s", g.counter));
            acq[k] += o.total;
            s[k] += o.s;
            cmds[k] += o.cmds * o.total;
            calls[k] += o.calls * o.total;
            mm[k] += o.minmax / passes;
            lost[k] += o.total - counter;
            errors[k] += o.errors;
            if (!bench_kinds[k].shared && o.total != counter) {
                fprintf(stderr, "rlock-bench: contended %s: %.0f acquisitions, counter %.0f\n",
                        bench_kinds[k].name, o.total, counter);
            }
        }
    }
    for (int k = 0; k < BK_COUNT; k++) {
        out->c_aps[k] = per(acq[k], s[k]);
        out->c_cmds[k] = per(cmds[k], acq[k]);
        out->c_calls[k] = per(calls[k], acq[k]);
        out->c_minmax[k] = mm[k];
        out->c_lost[k] = lost[k];
        out->c_errors[k] = errors[k];
    }
    for (int k = 0; k < BK_COUNT; k++) {
        out->c_vs_re[k] = per(out->c_aps[k], out->c_aps[BK_REENTRANT]);
    }
    unpin(x, false);
}

/* ---- readers in parallel ------------------------------------------------ */

/* R rlock readers or R floor loops (floor), or one of either, for secs. */
static void readers_slice(bench_ctx *x, int round, bool floor, int n, double secs, run_out *o)
{
    group g;
    memset(&g, 0, sizeof g);
    g.x = x;
    g.k = BK_READ_OR_0;
    g.n = n;
    snprintf(g.name, sizeof g.name, "%s:readers%s", x->prefix, floor ? ":floor" : "");
    (void)round;
    run_group(&g, floor ? x->rfloor : NULL, secs, o);
    if (o->errors) {
        bench_die("readers: %.0f failed calls", o->errors);
    }
}

void bench_scn_readers(bench_ctx *x, int round, bench_round *out)
{
    unpin(x, true);
    double secs = slice_s(x, 0.4);
    /* floor R, rlock R, rlock 1, floor 1, then back: each measured twice,
     * once early and once late in the round (the next round the other way
     * round). */
    double sum[4] = {0, 0, 0, 0}, s[4] = {0, 0, 0, 0}, mm[4] = {0, 0, 0, 0};
    static const int order[2][8] = {{0, 1, 2, 3, 3, 2, 1, 0}, {1, 0, 3, 2, 2, 3, 0, 1}};
    for (int i = 0; i < 8; i++) {
        int which = order[round % 2][i]; /* 0 floor R, 1 rlock R, 2 rlock 1, 3 floor 1 */
        bool floor = which == 0 || which == 3;
        int n = which < 2 ? x->readers : 1;
        if (x->pin) {
            /* One thread on the CPU the server is not on, where the
             * scheduler would put it at random: one placement for both. */
            bench_pin_self(n == 1 ? 1 : -1);
        }
        run_out o;
        readers_slice(x, round, floor, n, secs, &o);
        sum[which] += o.total;
        s[which] += o.s;
        mm[which] += o.minmax / 2;
    }
    out->rd_floor_pps = per(sum[0], s[0]);
    out->rd_pps = per(sum[1], s[1]);
    out->rd1_pps = per(sum[2], s[2]);
    out->rd1_floor_pps = per(sum[3], s[3]);
    out->rd_ratio = per(out->rd_pps, out->rd_floor_pps);
    out->rd1_ratio = per(out->rd1_pps, out->rd1_floor_pps);
    out->rd_scale = per(out->rd_pps, out->rd1_pps);
    out->rd_floor_scale = per(out->rd_floor_pps, out->rd1_floor_pps);
    out->rd_minmax = mm[1];
    out->rd_floor_minmax = mm[0];
    unpin(x, false);
}
