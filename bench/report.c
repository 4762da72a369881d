/* rlock-bench: the standalone report. Runs the scenarios in interleaved
 * rounds (limit, uncontended, nested, watchdog; again; again...), so that a
 * slow minute of this shared machine hits every measurement alike, and
 * prints the median of each figure over the rounds with its range. */
#include "bench.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct row {
    const char *label;
    size_t off; /* of the figure in bench_round */
    int nd;     /* decimals */
    char goal;  /* '>' at least, '<' at most, 0 none */
    double target;
} row;

#define F(field) offsetof(bench_round, field)

static const char *num(char *buf, double v, int nd)
{
    if (isnan(v)) {
        return "-";
    }
    snprintf(buf, 32, "%.*f", nd, v);
    return buf;
}

static double field(const bench_round *r, size_t off)
{
    return *(const double *)((const char *)r + off);
}

/* Median, min and max of one figure over the rounds, and the goal. */
static int print_row(const row *w, const bench_round *rs, int n)
{
    double *v = bench_xcalloc((size_t)n, sizeof *v);
    int k = 0;
    for (int i = 0; i < n; i++) {
        double x = field(&rs[i], w->off);
        if (!isnan(x)) {
            v[k++] = x;
        }
    }
    double med = bench_quantile(v, (size_t)k, 0.5);
    char a[32], b[32], c[32], g[64] = "";
    bool missed = false;
    if (w->goal) {
        missed = isnan(med) || (w->goal == '>' ? med < w->target : med > w->target);
        snprintf(g, sizeof g, "%s %s%s", w->goal == '>' ? "≥" : "≤", num(a, w->target, w->nd),
                 missed ? " **missed**" : " met");
    }
    printf("| %s | **%s** | %s | %s | %s |\n", w->label, num(a, med, w->nd),
           num(b, k ? v[0] : NAN, w->nd), num(c, k ? v[k - 1] : NAN, w->nd), g);
    free(v);
    return missed;
}

static void print_rounds(const bench_round *rs, int n)
{
    char a[32], b[32], c[32], d[32];
    printf("Rounds in the order they ran (limit and pairs measured back to back):\n\n"
           "| round | EVALSHA/s | pairs/s | ratio | registry B/lock |\n|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        printf("| %d | %s | %s | %s | %s |\n", i + 1, num(a, rs[i].limit_rps, 0),
               num(b, rs[i].pairs_per_s, 0), num(c, rs[i].ratio, 3),
               num(d, rs[i].wd_registry_b, 0));
    }
    printf("\n");
}

static void load_lock_like(bench_ctx *x)
{
    /* The same text as LOCK_LIKE_LUA in ../shared/bench-anchors/driver.py,
     * so that both measure the same limit. */
    redisReply *r = bench_cmd(x->r, "SCRIPT LOAD %s",
                              "redis.call('HINCRBY', KEYS[1], ARGV[1], 1); "
                              "redis.call('PEXPIRE', KEYS[1], 30000); return 1");
    snprintf(x->sha, sizeof x->sha, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
}

int bench_report_main(bench_ctx *x, int rounds, int held)
{
    x->r = bench_connect(x->host, x->port);
    load_lock_like(x);
    snprintf(x->prefix, sizeof x->prefix, "rlock-bench:%ld", (long)getpid());
    x->c = bench_client(x->host, x->port, 0);
    {
        char name[96];
        snprintf(name, sizeof name, "%s:warm", x->prefix);
        rlock *l = bench_lock(x->c, name);
        uint64_t errors = 0;
        bench_pairs(l, 500, 0, NULL, &errors); /* loads the scripts, opens the pool */
        rlock_free(l);
    }
    bench_round *rs = bench_xcalloc((size_t)rounds, sizeof *rs);
    int64_t t0 = bench_now_ns();
    for (int i = 0; i < rounds; i++) {
        bench_note("round %d/%d: limit, uncontended, nested, watchdog (%d locks)", i + 1, rounds,
                   held);
        bench_acc acc = {0};
        for (int k = 0; k < (x->quick ? 3 : 5); k++) {
            bench_slice_limit(x, x->quick ? 2000 : 6000, &acc);
            bench_slice_pairs(x, x->quick ? 1000 : 4000, &acc);
        }
        bench_speed(&acc, &rs[i]);
        bench_scn_nested(x, &rs[i]);
        bench_scn_watchdog(x, held, &rs[i]);
    }
    double total = (double)(bench_now_ns() - t0) / 1e9;

    redisReply *v = bench_cmd(x->r, "INFO server");
    const char *ver = v->type == REDIS_REPLY_STRING ? strstr(v->str, "redis_version:") : NULL;
    printf("# rlock-bench %s%s\n\n", rlock_version(), x->quick ? " (quick)" : "");
    printf("redis-server %.*s on %s:%d, %ld CPUs. %d interleaved rounds (each: limit, "
           "uncontended, nested, watchdog), %.0f s. Median over the rounds, with the "
           "lowest and highest round.\n\n",
           ver ? (int)strcspn(ver + 14, "\r\n") : 1, ver ? ver + 14 : "?", x->host, x->port,
           sysconf(_SC_NPROCESSORS_ONLN), rounds, total);
    freeReplyObject(v);
    char wd[4][128];
    snprintf(wd[0], sizeof wd[0], "watchdog, %d held: registry bytes per held lock", held);
    snprintf(wd[1], sizeof wd[1], "watchdog, %d held: renewal calls per round", held);
    snprintf(wd[2], sizeof wd[2], "watchdog, %d held: client CPU µs per lock renewed", held);
    snprintf(wd[3], sizeof wd[3], "watchdog, %d held: Redis CPU µs per lock renewed", held);
    const row rows[] = {
        {"limit: redis-benchmark EVALSHA lock-like -c 1, calls/s", F(limit_rps), 0, 0, 0},
        {"limit: redis-benchmark CPU µs per call", F(limit_cpu_us), 1, 0, 0},
        {"limit: Redis µs per lock-like call", F(limit_usec), 2, 0, 0},
        {"uncontended: lock + unlock pairs/s", F(pairs_per_s), 0, 0, 0},
        {"**uncontended ratio** = pairs/s ÷ (EVALSHA/s ÷ 2)", F(ratio), 3, '>', 0.9},
        {"uncontended: pair latency p50 µs", F(pair_p50_us), 1, 0, 0},
        {"uncontended: pair latency p99 µs", F(pair_p99_us), 1, 0, 0},
        {"uncontended: rlock client CPU µs per pair (all threads)", F(pair_cpu_us), 1, 0, 0},
        {"uncontended: client commands per pair", F(pair_cmds), 3, 0, 0},
        {"uncontended: Redis µs per rlock script call", F(pair_usec), 2, 0, 0},
        {"nested: first lock (hold 0 → 1) p50 µs", F(nest_first_us), 1, 0, 0},
        {"nested: re-entry (1 → 2 … 10 → 11) p50 µs", F(nest_reenter_us), 1, 0, 0},
        {"nested: re-entry p50 at depth 10 ÷ depth 1", F(nest_slope), 2, '<', 1.25},
        {"nested: partial unlock (11 → 10 … 2 → 1) p50 µs", F(nest_partial_us), 1, 0, 0},
        {"nested: full unlock (1 → 0) p50 µs", F(nest_full_us), 1, 0, 0},
        {wd[0], F(wd_registry_b), 0, '<', 256},
        {"watchdog: heap bytes per rlock handle", F(wd_handle_b), 0, 0, 0},
        {wd[1], F(wd_calls_round), 1, '<', ceil(held / 100.0)},
        {wd[2], F(wd_client_us), 2, 0, 0},
        {wd[3], F(wd_redis_us), 2, 0, 0},
        {"watchdog: sampled locks alive after the window", F(wd_alive), 2, '>', 1.0},
        {"watchdog: failed locks + unlocks (ELOST: a lease ran out)", F(wd_errors), 0, '<', 0},
    };
    printf("| measure | median | min | max | goal |\n|---|---|---|---|---|\n");
    int missed = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        missed += print_row(&rows[i], rs, rounds);
    }
    printf("\n");
    print_rounds(rs, rounds);
    printf("%d goal%s missed\n", missed, missed == 1 ? "" : "s");
    fflush(stdout);
    rlock_client_free(x->c);
    redisFree(x->r);
    free(rs);
    return 0;
}
