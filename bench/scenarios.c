/* rlock-bench: the measurements of one standalone round. Each fills its
 * fields of a bench_round; report.c runs them in interleaved rounds and
 * prints the medians. */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NEST_DEPTH 11    /* the first acquire, then re-entry to a hold count of 11 */
#define WD_LEASE_MS 3000 /* watchdog lease 3 s: a renewal round every second */

/* Resets the server's command statistics, so that the EVALSHA figures read
 * after a slice are that slice's alone. */
static void reset_stats(bench_ctx *x)
{
    freeReplyObject(bench_cmd(x->r, "CONFIG RESETSTAT"));
}

static void add_evalsha(bench_ctx *x, double *calls, double *usec)
{
    *calls += bench_info(x->r, "commandstats", "cmdstat_evalsha", "calls");
    *usec += bench_info(x->r, "commandstats", "cmdstat_evalsha", "usec");
}

static void grow(bench_side *d, int n)
{
    d->lat = realloc(d->lat, (d->nlat + (size_t)n) * sizeof *d->lat);
    if (!d->lat) {
        bench_die("out of memory");
    }
}

/* The floor (floor.c): rlock's scripts and arguments from a bare loop. */
void bench_slice_floor_on(bench_ctx *x, bench_floor *f, int n, bench_side *d)
{
    grow(d, n);
    reset_stats(x);
    uint64_t cmds0 = bench_floor_commands(f);
    double cpu0 = bench_cpu_s(true);
    int64_t t0 = bench_now_ns();
    uint64_t done = bench_floor_pairs(f, (uint64_t)n, d->lat + d->nlat);
    d->s += (double)(bench_now_ns() - t0) / 1e9;
    d->cpu_s += bench_cpu_s(true) - cpu0;
    d->cmds += (double)(bench_floor_commands(f) - cmds0);
    d->pairs += (double)done;
    d->nlat += done;
    add_evalsha(x, &d->srv_calls, &d->srv_usec);
}

/* One thread, lock(WATCHDOG) + unlock of l, n pairs. */
void bench_slice_pairs_on(bench_ctx *x, rlock_client *c, rlock *l, int n, bench_side *d)
{
    grow(d, n);
    uint64_t errors = 0;
    reset_stats(x);
    uint64_t cmds0 = bench_stat(c, RLOCK_STAT_COMMANDS);
    double cpu0 = bench_cpu_s(true);
    int64_t t0 = bench_now_ns();
    uint64_t done = bench_pairs(l, (uint64_t)n, 0, d->lat + d->nlat, &errors);
    d->s += (double)(bench_now_ns() - t0) / 1e9;
    d->cpu_s += bench_cpu_s(true) - cpu0;
    d->cmds += (double)(bench_stat(c, RLOCK_STAT_COMMANDS) - cmds0);
    if (errors || done == 0) {
        bench_die("uncontended %s: %llu errors", rlock_name(l), (unsigned long long)errors);
    }
    d->pairs += (double)done;
    d->nlat += done;
    add_evalsha(x, &d->srv_calls, &d->srv_usec);
}

void bench_slice_floor(bench_ctx *x, int t, int n, bench_acc *a)
{
    if (x->floor[t]) {
        bench_slice_floor_on(x, x->floor[t], n, &a->floor[t]);
    }
}

/* One thread, lock(WATCHDOG) + unlock of one name, n pairs, on the client
 * of transport t (none: nothing to measure). */
void bench_slice_pairs(bench_ctx *x, int t, int n, bench_acc *a)
{
    rlock_client *c = t == BENCH_TLS ? x->ctls : x->c;
    if (!c) {
        return;
    }
    char name[96];
    snprintf(name, sizeof name, "%s:unc%s", x->prefix, t == BENCH_TLS ? ":tls" : "");
    rlock *l = bench_lock(c, name);
    bench_slice_pairs_on(x, c, l, n, &a->lib[t]);
    rlock_free(l);
}

static double per(double a, double b)
{
    return b > 0 ? a / b : NAN;
}

void bench_speed(bench_acc *a, bench_round *out)
{
    for (int t = BENCH_TCP; t <= BENCH_TLS; t++) {
        bench_side *f = &a->floor[t], *p = &a->lib[t];
        out->floor_pps[t] = per(f->pairs, f->s);
        out->floor_cpu_us[t] = per(f->cpu_s * 1e6, f->pairs);
        out->floor_p50_us[t] = bench_quantile(f->lat, f->nlat, 0.5);
        out->pairs_per_s[t] = per(p->pairs, p->s);
        out->ratio[t] = per(out->pairs_per_s[t], out->floor_pps[t]);
        out->pair_cpu_us[t] = per(p->cpu_s * 1e6, p->pairs);
        out->pair_p50_us[t] = bench_quantile(p->lat, p->nlat, 0.5);
        out->pair_p99_us[t] = bench_quantile(p->lat, p->nlat, 0.99);
    }
    out->floor_usec = per(a->floor[BENCH_TCP].srv_usec, a->floor[BENCH_TCP].srv_calls);
    out->pair_cmds = per(a->lib[BENCH_TCP].cmds, a->lib[BENCH_TCP].pairs);
    out->pair_usec = per(a->lib[BENCH_TCP].srv_usec, a->lib[BENCH_TCP].srv_calls);
    out->tls_vs_tcp = per(out->pairs_per_s[BENCH_TLS], out->pairs_per_s[BENCH_TCP]);
    out->tls_floor_vs_tcp = per(out->floor_pps[BENCH_TLS], out->floor_pps[BENCH_TCP]);
    for (int t = BENCH_TCP; t <= BENCH_TLS; t++) {
        free(a->floor[t].lat);
        free(a->lib[t].lat);
    }
    memset(a, 0, sizeof *a);
}

/* Re-entry: lock x11 then unlock x11 on one name, per-call latency by the
 * hold count it moves from. */
void bench_scn_nested(bench_ctx *x, bench_round *out)
{
    int rounds = x->smoke ? 20 : x->quick ? 100 : 500;
    char name[96];
    snprintf(name, sizeof name, "%s:nest", x->prefix);
    rlock *l = bench_lock(x->c, name);
    double *lk = bench_xcalloc((size_t)(NEST_DEPTH * rounds), sizeof *lk);
    double *ul = bench_xcalloc((size_t)(NEST_DEPTH * rounds), sizeof *ul);
    for (int r = 0; r < rounds; r++) {
        for (int d = 0; d < NEST_DEPTH; d++) {
            int64_t t0 = bench_now_ns();
            rlock_status s = rlock_lock(l, RLOCK_WATCHDOG);
            lk[d * rounds + r] = (double)(bench_now_ns() - t0) / 1e3;
            if (s != RLOCK_OK) {
                bench_die("nested lock at depth %d: %s", d, rlock_status_name(s));
            }
        }
        for (int d = NEST_DEPTH - 1; d >= 0; d--) {
            int64_t t0 = bench_now_ns();
            rlock_status s = rlock_unlock(l);
            ul[d * rounds + r] = (double)(bench_now_ns() - t0) / 1e3;
            if (s != RLOCK_OK) {
                bench_die("nested unlock at depth %d: %s", d, rlock_status_name(s));
            }
        }
    }
    /* Medians per depth: robust to the odd scheduling stall. */
    double lm[NEST_DEPTH], um[NEST_DEPTH];
    for (int d = 0; d < NEST_DEPTH; d++) {
        lm[d] = bench_quantile(lk + d * rounds, (size_t)rounds, 0.5);
        um[d] = bench_quantile(ul + d * rounds, (size_t)rounds, 0.5);
    }
    out->nest_first_us = lm[0];
    out->nest_reenter_us = bench_mean(lm + 1, NEST_DEPTH - 1);
    out->nest_full_us = um[0];
    out->nest_partial_us = bench_mean(um + 1, NEST_DEPTH - 1);
    out->nest_slope = lm[NEST_DEPTH - 1] / lm[1];
    free(lk);
    free(ul);
    rlock_free(l);
}

static double redis_cpu_s(bench_ctx *x)
{
    return bench_info(x->r, "cpu", "used_cpu_sys", NULL) +
           bench_info(x->r, "cpu", "used_cpu_user", NULL);
}

/* Counts a failed lock or unlock; the first few are named on stderr. A lost
 * lease (RLOCK_ELOST at unlock) means renewal fell behind: a finding to
 * report, not a reason to stop. */
static void wd_check(rlock_status s, const char *what, double *errors)
{
    if (s != RLOCK_OK && ++*errors <= 3) {
        fprintf(stderr, "rlock-bench: watchdog %s: %s\n", what, rlock_status_name(s));
    }
}

/* held watchdog locks on a client of their own: memory per lock, then the
 * renewal rounds of a quiet window (calls, client and Redis CPU). */
void bench_scn_watchdog(bench_ctx *x, int held, bench_round *out)
{
    rlock_client *c = bench_client(x->host, x->port, WD_LEASE_MS);
    char name[128];
    snprintf(name, sizeof name, "%s:wd:warm", x->prefix);
    rlock *warm = bench_lock(c, name);
    uint64_t warm_errors = 0;
    bench_pairs(warm, 100, 0, NULL, &warm_errors); /* pool buffers in the baseline */
    rlock_free(warm);
    out->wd_errors = 0;

    rlock **h = bench_xcalloc((size_t)held, sizeof *h);
    int64_t heap0 = bench_heap_bytes();
    for (int i = 0; i < held; i++) {
        snprintf(name, sizeof name, "%s:wd:%d", x->prefix, i);
        h[i] = bench_lock(c, name);
        wd_check(rlock_lock(h[i], RLOCK_WATCHDOG), "lock", &out->wd_errors);
    }
    int64_t heap1 = bench_heap_bytes();
    for (int i = 0; i < held; i++) {
        rlock_free(h[i]); /* holds belong to the thread, not the handle */
    }
    int64_t heap2 = bench_heap_bytes();
    out->wd_registry_b = (double)(heap2 - heap0) / held;
    out->wd_handle_b = (double)(heap1 - heap2) / held;

    int periods = x->smoke ? 1 : x->quick ? 2 : 3;
    uint64_t calls0 = bench_stat(c, RLOCK_STAT_RENEWAL_CALLS);
    uint64_t renewed0 = bench_stat(c, RLOCK_STAT_RENEWED);
    double cpu0 = bench_cpu_s(true), rcpu0 = redis_cpu_s(x);
    bench_sleep_ms((int64_t)periods * WD_LEASE_MS / 3);
    double cpu = bench_cpu_s(true) - cpu0, rcpu = redis_cpu_s(x) - rcpu0;
    double calls = (double)(bench_stat(c, RLOCK_STAT_RENEWAL_CALLS) - calls0);
    double renewed = (double)(bench_stat(c, RLOCK_STAT_RENEWED) - renewed0);
    /* Rounds from the renewals themselves: exact where a window edge cuts
     * a round in two. */
    out->wd_calls_round = renewed > 0 ? calls / (renewed / held) : NAN;
    out->wd_client_us = renewed > 0 ? cpu * 1e6 / renewed : NAN;
    out->wd_redis_us = renewed > 0 ? rcpu * 1e6 / renewed : NAN;

    /* The oldest locks were taken more than a lease ago: only renewal
     * kept them. Sample 100 across the range. */
    int sampled = 0, alive = 0;
    for (int i = 0; i < held; i += held >= 100 ? held / 100 : 1) {
        redisReply *r = bench_cmd(x->r, "PTTL %s:wd:%d", x->prefix, i);
        alive += r->type == REDIS_REPLY_INTEGER && r->integer > 0;
        sampled++;
        freeReplyObject(r);
    }
    out->wd_alive = (double)alive / sampled;
    for (int i = 0; i < held; i++) {
        snprintf(name, sizeof name, "%s:wd:%d", x->prefix, i);
        rlock *l = bench_lock(c, name);
        wd_check(rlock_unlock(l), "unlock", &out->wd_errors);
        rlock_free(l);
    }
    out->wd_errors += (double)bench_stat(c, RLOCK_STAT_HELD); /* holds left behind */
    rlock_client_free(c);
    free(h);
}
