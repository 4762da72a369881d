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
    if (k == 0) {
        free(v); /* not measured in this run (no TLS server) */
        return 0;
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
    char a[32], b[32], c[32], d[32], e[32], f[32], g[32], h[32], o1[32], o2[32];
    printf("Rounds in the order they ran (floor and pairs measured in alternating slices):\n\n"
           "| round | floor pairs/s | rlock pairs/s | ratio | TLS floor pairs/s | TLS rlock "
           "pairs/s | TLS ratio | TLS ÷ TCP | other CPU: ratio | other CPU: TLS ratio | "
           "registry B/lock |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        const bench_round *r = &rs[i];
        printf("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", i + 1,
               num(a, r->floor_pps[BENCH_TCP], 0), num(b, r->pairs_per_s[BENCH_TCP], 0),
               num(c, r->ratio[BENCH_TCP], 3), num(d, r->floor_pps[BENCH_TLS], 0),
               num(e, r->pairs_per_s[BENCH_TLS], 0), num(f, r->ratio[BENCH_TLS], 3),
               num(g, r->tls_vs_tcp, 3), num(o1, r->other_ratio[BENCH_TCP], 3),
               num(o2, r->other_ratio[BENCH_TLS], 3), num(h, r->wd_registry_b, 0));
    }
    printf("\n");
}

/* Lock + unlock pairs of the floor and of rlock, warm (scripts loaded,
 * pools open, buffers grown). */
static void warm_up(bench_ctx *x)
{
    const rlock_client *cs[2] = {x->c, x->ctls};
    for (int t = BENCH_TCP; t <= BENCH_TLS; t++) {
        if (x->floor[t]) {
            bench_floor_pairs(x->floor[t], 300, NULL);
        }
        if (cs[t]) {
            char name[96];
            snprintf(name, sizeof name, "%s:warm%s", x->prefix, t == BENCH_TLS ? ":tls" : "");
            rlock *l = bench_lock((rlock_client *)cs[t], name);
            uint64_t errors = 0;
            bench_pairs(l, 500, 0, NULL, &errors);
            rlock_free(l);
        }
    }
}

int bench_report_main(bench_ctx *x, int rounds, int held)
{
    x->r = bench_connect(x->host, x->port);
    snprintf(x->prefix, sizeof x->prefix, "rlock-bench:%ld", (long)getpid());
    x->c = bench_client(x->host, x->port, 0);
    char name[96];
    snprintf(name, sizeof name, "%s:floor", x->prefix);
    x->floor[BENCH_TCP] = bench_floor_new(x->host, x->port, NULL, name);
    if (x->tls_port) {
        snprintf(name, sizeof name, "%s:floor:tls", x->prefix);
        x->floor[BENCH_TLS] = bench_floor_new(x->host, x->tls_port, &x->tls, name);
        x->ctls = bench_client_tls(x->host, x->tls_port, &x->tls);
    }
    if (x->pin && (sysconf(_SC_NPROCESSORS_ONLN) < 2 || !bench_pin_server(x->r, x->host, 0))) {
        bench_note("--pin: the server is not a local redis-server of this user, or there is "
                   "one CPU: not pinned");
        x->pin = false;
    }
    if (x->pin) {
        bench_pin_self(0);
    }
    warm_up(x);
    bench_round *rs = bench_xcalloc((size_t)rounds, sizeof *rs);
    int64_t t0 = bench_now_ns();
    int slices = x->quick ? 3 : 5, n = x->quick ? 1000 : 4000;
    for (int i = 0; i < rounds; i++) {
        bench_note("round %d/%d: floor and uncontended%s%s, nested, watchdog (%d locks)", i + 1,
                   rounds, x->tls_port ? " (TCP and TLS)" : "",
                   x->pin ? " on the server's CPU and on the other" : "", held);
        /* Placement 0: the main figures (with --pin: this thread on the
         * server's CPU); 1: this thread on the other CPU (--pin only). */
        for (int p = 0; p < (x->pin ? 2 : 1); p++) {
            if (x->pin) {
                bench_pin_self(p);
            }
            bench_acc acc;
            memset(&acc, 0, sizeof acc);
            /* On the other CPU a pair takes ~6x longer: fewer pairs, about
             * the same time. */
            int np = p == 0 ? n : n / 4;
            for (int k = 0; k < slices; k++) {
                /* floor, rlock, TLS floor, TLS rlock; the next slice backwards */
                for (int m = 0; m < 4; m++) {
                    int s = k % 2 ? 3 - m : m;
                    if (s % 2) {
                        bench_slice_pairs(x, s / 2, np, &acc);
                    } else {
                        bench_slice_floor(x, s / 2, np, &acc);
                    }
                }
            }
            if (p == 0) {
                bench_speed(&acc, &rs[i]);
                continue;
            }
            bench_round o;
            bench_speed(&acc, &o);
            for (int t = BENCH_TCP; t <= BENCH_TLS; t++) {
                rs[i].other_floor_pps[t] = o.floor_pps[t];
                rs[i].other_pairs_per_s[t] = o.pairs_per_s[t];
                rs[i].other_ratio[t] = o.ratio[t];
            }
            rs[i].other_tls_vs_tcp = o.tls_vs_tcp;
        }
        if (x->pin) {
            bench_pin_self(0); /* nested and watchdog: on the server's CPU too */
        }
        bench_scn_nested(x, &rs[i]);
        bench_scn_watchdog(x, held, &rs[i]);
    }
    double total = (double)(bench_now_ns() - t0) / 1e9;

    redisReply *v = bench_cmd(x->r, "INFO server");
    const char *ver = v->type == REDIS_REPLY_STRING ? strstr(v->str, "redis_version:") : NULL;
    printf("# rlock-bench %s%s\n\n", rlock_version(), x->quick ? " (quick)" : "");
    char load[64] = "?", tls_note[160] = "";
    FILE *la = fopen("/proc/loadavg", "r");
    if (la) {
        if (!fgets(load, sizeof load, la)) {
            snprintf(load, sizeof load, "?");
        }
        fclose(la);
        load[strcspn(load, " ")] = '\0'; /* the 1-minute figure */
    }
    if (x->tls_port) {
        snprintf(tls_note, sizeof tls_note, "TLS on port %d of the same server. ", x->tls_port);
    }
    printf("redis-server %.*s on %s:%d, %ld CPUs. %s%d interleaved rounds (each: "
           "floor and uncontended pairs, nested, watchdog), %.0f s, load average %s at the "
           "end. Median over the rounds, with the lowest and highest round. The floor is "
           "the same scripts and arguments as rlock's pair, sent by a bare loop on one "
           "blocking connection (bench/floor.c).\n\n",
           ver ? (int)strcspn(ver + 14, "\r\n") : 1, ver ? ver + 14 : "?", x->host, x->port,
           sysconf(_SC_NPROCESSORS_ONLN), tls_note, rounds, total, load);
    printf("%s\n\n", x->pin ? "Pinned (--pin): the server's main thread on CPU 0; the figures "
                              "are measured with the bench on CPU 0, the rows \"other CPU\" "
                              "with it on CPU 1 (a round trip then waits for the other vCPU "
                              "to wake up, several times slower on these VMs)."
                            : "Not pinned: the scheduler places the bench and the server, "
                              "on one CPU or on two, which changes the rate several times "
                              "over on these VMs; read the ratios, not the rates.");
    freeReplyObject(v);
    char wd[4][128];
    snprintf(wd[0], sizeof wd[0], "watchdog, %d held: registry bytes per held lock", held);
    snprintf(wd[1], sizeof wd[1], "watchdog, %d held: renewal calls per round", held);
    snprintf(wd[2], sizeof wd[2], "watchdog, %d held: client CPU µs per lock renewed", held);
    snprintf(wd[3], sizeof wd[3], "watchdog, %d held: Redis CPU µs per lock renewed", held);
    const row rows[] = {
        {"floor: bare-loop pairs/s (same scripts, one blocking connection)", F(floor_pps[0]), 0,
         0, 0},
        {"uncontended: rlock lock + unlock pairs/s", F(pairs_per_s[0]), 0, 0, 0},
        {"**uncontended ratio** = rlock pairs/s ÷ floor pairs/s", F(ratio[0]), 3, '>', 0.9},
        {"floor: pair latency p50 µs", F(floor_p50_us[0]), 1, 0, 0},
        {"uncontended: pair latency p50 µs", F(pair_p50_us[0]), 1, 0, 0},
        {"uncontended: pair latency p99 µs", F(pair_p99_us[0]), 1, 0, 0},
        {"floor: client CPU µs per pair (whole process)", F(floor_cpu_us[0]), 1, 0, 0},
        {"uncontended: rlock client CPU µs per pair (all threads)", F(pair_cpu_us[0]), 1, 0, 0},
        {"uncontended: client commands per pair (floor: 2.004)", F(pair_cmds), 3, 0, 0},
        {"floor: Redis µs per script call", F(floor_usec), 2, 0, 0},
        {"uncontended: Redis µs per rlock script call", F(pair_usec), 2, 0, 0},
        {"TLS floor: bare-loop pairs/s", F(floor_pps[1]), 0, 0, 0},
        {"TLS uncontended: rlock pairs/s", F(pairs_per_s[1]), 0, 0, 0},
        {"**TLS uncontended ratio** = rlock ÷ floor, both over TLS", F(ratio[1]), 3, '>', 0.9},
        {"TLS ÷ TCP: rlock pairs/s over TLS ÷ over TCP, same round", F(tls_vs_tcp), 3, 0, 0},
        {"TLS ÷ TCP: floor pairs/s over TLS ÷ over TCP, same round", F(tls_floor_vs_tcp), 3, 0,
         0},
        {"TLS floor: pair latency p50 µs", F(floor_p50_us[1]), 1, 0, 0},
        {"TLS uncontended: pair latency p50 µs", F(pair_p50_us[1]), 1, 0, 0},
        {"TLS floor: client CPU µs per pair", F(floor_cpu_us[1]), 1, 0, 0},
        {"TLS uncontended: rlock client CPU µs per pair", F(pair_cpu_us[1]), 1, 0, 0},
        {"other CPU: floor pairs/s", F(other_floor_pps[0]), 0, 0, 0},
        {"other CPU: rlock pairs/s", F(other_pairs_per_s[0]), 0, 0, 0},
        {"other CPU: **ratio** rlock ÷ floor", F(other_ratio[0]), 3, '>', 0.9},
        {"other CPU: TLS floor pairs/s", F(other_floor_pps[1]), 0, 0, 0},
        {"other CPU: TLS rlock pairs/s", F(other_pairs_per_s[1]), 0, 0, 0},
        {"other CPU: **TLS ratio** rlock ÷ floor", F(other_ratio[1]), 3, '>', 0.9},
        {"other CPU: TLS ÷ TCP, rlock pairs/s", F(other_tls_vs_tcp), 3, 0, 0},
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
    bench_floor_free(x->floor[BENCH_TCP]);
    bench_floor_free(x->floor[BENCH_TLS]);
    if (x->ctls) {
        rlock_client_free(x->ctls);
    }
    rlock_client_free(x->c);
    redisFree(x->r);
    free(rs);
    return 0;
}
