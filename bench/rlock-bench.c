/* rlock-bench: benchmarks rlock against a real Redis server, in one of three
 * modes (see usage()): the report of interleaved rounds (report.c); --loop N,
 * bare lock + unlock pairs and one summary line, the program to run under
 * perf, strace or callgrind (and bench/ab.sh); and --port P --scenario ...,
 * a runner of ../shared/bench-anchors (runner.c). */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: rlock-bench [--url redis://HOST:PORT] [--rounds R] [--held N] [--quick]\n"
               "       rlock-bench --loop N [--url redis://HOST:PORT]\n"
               "       rlock-bench --port P --scenario uncontended|contended [--n N]\n"
               "                   [--duration S] [--workers W] [--lock-key K] "
               "[--counter-key C]\n"
               "URL defaults to $RLOCK_URL, then redis://127.0.0.1:6379. R defaults to 5 "
               "(3 with --quick),\nN (held watchdog locks) to 10000 (1000 with --quick).\n");
}

static double number(int argc, char **argv, int *i, double min)
{
    char *end;
    if (*i + 1 >= argc) {
        bench_die("%s needs a value", argv[*i]);
    }
    double v = strtod(argv[++*i], &end);
    if (end == argv[*i] || *end != '\0' || v < min) {
        bench_die("bad value for %s: '%s'", argv[*i - 1], argv[*i]);
    }
    return v;
}

static const char *text(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        bench_die("%s needs a value", argv[*i]);
    }
    return argv[++*i];
}

/* redis://HOST[:PORT][/]: the benchmark's servers are local and need no
 * password, and redis-benchmark needs TCP. */
static void parse_url(const char *url, bench_ctx *x)
{
    x->port = 6379;
    size_t hl = strncmp(url, "redis://", 8) == 0 ? strcspn(url + 8, ":/@") : 0;
    if (hl == 0 || hl >= sizeof x->host || url[8 + hl] == '@') {
        bench_die("cannot use '%s': redis://HOST[:PORT] only", url);
    }
    memcpy(x->host, url + 8, hl);
    x->host[hl] = '\0';
    if (url[8 + hl] == ':') {
        x->port = atoi(url + 9 + hl);
    }
    if (x->port <= 0 || x->port > 65535) {
        bench_die("bad port in '%s'", url);
    }
}

static int loop(bench_ctx *x, uint64_t n)
{
    rlock_client *c = bench_client(x->host, x->port, 0);
    rlock *l = bench_lock(c, "rlock-bench:loop");
    uint64_t errors = 0;
    bench_pairs(l, 300, 0, NULL, &errors);
    uint64_t cmds0 = bench_stat(c, RLOCK_STAT_COMMANDS);
    double cpu0 = bench_cpu_s(true);
    int64_t t0 = bench_now_ns();
    uint64_t done = bench_pairs(l, n, 0, NULL, &errors);
    double s = (double)(bench_now_ns() - t0) / 1e9;
    fprintf(stderr,
            "%llu pairs in %.3f s: %.0f pairs/s, %.1f us per pair, client CPU %.1f us per "
            "pair, %.2f commands per pair, %llu errors\n",
            (unsigned long long)done, s, (double)done / s, s * 1e6 / (double)done,
            (bench_cpu_s(true) - cpu0) * 1e6 / (double)done,
            (double)(bench_stat(c, RLOCK_STAT_COMMANDS) - cmds0) / (double)done,
            (unsigned long long)errors);
    rlock_free(l);
    rlock_client_free(c);
    return errors ? 1 : 0;
}

int main(int argc, char **argv)
{
    bench_runner_args ra = {0, NULL, 20000, 5.0, 8, "bench:lock", "bench:counter"};
    bench_ctx x;
    memset(&x, 0, sizeof x);
    const char *url = getenv("RLOCK_URL");
    int rounds = 0, held = 0;
    uint64_t loop_n = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--quick") == 0) {
            x.quick = true;
        } else if (strcmp(a, "--url") == 0) {
            url = text(argc, argv, &i);
        } else if (strcmp(a, "--rounds") == 0) {
            rounds = (int)number(argc, argv, &i, 1);
        } else if (strcmp(a, "--held") == 0) {
            held = (int)number(argc, argv, &i, 1);
        } else if (strcmp(a, "--loop") == 0) {
            loop_n = (uint64_t)number(argc, argv, &i, 1);
        } else if (strcmp(a, "--port") == 0) {
            ra.port = (int)number(argc, argv, &i, 1);
        } else if (strcmp(a, "--scenario") == 0) {
            ra.scenario = text(argc, argv, &i);
        } else if (strcmp(a, "--n") == 0) {
            ra.n = (uint64_t)number(argc, argv, &i, 1);
        } else if (strcmp(a, "--duration") == 0) {
            ra.duration_s = number(argc, argv, &i, 0);
        } else if (strcmp(a, "--workers") == 0) {
            ra.workers = (int)number(argc, argv, &i, 1);
        } else if (strcmp(a, "--lock-key") == 0) {
            ra.lock_key = text(argc, argv, &i);
        } else if (strcmp(a, "--counter-key") == 0) {
            ra.counter_key = text(argc, argv, &i);
        } else {
            fprintf(stderr, "rlock-bench: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (ra.port > 0) {
        if (!ra.scenario) {
            bench_die("--port needs --scenario uncontended|contended");
        }
        return bench_runner_main(&ra);
    }
    parse_url(url && url[0] ? url : "redis://127.0.0.1:6379", &x);
    if (loop_n) {
        return loop(&x, loop_n);
    }
    if (rounds == 0) {
        rounds = x.quick ? 3 : 5;
    }
    if (held == 0) {
        held = x.quick ? 1000 : 10000;
    }
    return bench_report_main(&x, rounds, held);
}
