/* rlock-bench: benchmarks rlock against a real Redis server.
 *
 * Two modes:
 *
 *   rlock-bench --all | --scenario NAME [--url URL] [--quick] [--json]
 *       Standalone: runs the scenarios (uncontended, parallel, nested,
 *       contended, watchdog) against URL (default: $RLOCK_URL) and prints
 *       a Markdown report with each scenario's ratio to the physical limit
 *       measured with redis-benchmark on the same server in the same run.
 *
 *   rlock-bench --port P --scenario uncontended|contended --n N
 *               --duration S --workers W --lock-key K --counter-key C
 *       The runner protocol of the shared lock-anchor harness: READY, GO,
 *       RESULT {json}, BYE on stdin/stdout.
 */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: rlock-bench --all | --scenario NAME [--url URL] "
               "[--quick] [--json] [--quiet]\n"
               "       rlock-bench --port P --scenario uncontended|contended "
               "[--n N] [--duration S]\n"
               "                   [--workers W] [--grace S] [--lock-key K] "
               "[--counter-key C]\n"
               "\n"
               "Standalone scenarios (NAME or number): 1 uncontended, 2 "
               "parallel, 3 nested,\n"
               "4 contended, 5 watchdog. URL defaults to $RLOCK_URL, then "
               "redis://127.0.0.1:6379.\n"
               "--quick runs a short version of each (a smoke test); --json "
               "prints JSON on\n"
               "stdout and the Markdown report on stderr.\n"
               "With --port, speaks the line protocol of the lock-anchor "
               "harness (READY, GO,\n"
               "RESULT {json}, BYE).\n");
}

/* The value of option argv[*i]; dies when it is missing. */
static const char *value(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "rlock-bench: %s needs a value\n", argv[*i]);
        usage(stderr);
        exit(2);
    }
    return argv[++*i];
}

static double number(const char *opt, const char *s, double min)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || v < min) {
        bench_die("bad value for %s: '%s'", opt, s);
    }
    return v;
}

int main(int argc, char **argv)
{
    bench_runner_args ra = {
        .port = 0,
        .scenario = NULL,
        .n = 20000,
        .duration_s = 5.0,
        .workers = 8,
        .grace_s = 5.0,
        .lock_key = "bench:lock",
        .counter_key = "bench:counter",
    };
    bench_opts o;
    memset(&o, 0, sizeof o);
    const char *url = NULL;
    bool all = false;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--all") == 0) {
            all = true;
        } else if (strcmp(a, "--quick") == 0) {
            o.quick = true;
        } else if (strcmp(a, "--json") == 0) {
            o.json = true;
        } else if (strcmp(a, "--quiet") == 0) {
            bench_quiet = true;
        } else if (strcmp(a, "--url") == 0) {
            url = value(argc, argv, &i);
        } else if (strcmp(a, "--scenario") == 0) {
            ra.scenario = value(argc, argv, &i);
        } else if (strcmp(a, "--port") == 0) {
            ra.port = (int)number(a, value(argc, argv, &i), 1);
        } else if (strcmp(a, "--n") == 0) {
            ra.n = (uint64_t)number(a, value(argc, argv, &i), 1);
        } else if (strcmp(a, "--duration") == 0) {
            ra.duration_s = number(a, value(argc, argv, &i), 0);
        } else if (strcmp(a, "--workers") == 0) {
            ra.workers = (int)number(a, value(argc, argv, &i), 1);
        } else if (strcmp(a, "--grace") == 0) {
            ra.grace_s = number(a, value(argc, argv, &i), 0);
        } else if (strcmp(a, "--lock-key") == 0) {
            ra.lock_key = value(argc, argv, &i);
        } else if (strcmp(a, "--counter-key") == 0) {
            ra.counter_key = value(argc, argv, &i);
        } else {
            fprintf(stderr, "rlock-bench: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
    }

    if (ra.port > 0) {
        if (ra.scenario == NULL) {
            bench_die("--port needs --scenario uncontended|contended");
        }
        return bench_runner_main(&ra);
    }

    if (!all && ra.scenario == NULL) {
        usage(stderr);
        return 2;
    }
    o.only = all ? NULL : ra.scenario;
    if (url == NULL) {
        url = getenv("RLOCK_URL");
    }
    if (url == NULL || url[0] == '\0') {
        url = "redis://127.0.0.1:6379";
    }
    if (!bench_target_parse(url, &o.target)) {
        bench_die("cannot use URL '%s': redis://[[user]:password@]host"
                  "[:port][/db] only (redis-benchmark needs TCP)",
                  url);
    }
    return bench_standalone_main(&o);
}
