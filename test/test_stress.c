/* Load: mutual exclusion under contention (several processes, each with its
 * own client and several threads, nesting the lock at random depth), the
 * same while connections are being killed, and ten thousand locks held at
 * once by one client's watchdog.
 *
 * Mutual exclusion is checked two ways: a non-atomic GET/SET increment of a
 * Redis counter inside the critical section (lost updates show as a short
 * count), and the critical sections' [start, end] times on CLOCK_MONOTONIC,
 * which is one clock for every process of the machine: no two may overlap.
 *
 * Durations are short for `make check`; RLOCK_STRESS_SECONDS (used by
 * `make soak`) stretches them. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define NPROC 4
#define NTHREAD 8

static int64_t seconds(int64_t dflt)
{
    const char *s = getenv("RLOCK_STRESS_SECONDS");
    int64_t v = s ? atoll(s) : 0;
    return v > 0 ? v : dflt;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef struct span {
    int64_t start, end;
    int32_t proc, thread;
} span;

/* What each process writes to its result file: this header, then spans. */
typedef struct result {
    uint64_t nspans;
    uint64_t lock_errors;   /* rlock_lock() not OK */
    uint64_t unlock_errors; /* rlock_unlock() not OK (each failed call) */
    uint64_t lost;          /* rlock_unlock() said RLOCK_ELOST */
    uint64_t counter_errors;
    uint64_t max_depth;
    int32_t first_error; /* first unexpected status, or -1 */
} result;

typedef struct job {
    const char *url; /* the lock's server */
    int counter_port;
    const char *name;
    const char *counter;
    int64_t duration_ms;
    bool faults; /* transport errors are expected and retried */
    int out_fd;
    int proc;
} job;

typedef struct worker {
    const job *j;
    rlock *l; /* one handle shared by the process's threads */
    int thread;
    span *spans;
    size_t n, cap;
    result res;
    bool tainted; /* a transport error hit this iteration's unlocks */
} worker;

static void note_error(result *res, rlock_status st)
{
    if (res->first_error < 0) {
        res->first_error = (int32_t)st;
    }
}

/* One logical unlock. Under faults a transport error is retried; the
 * retry carries a new request id, so if the failed call did run after all
 * the retry - or a later unlock of the same nesting - may find the hold
 * gone (RLOCK_ENOTOWNER or RLOCK_ELOST): that is the caller's own
 * non-idempotent retry, counted but not an error. */
static rlock_status unlock_retrying(worker *w)
{
    rlock_status st = RLOCK_OK;
    for (int tries = 0; tries < 20; tries++) {
        st = rlock_unlock(w->l);
        if (st == RLOCK_OK) {
            return st;
        }
        w->res.unlock_errors++;
        if (st == RLOCK_ELOST) {
            w->res.lost++;
        }
        if (w->j->faults && w->tainted && (st == RLOCK_ELOST || st == RLOCK_ENOTOWNER)) {
            return st;
        }
        if (!w->j->faults || (st != RLOCK_EIO && st != RLOCK_ETIMEDOUT)) {
            note_error(&w->res, st);
            return st;
        }
        w->tainted = true;
        th_sleep_ms(20);
    }
    note_error(&w->res, st);
    return st;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    const job *j = w->j;
    unsigned seed = (unsigned)(now_ns() ^ (j->proc * 7919 + w->thread));
    struct timeval tv = {5, 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", j->counter_port, tv);
    if (!r || r->err) {
        w->res.counter_errors++;
        return NULL;
    }
    redisSetTimeout(r, tv);
    int64_t deadline = th_now_ms() + j->duration_ms;
    while (th_now_ms() < deadline) {
        int depth = 1 + (int)(rand_r(&seed) % 3), taken = 0;
        int64_t lease = (rand_r(&seed) % 2) ? RLOCK_WATCHDOG : (j->faults ? 5000 : 10000);
        if (j->faults) {
            /* Explicit leases only: an acquire whose outcome a killed link
             * hid then costs one lease, not a renewed hold. */
            lease = 5000;
        }
        for (int d = 0; d < depth; d++) {
            rlock_status st = rlock_lock(w->l, lease);
            if (st != RLOCK_OK) {
                w->res.lock_errors++;
                if (!j->faults) {
                    note_error(&w->res, st);
                }
                break;
            }
            taken++;
        }
        if (taken > 0) {
            if ((uint64_t)taken > w->res.max_depth) {
                w->res.max_depth = (uint64_t)taken;
            }
            /* The critical section: everything happens before the first
             * unlock, so an unlock's fate cannot shorten it. */
            int64_t start = now_ns();
            redisReply *g = redisCommand(r, "GET %s", j->counter);
            long long v = (g && g->type == REDIS_REPLY_STRING) ? atoll(g->str) : 0;
            bool ok = g && (g->type == REDIS_REPLY_STRING || g->type == REDIS_REPLY_NIL);
            if (g) {
                freeReplyObject(g);
            }
            redisReply *s = ok ? redisCommand(r, "SET %s %lld", j->counter, v + 1) : NULL;
            ok = ok && s && s->type == REDIS_REPLY_STATUS;
            if (s) {
                freeReplyObject(s);
            }
            int64_t end = now_ns();
            if (!ok) {
                w->res.counter_errors++;
                break;
            }
            if (w->n == w->cap) {
                w->cap = w->cap ? w->cap * 2 : 1024;
                span *ns = realloc(w->spans, w->cap * sizeof *ns);
                if (!ns) {
                    w->res.counter_errors++;
                    break;
                }
                w->spans = ns;
            }
            w->spans[w->n++] = (span){start, end, j->proc, w->thread};
        }
        w->tainted = false;
        for (int d = 0; d < taken; d++) {
            unlock_retrying(w);
        }
        if (!j->faults && w->res.first_error >= 0) {
            break;
        }
    }
    redisFree(r);
    return NULL;
}

static bool write_all(int fd, const void *p, size_t n)
{
    const char *b = p;
    while (n > 0) {
        ssize_t k = write(fd, b, n);
        if (k <= 0) {
            return false;
        }
        b += k;
        n -= (size_t)k;
    }
    return true;
}

/* One process: its own client, NTHREAD workers, results to out_fd. */
static int stress_proc(void *arg)
{
    job *j = arg;
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = j->url;
    if (j->faults) {
        cfg.command_timeout_ms = 1000;
        cfg.retry_timeout_ms = 20000;
        cfg.connect_timeout_ms = 1000;
    }
    rlock_client *c;
    rlock *l;
    if (rlock_client_new(&cfg, &c) != RLOCK_OK) {
        return 10;
    }
    if (rlock_new(c, j->name, &l) != RLOCK_OK) {
        return 11;
    }
    worker w[NTHREAD];
    pthread_t t[NTHREAD];
    for (int i = 0; i < NTHREAD; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].j = j;
        w[i].l = l;
        w[i].thread = i;
        w[i].res.first_error = -1;
        pthread_create(&t[i], NULL, worker_main, &w[i]);
    }
    result total = {.first_error = -1};
    for (int i = 0; i < NTHREAD; i++) {
        pthread_join(t[i], NULL);
        total.nspans += w[i].n;
        total.lock_errors += w[i].res.lock_errors;
        total.unlock_errors += w[i].res.unlock_errors;
        total.lost += w[i].res.lost;
        total.counter_errors += w[i].res.counter_errors;
        if (w[i].res.max_depth > total.max_depth) {
            total.max_depth = w[i].res.max_depth;
        }
        if (total.first_error < 0) {
            total.first_error = w[i].res.first_error;
        }
    }
    bool ok = write_all(j->out_fd, &total, sizeof total);
    for (int i = 0; i < NTHREAD; i++) {
        ok = ok && write_all(j->out_fd, w[i].spans, w[i].n * sizeof(span));
        free(w[i].spans);
    }
    rlock_free(l);
    rlock_client_free(c);
    return ok ? 0 : 12;
}

static int by_start(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}

typedef struct stress_summary {
    uint64_t spans, lock_errors, unlock_errors, lost;
} stress_summary;

/* Runs NPROC processes on the lock server lock_url, with the counter on
 * counter_port; checks the counter and that no two sections overlap. */
static stress_summary run_stress(const char *lock_url, int counter_port, int64_t duration_ms,
                                 bool faults, void (*during)(void *), void *arg)
{
    char *name = th_name("stress");
    char *counter = th_name("stress-counter");
    int fds[NPROC];
    pid_t pids[NPROC];
    job jobs[NPROC];
    for (int i = 0; i < NPROC; i++) {
        char path[] = "/tmp/rlock-stress.XXXXXX";
        fds[i] = mkstemp(path);
        cr_assert(fds[i] >= 0);
        unlink(path);
        jobs[i] = (job){lock_url, counter_port, name, counter, duration_ms, faults, fds[i], i};
        pids[i] = th_fork(stress_proc, &jobs[i]);
    }
    if (during) {
        during(arg);
    }
    for (int i = 0; i < NPROC; i++) {
        int code = th_wait_bounded(pids[i], 2 * duration_ms + 60000);
        cr_assert_eq(code, 0, "stress process %d exited %d", i, code);
    }

    stress_summary sum = {0};
    span *all = NULL;
    size_t n = 0;
    uint64_t counter_errors = 0;
    for (int i = 0; i < NPROC; i++) {
        result res;
        cr_assert_eq(pread(fds[i], &res, sizeof res, 0), (ssize_t)sizeof res);
        cr_assert(res.first_error < 0, "process %d: unexpected %s", i,
                  rlock_status_name((rlock_status)res.first_error));
        all = realloc(all, (n + res.nspans) * sizeof *all);
        cr_assert(all != NULL || res.nspans == 0);
        size_t bytes = res.nspans * sizeof(span);
        cr_assert_eq(pread(fds[i], all + n, bytes, sizeof res), (ssize_t)bytes);
        n += res.nspans;
        sum.lock_errors += res.lock_errors;
        sum.unlock_errors += res.unlock_errors;
        sum.lost += res.lost;
        counter_errors += res.counter_errors;
        cr_log_info("process %d: %llu sections (max depth %llu), %llu lock errors, %llu "
                    "unlock errors, %llu lost",
                    i, (unsigned long long)res.nspans, (unsigned long long)res.max_depth,
                    (unsigned long long)res.lock_errors, (unsigned long long)res.unlock_errors,
                    (unsigned long long)res.lost);
        close(fds[i]);
    }
    sum.spans = n;
    cr_assert_eq(counter_errors, 0, "counter GET/SET failed");
    cr_assert(n > 0, "no critical section ran");

    qsort(all, n, sizeof *all, by_start);
    size_t overlaps = 0;
    int64_t max_end = all[0].end;
    size_t max_i = 0;
    for (size_t i = 1; i < n; i++) {
        if (all[i].start < max_end) {
            if (overlaps++ == 0) {
                cr_log_error("overlap: [%lld, %lld] proc %d thread %d starts before "
                             "[%lld, %lld] proc %d thread %d ends",
                             (long long)all[i].start, (long long)all[i].end, all[i].proc,
                             all[i].thread, (long long)all[max_i].start, (long long)all[max_i].end,
                             all[max_i].proc, all[max_i].thread);
            }
        }
        if (all[i].end > max_end) {
            max_end = all[i].end;
            max_i = i;
        }
    }
    cr_assert_eq(overlaps, 0, "%zu of %zu critical sections overlapped another", overlaps, n);

    redisContext *r = th_redis(counter_port);
    redisReply *g = th_cmd(r, "GET %s", counter);
    long long v = g->type == REDIS_REPLY_STRING ? atoll(g->str) : 0;
    freeReplyObject(g);
    cr_assert_eq(v, (long long)n, "counter %lld after %zu protected increments", v, n);
    freeReplyObject(th_cmd(r, "DEL %s", counter));
    redisFree(r);
    free(all);
    free(name);
    free(counter);
    return sum;
}

/* A private server per test, stopped by the fixture even when an
 * assertion fails. */
static th_server srv;
static char *url;

static void setup(void)
{
    th_server_start(&srv);
    url = th_server_url(&srv);
}

static void teardown(void)
{
    th_server_stop(&srv);
    free(url);
}

TestSuite(stress, .init = setup, .fini = teardown);

Test(stress, mutual_exclusion_processes_threads_nesting)
{
    int64_t dur = seconds(20) * 1000;
    stress_summary s = run_stress(url, srv.port, dur, false, NULL, NULL);
    cr_log_info("%d processes x %d threads, %lld s: %llu critical sections", NPROC, NTHREAD,
                (long long)(dur / 1000), (unsigned long long)s.spans);
    cr_assert_eq(s.lock_errors, 0);
    cr_assert_eq(s.unlock_errors, 0);
}

/* Keys on the server other than request latches (unlock and acquire: one
 * whose request was resent lives out its TTL, to answer a late copy). */
static long long lock_keys(redisContext *r)
{
    redisReply *rep = th_cmd(r, "EVAL %s 0",
                             "local n = 0 for _, k in ipairs(redis.call('keys', '*')) do "
                             "if string.sub(k, 1, 21) ~= 'redisson_unlock_latch' and "
                             "string.sub(k, 1, 19) ~= 'rlock_acquire_latch' then "
                             "n = n + 1 end end return n");
    long long n = rep->integer;
    freeReplyObject(rep);
    return n;
}

typedef struct killer {
    int port;
    int64_t until_ms;
    int kills;
} killer;

static void kill_connections(void *arg)
{
    killer *k = arg;
    redisContext *r = th_redis(k->port);
    while (th_now_ms() < k->until_ms) {
        th_sleep_ms(200 + rand() % 300);
        redisReply *rep =
            th_cmd(r, "CLIENT KILL TYPE %s", (k->kills % 3 == 2) ? "pubsub" : "normal");
        freeReplyObject(rep);
        k->kills++;
    }
    redisFree(r);
}

Test(stress, mutual_exclusion_while_connections_are_killed)
{
    int64_t dur = seconds(10) * 1000;
    killer k = {srv.port, th_now_ms() + dur, 0};
    /* The counter lives on the shared server, out of reach of the kills. */
    stress_summary s = run_stress(url, th_port(), dur, true, kill_connections, &k);
    cr_log_info("%d kills: %llu critical sections, %llu lock errors, %llu unlock errors, "
                "%llu lost",
                k.kills, (unsigned long long)s.spans, (unsigned long long)s.lock_errors,
                (unsigned long long)s.unlock_errors, (unsigned long long)s.lost);
    /* How many sections ran is throughput, which bench/ measures: here it
     * only matters that some did (run_stress) and that none overlapped. */
    cr_assert(k.kills >= 10);
    /* No lock is left behind once every lease has run out (latches whose
     * batched DEL was lost to a kill, or whose request was resent, expire
     * on their own PX TTL). */
    redisContext *r = th_redis(srv.port);
    long long keys = -1;
    TH_POLL((keys = lock_keys(r)) == 0, 8000);
    cr_assert_eq(keys, 0, "%lld lock keys left on the lock server", keys);
    redisFree(r);
}

#define MANY 10000

static long long db_size(redisContext *r)
{
    redisReply *rep = th_cmd(r, "DBSIZE");
    long long n = rep->integer;
    freeReplyObject(rep);
    return n;
}

Test(stress, ten_thousand_locks_renewed_in_batches)
{
    /* A 3 s lease renewed every second: a round of 10000 renewals has two
     * seconds before any lease runs out, on a loaded machine too. */
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.watchdog_timeout_ms = 3000;
    rlock_client *c = th_client_cfg(&cfg);
    rlock **ls = calloc(MANY, sizeof *ls);
    char **names = calloc(MANY, sizeof *names);
    char *base = th_name("many");
    int64_t t0 = th_now_ms();
    for (int i = 0; i < MANY; i++) {
        cr_assert(asprintf(&names[i], "%s:%d", base, i) > 0);
        th_ok(rlock_new(c, names[i], &ls[i]));
        th_ok(rlock_lock(ls[i], RLOCK_WATCHDOG));
    }
    cr_log_info("%d locks taken in %lld ms", MANY, (long long)(th_now_ms() - t0));
    uint64_t held = 0;
    th_ok(rlock_client_stat(c, RLOCK_STAT_HELD, &held));
    cr_assert_eq(held, MANY);

    uint64_t calls0, calls1, ren0, ren1;
    th_ok(rlock_client_stat(c, RLOCK_STAT_RENEWAL_CALLS, &calls0));
    th_ok(rlock_client_stat(c, RLOCK_STAT_RENEWED, &ren0));
    th_sleep_ms(2 * 3000); /* two leases pass: only renewal keeps the locks */
    th_ok(rlock_client_stat(c, RLOCK_STAT_RENEWAL_CALLS, &calls1));
    th_ok(rlock_client_stat(c, RLOCK_STAT_RENEWED, &ren1));
    uint64_t calls = calls1 - calls0, renewed = ren1 - ren0;
    cr_log_info("renewal: %llu script calls renewed %llu locks", (unsigned long long)calls,
                (unsigned long long)renewed);
    /* Batched (default batch 100): about 100 locks per call, never more;
     * one call per lock would renew 1 per call. How many rounds ran is the
     * watchdog's pace, which bench/ measures. (A call counts just before
     * its renewals do: one call of slack.) */
    cr_assert(calls >= 100, "%llu renewal calls: not one round of 10000 locks",
              (unsigned long long)calls);
    cr_assert(renewed >= 50 * (calls - 1) && renewed <= 100 * (calls + 1),
              "%llu locks renewed in %llu calls: not batches of up to 100",
              (unsigned long long)renewed, (unsigned long long)calls);

    /* Every lock still held: field present, PTTL > 0 (pipelined check). */
    redisContext *r = th_redis(srv.port);
    char *owner = th_owner(c, rlock_thread_id());
    for (int i = 0; i < MANY; i++) {
        redisAppendCommand(r, "HGET %s %s", names[i], owner);
        redisAppendCommand(r, "PTTL %s", names[i]);
    }
    int missing = 0, expired = 0;
    for (int i = 0; i < MANY; i++) {
        redisReply *a = NULL, *b = NULL;
        cr_assert_eq(redisGetReply(r, (void **)&a), REDIS_OK);
        cr_assert_eq(redisGetReply(r, (void **)&b), REDIS_OK);
        if (a->type != REDIS_REPLY_STRING || strcmp(a->str, "1") != 0) {
            missing++;
        }
        if (b->type != REDIS_REPLY_INTEGER || b->integer <= 0 || b->integer > 3000) {
            expired++;
        }
        freeReplyObject(a);
        freeReplyObject(b);
    }
    cr_assert_eq(missing, 0, "%d of %d locks lost their owner field", missing, MANY);
    cr_assert_eq(expired, 0, "%d of %d locks without a live lease", expired, MANY);

    for (int i = 0; i < MANY; i++) {
        th_ok(rlock_unlock(ls[i]));
        rlock_free(ls[i]);
        free(names[i]);
    }
    th_ok(rlock_client_stat(c, RLOCK_STAT_HELD, &held));
    cr_assert_eq(held, 0);
    /* Lock keys and the unlock latches (deleted in batches by the watchdog
     * thread) are all gone. */
    long long dbsize = -1;
    TH_POLL((dbsize = db_size(r)) == 0, 5000);
    cr_assert_eq(dbsize, 0, "%lld keys left after unlocking everything", dbsize);
    redisFree(r);
    rlock_client_free(c);
    free(ls);
    free(names);
    free(owner);
    free(base);
}
