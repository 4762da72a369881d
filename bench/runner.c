/* rlock-bench: the runner protocol of ../shared/bench-anchors (README.md,
 * "Adding a runner"): arguments from the driver, READY, GO, RESULT {json},
 * BYE, on stdin/stdout.
 *
 * Uncontended: one thread, lock(WATCHDOG) + unlock of the lock key, N pairs
 * or the duration. Contended: W threads sharing ONE rlock_client (the model
 * rlock is built for), each looping rlock_lock(WATCHDOG); GET counter;
 * SET counter+1; rlock_unlock, the critical section on the thread's own
 * hiredis connection so that it does not queue behind the lock's pool. */
#include "bench.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GRACE_NS 5000000000LL /* protocol: stop touching the counter at DURATION + 5 s */
#define WARMUP_PAIRS 300

typedef struct worker {
    rlock_client *c;
    const bench_runner_args *a;
    pthread_mutex_t *mu; /* the start gate */
    pthread_cond_t *cv;
    int *ready;
    const int64_t *deadline; /* 0 until GO */
    uint64_t ops, errors, cs_cmds;
    double *wait_us; /* acquire wait of each acquisition */
    size_t nwait, capwait;
    bool done;
    pthread_t thread;
} worker;

static bool wait_for(const char *word)
{
    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (strcmp(line, word) == 0) {
            return true;
        }
    }
    return false;
}

static void *contended_main(void *arg)
{
    worker *w = arg;
    rlock *l = bench_lock(w->c, w->a->lock_key);
    redisContext *cs = bench_connect("127.0.0.1", w->a->port);
    uint64_t warm_errors = 0;
    if (bench_pairs(l, (WARMUP_PAIRS + w->a->workers - 1) / w->a->workers, 0, NULL, &warm_errors) ==
            0 ||
        warm_errors) {
        bench_die("warm-up failed");
    }
    pthread_mutex_lock(w->mu);
    ++*w->ready;
    pthread_cond_broadcast(w->cv);
    while (*w->deadline == 0) {
        pthread_cond_wait(w->cv, w->mu);
    }
    int64_t deadline = *w->deadline;
    pthread_mutex_unlock(w->mu);

    while (bench_now_ns() < deadline) {
        int64_t t0 = bench_now_ns();
        rlock_status s = rlock_lock(l, RLOCK_WATCHDOG);
        int64_t t1 = bench_now_ns();
        if (s != RLOCK_OK) {
            /* As the anchor runners do with a failed acquire: count it and
             * stop this worker rather than spin on a failing call. */
            w->errors++;
            fprintf(stderr, "rlock-bench: rlock_lock: %s\n", rlock_status_name(s));
            break;
        }
        if (t1 >= deadline + GRACE_NS) {
            rlock_unlock(l); /* the driver is reading the counter now */
            break;
        }
        redisReply *r = bench_cmd(cs, "GET %s", w->a->counter_key);
        long long v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
        freeReplyObject(r);
        freeReplyObject(bench_cmd(cs, "SET %s %lld", w->a->counter_key, v + 1));
        w->cs_cmds += 2;
        if ((s = rlock_unlock(l)) != RLOCK_OK) {
            w->errors++;
            fprintf(stderr, "rlock-bench: rlock_unlock: %s\n", rlock_status_name(s));
        }
        if (w->nwait == w->capwait) {
            w->capwait = w->capwait ? 2 * w->capwait : 4096;
            w->wait_us = realloc(w->wait_us, w->capwait * sizeof *w->wait_us);
            if (!w->wait_us) {
                bench_die("out of memory");
            }
        }
        w->wait_us[w->nwait++] = (double)(t1 - t0) / 1e3;
        w->ops++;
    }
    redisFree(cs);
    rlock_free(l);
    pthread_mutex_lock(w->mu);
    w->done = true;
    pthread_cond_broadcast(w->cv);
    pthread_mutex_unlock(w->mu);
    return NULL;
}

static void result(const bench_runner_args *a, uint64_t ops, double elapsed, double *lat,
                   size_t nlat, uint64_t cmds, uint64_t errors, int stuck, const worker *w, int nw)
{
    bool cont = w != NULL;
    double mean = bench_mean(lat, nlat);
    double p99 = bench_quantile(lat, nlat, 0.99), max = bench_quantile(lat, nlat, 1.0);
    printf("RESULT {\"library\": \"rlock\", \"version\": \"%s\", \"scenario\": \"%s\", "
           "\"ops\": %llu, \"elapsed_s\": %.6f, \"lat_mean_us\": %.1f, \"lat_p99_us\": %.1f, "
           "\"lat_max_us\": %.1f, \"lat_kind\": \"%s\", \"client_cmds\": %llu, "
           "\"timeouts\": %llu, \"stuck\": %d, ",
           rlock_version(), a->scenario, (unsigned long long)ops, elapsed, nlat ? mean : 0,
           nlat ? p99 : 0, nlat ? max : 0, cont ? "acquire wait" : "lock+unlock pair",
           (unsigned long long)cmds, (unsigned long long)errors, stuck);
    if (cont) {
        printf("\"per_worker\": [");
        for (int i = 0; i < nw; i++) {
            printf("%s%llu", i ? ", " : "", (unsigned long long)w[i].ops);
        }
        printf("], ");
    }
    printf("\"concurrency\": \"%d thread%s, one shared rlock_client%s\", "
           "\"blocking\": \"pub/sub\"}\n",
           nw, nw == 1 ? "" : "s", cont ? ", own hiredis connection each for the CS" : "");
    fflush(stdout);
}

static int uncontended(const bench_runner_args *a, rlock_client *c)
{
    rlock *l = bench_lock(c, a->lock_key);
    uint64_t errors = 0;
    if (bench_pairs(l, WARMUP_PAIRS, 0, NULL, &errors) != WARMUP_PAIRS) {
        bench_die("warm-up failed");
    }
    double *lat = bench_xcalloc(a->n, sizeof *lat);
    printf("READY\n");
    fflush(stdout);
    if (!wait_for("GO")) {
        bench_die("stdin closed before GO");
    }
    uint64_t cmds0 = bench_stat(c, RLOCK_STAT_COMMANDS);
    int64_t t0 = bench_now_ns();
    uint64_t ops = bench_pairs(l, a->n, t0 + (int64_t)(a->duration_s * 1e9), lat, &errors);
    double elapsed = (double)(bench_now_ns() - t0) / 1e9;
    result(a, ops, elapsed, lat, ops, bench_stat(c, RLOCK_STAT_COMMANDS) - cmds0, errors, 0, NULL,
           1);
    wait_for("BYE");
    free(lat);
    rlock_free(l);
    rlock_client_free(c);
    return 0;
}

int bench_runner_main(const bench_runner_args *a)
{
    bench_quiet = true;
    rlock_client *c = bench_client("127.0.0.1", a->port, 0);
    if (strcmp(a->scenario, "uncontended") == 0) {
        return uncontended(a, c);
    }
    if (strcmp(a->scenario, "contended") != 0) {
        bench_die("--scenario must be uncontended or contended");
    }
    int nw = a->workers;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    int ready = 0;
    static int64_t deadline; /* static: a stuck worker may outlive this frame */
    worker *w = bench_xcalloc((size_t)nw, sizeof *w);
    for (int i = 0; i < nw; i++) {
        w[i] =
            (worker){.c = c, .a = a, .mu = &mu, .cv = &cv, .ready = &ready, .deadline = &deadline};
        if (pthread_create(&w[i].thread, NULL, contended_main, &w[i]) != 0) {
            bench_die("pthread_create failed");
        }
    }
    pthread_mutex_lock(&mu);
    while (ready < nw) {
        pthread_cond_wait(&cv, &mu);
    }
    pthread_mutex_unlock(&mu);
    printf("READY\n");
    fflush(stdout);
    if (!wait_for("GO")) {
        bench_die("stdin closed before GO");
    }
    uint64_t cmds0 = bench_stat(c, RLOCK_STAT_COMMANDS);
    int64_t t0 = bench_now_ns();
    pthread_mutex_lock(&mu);
    deadline = t0 + (int64_t)(a->duration_s * 1e9);
    pthread_cond_broadcast(&cv);
    /* Wait for the workers until 1 s past the hard stop; one still blocked
     * in rlock_lock() then is reported as stuck instead of hanging the run. */
    int64_t give_up = deadline + GRACE_NS + 1000000000LL;
    int stuck = nw;
    while (stuck > 0 && bench_now_ns() < give_up) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50000000;
        ts.tv_sec += ts.tv_nsec / 1000000000;
        ts.tv_nsec %= 1000000000;
        pthread_cond_timedwait(&cv, &mu, &ts);
        stuck = 0;
        for (int i = 0; i < nw; i++) {
            stuck += !w[i].done;
        }
    }
    pthread_mutex_unlock(&mu);
    double elapsed = (double)(bench_now_ns() - t0) / 1e9;
    uint64_t cmds = bench_stat(c, RLOCK_STAT_COMMANDS) - cmds0, ops = 0, errors = 0;
    size_t nlat = 0;
    for (int i = 0; i < nw; i++) {
        ops += w[i].ops;
        errors += w[i].errors;
        cmds += w[i].cs_cmds;
        nlat += w[i].nwait;
    }
    double *lat = bench_xcalloc(nlat, sizeof *lat);
    for (int i = 0, k = 0; i < nw; i++) {
        memcpy(lat + k, w[i].wait_us, w[i].nwait * sizeof *lat);
        k += (int)w[i].nwait;
    }
    result(a, ops, elapsed, lat, nlat, cmds, errors, stuck, w, nw);
    free(lat);
    wait_for("BYE");
    if (stuck) {
        _Exit(0); /* blocked threads still use the client: never free it under them */
    }
    for (int i = 0; i < nw; i++) {
        pthread_join(w[i].thread, NULL);
        free(w[i].wait_us);
    }
    free(w);
    rlock_client_free(c);
    return 0;
}
