/* rlock-bench: benchmarks rlock against a real Redis server, in one of three
 * modes (see usage()): the report of interleaved rounds (report.c); --loop N,
 * bare lock + unlock pairs and one summary line, the program to run under
 * perf, strace or callgrind (and bench/ab.sh); and --port P --scenario ...,
 * a runner of ../shared/bench-anchors (runner.c). */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: rlock-bench [--url redis://HOST:PORT] [TLS] [--rounds R] [--held N] "
        "[--quick] [--pin]\n"
        "                   [--only LIST] [--contend T] [--readers R] [--threads T] "
        "[--seconds S] [--smoke]\n"
        "       rlock-bench --check [--url redis://HOST:PORT] [--quiet]\n"
        "       rlock-bench --loop N [--kind K] [--url redis://HOST:PORT] [TLS --tls]\n"
        "       rlock-bench --floor N [--kind K] [--url redis://HOST:PORT] [TLS --tls]\n"
        "       rlock-bench --slices [--cpu N] [--url redis://HOST:PORT]   (bench/ab.sh)\n"
        "       rlock-bench --procs P [--threads T] [--seconds S] [--url redis://HOST:PORT]\n"
        "       rlock-bench --port P --scenario uncontended|contended [--n N]\n"
        "                   [--duration S] [--workers W] [--lock-key K] "
        "[--counter-key C]\n"
        "TLS: --tls-url rediss://HOST:PORT [--cacert FILE] [--cert FILE [--key FILE]]\n"
        "     [--tls-name NAME] [--tls-insecure]: the same server's TLS port\n"
        "URL defaults to $RLOCK_URL, then redis://127.0.0.1:6379; --tls-url to "
        "$RLOCK_TLS_URL,\n--cacert to $RLOCK_TLS_CACERT. R defaults to 5 (3 with "
        "--quick), N (held\nwatchdog locks) to 10000 (1000 with --quick). --loop: "
        "rlock's pairs; --floor: the\nsame scripts from a bare loop; --tls: over the TLS "
        "port.\n--procs: P processes x T threads (2) on one fair lock, then one reentrant lock,\n"
        "S seconds (5) each: rates, commands per acquisition, per-worker min/max.\n"
        "--only: a comma-separated list of the report's scenarios (default all): pair\n"
        "(floor and reentrant pairs, TCP and TLS), nested, watchdog, kinds (each kind\n"
        "against its floor), contended (--contend threads (4) on one name, each kind),\n"
        "readers (--readers R (8) against R bare loops), procs (4 processes x --threads\n"
        "(2), fair and reentrant, --seconds (2; 1 with --quick) per kind and round).\n"
        "--smoke: every scenario once, briefly (a check that they run, no figures).\n"
        "--check: one pair of each kind by rlock and by its floor under MONITOR, the\n"
        "commands compared; exit 1 when a floor differs.\n"
        "K: reentrant (default), nonreentrant, fair, fair-nonreentrant, fenced, spin,\n"
        "read, write.\n");
}

/* --only's list into BENCH_ONLY_* bits. */
static unsigned only_of(const char *list)
{
    static const struct {
        const char *name;
        unsigned bit;
    } names[] = {{"pair", BENCH_ONLY_PAIR},           {"nested", BENCH_ONLY_NESTED},
                 {"watchdog", BENCH_ONLY_WATCHDOG},   {"kinds", BENCH_ONLY_KINDS},
                 {"contended", BENCH_ONLY_CONTENDED}, {"readers", BENCH_ONLY_READERS},
                 {"procs", BENCH_ONLY_PROCS}};
    unsigned bits = 0;
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        bool found = false;
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            if (strlen(names[i].name) == n && strncmp(p, names[i].name, n) == 0) {
                bits |= names[i].bit;
                found = true;
            }
        }
        if (!found) {
            bench_die("--only: no scenario '%.*s'", (int)n, p);
        }
        p += n + (p[n] == ',');
    }
    if (!bits) {
        bench_die("--only needs a scenario");
    }
    return bits;
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

/* SCHEME://HOST[:PORT][/]: the benchmark's servers are local and need no
 * password. host may be NULL (the TLS URL names the host of the plain one). */
static void parse_url(const char *url, const char *scheme, char *host, size_t size, int *port)
{
    size_t sl = strlen(scheme);
    *port = 6379;
    size_t hl = strncmp(url, scheme, sl) == 0 ? strcspn(url + sl, ":/@") : 0;
    if (hl == 0 || hl >= size || url[sl + hl] == '@') {
        bench_die("cannot use '%s': %sHOST[:PORT] only", url, scheme);
    }
    if (host) {
        memcpy(host, url + sl, hl);
        host[hl] = '\0';
    }
    if (url[sl + hl] == ':') {
        *port = atoi(url + sl + 1 + hl);
    }
    if (*port <= 0 || *port > 65535) {
        bench_die("bad port in '%s'", url);
    }
}

/* The summary line of --loop and --floor; bench/ab.sh reads its 6th word. */
static void summary(uint64_t done, double s, double cpu_s, double cmds, uint64_t errors)
{
    fprintf(stderr,
            "%llu pairs in %.3f s: %.0f pairs/s, %.1f us per pair, client CPU %.1f us per "
            "pair, %.2f commands per pair, %llu errors\n",
            (unsigned long long)done, s, (double)done / s, s * 1e6 / (double)done,
            cpu_s * 1e6 / (double)done, cmds / (double)done, (unsigned long long)errors);
}

/* n floor pairs after 300 warm-up pairs, one summary line. */
static int floor_loop(bench_ctx *x, bool tls, uint64_t n, bench_kind k)
{
    char name[64];
    snprintf(name, sizeof name, "rlock-bench:floor:%ld", (long)getpid());
    bench_floor *f =
        bench_floor_new(x->host, tls ? x->tls_port : x->port, tls ? &x->tls : NULL, name, k);
    bench_floor_pairs(f, 300, NULL);
    uint64_t cmds0 = bench_floor_commands(f);
    double cpu0 = bench_cpu_s(true);
    int64_t t0 = bench_now_ns();
    uint64_t done = bench_floor_pairs(f, n, NULL);
    double s = (double)(bench_now_ns() - t0) / 1e9;
    summary(done, s, bench_cpu_s(true) - cpu0, (double)(bench_floor_commands(f) - cmds0), 0);
    bench_floor_free(f);
    return 0;
}

static int loop(bench_ctx *x, bool tls, uint64_t n, bench_kind k)
{
    rlock_client *c =
        tls ? bench_client_tls(x->host, x->tls_port, &x->tls) : bench_client(x->host, x->port, 0);
    rlock *l = bench_lock_kind(c, k, "rlock-bench:loop");
    uint64_t errors = 0;
    bench_pairs(l, 300, 0, NULL, &errors);
    uint64_t cmds0 = bench_stat(c, RLOCK_STAT_COMMANDS);
    double cpu0 = bench_cpu_s(true);
    int64_t t0 = bench_now_ns();
    uint64_t done = bench_pairs(l, n, 0, NULL, &errors);
    double s = (double)(bench_now_ns() - t0) / 1e9;
    summary(done, s, bench_cpu_s(true) - cpu0, (double)(bench_stat(c, RLOCK_STAT_COMMANDS) - cmds0),
            errors);
    rlock_free(l);
    rlock_client_free(c);
    return errors ? 1 : 0;
}

/* --slices: one process of an A/B (bench/ab.sh), driven line by line on
 * stdin so that two builds can alternate in short slices: "lock N" runs N
 * of rlock's pairs, "floor N" N floor pairs, each answered with the
 * seconds it took; "ready" once both are warm; ends at EOF. */
static int slices(bench_ctx *x)
{
    char name[64];
    snprintf(name, sizeof name, "rlock-bench:ab:%ld", (long)getpid());
    rlock_client *c = bench_client(x->host, x->port, 0);
    rlock *l = bench_lock(c, name);
    snprintf(name, sizeof name, "rlock-bench:ab:%ld:floor", (long)getpid());
    bench_floor *f = bench_floor_new(x->host, x->port, NULL, name, BK_REENTRANT);
    if (x->cpu >= 0) {
        /* Only this thread, as --pin does in the report: the client's own
         * threads, made above, run wherever the scheduler puts them, as in
         * an application. */
        bench_pin_self(x->cpu);
    }
    uint64_t errors = 0;
    bench_pairs(l, 300, 0, NULL, &errors);
    bench_floor_pairs(f, 300, NULL);
    printf("ready\n");
    fflush(stdout);
    char line[64], what[16];
    unsigned long long n;
    while (fgets(line, sizeof line, stdin)) {
        if (sscanf(line, "%15s %llu", what, &n) != 2 || n == 0) {
            bench_die("--slices: bad line '%s'", line);
        }
        int64_t t0 = bench_now_ns();
        if (strcmp(what, "floor") == 0) {
            bench_floor_pairs(f, n, NULL);
        } else if (bench_pairs(l, n, 0, NULL, &errors) != n) {
            bench_die("--slices: lock/unlock failed");
        }
        printf("%.9f\n", (double)(bench_now_ns() - t0) / 1e9);
        fflush(stdout);
    }
    bench_floor_free(f);
    rlock_free(l);
    rlock_client_free(c);
    return 0;
}

int main(int argc, char **argv)
{
    bench_runner_args ra = {0, NULL, 20000, 5.0, 8, "bench:lock", "bench:counter"};
    bench_ctx x;
    memset(&x, 0, sizeof x);
    x.cpu = -1;
    const char *url = getenv("RLOCK_URL");
    const char *tls_url = getenv("RLOCK_TLS_URL");
    x.tls.ca_file = getenv("RLOCK_TLS_CACERT");
    if (x.tls.ca_file && !x.tls.ca_file[0]) {
        x.tls.ca_file = NULL;
    }
    int rounds = 0, held = 0;
    uint64_t loop_n = 0, floor_n = 0;
    bool over_tls = false, sliced = false, check = false;
    int procs = 0, threads = 0;
    double seconds = 0;
    bench_kind kind = BK_REENTRANT;
    x.only = BENCH_ONLY_ALL;
    x.contenders = 4;
    x.readers = 8;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--quick") == 0) {
            x.quick = true;
        } else if (strcmp(a, "--smoke") == 0) {
            x.smoke = true;
            x.quick = true;
        } else if (strcmp(a, "--check") == 0) {
            check = true;
        } else if (strcmp(a, "--quiet") == 0) {
            bench_quiet = true;
        } else if (strcmp(a, "--only") == 0) {
            x.only = only_of(text(argc, argv, &i));
        } else if (strcmp(a, "--kind") == 0) {
            kind = bench_kind_named(text(argc, argv, &i));
        } else if (strcmp(a, "--contend") == 0) {
            x.contenders = (int)number(argc, argv, &i, 1);
        } else if (strcmp(a, "--readers") == 0) {
            x.readers = (int)number(argc, argv, &i, 1);
        } else if (strcmp(a, "--url") == 0) {
            url = text(argc, argv, &i);
        } else if (strcmp(a, "--rounds") == 0) {
            rounds = (int)number(argc, argv, &i, 1);
        } else if (strcmp(a, "--held") == 0) {
            held = (int)number(argc, argv, &i, 1);
        } else if (strcmp(a, "--loop") == 0) {
            loop_n = (uint64_t)number(argc, argv, &i, 1);
        } else if (strcmp(a, "--floor") == 0) {
            floor_n = (uint64_t)number(argc, argv, &i, 1);
        } else if (strcmp(a, "--pin") == 0) {
            x.pin = true;
        } else if (strcmp(a, "--procs") == 0) {
            procs = (int)number(argc, argv, &i, 1);
        } else if (strcmp(a, "--threads") == 0) {
            threads = (int)number(argc, argv, &i, 1);
        } else if (strcmp(a, "--seconds") == 0) {
            seconds = number(argc, argv, &i, 0.1);
        } else if (strcmp(a, "--slices") == 0) {
            sliced = true;
        } else if (strcmp(a, "--cpu") == 0) {
            x.cpu = (int)number(argc, argv, &i, 0);
        } else if (strcmp(a, "--tls") == 0) {
            over_tls = true;
        } else if (strcmp(a, "--tls-url") == 0) {
            tls_url = text(argc, argv, &i);
        } else if (strcmp(a, "--cacert") == 0) {
            x.tls.ca_file = text(argc, argv, &i);
        } else if (strcmp(a, "--cert") == 0) {
            x.tls.cert_file = text(argc, argv, &i);
        } else if (strcmp(a, "--key") == 0) {
            x.tls.key_file = text(argc, argv, &i);
        } else if (strcmp(a, "--tls-name") == 0) {
            x.tls.server_name = text(argc, argv, &i);
        } else if (strcmp(a, "--tls-insecure") == 0) {
            x.tls.insecure = true;
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
    parse_url(url && url[0] ? url : "redis://127.0.0.1:6379", "redis://", x.host, sizeof x.host,
              &x.port);
    if (tls_url && tls_url[0]) {
        parse_url(tls_url, "rediss://", NULL, sizeof x.host, &x.tls_port);
    } else if (over_tls) {
        bench_die("--tls needs --tls-url rediss://HOST:PORT (or $RLOCK_TLS_URL)");
    }
    if (sliced) {
        return slices(&x);
    }
    if (check) {
        return bench_check_main(&x);
    }
    if (procs > 0) {
        return bench_procs_main(x.host, x.port, procs, threads ? threads : 2,
                                seconds > 0 ? seconds : 5);
    }
    if (floor_n) {
        return floor_loop(&x, over_tls, floor_n, kind);
    }
    if (loop_n) {
        return loop(&x, over_tls, loop_n, kind);
    }
    if (rounds == 0) {
        rounds = x.smoke ? 1 : x.quick ? 3 : 5;
    }
    if (held == 0) {
        held = x.smoke ? 100 : x.quick ? 1000 : 10000;
    }
    /* The fair lock across processes: issue 16's 4 processes x 2 threads. */
    x.procs = x.smoke ? 2 : 4;
    x.threads = threads ? threads : 2;
    x.procs_s = seconds > 0 ? seconds : x.smoke ? 0.2 : x.quick ? 1 : 2;
#ifdef BENCH_NO_LIB_KINDS
    x.only &= ~(unsigned)(BENCH_ONLY_READERS | BENCH_ONLY_PROCS);
#endif
    return bench_report_main(&x, rounds, held);
}
