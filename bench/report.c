/* rlock-bench: the standalone report. Runs the scenarios in interleaved
 * rounds (limit, uncontended, nested, watchdog, the kinds against their
 * floors, contended, parallel readers; again; again...), so that a slow
 * minute of this shared machine hits every measurement alike, and prints
 * the median of each figure over the rounds with its range. The fair lock
 * across processes runs first, in rounds of its own (fair, reentrant;
 * reentrant, fair; ...), before this process makes a client: its workers
 * are forked. */
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

/* Median of one figure over the rounds (NaN: not measured), with the
 * lowest and highest in *lo, *hi. */
static double med(const bench_round *rs, int n, size_t off, double *lo, double *hi)
{
    double *v = bench_xcalloc((size_t)n, sizeof *v);
    int k = 0;
    for (int i = 0; i < n; i++) {
        double x = field(&rs[i], off);
        if (!isnan(x)) {
            v[k++] = x;
        }
    }
    double m = bench_quantile(v, (size_t)k, 0.5);
    if (lo) {
        *lo = k ? v[0] : NAN;
    }
    if (hi) {
        *hi = k ? v[k - 1] : NAN;
    }
    free(v);
    return m;
}

/* "median [lowest – highest]", the median in bold when bold. */
static const char *cell(char *buf, size_t size, const bench_round *rs, int n, size_t off, int nd,
                        bool bold)
{
    double lo, hi, m = med(rs, n, off, &lo, &hi);
    char a[32], b[32], c[32];
    if (isnan(m)) {
        return "-";
    }
    snprintf(buf, size, "%s%s%s [%s – %s]", bold ? "**" : "", num(a, m, nd), bold ? "**" : "",
             num(b, lo, nd), num(c, hi, nd));
    return buf;
}

/* The median alone. */
static const char *mcell(char *buf, const bench_round *rs, int n, size_t off, int nd)
{
    return num(buf, med(rs, n, off, NULL, NULL), nd);
}

/* Whether the median of a figure misses a goal ('>' at least, '<' at
 * most); a figure not measured misses nothing. */
static int missed_goal(const bench_round *rs, int n, size_t off, char goal, double target)
{
    double m = med(rs, n, off, NULL, NULL);
    if (isnan(m)) {
        return 0;
    }
    return goal == '>' ? m < target : m > target;
}

static int print_kinds(const bench_round *rs, int n)
{
    if (isnan(med(rs, n, F(k_ratio[0]), NULL, NULL))) {
        return 0;
    }
    int missed = 0;
    char a[128], b[32], c[32], d[32], e[32], f[32], g[32], h[32], i2[32], j[32], j2[32];
    printf("Each kind uncontended: one thread, lock(RLOCK_WATCHDOG) + unlock of one name, in "
           "slices alternating with the kind's floor (its own scripts, keys and arguments "
           "from a bare loop on one connection; `rlock-bench --check` shows they are the "
           "library's). Median [lowest – highest round]; goal: ratio ≥ 0.9, the reentrant "
           "lock's.\n\n"
           "| kind | floor pairs/s | rlock pairs/s | **ratio rlock ÷ floor** | pair p50 µs "
           "floor / rlock | client CPU µs per pair floor / rlock | commands per pair floor / "
           "rlock | Redis µs per script call floor / rlock |\n"
           "|---|---|---|---|---|---|---|---|\n");
    for (int k = 0; k < BK_COUNT; k++) {
        int miss = missed_goal(rs, n, F(k_ratio[k]), '>', 0.9);
        missed += miss;
        printf("| %s | %s | %s | %s%s | %s / %s | %s / %s | %s / %s | %s / %s |\n",
               bench_kinds[k].name, mcell(b, rs, n, F(k_floor_pps[k]), 0),
               mcell(c, rs, n, F(k_pps[k]), 0), cell(a, sizeof a, rs, n, F(k_ratio[k]), 3, true),
               miss ? " **missed**" : "", mcell(d, rs, n, F(k_floor_p50_us[k]), 1),
               mcell(e, rs, n, F(k_p50_us[k]), 1), mcell(f, rs, n, F(k_floor_cpu_us[k]), 1),
               mcell(g, rs, n, F(k_cpu_us[k]), 1), mcell(h, rs, n, F(k_floor_cmds[k]), 3),
               mcell(i2, rs, n, F(k_cmds[k]), 3), mcell(j, rs, n, F(k_floor_usec[k]), 2),
               mcell(j2, rs, n, F(k_usec[k]), 2));
    }
    printf("\nRatio to the floor per round:\n\n| round | load |");
    for (int k = 0; k < BK_COUNT; k++) {
        printf(" %s |", bench_kinds[k].name);
    }
    printf("\n|---|---|");
    for (int k = 0; k < BK_COUNT; k++) {
        printf("---|");
    }
    printf("\n");
    for (int r = 0; r < n; r++) {
        printf("| %d | %s |", r + 1, num(a, rs[r].load1, 2));
        for (int k = 0; k < BK_COUNT; k++) {
            printf(" %s |", num(b, rs[r].k_ratio[k], 3));
        }
        printf("\n");
    }
    printf("\n");
    return missed;
}

static void print_contended(const bench_ctx *x, const bench_round *rs, int n)
{
    if (isnan(med(rs, n, F(c_aps[0]), NULL, NULL))) {
        return;
    }
    char a[128], b[128], c[32], d[32], e[32], f[32];
    printf("Each kind contended: %d threads of one client on one name, each looping "
           "lock(RLOCK_WATCHDOG), GET + SET of a counter on the thread's own connection, "
           "unlock; the kinds in turn (backwards in odd rounds), unpinned. The ratio is to "
           "the reentrant lock's rate in the same round. Median [lowest – highest round].\n\n"
           "| kind | acquisitions/s | **÷ reentrant, same round** | client commands per "
           "acquisition | script calls per acquisition (Redis) | per-thread min / max | "
           "counter updates lost (worst round) |\n|---|---|---|---|---|---|---|\n",
           x->contenders);
    for (int k = 0; k < BK_COUNT; k++) {
        double lo, hi;
        med(rs, n, F(c_lost[k]), &lo, &hi);
        printf("| %s | %s | %s | %s | %s | %s | %s%s |\n", bench_kinds[k].name,
               cell(a, sizeof a, rs, n, F(c_aps[k]), 0, false),
               k == BK_REENTRANT ? "1" : cell(b, sizeof b, rs, n, F(c_vs_re[k]), 3, true),
               mcell(c, rs, n, F(c_cmds[k]), 2), mcell(d, rs, n, F(c_calls[k]), 2),
               mcell(e, rs, n, F(c_minmax[k]), 2), num(f, hi, 0),
               bench_kinds[k].shared ? " (readers share: expected)"
               : hi > 0              ? " **NOT EXCLUSIVE**"
                                     : "");
    }
    printf("\n");
}

static void print_readers(const bench_ctx *x, const bench_round *rs, int n)
{
    if (isnan(med(rs, n, F(rd_pps), NULL, NULL))) {
        return;
    }
    char l[6][160];
    snprintf(l[0], sizeof l[0], "%d rlock readers, one client: pairs/s (all threads)", x->readers);
    snprintf(l[1], sizeof l[1],
             "parallel limit: %d bare loops of read_acquire + read_unlock, %d connections: pairs/s",
             x->readers, x->readers);
    snprintf(l[2], sizeof l[2], "**%d readers ÷ parallel limit**", x->readers);
    snprintf(l[3], sizeof l[3], "scaling, rlock: %d readers ÷ one", x->readers);
    snprintf(l[4], sizeof l[4], "scaling, floor: %d loops ÷ one", x->readers);
    snprintf(l[5], sizeof l[5], "per-thread min / max: rlock readers");
    const row rows[] = {
        {l[0], F(rd_pps), 0, 0, 0},
        {l[1], F(rd_floor_pps), 0, 0, 0},
        {l[2], F(rd_ratio), 3, 0, 0},
        {"one rlock reader: pairs/s", F(rd1_pps), 0, 0, 0},
        {"one bare loop: pairs/s", F(rd1_floor_pps), 0, 0, 0},
        {"one reader ÷ one loop", F(rd1_ratio), 3, 0, 0},
        {l[3], F(rd_scale), 2, 0, 0},
        {l[4], F(rd_floor_scale), 2, 0, 0},
        {l[5], F(rd_minmax), 2, 0, 0},
        {"per-thread min / max: bare loops", F(rd_floor_minmax), 2, 0, 0},
    };
    printf("Readers in parallel on one read lock (one name), unpinned. The parallel limit is "
           "the same scripts, keys and arguments sent by as many bare loops, each on a "
           "connection of its own, on the same name in the same round: what Redis and this "
           "machine's CPUs allow those scripts, with no library in between. One thread of "
           "each is measured too. Slices alternate within the round.\n\n"
           "| measure | median | min | max | goal |\n|---|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        print_row(&rows[i], rs, n);
    }
    printf("\n");
}

static int print_procs(const bench_ctx *x, const bench_round *rs, int n)
{
    if (isnan(med(rs, n, F(p_aps[0]), NULL, NULL)) && isnan(med(rs, n, F(p_aps[1]), NULL, NULL))) {
        return 0;
    }
    char a[128], b[128], c[128], d[128];
    printf("Contention across processes: %d processes x %d threads on one name, %.1f s per "
           "kind and round, the kinds alternating (fair first in odd rounds); each "
           "acquisition a lock with a 30 s lease, GET + SET of a counter, unlock "
           "(bench/procs.c). Script calls and (un)subscribes from INFO commandstats. "
           "Median [lowest – highest round]; goals of issue 16 for the fair lock: at most 3 "
           "script calls per acquisition (and the one attempt a fresh SUBSCRIBE adds: the "
           "attempt after subscribing that closes the lost wake-up window, as test_fair "
           "counts them), per-worker min / max at least 0.8.\n\n"
           "| kind | acquisitions/s | script calls per acquisition | (un)subscribes per "
           "acquisition | per-worker min / max | counter exact in every round |\n"
           "|---|---|---|---|---|---|\n",
           x->procs, x->threads, x->procs_s);
    int missed = 0;
    for (int k = 0; k < 2; k++) {
        double lo, hi;
        med(rs, n, F(p_exact[k]), &lo, &hi);
        printf("| %s | %s | %s | %s | %s | %s |\n", k == 0 ? "fair" : "reentrant",
               cell(a, sizeof a, rs, n, F(p_aps[k]), 0, false),
               cell(b, sizeof b, rs, n, F(p_calls[k]), 4, true), mcell(d, rs, n, F(p_subs[k]), 4),
               cell(c, sizeof c, rs, n, F(p_minmax[k]), 3, true),
               isnan(lo) ? "-"
               : lo == 1 ? "yes"
                         : "**NO**");
    }
    int m1 = missed_goal(rs, n, F(p_over[0]), '<', 0.0);
    int m2 = missed_goal(rs, n, F(p_minmax[0]), '>', 0.8);
    missed = m1 + m2;
    printf("\nfair: script calls per acquisition ≤ 3 + SUBSCRIBEs per acquisition %s (calls "
           "- 3 - SUBSCRIBEs: %s); per-worker min / max ≥ 0.8 %s; acquisitions/s fair ÷ "
           "reentrant, same round: %s\n\n",
           m1 ? "**missed**" : "met", cell(c, sizeof c, rs, n, F(p_over[0]), 4, false),
           m2 ? "**missed**" : "met", cell(a, sizeof a, rs, n, F(p_fair_vs_re), 3, false));
    return missed;
}

static void print_rounds(const bench_round *rs, int n)
{
    char a[32], b[32], c[32], d[32], e[32], f[32], g[32], h[32], o1[32], o2[32];
    printf("Rounds in the order they ran (floor and pairs measured in alternating slices):\n\n"
           "| round | load | floor pairs/s | rlock pairs/s | ratio | TLS floor pairs/s | TLS "
           "rlock pairs/s | TLS ratio | TLS ÷ TCP | other CPU: ratio | other CPU: TLS ratio | "
           "registry B/lock |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        const bench_round *r = &rs[i];
        char ld[32];
        printf("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", i + 1,
               num(ld, r->load1, 2), num(a, r->floor_pps[BENCH_TCP], 0),
               num(b, r->pairs_per_s[BENCH_TCP], 0), num(c, r->ratio[BENCH_TCP], 3),
               num(d, r->floor_pps[BENCH_TLS], 0), num(e, r->pairs_per_s[BENCH_TLS], 0),
               num(f, r->ratio[BENCH_TLS], 3), num(g, r->tls_vs_tcp, 3),
               num(o1, r->other_ratio[BENCH_TCP], 3), num(o2, r->other_ratio[BENCH_TLS], 3),
               num(h, r->wd_registry_b, 0));
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

static double load_avg(void)
{
    double v = NAN;
    FILE *la = fopen("/proc/loadavg", "r");
    if (la) {
        if (fscanf(la, "%lf", &v) != 1) {
            v = NAN;
        }
        fclose(la);
    }
    return v;
}

/* The fair lock across processes, then the reentrant lock, or the other
 * way round, per round; before this process has a client (bench/procs.c
 * forks). */
static void procs_rounds(bench_ctx *x, bench_round *rs, int rounds)
{
    for (int i = 0; i < rounds; i++) {
        bench_note("round %d/%d: %d processes x %d threads, fair and reentrant", i + 1, rounds,
                   x->procs, x->threads);
        for (int j = 0; j < 2; j++) {
            int k = (i + j) % 2; /* 0: fair, first in even rounds */
#ifdef BENCH_NO_LIB_KINDS
            if (k == 0) {
                rs[i].p_aps[0] = NAN;
                continue;
            }
#endif
            bench_procs_result o;
            bench_procs_run(x->host, x->port, x->procs, x->threads, x->procs_s, k == 0, &o);
            rs[i].p_aps[k] = o.acq_per_s;
            rs[i].p_calls[k] = o.calls_per_acq;
            rs[i].p_subs[k] = o.subs_per_acq;
            rs[i].p_over[k] = o.calls_per_acq - 3 - o.sub_per_acq;
            rs[i].p_minmax[k] = o.min_max;
            rs[i].p_exact[k] = o.exact ? 1 : 0;
        }
        rs[i].p_fair_vs_re = rs[i].p_aps[0] / rs[i].p_aps[1];
        rs[i].load1 = load_avg();
    }
}

/* NaN in every figure: a scenario that does not run shows nothing. */
static void clear_round(bench_round *r)
{
    double *v = (double *)r;
    for (size_t i = 0; i < sizeof *r / sizeof(double); i++) {
        v[i] = NAN;
    }
}

int bench_report_main(bench_ctx *x, int rounds, int held)
{
    x->r = bench_connect(x->host, x->port);
    snprintf(x->prefix, sizeof x->prefix, "rlock-bench:%ld", (long)getpid());
    if (x->pin && (sysconf(_SC_NPROCESSORS_ONLN) < 2 || !bench_pin_server(x->r, x->host, 0))) {
        bench_note("--pin: the server is not a local redis-server of this user, or there is "
                   "one CPU: not pinned");
        x->pin = false;
    }
    bench_round *rs = bench_xcalloc((size_t)rounds, sizeof *rs);
    for (int i = 0; i < rounds; i++) {
        clear_round(&rs[i]);
    }
    unsigned only = x->only;
    int64_t t0 = bench_now_ns();
    if (only & BENCH_ONLY_PROCS) {
        procs_rounds(x, rs, rounds);
    }
    x->c = bench_client(x->host, x->port, 0);
    char name[96];
    snprintf(name, sizeof name, "%s:floor", x->prefix);
    x->floor[BENCH_TCP] = bench_floor_new(x->host, x->port, NULL, name, BK_REENTRANT);
    if (x->tls_port && (only & BENCH_ONLY_PAIR)) {
        snprintf(name, sizeof name, "%s:floor:tls", x->prefix);
        x->floor[BENCH_TLS] = bench_floor_new(x->host, x->tls_port, &x->tls, name, BK_REENTRANT);
        x->ctls = bench_client_tls(x->host, x->tls_port, &x->tls);
    }
    if (x->pin) {
        bench_pin_self(0);
    }
    warm_up(x);
    bool kinds = only & (BENCH_ONLY_KINDS | BENCH_ONLY_CONTENDED | BENCH_ONLY_READERS);
    if (kinds) {
        bench_kinds_open(x);
    }
    int slices = x->smoke ? 1 : x->quick ? 3 : 5;
    int n = x->smoke ? 100 : x->quick ? 1000 : 4000;
    for (int i = 0; i < rounds; i++) {
        bench_note("round %d/%d:%s%s%s%s%s%s%s", i + 1, rounds,
                   only & BENCH_ONLY_PAIR ? " floor and uncontended" : "",
                   only & BENCH_ONLY_PAIR && x->tls_port ? " (TCP and TLS)" : "",
                   only & BENCH_ONLY_NESTED ? ", nested" : "",
                   only & BENCH_ONLY_WATCHDOG ? ", watchdog" : "",
                   only & BENCH_ONLY_KINDS ? ", kinds against their floors" : "",
                   only & BENCH_ONLY_CONTENDED ? ", kinds contended" : "",
                   only & BENCH_ONLY_READERS ? ", parallel readers" : "");
        /* Placement 0: the main figures (with --pin: this thread on the
         * server's CPU); 1: this thread on the other CPU (--pin only). */
        for (int p = 0; p < (x->pin ? 2 : 1) && (only & BENCH_ONLY_PAIR); p++) {
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
            bench_pin_self(0); /* nested, watchdog and the kinds: on the server's CPU too */
        }
        if (only & BENCH_ONLY_NESTED) {
            bench_scn_nested(x, &rs[i]);
        }
        if (only & BENCH_ONLY_WATCHDOG) {
            bench_scn_watchdog(x, held, &rs[i]);
        }
        if (only & BENCH_ONLY_KINDS) {
            bench_scn_kinds(x, i, &rs[i]);
        }
        if (only & BENCH_ONLY_CONTENDED) {
            bench_scn_contended(x, i, &rs[i]);
        }
        if (only & BENCH_ONLY_READERS) {
            bench_scn_readers(x, i, &rs[i]);
        }
        rs[i].load1 = load_avg();
    }
    double total = (double)(bench_now_ns() - t0) / 1e9;

    redisReply *v = bench_cmd(x->r, "INFO server");
    const char *ver = v->type == REDIS_REPLY_STRING ? strstr(v->str, "redis_version:") : NULL;
    printf("# rlock-bench %s%s\n\n", rlock_version(),
           x->smoke   ? " (smoke: not a measurement)"
           : x->quick ? " (quick)"
                      : "");
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
    double llo, lhi;
    med(rs, rounds, F(load1), &llo, &lhi);
    char l1[32], l2[32];
    printf("redis-server %.*s on %s:%d, %ld CPUs. %s%d interleaved rounds, %.0f s, load "
           "average (1 min) %s–%s at the rounds' ends, %s at the end. Median over the "
           "rounds, with the lowest and highest round. A floor is the same scripts and "
           "arguments as rlock's pair, sent by a bare loop on one blocking connection "
           "(bench/floor.c).\n\n",
           ver ? (int)strcspn(ver + 14, "\r\n") : 1, ver ? ver + 14 : "?", x->host, x->port,
           sysconf(_SC_NPROCESSORS_ONLN), tls_note, rounds, total, num(l1, llo, 2), num(l2, lhi, 2),
           load);
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
        {"floor: bare-loop pairs/s (same scripts, one blocking connection)", F(floor_pps[0]), 0, 0,
         0},
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
        {"TLS ÷ TCP: floor pairs/s over TLS ÷ over TCP, same round", F(tls_floor_vs_tcp), 3, 0, 0},
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
    if (only & BENCH_ONLY_PAIR) {
        print_rounds(rs, rounds);
    }
    missed += print_kinds(rs, rounds);
    print_contended(x, rs, rounds);
    print_readers(x, rs, rounds);
    missed += print_procs(x, rs, rounds);
    printf("%d goal%s missed\n", missed, missed == 1 ? "" : "s");
    fflush(stdout);
    if (kinds) {
        bench_kinds_close(x);
    }
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
