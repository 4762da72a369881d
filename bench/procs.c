/* rlock-bench --procs P: contention across processes. P forked processes,
 * each with its own client and T threads, contend on one lock name for S
 * seconds: lock (a 30 s lease, so no renewal calls), GET and SET of a
 * counter on the worker's own connection, unlock. Once with the fair lock,
 * once with the reentrant lock, and for each: acquisitions per second,
 * the script calls and (un)subscribes Redis ran per acquisition (INFO
 * commandstats, reset when the workers start), the fewest and most
 * acquisitions of one worker, and whether the counter saw every
 * acquisition (mutual exclusion). */
#include "bench.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct procs_ctx {
    const char *host;
    int port;
    int threads;
    double seconds;
    bool fair;
    char name[96];
    rlock_client *c;
} procs_ctx;

static bool key_exists(redisContext *r, const char *name, const char *suffix)
{
    redisReply *rep = bench_cmd(r, "EXISTS %s:%s", name, suffix);
    bool yes = rep->integer == 1;
    freeReplyObject(rep);
    return yes;
}

static void *worker(void *arg)
{
    procs_ctx *x = arg;
    redisContext *r = bench_connect(x->host, x->port);
    rlock *l;
#ifdef BENCH_NO_LIB_KINDS
    rlock_status st = rlock_new(x->c, x->name, &l);
#else
    rlock_status st = x->fair ? rlock_new_fair(x->c, x->name, &l) : rlock_new(x->c, x->name, &l);
#endif
    if (st != RLOCK_OK || rlock_lock(l, 30000) != RLOCK_OK || rlock_unlock(l) != RLOCK_OK) {
        bench_die("worker warm-up failed");
    }
    freeReplyObject(bench_cmd(r, "INCR %s:ready", x->name));
    while (!key_exists(r, x->name, "go")) {
        bench_sleep_ms(1);
    }
    long long n = 0;
    int64_t end = bench_now_ns() + (int64_t)(x->seconds * 1e9);
    while (bench_now_ns() < end) {
        if (rlock_lock(l, 30000) != RLOCK_OK) {
            n = -1;
            break;
        }
        redisReply *rep = bench_cmd(r, "GET %s:counter", x->name);
        long long v = rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
        freeReplyObject(rep);
        freeReplyObject(bench_cmd(r, "SET %s:counter %lld", x->name, v + 1));
        if (rlock_unlock(l) != RLOCK_OK) {
            n = -1;
            break;
        }
        n++;
    }
    freeReplyObject(bench_cmd(r, "RPUSH %s:counts %lld", x->name, n));
    rlock_free(l);
    redisFree(r);
    return NULL;
}

static _Noreturn void child(procs_ctx *x)
{
    x->c = bench_client(x->host, x->port, 0);
    pthread_t *th = bench_xcalloc((size_t)x->threads, sizeof *th);
    for (int i = 0; i < x->threads; i++) {
        if (pthread_create(&th[i], NULL, worker, x) != 0) {
            bench_die("pthread_create failed");
        }
    }
    for (int i = 0; i < x->threads; i++) {
        pthread_join(th[i], NULL);
    }
    /* Stays until the parent has read the server's statistics: a client
     * going away unsubscribes. */
    redisContext *r = bench_connect(x->host, x->port);
    while (!key_exists(r, x->name, "exit")) {
        bench_sleep_ms(2);
    }
    redisFree(r);
    rlock_client_free(x->c);
    free(th);
    _exit(0);
}

static long long get_int(redisContext *r, const char *fmt, const char *name)
{
    redisReply *rep = bench_cmd(r, fmt, name);
    long long v = rep->type == REDIS_REPLY_INTEGER  ? rep->integer
                  : rep->type == REDIS_REPLY_STRING ? atoll(rep->str)
                                                    : 0;
    freeReplyObject(rep);
    return v;
}

void bench_procs_run(const char *host, int port, int procs, int threads, double seconds, bool fair,
                     bench_procs_result *out)
{
    procs_ctx x = {host, port, threads, seconds, fair, {0}, NULL};
    snprintf(x.name, sizeof x.name, "rlock-bench:procs:%s:%d", fair ? "fair" : "reentrant",
             (int)getpid());
    redisContext *r = bench_connect(host, port);
    freeReplyObject(bench_cmd(r, "DEL %s %s:ready %s:go %s:exit %s:counts %s:counter", x.name,
                              x.name, x.name, x.name, x.name, x.name));
    fflush(NULL);
    pid_t *pid = bench_xcalloc((size_t)procs, sizeof *pid);
    for (int i = 0; i < procs; i++) {
        pid[i] = fork();
        if (pid[i] < 0) {
            bench_die("fork failed");
        }
        if (pid[i] == 0) {
            child(&x);
        }
    }
    int workers = procs * threads;
    while (get_int(r, "GET %s:ready", x.name) < workers) {
        bench_sleep_ms(5);
    }
    freeReplyObject(bench_cmd(r, "CONFIG RESETSTAT"));
    int64_t t0 = bench_now_ns();
    freeReplyObject(bench_cmd(r, "SET %s:go 1", x.name));
    while (get_int(r, "LLEN %s:counts", x.name) < workers) {
        bench_sleep_ms(5);
    }
    double elapsed = (double)(bench_now_ns() - t0) / 1e9;
    double scripts = bench_info(r, "commandstats", "cmdstat_evalsha", "calls");
    double eval = bench_info(r, "commandstats", "cmdstat_eval", "calls");
    double sub = bench_info(r, "commandstats", "cmdstat_subscribe", "calls");
    double unsub = bench_info(r, "commandstats", "cmdstat_unsubscribe", "calls");
    scripts += eval == eval ? eval : 0; /* NaN when it never ran */
    double sub_only = sub == sub ? sub : 0;
    sub = sub_only + (unsub == unsub ? unsub : 0);
    freeReplyObject(bench_cmd(r, "SET %s:exit 1", x.name));
    for (int i = 0; i < procs; i++) {
        int status = 0;
        waitpid(pid[i], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            bench_die("worker process %d failed", i);
        }
    }
    redisReply *rep = bench_cmd(r, "LRANGE %s:counts 0 -1", x.name);
    long long total = 0, min = -1, max = 0;
    for (size_t i = 0; i < rep->elements; i++) {
        long long n = atoll(rep->element[i]->str);
        if (n < 0) {
            bench_die("a worker's lock or unlock failed");
        }
        total += n;
        min = min < 0 || n < min ? n : min;
        max = n > max ? n : max;
    }
    freeReplyObject(rep);
    long long counter = get_int(r, "GET %s:counter", x.name);
    out->acq_per_s = (double)total / elapsed;
    out->calls_per_acq = scripts / (double)(total ? total : 1);
    out->subs_per_acq = sub / (double)(total ? total : 1);
    out->sub_per_acq = sub_only / (double)(total ? total : 1);
    out->min = min;
    out->max = max;
    out->min_max = max ? (double)min / (double)max : 0.0;
    out->exact = counter == total;
    freeReplyObject(bench_cmd(r, "DEL %s %s:ready %s:go %s:exit %s:counts %s:counter", x.name,
                              x.name, x.name, x.name, x.name, x.name));
    redisFree(r);
    free(pid);
}

static void print_kind(int procs, int threads, bool fair, const bench_procs_result *o)
{
    printf("| %s | %d x %d | %.0f | %.3f | %.4f | %lld / %lld = %.3f | %s |\n",
           fair ? "fair" : "reentrant", procs, threads, o->acq_per_s, o->calls_per_acq,
           o->subs_per_acq, o->min, o->max, o->min_max, o->exact ? "yes" : "NO");
    fflush(stdout);
}

int bench_procs_main(const char *host, int port, int procs, int threads, double seconds)
{
    printf("| kind | processes x threads | acquisitions/s | script calls per acquisition | "
           "(un)subscribes per acquisition | per-worker min / max | counter exact |\n"
           "|---|---|---|---|---|---|---|\n");
    bench_procs_result o;
#ifndef BENCH_NO_LIB_KINDS
    bench_procs_run(host, port, procs, threads, seconds, true, &o);
    print_kind(procs, threads, true, &o);
#endif
    bench_procs_run(host, port, procs, threads, seconds, false, &o);
    print_kind(procs, threads, false, &o);
    return 0;
}
