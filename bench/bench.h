/* rlock-bench: declarations shared by the files of bench/.
 *
 * What the shared peer harness (../shared/bench-anchors) measures for every
 * library, rlock included, is not measured again here: runner.c speaks its
 * line protocol. The standalone report (report.c) keeps what is specific to
 * rlock: the uncontended pair as a ratio to its floor (the same scripts
 * sent by a bare loop, floor.c) on the same server at the same moments,
 * over plain TCP and over TLS; re-entry; the cost and memory of
 * watchdog-held locks (scenarios.c); each measured in interleaved rounds.
 * rlock is used through its public API (rlock.h) only; the floor reads the
 * build's embedded script text; hiredis serves the control connection. */
#ifndef RLOCK_BENCH_H
#define RLOCK_BENCH_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rlock.h"

/* ---- kinds.c: the lock kinds measured -------------------------------- */

/* Every kind of lock rlock makes, in the order the report lists them.
 * BENCH_NO_LIB_KINDS builds the bench against a library from before issue
 * 16 (an A/B baseline, docs/performance.md): the reentrant lock only. */
typedef enum bench_kind {
    BK_REENTRANT,
#ifndef BENCH_NO_LIB_KINDS
    BK_NONREENTRANT,
    BK_FAIR,
    BK_FAIR_NONREENTRANT,
    BK_FENCED,
    BK_SPIN,
    BK_READ,
    BK_WRITE,
#endif
    BK_COUNT
} bench_kind;

typedef struct bench_kind_info {
    const char *name; /* as --kind takes it */
    const char *ctor; /* the public constructor */
    rlock_status (*make)(rlock_client *c, const char *name, rlock **out);
    bool shared; /* holds share the lock (readers): no mutual exclusion */
} bench_kind_info;

extern const bench_kind_info bench_kinds[BK_COUNT];
/* The kind called name; dies when there is none. */
bench_kind bench_kind_named(const char *name);
/* A handle of kind k; dies on failure. */
rlock *bench_lock_kind(rlock_client *c, bench_kind k, const char *name);

/* ---- procs.c: contention across processes ------------------------------- */

/* One run of --procs: procs processes x threads threads on one name. */
typedef struct bench_procs_result {
    double acq_per_s;
    double calls_per_acq; /* script calls (EVALSHA + EVAL) Redis ran */
    double subs_per_acq;  /* SUBSCRIBE + UNSUBSCRIBE Redis ran */
    double sub_per_acq;   /* SUBSCRIBE alone */
    double min_max;       /* the fewest / the most acquisitions of a worker */
    long long min, max;
    bool exact; /* the counter saw every acquisition */
} bench_procs_result;

/* Forks procs processes, each with its own client and threads threads,
 * contending on one fair (fair) or reentrant lock for seconds; the parent
 * must not have made an rlock client yet (a fork copies no threads). */
void bench_procs_run(const char *host, int port, int procs, int threads, double seconds, bool fair,
                     bench_procs_result *out);
/* procs processes x threads threads on one fair lock, then one reentrant
 * lock, seconds each; prints a table of rates, commands per acquisition
 * and fairness on stdout. */
int bench_procs_main(const char *host, int port, int procs, int threads, double seconds);

/* ---- util.c ------------------------------------------------------------ */

/* CLOCK_MONOTONIC in ns: system-wide, so stamps of different threads compare. */
int64_t bench_now_ns(void);
void bench_sleep_ms(int64_t ms);
/* User + system CPU seconds so far of this process, all threads (self) or
 * of its waited-for children (!self). */
double bench_cpu_s(bool self);
/* Bytes in use by malloc, all arenas, chunk headers included (mallinfo2). */
int64_t bench_heap_bytes(void);

/* The q-quantile (0..1) of v[0..n), sorting v in place; NaN when n == 0. */
double bench_quantile(double *v, size_t n, double q);
/* Mean of v[0..n); NaN when n == 0. */
double bench_mean(const double *v, size_t n);

/* Fatal error: the benchmark cannot recover from a lost server. */
void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* A progress line on stderr (stdout may carry the runner protocol). */
void bench_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
extern bool bench_quiet;
void *bench_xcalloc(size_t n, size_t size);

/* Pins the main thread of the redis-server behind r to cpu; false when the
 * server is not a local redis-server of this user (nothing changed). */
bool bench_pin_server(redisContext *r, const char *host, int cpu);
/* Pins the calling thread to cpu (< 0: every CPU); dies on failure. */
void bench_pin_self(int cpu);

/* A direct hiredis connection to host:port; dies on failure. */
redisContext *bench_connect(const char *host, int port);
/* Runs a command; dies on transport errors and error replies. */
redisReply *bench_cmd(redisContext *r, const char *fmt, ...);
/* One numeric field of INFO section (e.g. "used_cpu_sys"), or NaN. For
 * commandstats, field is e.g. "cmdstat_evalsha" and sub "usec_per_call". */
double bench_info(redisContext *r, const char *section, const char *field, const char *sub);

/* A client for redis://host:port (watchdog_ms 0: the default); dies on failure. */
rlock_client *bench_client(const char *host, int port, int64_t watchdog_ms);
/* A client for rediss://host:port with tls's settings; dies on failure. */
struct bench_tls;
rlock_client *bench_client_tls(const char *host, int port, const struct bench_tls *tls);
rlock *bench_lock(rlock_client *c, const char *name);
uint64_t bench_stat(rlock_client *c, rlock_stat which);

/* Lock(WATCHDOG) + unlock pairs on l: n pairs (0: no limit), stopping after
 * the pair that ends past deadline_ns (0: none), as the anchor runners do.
 * Each pair's latency goes to lat_us when it is not NULL (room for n).
 * Returns the pairs done; failed calls are counted in *errors. */
uint64_t bench_pairs(rlock *l, uint64_t n, int64_t deadline_ns, double *lat_us, uint64_t *errors);

/* ---- wire.c, floor.c: the floor of the uncontended pair --------------- */

/* TLS settings of a connection the bench opens itself (floor.c) and of its
 * rlock clients over rediss://. ca_file NULL: OpenSSL's default store. */
typedef struct bench_tls {
    const char *ca_file;
    const char *cert_file, *key_file; /* mutual TLS; key NULL: in cert_file */
    const char *server_name;          /* NULL: the host */
    bool insecure;                    /* no verification (self-made test servers) */
} bench_tls;

/* One blocking connection: a socket of our own, TLS when tls is not NULL,
 * hiredis's formatter and reader. Dies on any failure. */
typedef struct bench_wire bench_wire;
bench_wire *bench_wire_open(const char *host, int port, const bench_tls *tls);
redisReply *bench_wire_call(bench_wire *w, int argc, const char **argv, const size_t *lens);
/* A command of up to three words (a1, a2 may be NULL); dies on an error reply. */
redisReply *bench_wire_cmd(bench_wire *w, const char *a0, const char *a1, const char *a2);
void bench_wire_close(bench_wire *w);

/* The floor: the scripts and arguments of rlock's uncontended lock(WATCHDOG)
 * + unlock of name by a lock of kind k, sent by a bare loop on one
 * bench_wire (floor.c). A floor is used by one thread at a time. */
typedef struct bench_floor bench_floor;
bench_floor *bench_floor_new(const char *host, int port, const bench_tls *tls, const char *name,
                             bench_kind k);
/* n pairs; each pair's latency to lat_us when not NULL (room for n). Dies
 * on a failed pair (another owner holding name included). */
uint64_t bench_floor_pairs(bench_floor *f, uint64_t n, double *lat_us);
/* Commands sent so far (the pairs' EVALSHAs and the latch DELs). */
uint64_t bench_floor_commands(const bench_floor *f);
void bench_floor_free(bench_floor *f);

/* ---- runner.c: the line protocol of ../shared/bench-anchors ------------ */

typedef struct bench_runner_args {
    int port;
    const char *scenario; /* uncontended | contended */
    uint64_t n;
    double duration_s;
    int workers;
    const char *lock_key;
    const char *counter_key;
} bench_runner_args;

int bench_runner_main(const bench_runner_args *a);

/* ---- scenarios.c: one measurement each, called once per round --------- */

enum { BENCH_TCP = 0, BENCH_TLS = 1 };

/* The server and the run's settings, shared by every scenario. */
typedef struct bench_ctx {
    char host[256];
    int port;
    bool quick;
    redisContext *r; /* control connection */
    char prefix[48]; /* key prefix unique to this run */
    rlock_client *c; /* the uncontended and nested client, made once */
    /* TLS: a second port of the same server (0: none), the floor's and
     * rlock's settings for it, and rlock's client over it (NULL while the
     * library has no rediss://). */
    int tls_port;
    bench_tls tls;
    rlock_client *ctls;
    bench_floor *floor[2]; /* by transport */
    /* --pin: the server's main thread on CPU 0, and the pairs measured
     * with this thread on CPU 0 (the placement the main figures are of)
     * and on CPU 1; false: wherever the scheduler puts them. */
    bool pin;
    int cpu; /* --slices --cpu N: the measuring thread's CPU (-1: any) */
    /* --smoke: every scenario once, as briefly as it can run (the check of
     * test/test_bench.c), not a measurement */
    bool smoke;
    unsigned only; /* --only: the scenarios to run (BENCH_ONLY_* bits) */
    /* The other kinds' uncontended pairs, each on a name of its own, and
     * their floors (kinds.c); [BK_REENTRANT] is the TCP pair above. */
    rlock *klock[BK_COUNT];
    bench_floor *kfloor[BK_COUNT];
    bench_floor **rfloor; /* x->readers floors of the read lock, one per thread */
    int contenders;       /* --contend T: threads of the contended scenario */
    int readers;          /* --readers R: threads of the parallel readers */
    int procs, threads;   /* --procs-report P x T: the fair lock across processes */
    double procs_s;       /* seconds per kind and round of that */
} bench_ctx;

enum {
    BENCH_ONLY_PAIR = 1,       /* floor and uncontended reentrant pairs, TCP and TLS */
    BENCH_ONLY_NESTED = 2,     /* re-entry */
    BENCH_ONLY_WATCHDOG = 4,   /* held locks */
    BENCH_ONLY_KINDS = 8,      /* each kind's uncontended pair against its floor */
    BENCH_ONLY_CONTENDED = 16, /* each kind, threads on one name */
    BENCH_ONLY_READERS = 32,   /* readers in parallel against the parallel limit */
    BENCH_ONLY_PROCS = 64,     /* the fair lock across processes */
    BENCH_ONLY_ALL = 127
};

/* Figures of one round; NaN where a scenario did not run. By transport:
 * [BENCH_TCP], [BENCH_TLS]. */
typedef struct bench_round {
    double floor_pps[2];    /* the floor's pairs/s */
    double floor_p50_us[2]; /* the floor's pair latency */
    double floor_cpu_us[2]; /* client CPU per floor pair (whole process) */
    double floor_usec;      /* Redis usec per script call of the floor */
    double pairs_per_s[2];  /* uncontended lock + unlock */
    double ratio[2];        /* pairs_per_s / floor_pps, same transport */
    double pair_p50_us[2], pair_p99_us[2];
    double pair_cpu_us[2];   /* client CPU (all threads) per pair */
    double pair_cmds;        /* RLOCK_STAT_COMMANDS per pair */
    double pair_usec;        /* Redis usec per rlock script call */
    double tls_vs_tcp;       /* rlock's TLS pairs/s / its TCP pairs/s */
    double tls_floor_vs_tcp; /* the same for the floor */
    /* --pin: the same with the bench on the other CPU than the server */
    double other_floor_pps[2], other_pairs_per_s[2], other_ratio[2], other_tls_vs_tcp;
    double nest_first_us;   /* lock, hold count 0 -> 1 */
    double nest_reenter_us; /* lock, 1 -> 2 .. 10 -> 11 (mean of medians) */
    double nest_partial_us; /* unlock, 11 -> 10 .. 2 -> 1 */
    double nest_full_us;    /* unlock, 1 -> 0 */
    double nest_slope;      /* re-entry median at depth 10 / depth 1 */
    double wd_registry_b;   /* heap per held lock once handles are freed */
    double wd_handle_b;     /* heap per rlock handle */
    double wd_calls_round;  /* renewal calls per renewal round */
    double wd_client_us;    /* client CPU per lock renewed */
    double wd_redis_us;     /* Redis CPU per lock renewed */
    double wd_alive;        /* sampled locks still alive after the window */
    double wd_errors;       /* failed locks and unlocks (ELOST: renewal fell behind) */
    /* kinds.c: each kind's uncontended pair against its own floor */
    double k_floor_pps[BK_COUNT], k_pps[BK_COUNT], k_ratio[BK_COUNT];
    double k_floor_p50_us[BK_COUNT], k_p50_us[BK_COUNT];
    double k_floor_cpu_us[BK_COUNT], k_cpu_us[BK_COUNT];
    double k_cmds[BK_COUNT]; /* rlock's client commands per pair */
    double k_floor_cmds[BK_COUNT];
    double k_floor_usec[BK_COUNT], k_usec[BK_COUNT]; /* Redis µs per script call */
    /* each kind contended: threads on one name, one client */
    double c_aps[BK_COUNT];    /* acquisitions/s */
    double c_vs_re[BK_COUNT];  /* ÷ the reentrant lock's of the round */
    double c_cmds[BK_COUNT];   /* client commands per acquisition */
    double c_calls[BK_COUNT];  /* script calls Redis ran per acquisition */
    double c_minmax[BK_COUNT]; /* per-thread fewest / most */
    double c_lost[BK_COUNT];   /* counter updates lost (exclusive kinds: 0) */
    double c_errors[BK_COUNT];
    /* readers in parallel on one read lock, against the parallel limit */
    double rd_pps, rd_floor_pps, rd_ratio;    /* R threads */
    double rd1_pps, rd1_floor_pps, rd1_ratio; /* one thread */
    double rd_scale, rd_floor_scale;          /* R threads ÷ one */
    double rd_minmax, rd_floor_minmax;        /* per-thread fewest / most */
    /* the fair lock across processes, beside the reentrant lock: [0] fair */
    double p_aps[2], p_calls[2], p_subs[2], p_minmax[2], p_exact[2];
    double p_over[2];    /* script calls per acquisition - 3 - SUBSCRIBEs per acquisition */
    double p_fair_vs_re; /* acquisitions/s, fair ÷ reentrant, same round */
    double load1;        /* the 1-minute load average at the round's end */
} bench_round;

/* The sums of one side's slices in a round. */
typedef struct bench_side {
    double pairs, s, cpu_s, cmds, srv_calls, srv_usec;
    double *lat; /* pair latencies, us */
    size_t nlat;
} bench_side;

/* A round alternates short slices of the floor and of rlock's pairs, per
 * transport (floor, rlock, TLS floor, TLS rlock; then the other way round)
 * so that all see the same moments of a noisy machine; bench_speed() turns
 * the sums into the round's figures and clears them. */
typedef struct bench_acc {
    bench_side floor[2], lib[2];
} bench_acc;

void bench_slice_floor(bench_ctx *x, int t, int n, bench_acc *a);
void bench_slice_pairs(bench_ctx *x, int t, int n, bench_acc *a);
void bench_speed(bench_acc *a, bench_round *out);
/* One side's slice on a floor / an rlock handle of client c. */
void bench_slice_floor_on(bench_ctx *x, bench_floor *f, int n, bench_side *d);
void bench_slice_pairs_on(bench_ctx *x, rlock_client *c, rlock *l, int n, bench_side *d);
void bench_scn_nested(bench_ctx *x, bench_round *out);
void bench_scn_watchdog(bench_ctx *x, int held, bench_round *out);

/* kinds.c: the scenarios of the lock kinds, called once per round. */
/* Makes x->klock and x->kfloor (the reentrant lock's are the TCP pair's);
 * warms them up. */
void bench_kinds_open(bench_ctx *x);
void bench_kinds_close(bench_ctx *x);
/* Each kind but the reentrant: slices alternating floor and rlock pairs. */
void bench_scn_kinds(bench_ctx *x, int round, bench_round *out);
/* Every kind contended by x->contenders threads on one name, in turn. */
void bench_scn_contended(bench_ctx *x, int round, bench_round *out);
/* x->readers threads on one read lock; the floor the same. */
void bench_scn_readers(bench_ctx *x, int round, bench_round *out);

/* ---- check.c: each floor against the library, under MONITOR ------------ */

/* One pair of each kind by the library, then by its floor, on one name,
 * as MONITOR shows them; the commands compared with the client's
 * identity, request ids and clock masked. Prints each kind's verdict;
 * returns 0 when every kind matched. */
int bench_check_main(bench_ctx *x);

/* ---- report.c: rounds of every scenario, then the table of medians ----- */

int bench_report_main(bench_ctx *x, int rounds, int held);

#endif
