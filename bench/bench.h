/* rlock-bench: declarations shared by the files of bench/.
 *
 * The benchmark has two faces: the line protocol of the shared lock-anchor
 * harness (runner.c) and a standalone report (scenarios.c, report.c) that
 * measures each scenario against the physical limit of the same server,
 * measured in the same run with redis-benchmark. Timing, statistics and the
 * direct hiredis helpers live in util.c; the lock loops both faces share
 * live in workers.c. */
#ifndef RLOCK_BENCH_H
#define RLOCK_BENCH_H

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rlock.h"

/* ---- time and statistics (util.c) ------------------------------------ */

/* CLOCK_MONOTONIC in ns. It is system-wide on Linux, so stamps taken in
 * different threads or fork()ed processes compare directly. */
int64_t bench_now_ns(void);
void bench_sleep_ms(int64_t ms);

/* A growable array of int64 (latencies or time stamps, in ns). */
typedef struct bench_vec {
    int64_t *v;
    size_t n;
    size_t cap;
} bench_vec;

void bench_vec_push(bench_vec *a, int64_t x);
void bench_vec_append(bench_vec *a, const int64_t *xs, size_t n);
void bench_vec_free(bench_vec *a);

/* Summary of a latency sample, in microseconds; n == 0 when empty (and
 * every figure NaN). */
typedef struct bench_lat {
    size_t n;
    double mean_us;
    double p50_us;
    double p99_us;
    double max_us;
} bench_lat;

/* Sorts a in place and summarises it. */
bench_lat bench_lat_of(bench_vec *a);

/* Prints a fatal error and exits: the benchmark has no way to recover from
 * a server that is gone or a library call that fails where it must not. */
void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void *bench_xmalloc(size_t n);
void *bench_xcalloc(size_t n, size_t size);
char *bench_xstrdup(const char *s);
/* Prints a warning on stderr (stdout may carry the runner protocol). */
void bench_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A progress line on stderr, unless --quiet. */
void bench_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
extern bool bench_quiet;

/* ---- the server (util.c) --------------------------------------------- */

/* Where the server is, parsed from a redis:// URL (or host + port). */
typedef struct bench_target {
    char url[512];
    char host[256];
    int port;
    char password[256]; /* empty when none */
    char user[128];     /* empty when none */
    int db;
} bench_target;

/* Parses redis://[[user]:pass@]host[:port][/db]. Returns false for any
 * other form (the benchmark needs TCP to run redis-benchmark). */
bool bench_target_parse(const char *url, bench_target *t);
void bench_target_from_port(int port, bench_target *t);

/* A direct hiredis connection (AUTH and SELECT done). Dies on failure. */
redisContext *bench_connect(const bench_target *t);
/* Runs a command; dies on transport errors and error replies. The caller
 * frees the reply with freeReplyObject(). */
redisReply *bench_cmd(redisContext *r, const char *fmt, ...);
/* Runs a command whose reply is not needed. */
void bench_cmd_void(redisContext *r, const char *fmt, ...);

/* One field of INFO (e.g. "used_cpu_sys"), or NaN. */
double bench_info_double(redisContext *r, const char *section,
                         const char *field);
/* The server's version string (INFO server redis_version). */
void bench_redis_version(redisContext *r, char *out, size_t outlen);

/* INFO commandstats: calls per command, the harness's own commands (info,
 * config) left out. */
typedef struct bench_cmdstat {
    char name[64];
    uint64_t calls;
} bench_cmdstat;

typedef struct bench_cmdstats {
    bench_cmdstat *v;
    size_t n;
} bench_cmdstats;

void bench_cmdstats_read(redisContext *r, bench_cmdstats *out);
void bench_cmdstats_free(bench_cmdstats *s);
uint64_t bench_cmdstats_total(const bench_cmdstats *s);
uint64_t bench_cmdstats_get(const bench_cmdstats *s, const char *name);
/* "evalsha 1.00, hexists 1.00, ..." per acquisition, biggest first, with
 * sub_per_op calls of each name in sub[] taken off first (the critical
 * section's GET and SET). */
void bench_cmdstats_format(const bench_cmdstats *s, uint64_t ops,
                           const char *const *sub, size_t nsub, char *out,
                           size_t outlen);

/* Mean round trip of PING on r over n calls, in microseconds. */
double bench_ping_rtt_us(redisContext *r, int n, double *p50_us);

/* The physical limit: redis-benchmark against t. */
typedef struct bench_rb {
    bool ok;
    double rps;
    double avg_us;
    double p99_us;
    double max_us;
} bench_rb;

/* Loads the lock-like script of the anchor harness (HINCRBY + PEXPIRE,
 * same text as driver.py) and returns its SHA. */
void bench_load_lock_like(redisContext *r, char *sha, size_t shalen);
/* redis-benchmark -c clients -n requests --csv evalsha SHA 1 KEY field. */
bench_rb bench_redis_benchmark_evalsha(const bench_target *t,
                                       const char *sha, const char *key,
                                       int clients, int requests);

/* ---- memory (util.c) -------------------------------------------------- */

/* Bytes in use by malloc, all arenas (mallinfo2 uordblks + hblkhd):
 * includes each chunk's header, i.e. what an allocation really costs. */
int64_t bench_heap_bytes(void);
/* Resident set size from /proc/self/statm, in bytes. */
int64_t bench_rss_bytes(void);

/* ---- a small string builder (util.c) for JSON ------------------------ */

typedef struct bench_str {
    char *s;
    size_t n;
    size_t cap;
} bench_str;

void bench_str_printf(bench_str *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void bench_str_free(bench_str *b);
/* Appends x as a JSON number, or null when it is NaN or infinite. */
void bench_str_num(bench_str *b, double x);

/* ---- lock loops (workers.c) ------------------------------------------ */

/* A client for t with the given watchdog timeout (0: default) and pool
 * size (0: default). Dies on failure. */
rlock_client *bench_client(const bench_target *t, int64_t watchdog_ms,
                           int pool_size);
uint64_t bench_stat(rlock_client *c, rlock_stat which);

/* A start gate: workers wait on it after their warm-up; the controller
 * opens it with the run's deadline. */
typedef struct bench_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int ready;
    bool open;
    int64_t deadline_ns;  /* stop starting new acquisitions */
    int64_t hard_stop_ns; /* stop touching the counter (protocol §3) */
} bench_gate;

void bench_gate_init(bench_gate *g);
void bench_gate_destroy(bench_gate *g);
/* Waits until n workers are ready. */
void bench_gate_wait_ready(bench_gate *g, int n);
void bench_gate_open(bench_gate *g, int64_t deadline_ns, int64_t hard_stop_ns);

/* One worker of a lock loop, as a thread. */
typedef struct bench_worker {
    /* inputs */
    rlock_client *client;
    const bench_target *target;
    /* Copies, not pointers: a worker stuck in rlock_lock() outlives the
     * caller's stack frame (its memory is then leaked on purpose). */
    char lock_name[160];
    char counter_key[160]; /* empty: no critical section (plain pairs) */
    bench_gate *gate;
    int warmup;      /* lock/unlock pairs before reporting ready */
    uint64_t max_ops; /* 0: until the deadline */
    /* outputs */
    uint64_t ops;       /* acquisitions (or pairs) completed */
    uint64_t errors;    /* lock calls that failed */
    uint64_t unlock_errors;
    uint64_t cs_cmds;   /* GET + SET sent on the worker's own connection */
    bench_vec lat;      /* contended: acquire wait; else the lock+unlock pair */
    bench_vec acq_at;   /* contended: when each rlock_lock returned */
    bench_vec rel_at;   /* contended: just before each rlock_unlock */
    bool finished;      /* set by the thread when it returns */
    pthread_t thread;
} bench_worker;

/* Contended: rlock_lock(WATCHDOG); GET counter; SET counter+1; unlock.
 * Uncontended / parallel (counter_key NULL): lock + unlock pairs. */
void *bench_worker_main(void *arg);
/* Joins w's thread, waiting until the monotonic deadline at most; sets and
 * returns w->finished. A worker still blocked then counts as stuck. */
bool bench_worker_join_until(bench_worker *w, int64_t mono_deadline_ns);
void bench_worker_free(bench_worker *w);

/* Time from each release to the next owner's acquire: merges every
 * worker's (acquire, release) stamps in time order. Mutual exclusion makes
 * the hold intervals disjoint, so sorted by acquire time each release is
 * followed by the next acquire. Appends to out (ns). */
void bench_handoffs(bench_vec *const *acq, bench_vec *const *rel, size_t n,
                    bench_vec *out);

/* ---- the two faces ----------------------------------------------------- */

typedef struct bench_runner_args {
    int port;
    const char *scenario;
    uint64_t n;
    double duration_s;
    int workers;
    double grace_s;
    const char *lock_key;
    const char *counter_key;
} bench_runner_args;

int bench_runner_main(const bench_runner_args *a);

typedef struct bench_opts {
    bench_target target;
    bool quick;
    bool json;
    const char *only; /* NULL: all scenarios */
} bench_opts;

int bench_standalone_main(const bench_opts *o);

/* ---- the standalone report (report.c) ---------------------------------- */

/* What every standalone scenario shares: the options, a control
 * connection, a key prefix unique to this run, and the physical limits
 * measured once per run. */
typedef struct bench_ctx {
    const bench_opts *o;
    redisContext *r;
    char prefix[64];
    char redis_version[32];
    double rtt_us;     /* mean PING round trip on r */
    double rtt_p50_us;
    char sha[64];      /* the lock-like script */
    bench_rb rb[8];    /* redis-benchmark EVALSHA, by rb_clients[] */
    int rb_clients[8];
    int nrb;
} bench_ctx;

/* redis-benchmark EVALSHA rate at -c clients, measured once per run. */
const bench_rb *bench_limit(bench_ctx *x, int clients);

/* A number for a table: thousands separators, nd decimals, "-" for NaN.
 * Returns one of a ring of static buffers (the report is single-threaded). */
const char *bench_fmt(double x, int nd);

/* Markdown lines of the report, in order. */
void bench_md(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* One JSON object per measured row: begin, fields, end. */
void bench_js_begin(const char *scenario);
void bench_js_num(const char *key, double x);
void bench_js_str(const char *key, const char *s);
void bench_js_end(void);
/* A goal: measured against target, met when measured >= target (at_least)
 * or <= target. */
void bench_goal(const char *what, double measured, int nd, bool at_least,
                double target);

/* One timed run of already-filled workers: starts their threads, waits
 * for their warm-up, resets the server's command stats, opens the gate for
 * duration_s (the hard stop grace_s later), joins them, waiting at most
 * 1 s past the hard stop. w must be on the heap: see bench_workers_done. */
typedef struct bench_run {
    double elapsed_s;
    uint64_t client_cmds; /* RLOCK_STAT_COMMANDS delta of c */
    uint64_t wakeups;     /* RLOCK_STAT_WAKEUPS delta of c */
    bench_cmdstats server; /* INFO commandstats since the gate opened */
    int stuck;             /* workers still in rlock_lock() 1 s after the
                              hard stop */
    double cpu_s;          /* this process's user + system CPU in the run */
    double csw;            /* its context switches, voluntary + not */
} bench_run;

void bench_run_workers(bench_ctx *x, rlock_client *c, bench_worker *w,
                       int n, double duration_s, double grace_s,
                       bench_run *out);

/* Frees w[0..n) (and w), the gate and the client, unless some worker is
 * stuck: then a thread may still use them when it wakes, so they are
 * leaked on purpose (the report shows the stuck count). */
void bench_workers_done(rlock_client *c, bench_gate *g, bench_worker *w,
                        int n, int stuck);

/* The scenarios (scenarios.c, contended.c). */
void bench_scn_uncontended(bench_ctx *x);
void bench_scn_parallel(bench_ctx *x);
void bench_scn_nested(bench_ctx *x);
void bench_scn_contended(bench_ctx *x);
void bench_scn_watchdog(bench_ctx *x);

#endif
