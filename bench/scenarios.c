/* rlock-bench: standalone scenarios 1 (uncontended), 2 (parallel distinct
 * locks), 3 (nested re-entry) and 5 (watchdog scale). Scenario 4 is in
 * contended.c. */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* CPU seconds and context switches of this process so far: what the
 * client side costs per operation (the server is another process). */
static void usage_now(double *cpu_s, double *csw)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *cpu_s = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
             ru.ru_stime.tv_usec / 1e6;
    *csw = (double)(ru.ru_nvcsw + ru.ru_nivcsw);
}

void bench_run_workers(bench_ctx *x, rlock_client *c, bench_worker *w, int n, double duration_s,
                       double grace_s, bench_run *out)
{
    bench_gate *g = w[0].gate;
    for (int i = 0; i < n; i++) {
        if (pthread_create(&w[i].thread, NULL, bench_worker_main, &w[i]) != 0) {
            bench_die("pthread_create failed");
        }
    }
    bench_gate_wait_ready(g, n);
    bench_cmd_void(x->r, "CONFIG RESETSTAT");
    uint64_t cmds0 = bench_stat(c, RLOCK_STAT_COMMANDS);
    uint64_t wake0 = bench_stat(c, RLOCK_STAT_WAKEUPS);
    double cpu0, csw0;
    usage_now(&cpu0, &csw0);
    int64_t start = bench_now_ns();
    int64_t deadline = start + (int64_t)(duration_s * 1e9);
    int64_t hard_stop = deadline + (int64_t)(grace_s * 1e9);
    bench_gate_open(g, deadline, hard_stop);
    out->stuck = 0;
    for (int i = 0; i < n; i++) {
        if (!bench_worker_join_until(&w[i], hard_stop + 1000000000LL)) {
            bench_warn("worker %d (%s) still blocked in rlock_lock 1 s "
                       "after the hard stop",
                       i, w[i].lock_name);
            out->stuck++;
        }
    }
    out->elapsed_s = (double)(bench_now_ns() - start) / 1e9;
    usage_now(&out->cpu_s, &out->csw);
    out->cpu_s -= cpu0;
    out->csw -= csw0;
    /* Read first: the checks that follow send commands of their own. */
    bench_cmdstats_read(x->r, &out->server);
    out->client_cmds = bench_stat(c, RLOCK_STAT_COMMANDS) - cmds0;
    out->wakeups = bench_stat(c, RLOCK_STAT_WAKEUPS) - wake0;
}

void bench_workers_done(rlock_client *c, bench_gate *g, bench_worker *w, int n, int stuck)
{
    if (stuck > 0) {
        bench_warn("leaking a client and %d workers: %d still blocked", n, stuck);
        return;
    }
    for (int i = 0; i < n; i++) {
        bench_worker_free(&w[i]);
    }
    free(w);
    bench_gate_destroy(g);
    rlock_client_free(c);
}

/* ---- 1. uncontended ------------------------------------------------------- */

void bench_scn_uncontended(bench_ctx *x)
{
    bool q = x->o->quick;
    uint64_t n = q ? 2000 : 20000;
    double dur = q ? 1.0 : 5.0;
    bench_progress("1. uncontended: %llu pairs or %.0f s", (unsigned long long)n, dur);

    rlock_client *c = bench_client(&x->o->target, 0, 0);
    static bench_gate g; /* static: a stuck worker may outlive this call */
    bench_gate_init(&g);
    bench_worker *wp = bench_xcalloc(1, sizeof *wp);
    bench_worker w0 = {0};
    w0.client = c;
    w0.target = &x->o->target;
    snprintf(w0.lock_name, sizeof w0.lock_name, "%s:unc", x->prefix);
    w0.gate = &g;
    w0.warmup = 300;
    w0.max_ops = n;
    *wp = w0;
    bench_run run;
    bench_run_workers(x, c, wp, 1, dur, 0, &run);
    bench_worker w = *wp; /* a snapshot for the figures below */

    bench_lat l = bench_lat_of(&w.lat);
    double rate = (double)w.ops / run.elapsed_s;
    const bench_rb *rb = bench_limit(x, 1);
    double limit = rb->ok ? rb->rps / 2 : NAN;
    double ratio = rate / limit;
    double ccmd = (double)run.client_cmds / (double)w.ops;
    double scmd = (double)bench_cmdstats_total(&run.server) / (double)w.ops;
    char breakdown[1024];
    bench_cmdstats_format(&run.server, w.ops, NULL, 0, breakdown, sizeof breakdown);

    bench_md("## 1. Uncontended lock + unlock\n");
    bench_md("One thread, one client (default pool), lock(WATCHDOG) + "
             "unlock of one name, %llu pairs or %.0f s. Latency is one "
             "pair. The limit is half the redis-benchmark EVALSHA rate at "
             "-c 1 (a pair is two script calls).\n",
             (unsigned long long)n, dur);
    bench_md("| pairs | pairs/s | mean us | p50 us | p99 us | max us | "
             "round trips per pair | client cmds/pair | server cmds/pair | "
             "limit pairs/s | ratio |");
    bench_md("|---|---|---|---|---|---|---|---|---|---|---|");
    bench_md("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |",
             bench_fmt((double)w.ops, 0), bench_fmt(rate, 0), bench_fmt(l.mean_us, 0),
             bench_fmt(l.p50_us, 0), bench_fmt(l.p99_us, 0), bench_fmt(l.max_us, 0),
             bench_fmt(l.mean_us / x->rtt_us, 2), bench_fmt(ccmd, 2), bench_fmt(scmd, 2),
             bench_fmt(limit, 0), bench_fmt(ratio, 2));
    bench_md("\nServer commands per pair: %s\n", breakdown);
    if (w.errors || w.unlock_errors) {
        bench_md("**%llu lock errors, %llu unlock errors.**\n", (unsigned long long)w.errors,
                 (unsigned long long)w.unlock_errors);
    }

    bench_js_begin("uncontended");
    bench_js_num("pairs", (double)w.ops);
    bench_js_num("pairs_per_s", rate);
    bench_js_num("lat_mean_us", l.mean_us);
    bench_js_num("lat_p50_us", l.p50_us);
    bench_js_num("lat_p99_us", l.p99_us);
    bench_js_num("lat_max_us", l.max_us);
    bench_js_num("client_cmds_per_pair", ccmd);
    bench_js_num("server_cmds_per_pair", scmd);
    bench_js_num("limit_pairs_per_s", limit);
    bench_js_num("ratio", ratio);
    bench_js_end();
    bench_goal("1. uncontended pairs/s ÷ ½ EVALSHA -c 1", ratio, 2, true, 0.9);

    if (run.stuck) {
        bench_md("**%d worker stuck in rlock_lock.**\n", run.stuck);
    }
    bench_goal("1. workers stuck in rlock_lock", run.stuck, 0, false, 0);
    bench_cmdstats_free(&run.server);
    bench_workers_done(c, &g, wp, 1, run.stuck);
}

/* ---- 2. parallel, distinct locks ------------------------------------------- */

static void parallel_one(bench_ctx *x, int threads, double dur)
{
    bench_progress("2. parallel: %d threads, distinct locks, %.0f s", threads, dur);
    /* One client shared by every thread, default pool: how an application
     * would use it, and what the pool size is there to serve. */
    rlock_client *c = bench_client(&x->o->target, 0, 0);
    bench_gate *g = bench_xcalloc(1, sizeof *g);
    bench_gate_init(g);
    bench_worker *w = bench_xcalloc((size_t)threads, sizeof *w);
    for (int i = 0; i < threads; i++) {
        snprintf(w[i].lock_name, sizeof w[i].lock_name, "%s:par:%d:%d", x->prefix, threads, i);
        w[i].client = c;
        w[i].target = &x->o->target;
        w[i].gate = g;
        w[i].warmup = 20;
    }
    bench_run run;
    bench_run_workers(x, c, w, threads, dur, 0, &run);

    uint64_t ops = 0, errors = 0;
    bench_vec lat = {0};
    for (int i = 0; i < threads; i++) {
        ops += w[i].ops;
        errors += w[i].errors + w[i].unlock_errors;
        bench_vec_append(&lat, w[i].lat.v, w[i].lat.n);
    }
    bench_lat l = bench_lat_of(&lat);
    double rate = (double)ops / run.elapsed_s;
    const bench_rb *rb = bench_limit(x, threads);
    double limit = rb->ok ? rb->rps / 2 : NAN;
    double ratio = rate / limit;
    double ccmd = (double)run.client_cmds / (double)ops;

    double cpu_us = run.cpu_s * 1e6 / (double)ops;
    double csw = run.csw / (double)ops;
    bench_md("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |%s", threads,
             bench_fmt((double)ops, 0), bench_fmt(rate, 0), bench_fmt(l.mean_us, 0),
             bench_fmt(l.p50_us, 0), bench_fmt(l.p99_us, 0), bench_fmt(l.max_us, 0),
             bench_fmt(ccmd, 2), bench_fmt(cpu_us, 1), bench_fmt(csw, 2), bench_fmt(limit, 0),
             bench_fmt(ratio, 2), errors ? " errors!" : "");
    char label[64];
    snprintf(label, sizeof label, "parallel %d", threads);
    bench_js_begin(label);
    bench_js_num("threads", threads);
    bench_js_num("pairs", (double)ops);
    bench_js_num("pairs_per_s", rate);
    bench_js_num("lat_mean_us", l.mean_us);
    bench_js_num("lat_p50_us", l.p50_us);
    bench_js_num("lat_p99_us", l.p99_us);
    bench_js_num("lat_max_us", l.max_us);
    bench_js_num("client_cmds_per_pair", ccmd);
    bench_js_num("client_cpu_us_per_pair", cpu_us);
    bench_js_num("context_switches_per_pair", csw);
    bench_js_num("limit_pairs_per_s", limit);
    bench_js_num("ratio", ratio);
    bench_js_num("errors", (double)errors);
    bench_js_end();
    char goal[96];
    snprintf(goal, sizeof goal, "2. parallel %d threads ÷ ½ EVALSHA -c %d", threads, threads);
    bench_goal(goal, ratio, 2, true, 0.7);

    snprintf(goal, sizeof goal, "2. parallel %d: workers stuck", threads);
    bench_goal(goal, run.stuck, 0, false, 0);
    bench_vec_free(&lat);
    bench_cmdstats_free(&run.server);
    bench_workers_done(c, g, w, threads, run.stuck);
    if (run.stuck == 0) {
        free(g);
    }
}

void bench_scn_parallel(bench_ctx *x)
{
    double dur = x->o->quick ? 1.0 : 5.0;
    bench_md("## 2. Parallel, distinct locks\n");
    bench_md("N threads, each lock + unlock of its own name, one shared "
             "client with the default pool (up to 32 connections, made on demand), %.0f s. "
             "Latency is one pair. Client CPU and context switches are this "
             "process's (getrusage) per pair. The limit is half the "
             "redis-benchmark EVALSHA rate at the same -c.\n",
             dur);
    bench_md("| threads | pairs | pairs/s | mean us | p50 us | p99 us | "
             "max us | client cmds/pair | client CPU us/pair | context "
             "switches/pair | limit pairs/s | ratio |");
    bench_md("|---|---|---|---|---|---|---|---|---|---|---|---|");
    parallel_one(x, 8, dur);
    parallel_one(x, 32, dur);
    bench_md("%s", "");
}

/* ---- 3. nested re-entry ------------------------------------------------------ */

#define NEST_DEPTH 11 /* the first acquire, then re-entry depths 1..10 */

void bench_scn_nested(bench_ctx *x)
{
    int rounds = x->o->quick ? 100 : 1000;
    bench_progress("3. nested re-entry: %d rounds of depth 1..10", rounds);
    rlock_client *c = bench_client(&x->o->target, 0, 0);
    char name[128];
    snprintf(name, sizeof name, "%s:nest", x->prefix);
    rlock *l = NULL;
    rlock_status s = rlock_new(c, name, &l);
    if (s != RLOCK_OK) {
        bench_die("rlock_new: %s", rlock_status_name(s));
    }
    for (int i = 0; i < 100; i++) {
        if (rlock_lock(l, RLOCK_WATCHDOG) != RLOCK_OK || rlock_unlock(l) != RLOCK_OK) {
            bench_die("nested warm-up failed");
        }
    }

    bench_vec lk[NEST_DEPTH] = {{0}}, ul[NEST_DEPTH] = {{0}};
    uint64_t errors = 0;
    int64_t held_at_top = -1;
    uint64_t cmds0 = bench_stat(c, RLOCK_STAT_COMMANDS);
    for (int r = 0; r < rounds; r++) {
        for (int d = 0; d < NEST_DEPTH; d++) {
            int64_t t0 = bench_now_ns();
            s = rlock_lock(l, RLOCK_WATCHDOG);
            bench_vec_push(&lk[d], bench_now_ns() - t0);
            errors += s != RLOCK_OK;
        }
        if (r == 0) {
            /* Once, outside the timing: the count Redis holds must be
             * the depth we think we are at. */
            uint64_t c0 = bench_stat(c, RLOCK_STAT_COMMANDS);
            if (rlock_hold_count(l, &held_at_top) != RLOCK_OK) {
                held_at_top = -1;
            }
            cmds0 += bench_stat(c, RLOCK_STAT_COMMANDS) - c0;
        }
        for (int d = NEST_DEPTH - 1; d >= 0; d--) {
            int64_t t0 = bench_now_ns();
            s = rlock_unlock(l);
            bench_vec_push(&ul[d], bench_now_ns() - t0);
            errors += s != RLOCK_OK;
        }
    }
    uint64_t cmds = bench_stat(c, RLOCK_STAT_COMMANDS) - cmds0;
    rlock_free(l);
    rlock_client_free(c);

    bench_md("## 3. Nested re-entry\n");
    bench_md("One thread takes the lock it already holds, %d rounds of "
             "lock x11 then unlock x11. Row d: the lock call that takes the "
             "hold count from d to d+1 (d = 0 is the first acquire), and "
             "the unlock that takes it from d+1 back to d (d = 0 is the "
             "full release, which deletes the key and publishes). Round "
             "trips = mean / PING mean (%s us). Client commands per call: "
             "%s. Hold count in Redis at the top: %lld (expected %d).\n",
             rounds, bench_fmt(x->rtt_us, 1),
             bench_fmt((double)cmds / (2.0 * NEST_DEPTH * rounds), 2), (long long)held_at_top,
             NEST_DEPTH);
    bench_md("| depth d | lock mean us | p50 | p99 | max | round trips | "
             "unlock mean us | p50 | p99 | max |");
    bench_md("|---|---|---|---|---|---|---|---|---|---|");
    for (int d = 0; d < NEST_DEPTH; d++) {
        bench_lat a = bench_lat_of(&lk[d]);
        bench_lat b = bench_lat_of(&ul[d]);
        bench_md("| %d%s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", d,
                 d == 0 ? " (first)" : "", bench_fmt(a.mean_us, 0), bench_fmt(a.p50_us, 0),
                 bench_fmt(a.p99_us, 0), bench_fmt(a.max_us, 0),
                 bench_fmt(a.mean_us / x->rtt_us, 2), bench_fmt(b.mean_us, 0),
                 bench_fmt(b.p50_us, 0), bench_fmt(b.p99_us, 0), bench_fmt(b.max_us, 0));
        char label[32];
        snprintf(label, sizeof label, "nested depth %d", d);
        bench_js_begin(label);
        bench_js_num("depth", d);
        bench_js_num("lock_mean_us", a.mean_us);
        bench_js_num("lock_p50_us", a.p50_us);
        bench_js_num("lock_p99_us", a.p99_us);
        bench_js_num("unlock_mean_us", b.mean_us);
        bench_js_num("unlock_p50_us", b.p50_us);
        bench_js_num("unlock_p99_us", b.p99_us);
        bench_js_end();
        bench_vec_free(&lk[d]);
        bench_vec_free(&ul[d]);
    }
    if (errors) {
        bench_md("\n**%llu calls failed.**", (unsigned long long)errors);
    }
    bench_md("%s", "");
}

/* ---- 5. watchdog scale --------------------------------------------------------- */

#define WD_TIMEOUT_MS 3000 /* lease 3 s: a renewal period of 1 s */

static void lock_name(char *buf, size_t len, const bench_ctx *x, int n, int i)
{
    snprintf(buf, len, "%s:wd:%d:%d", x->prefix, n, i);
}

static void watchdog_one(bench_ctx *x, int n, int periods)
{
    bench_progress("5. watchdog: %d held locks, %d renewal periods", n, periods);
    rlock_client *c = bench_client(&x->o->target, WD_TIMEOUT_MS, 0);
    char name[160];
    /* Warm the pool so its buffers are in the baseline, not the figure. */
    snprintf(name, sizeof name, "%s:wd:warm", x->prefix);
    rlock *wl = NULL;
    if (rlock_new(c, name, &wl) != RLOCK_OK) {
        bench_die("rlock_new failed");
    }
    for (int i = 0; i < 100; i++) {
        if (rlock_lock(wl, RLOCK_WATCHDOG) != RLOCK_OK || rlock_unlock(wl) != RLOCK_OK) {
            bench_die("watchdog warm-up failed");
        }
    }
    rlock_free(wl);
    rlock **h = bench_xcalloc((size_t)n, sizeof *h);

    int64_t heap0 = bench_heap_bytes(), rss0 = bench_rss_bytes();
    int64_t t0 = bench_now_ns();
    uint64_t errors = 0;
    for (int i = 0; i < n; i++) {
        lock_name(name, sizeof name, x, n, i);
        if (rlock_new(c, name, &h[i]) != RLOCK_OK) {
            bench_die("rlock_new failed");
        }
        errors += rlock_lock(h[i], RLOCK_WATCHDOG) != RLOCK_OK;
    }
    double take_s = (double)(bench_now_ns() - t0) / 1e9;
    int64_t heap1 = bench_heap_bytes(), rss1 = bench_rss_bytes();
    /* Holds belong to threads, not handles (rlock.h): freeing the handles
     * leaves what the registry needs to renew and later unlock. */
    for (int i = 0; i < n; i++) {
        rlock_free(h[i]);
        h[i] = NULL;
    }
    int64_t heap2 = bench_heap_bytes();
    double registry_b = (double)(heap2 - heap0) / n;
    double handle_b = (double)(heap1 - heap2) / n;
    double rss_b = (double)(rss1 - rss0) / n;
    uint64_t held = bench_stat(c, RLOCK_STAT_HELD);

    /* A whole number of periods, so the window holds that many rounds
     * (give or take one that straddles an edge: renewed / n tells). */
    uint64_t calls0 = bench_stat(c, RLOCK_STAT_RENEWAL_CALLS);
    uint64_t renewed0 = bench_stat(c, RLOCK_STAT_RENEWED);
    double cpu0 = bench_info_double(x->r, "cpu", "used_cpu_sys") +
                  bench_info_double(x->r, "cpu", "used_cpu_user");
    int64_t w0 = bench_now_ns();
    bench_sleep_ms((int64_t)periods * WD_TIMEOUT_MS / 3);
    double window_s = (double)(bench_now_ns() - w0) / 1e9;
    uint64_t calls = bench_stat(c, RLOCK_STAT_RENEWAL_CALLS) - calls0;
    uint64_t renewed = bench_stat(c, RLOCK_STAT_RENEWED) - renewed0;
    double cpu = bench_info_double(x->r, "cpu", "used_cpu_sys") +
                 bench_info_double(x->r, "cpu", "used_cpu_user") - cpu0;
    double nper = window_s / (WD_TIMEOUT_MS / 3000.0);
    double calls_per_period = (double)calls / nper;
    double renewed_per_period = (double)renewed / nper;
    double cpu_ms_per_period = cpu * 1000.0 / nper;
    /* Rounds that ran in the window, from the renewals themselves: a
     * round that straddles an edge counts in part, so this is exact where
     * calls / periods is off by up to one round. */
    double rounds = (double)renewed / n;
    double calls_per_round = rounds > 0 ? (double)calls / rounds : NAN;

    /* Every lock must still be there: the oldest were taken more than a
     * lease ago, so only renewal kept them. Sample 100 across the range. */
    int sampled = 0, alive = 0;
    for (int i = 0; i<n; i += n / 100> 0 ? n / 100 : 1) {
        lock_name(name, sizeof name, x, n, i);
        redisReply *rep = bench_cmd(x->r, "PTTL %s", name);
        sampled++;
        alive += rep->type == REDIS_REPLY_INTEGER && rep->integer > 0;
        freeReplyObject(rep);
    }

    int64_t u0 = bench_now_ns();
    uint64_t unlock_errors = 0;
    for (int i = 0; i < n; i++) {
        lock_name(name, sizeof name, x, n, i);
        rlock *l = NULL;
        if (rlock_new(c, name, &l) != RLOCK_OK) {
            bench_die("rlock_new failed");
        }
        unlock_errors += rlock_unlock(l) != RLOCK_OK;
        rlock_free(l);
    }
    double unlock_s = (double)(bench_now_ns() - u0) / 1e9;
    uint64_t held_after = bench_stat(c, RLOCK_STAT_HELD);
    rlock_client_free(c);
    free(h);

    bench_md("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d/%d | "
             "%s | %llu / %llu |",
             bench_fmt(n, 0), bench_fmt(take_s, 2), bench_fmt(calls_per_period, 1),
             bench_fmt(calls_per_round, 1), bench_fmt(renewed_per_period, 0),
             bench_fmt(cpu_ms_per_period, 1), bench_fmt(registry_b, 0), bench_fmt(handle_b, 0),
             bench_fmt(rss_b, 0), bench_fmt((double)held, 0), alive, sampled,
             bench_fmt(unlock_s, 2), (unsigned long long)errors, (unsigned long long)unlock_errors);
    if (held_after != 0) {
        bench_md("\n**%llu holds still tracked after unlocking all.**\n",
                 (unsigned long long)held_after);
    }
    char label[48];
    snprintf(label, sizeof label, "watchdog %d", n);
    bench_js_begin(label);
    bench_js_num("held", n);
    bench_js_num("take_s", take_s);
    bench_js_num("renewal_calls_per_period", calls_per_period);
    bench_js_num("renewal_calls_per_round", calls_per_round);
    bench_js_num("renewed_per_period", renewed_per_period);
    bench_js_num("redis_cpu_ms_per_period", cpu_ms_per_period);
    bench_js_num("registry_bytes_per_lock", registry_b);
    bench_js_num("handle_bytes_per_lock", handle_b);
    bench_js_num("rss_bytes_per_lock", rss_b);
    bench_js_num("stat_held", (double)held);
    bench_js_num("alive_sampled", alive);
    bench_js_num("sampled", sampled);
    bench_js_num("unlock_s", unlock_s);
    bench_js_num("errors", (double)(errors + unlock_errors));
    bench_js_end();
    char goal[80];
    snprintf(goal, sizeof goal, "5. registry bytes per held lock (%d)", n);
    bench_goal(goal, registry_b, 0, false, 256);
    snprintf(goal, sizeof goal, "5. renewal calls per round (%d; design: n / batch 100)", n);
    bench_goal(goal, calls_per_round, 1, false, ceil(n / 100.0));
    snprintf(goal, sizeof goal, "5. locks alive after the window (%d)", n);
    bench_goal(goal, (double)alive / sampled, 2, true, 1.0);
}

void bench_scn_watchdog(bench_ctx *x)
{
    static const int full[] = {1000, 10000, 100000};
    static const int quick[] = {1000};
    const int *counts = x->o->quick ? quick : full;
    int ncounts = x->o->quick ? 1 : 3;
    int periods = x->o->quick ? 2 : 3;
    bench_md("## 5. Watchdog scale\n");
    bench_md("One client, one thread, watchdog_timeout_ms = %d (renewal "
             "period %d ms, default batch of 100 locks per renewal call). "
             "Take n locks, free the handles, watch %d periods, unlock all. "
             "Memory from mallinfo2 (bytes in use, all arenas, chunk "
             "headers included): registry = after freeing the handles "
             "minus before taking the locks; handle = what rlock_new "
             "costs until rlock_free. RSS = /proc/self/statm delta while "
             "locks and handles are held. Alive = locks sampled with "
             "PTTL > 0 after the window (the oldest were taken more than a "
             "lease earlier). Calls/round = renewal calls / (locks renewed / n).\n",
             WD_TIMEOUT_MS, WD_TIMEOUT_MS / 3, periods);
    bench_md("| held | take s | renewal calls/period | calls/round | locks "
             "renewed/period "
             "| Redis CPU ms/period | registry B/lock | handle B/lock | RSS "
             "B/lock | RLOCK_STAT_HELD | alive | unlock-all s | errors "
             "lock / unlock |");
    bench_md("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (int i = 0; i < ncounts; i++) {
        watchdog_one(x, counts[i], periods);
    }
    bench_md("%s", "");
}
