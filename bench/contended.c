/* rlock-bench: standalone scenario 4 — one lock, contended, by 8 threads of
 * one process (one shared client) and by 4 processes x 2 threads (each
 * process its own client; results come back through a pipe). */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CONT_GRACE_S 5.0

typedef struct cont_result {
    char label[64];
    int nworkers;
    uint64_t ops;
    uint64_t errors;
    uint64_t client_cmds;
    uint64_t wakeups;
    double elapsed_s;
    bench_vec lat;     /* acquire wait */
    bench_vec handoff; /* release start -> next acquire return */
    uint64_t *per_worker;
    int stuck;
    bench_cmdstats server;
    long long counter;
} cont_result;

static void fill_workers(bench_ctx *x, rlock_client *c, bench_gate *g, bench_worker *w, int n,
                         const char *lock, const char *counter)
{
    for (int i = 0; i < n; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].client = c;
        w[i].target = &x->o->target;
        snprintf(w[i].lock_name, sizeof w[i].lock_name, "%s", lock);
        snprintf(w[i].counter_key, sizeof w[i].counter_key, "%s", counter);
        w[i].gate = g;
        w[i].warmup = 10;
    }
}

static long long read_counter(bench_ctx *x, const char *key)
{
    redisReply *rep = bench_cmd(x->r, "GET %s", key);
    long long v = rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
    freeReplyObject(rep);
    return v;
}

/* ---- 8 threads, one process ------------------------------------------------- */

static void run_threads(bench_ctx *x, int threads, double dur, cont_result *r)
{
    char lock[128], counter[128];
    snprintf(lock, sizeof lock, "%s:cont:t:lock", x->prefix);
    snprintf(counter, sizeof counter, "%s:cont:t:counter", x->prefix);
    snprintf(r->label, sizeof r->label, "%d threads, 1 process", threads);
    bench_progress("4. contended: %s, %.0f s", r->label, dur);
    bench_cmd_void(x->r, "SET %s 0", counter);

    rlock_client *c = bench_client(&x->o->target, 0, 0);
    bench_gate *g = bench_xcalloc(1, sizeof *g);
    bench_gate_init(g);
    bench_worker *w = bench_xcalloc((size_t)threads, sizeof *w);
    fill_workers(x, c, g, w, threads, lock, counter);
    bench_run run;
    bench_run_workers(x, c, w, threads, dur, CONT_GRACE_S, &run);
    r->counter = read_counter(x, counter);
    r->stuck = run.stuck;

    r->nworkers = threads;
    r->per_worker = bench_xcalloc((size_t)threads, sizeof *r->per_worker);
    bench_vec **acq = bench_xcalloc((size_t)threads, sizeof *acq);
    bench_vec **rel = bench_xcalloc((size_t)threads, sizeof *rel);
    for (int i = 0; i < threads; i++) {
        r->ops += w[i].ops;
        r->errors += w[i].errors + w[i].unlock_errors;
        r->per_worker[i] = w[i].ops;
        bench_vec_append(&r->lat, w[i].lat.v, w[i].lat.n);
        acq[i] = &w[i].acq_at;
        rel[i] = &w[i].rel_at;
    }
    bench_handoffs(acq, rel, (size_t)threads, &r->handoff);
    free(acq);
    free(rel);
    bench_workers_done(c, g, w, threads, run.stuck);
    if (run.stuck == 0) {
        free(g);
    }
    r->client_cmds = run.client_cmds;
    r->wakeups = run.wakeups;
    r->elapsed_s = run.elapsed_s;
    r->server = run.server;
    bench_cmd_void(x->r, "DEL %s", counter);
}

/* ---- processes x threads ------------------------------------------------------ */

static void write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t k = write(fd, p, len);
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k <= 0) {
            bench_die("pipe write: %s", strerror(errno));
        }
        p += k;
        len -= (size_t)k;
    }
}

static void read_all(int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len > 0) {
        ssize_t k = read(fd, p, len);
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k <= 0) {
            bench_die("pipe read: %s", k == 0 ? "child exited early" : strerror(errno));
        }
        p += k;
        len -= (size_t)k;
    }
}

static void write_vec(int fd, const bench_vec *v)
{
    uint64_t n = v->n;
    write_all(fd, &n, sizeof n);
    write_all(fd, v->v, v->n * sizeof v->v[0]);
}

static void read_vec(int fd, bench_vec *v)
{
    uint64_t n;
    read_all(fd, &n, sizeof n);
    int64_t *buf = bench_xcalloc(n ? n : 1, sizeof *buf);
    read_all(fd, buf, n * sizeof *buf);
    bench_vec_append(v, buf, n);
    free(buf);
}

/* One child process: its own client (a client inherited across fork() is
 * closed to the child by design), its threads, one report on `up`. */
static int child_main(bench_ctx *x, int up, int down, int threads, const char *lock,
                      const char *counter)
{
    rlock_client *c = bench_client(&x->o->target, 0, 0);
    bench_gate *g = bench_xcalloc(1, sizeof *g);
    bench_gate_init(g);
    bench_worker *w = bench_xcalloc((size_t)threads, sizeof *w);
    fill_workers(x, c, g, w, threads, lock, counter);
    for (int i = 0; i < threads; i++) {
        if (pthread_create(&w[i].thread, NULL, bench_worker_main, &w[i]) != 0) {
            bench_die("pthread_create failed");
        }
    }
    bench_gate_wait_ready(g, threads);
    write_all(up, "R", 1);
    int64_t when[2];
    read_all(down, when, sizeof when);
    uint64_t cmds0 = bench_stat(c, RLOCK_STAT_COMMANDS);
    uint64_t wake0 = bench_stat(c, RLOCK_STAT_WAKEUPS);
    bench_gate_open(g, when[0], when[1]);
    int stuck = 0;
    for (int i = 0; i < threads; i++) {
        if (!bench_worker_join_until(&w[i], when[1] + 1000000000LL)) {
            bench_warn("process %ld: worker %d still blocked in rlock_lock "
                       "1 s after the hard stop",
                       (long)getpid(), i);
            stuck++;
        }
    }
    int64_t hdr[5] = {
        (int64_t)(bench_stat(c, RLOCK_STAT_COMMANDS) - cmds0),
        (int64_t)(bench_stat(c, RLOCK_STAT_WAKEUPS) - wake0),
        bench_now_ns(),
        threads,
        stuck,
    };
    write_all(up, hdr, sizeof hdr);
    for (int i = 0; i < threads; i++) {
        uint64_t f[2] = {w[i].ops, w[i].errors + w[i].unlock_errors};
        write_all(up, f, sizeof f);
        write_vec(up, &w[i].lat);
        write_vec(up, &w[i].acq_at);
        write_vec(up, &w[i].rel_at);
    }
    /* A stuck worker's figures are stable (past the hard stop it writes
     * none), but it still uses the client: leave everything to _exit. */
    bench_workers_done(c, g, w, threads, stuck);
    return 0;
}

#define MAX_PROCS 16

static void run_procs(bench_ctx *x, int procs, int threads, double dur, cont_result *r)
{
    char lock[128], counter[128];
    snprintf(lock, sizeof lock, "%s:cont:p:lock", x->prefix);
    snprintf(counter, sizeof counter, "%s:cont:p:counter", x->prefix);
    snprintf(r->label, sizeof r->label, "%d processes x %d threads", procs, threads);
    bench_progress("4. contended: %s, %.0f s", r->label, dur);
    bench_cmd_void(x->r, "SET %s 0", counter);

    int up[MAX_PROCS][2], down[MAX_PROCS][2];
    pid_t pid[MAX_PROCS];
    for (int p = 0; p < procs; p++) {
        if (pipe(up[p]) != 0 || pipe(down[p]) != 0) {
            bench_die("pipe: %s", strerror(errno));
        }
        /* Nothing buffered may be written twice by parent and child. */
        fflush(stdout);
        fflush(stderr);
        pid[p] = fork();
        if (pid[p] < 0) {
            bench_die("fork: %s", strerror(errno));
        }
        if (pid[p] == 0) {
            for (int q = 0; q < p; q++) {
                close(up[q][0]);
                close(down[q][1]);
            }
            close(up[p][0]);
            close(down[p][1]);
            int rc = child_main(x, up[p][1], down[p][0], threads, lock, counter);
            /* _exit: the parent's atexit handlers and stdio buffers are
             * not the child's to run. */
            _exit(rc);
        }
        close(up[p][1]);
        close(down[p][0]);
    }
    for (int p = 0; p < procs; p++) {
        char ready;
        read_all(up[p][0], &ready, 1);
    }
    bench_cmd_void(x->r, "CONFIG RESETSTAT");
    /* CLOCK_MONOTONIC is one clock for every process of the machine, so the
     * children can take the deadline as an absolute time. */
    int64_t start = bench_now_ns();
    int64_t when[2] = {start + (int64_t)(dur * 1e9), start + (int64_t)((dur + CONT_GRACE_S) * 1e9)};
    for (int p = 0; p < procs; p++) {
        write_all(down[p][1], when, sizeof when);
    }

    int nw = procs * threads;
    r->nworkers = nw;
    r->per_worker = bench_xcalloc((size_t)nw, sizeof *r->per_worker);
    bench_vec *acq = bench_xcalloc((size_t)nw, sizeof *acq);
    bench_vec *rel = bench_xcalloc((size_t)nw, sizeof *rel);
    int64_t end = start;
    for (int p = 0; p < procs; p++) {
        int64_t hdr[5];
        read_all(up[p][0], hdr, sizeof hdr);
        r->stuck += (int)hdr[4];
        r->client_cmds += (uint64_t)hdr[0];
        r->wakeups += (uint64_t)hdr[1];
        if (hdr[2] > end) {
            end = hdr[2];
        }
        if (hdr[3] != threads) {
            bench_die("child report of an unexpected shape");
        }
        for (int i = 0; i < threads; i++) {
            int k = p * threads + i;
            uint64_t f[2];
            read_all(up[p][0], f, sizeof f);
            r->per_worker[k] = f[0];
            r->ops += f[0];
            r->errors += f[1];
            read_vec(up[p][0], &r->lat);
            read_vec(up[p][0], &acq[k]);
            read_vec(up[p][0], &rel[k]);
        }
    }
    /* All reports are in, so every child is done with the lock. */
    bench_cmdstats_read(x->r, &r->server);
    r->elapsed_s = (double)(end - start) / 1e9;
    for (int p = 0; p < procs; p++) {
        close(up[p][0]);
        close(down[p][1]);
        int st = 0;
        if (waitpid(pid[p], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            bench_warn("child %ld ended with status %d", (long)pid[p], st);
        }
    }
    r->counter = read_counter(x, counter);

    bench_vec **pa = bench_xcalloc((size_t)nw, sizeof *pa);
    bench_vec **pr = bench_xcalloc((size_t)nw, sizeof *pr);
    for (int k = 0; k < nw; k++) {
        pa[k] = &acq[k];
        pr[k] = &rel[k];
    }
    bench_handoffs(pa, pr, (size_t)nw, &r->handoff);
    for (int k = 0; k < nw; k++) {
        bench_vec_free(&acq[k]);
        bench_vec_free(&rel[k]);
    }
    free(pa);
    free(pr);
    free(acq);
    free(rel);
    bench_cmd_void(x->r, "DEL %s", counter);
}

/* ---- the report ------------------------------------------------------------- */

static void report(bench_ctx *x, cont_result *r)
{
    bench_lat l = bench_lat_of(&r->lat);
    bench_lat h = bench_lat_of(&r->handoff);
    uint64_t mn = UINT64_MAX, mx = 0;
    for (int i = 0; i < r->nworkers; i++) {
        mn = r->per_worker[i] < mn ? r->per_worker[i] : mn;
        mx = r->per_worker[i] > mx ? r->per_worker[i] : mx;
    }
    double fair = mx ? (double)mn / (double)mx : NAN;
    double ops = (double)r->ops;
    double rate = ops / r->elapsed_s;
    double ccmd = (double)r->client_cmds / ops;
    /* The critical section's GET and SET run on the workers' own
     * connections; take them off the server's count. */
    uint64_t total = bench_cmdstats_total(&r->server);
    double scmd = ((double)total - 2.0 * ops) / ops;
    double evalsha = (double)(bench_cmdstats_get(&r->server, "evalsha") +
                              bench_cmdstats_get(&r->server, "eval")) /
                     ops;
    double cycle_us = 1e6 / rate;
    bool mutex_ok = r->counter == (long long)r->ops;

    bench_md("| %s | %s | %s | %s | %s | %s | %s | %llu / %llu | %s | %s | "
             "%s | %s | %s / %s | %s / %s | %s (%s) | %s | %d |",
             r->label, bench_fmt(ops, 0), bench_fmt(rate, 0), bench_fmt(l.mean_us, 0),
             bench_fmt(l.p50_us, 0), bench_fmt(l.p99_us, 0), bench_fmt(l.max_us, 0),
             (unsigned long long)mn, (unsigned long long)mx, bench_fmt(fair, 2), bench_fmt(ccmd, 2),
             bench_fmt(scmd, 2), bench_fmt(evalsha, 2), bench_fmt(h.p50_us, 0),
             bench_fmt(h.p99_us, 0), bench_fmt(h.p50_us / x->rtt_us, 1),
             bench_fmt(h.p99_us / x->rtt_us, 1), bench_fmt(cycle_us, 0),
             bench_fmt(cycle_us / x->rtt_us, 1), mutex_ok ? "yes" : "**NO**", r->stuck);

    char label[96];
    snprintf(label, sizeof label, "contended %s", r->label);
    bench_js_begin(label);
    bench_js_num("acquisitions", ops);
    bench_js_num("acq_per_s", rate);
    bench_js_num("wait_mean_us", l.mean_us);
    bench_js_num("wait_p50_us", l.p50_us);
    bench_js_num("wait_p99_us", l.p99_us);
    bench_js_num("wait_max_us", l.max_us);
    bench_js_num("per_worker_min", (double)mn);
    bench_js_num("per_worker_max", (double)mx);
    bench_js_num("fairness", fair);
    bench_js_num("client_cmds_per_acq", ccmd);
    bench_js_num("server_cmds_per_acq", scmd);
    bench_js_num("evalsha_per_acq", evalsha);
    bench_js_num("wakeups_per_acq", (double)r->wakeups / ops);
    bench_js_num("handoff_p50_us", h.p50_us);
    bench_js_num("handoff_p99_us", h.p99_us);
    bench_js_num("handoff_p50_rtt", h.p50_us / x->rtt_us);
    bench_js_num("handoff_p99_rtt", h.p99_us / x->rtt_us);
    bench_js_num("errors", (double)r->errors);
    bench_js_num("counter", (double)r->counter);
    bench_js_num("stuck", r->stuck);
    bench_js_end();

    char goal[128];
    snprintf(goal, sizeof goal, "4. fairness min/max, %s", r->label);
    bench_goal(goal, fair, 2, true, 0.5);
    snprintf(goal, sizeof goal, "4. client cmds per acquisition, %s", r->label);
    bench_goal(goal, ccmd, 2, false, 2.5);
    snprintf(goal, sizeof goal, "4. mutual exclusion |counter - acq|, %s", r->label);
    bench_goal(goal, fabs((double)r->counter - ops), 0, false, 0);
    snprintf(goal, sizeof goal, "4. workers stuck in rlock_lock, %s", r->label);
    bench_goal(goal, r->stuck, 0, false, 0);
}

static void breakdown(cont_result *r)
{
    static const char *const cs[] = {"get", "set"};
    char b[1024];
    bench_cmdstats_format(&r->server, r->ops, cs, 2, b, sizeof b);
    bench_md("- %s: %s; wake-ups received per acquisition %s; %llu "
             "errors",
             r->label, b, bench_fmt((double)r->wakeups / (double)r->ops, 2),
             (unsigned long long)r->errors);
}

static void result_free(cont_result *r)
{
    bench_vec_free(&r->lat);
    bench_vec_free(&r->handoff);
    bench_cmdstats_free(&r->server);
    free(r->per_worker);
}

void bench_scn_contended(bench_ctx *x)
{
    double dur = x->o->quick ? 1.0 : 5.0;
    cont_result res[2];
    memset(res, 0, sizeof res);
    run_threads(x, 8, dur, &res[0]);
    run_procs(x, 4, 2, dur, &res[1]);

    bench_md("## 4. Contended, one lock\n");
    bench_md("8 workers loop rlock_lock(WATCHDOG); GET counter; SET "
             "counter+1; rlock_unlock for %.0f s, the GET/SET on each "
             "worker's own hiredis connection. Threads: one process, one "
             "shared client. Processes: fork()ed, each with its own client. "
             "Wait = time in rlock_lock. Fairness = fewest / most "
             "acquisitions of a worker. Client cmds = RLOCK_STAT_COMMANDS "
             "(command connections; SUBSCRIBE traffic is on the pub/sub "
             "connection) per acquisition; server cmds = INFO commandstats "
             "per acquisition, commands inside Lua included, the critical "
             "section's GET+SET excluded. Hand-off = from just before the "
             "holder's rlock_unlock to the next owner's rlock_lock return "
             "(CLOCK_MONOTONIC, comparable across threads and processes), "
             "also in PING round trips (%s us). Cycle = 1 / rate: the time "
             "one acquisition occupies the lock, in us and round trips.\n",
             dur, bench_fmt(x->rtt_us, 1));
    bench_md("| setup | acquisitions | acq/s | wait mean us | p50 | p99 | "
             "max | per worker min / max | fairness | client cmds/acq | "
             "server cmds/acq | EVALSHA/acq | hand-off p50 / p99 us | "
             "hand-off p50 / p99 RTTs | cycle us (RTTs) | mutex ok | stuck |");
    bench_md("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
             "---|---|");
    report(x, &res[0]);
    report(x, &res[1]);
    bench_md("\nServer commands per acquisition, by command (critical "
             "section excluded):\n");
    breakdown(&res[0]);
    breakdown(&res[1]);
    bench_md("%s", "");
    result_free(&res[0]);
    result_free(&res[1]);
}
