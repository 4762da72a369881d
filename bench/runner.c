/* rlock-bench: the line protocol of the shared lock-anchor harness
 * (shared/bench-anchors/README.md): arguments from the driver, READY, GO,
 * RESULT {json}, BYE.
 *
 * Uncontended: one thread, lock + unlock of the lock key, N pairs or the
 * duration. Contended: W threads of this process sharing ONE rlock_client,
 * each looping rlock_lock(WATCHDOG); GET counter; SET counter+1;
 * rlock_unlock, with the critical section on the thread's own hiredis
 * connection. */
#include "bench.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Reads stdin lines until one equals word; false on EOF. */
static bool wait_for(const char *word)
{
    char line[256];
    while (fgets(line, sizeof line, stdin) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        if (strcmp(line, word) == 0) {
            return true;
        }
    }
    return false;
}

int bench_runner_main(const bench_runner_args *a)
{
    bench_quiet = true;
    bool contended = strcmp(a->scenario, "contended") == 0;
    if (!contended && strcmp(a->scenario, "uncontended") != 0) {
        bench_die("--scenario must be uncontended or contended");
    }
    int nw = contended ? a->workers : 1;
    if (nw < 1) {
        bench_die("--workers must be at least 1");
    }

    bench_target t;
    bench_target_from_port(a->port, &t);
    /* One client for the process, shared by every worker thread: the model
     * rlock is built for. Default pool (up to 32 connections, made on demand). */
    rlock_client *c = bench_client(&t, 0, 0);

    bench_gate gate;
    bench_gate_init(&gate);
    bench_worker *w = bench_xcalloc((size_t)nw, sizeof *w);
    for (int i = 0; i < nw; i++) {
        w[i].client = c;
        w[i].target = &t;
        snprintf(w[i].lock_name, sizeof w[i].lock_name, "%s", a->lock_key);
        snprintf(w[i].counter_key, sizeof w[i].counter_key, "%s", contended ? a->counter_key : "");
        w[i].gate = &gate;
        /* A few hundred pairs in all: loads the scripts, opens the pool's
         * connections and the workers' own connections. */
        w[i].warmup = contended ? (300 + nw - 1) / nw : 300;
        w[i].max_ops = contended ? 0 : a->n;
        if (pthread_create(&w[i].thread, NULL, bench_worker_main, &w[i]) != 0) {
            bench_die("pthread_create failed");
        }
    }
    bench_gate_wait_ready(&gate, nw);
    printf("READY\n");
    fflush(stdout);
    if (!wait_for("GO")) {
        bench_die("stdin closed before GO");
    }

    uint64_t cmds0 = bench_stat(c, RLOCK_STAT_COMMANDS);
    int64_t start = bench_now_ns();
    int64_t deadline = start + (int64_t)(a->duration_s * 1e9);
    int64_t hard_stop = deadline + (int64_t)(a->grace_s * 1e9);
    bench_gate_open(&gate, deadline, hard_stop);

    int stuck = 0;
    for (int i = 0; i < nw; i++) {
        w[i].finished = bench_worker_join_until(&w[i], hard_stop + 1000000000LL);
        if (!w[i].finished) {
            stuck++;
        }
    }
    double elapsed = (double)(bench_now_ns() - start) / 1e9;
    uint64_t cmds = bench_stat(c, RLOCK_STAT_COMMANDS) - cmds0;

    uint64_t ops = 0, errors = 0, unlock_errors = 0;
    bench_vec lat = {0};
    for (int i = 0; i < nw; i++) {
        /* A stuck worker's figures are read too: past the hard stop it
         * writes none of them (it only unlocks and returns). */
        ops += w[i].ops;
        errors += w[i].errors;
        unlock_errors += w[i].unlock_errors;
        cmds += w[i].cs_cmds;
        bench_vec_append(&lat, w[i].lat.v, w[i].lat.n);
    }
    bench_lat l = bench_lat_of(&lat);

    bench_str js = {0};
    bench_str_printf(&js,
                     "{\"library\": \"rlock\", \"version\": \"%s\", "
                     "\"scenario\": \"%s\", \"ops\": %llu, "
                     "\"elapsed_s\": ",
                     rlock_version(), a->scenario, (unsigned long long)ops);
    bench_str_num(&js, elapsed);
    bench_str_printf(&js, ", \"lat_mean_us\": ");
    bench_str_num(&js, l.mean_us);
    bench_str_printf(&js, ", \"lat_p50_us\": ");
    bench_str_num(&js, l.p50_us);
    bench_str_printf(&js, ", \"lat_p99_us\": ");
    bench_str_num(&js, l.p99_us);
    bench_str_printf(&js, ", \"lat_max_us\": ");
    bench_str_num(&js, l.max_us);
    bench_str_printf(&js,
                     ", \"lat_kind\": \"%s\", \"client_cmds\": %llu, "
                     "\"workers\": %d, \"timeouts\": %llu, "
                     "\"unlock_errors\": %llu, \"stuck\": %d",
                     contended ? "acquire wait" : "lock+unlock pair", (unsigned long long)cmds, nw,
                     (unsigned long long)errors, (unsigned long long)unlock_errors, stuck);
    if (contended) {
        bench_str_printf(&js, ", \"per_worker\": [");
        for (int i = 0; i < nw; i++) {
            bench_str_printf(&js, "%s%llu", i ? ", " : "", (unsigned long long)w[i].ops);
        }
        bench_str_printf(&js, "]");
    }
    bench_str_printf(&js,
                     ", \"concurrency\": \"%d thread%s, one shared "
                     "rlock_client (default pool)%s\", "
                     "\"blocking\": \"pub/sub\"}",
                     nw, nw == 1 ? "" : "s",
                     contended ? ", own hiredis connection each for the CS" : "");
    printf("RESULT %s\n", js.s);
    fflush(stdout);
    bench_str_free(&js);
    bench_vec_free(&lat);

    wait_for("BYE");
    if (stuck) {
        /* Threads still blocked in rlock_lock() use the client: freeing it
         * under them is not allowed, and the process is ending anyway. */
        fflush(stdout);
        _Exit(0);
    }
    for (int i = 0; i < nw; i++) {
        bench_worker_free(&w[i]);
    }
    free(w);
    bench_gate_destroy(&gate);
    rlock_client_free(c);
    return 0;
}
