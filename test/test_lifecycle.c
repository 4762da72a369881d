/* The client's life cycle and the reports of lost holds: a call leaving
 * while the client is freed, fork() with a busy parent, stale lost-lock
 * reports, a thread that exits with an acquire in doubt, the order of
 * shutdown, and a thread's exit among many holds of other threads. One test
 * per item of issue 14 (3, 4, 11, 12, 13, 19); each failed before its fix.
 * Tests that stall Redis run on a private server. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "object.h" /* sizeof(struct rlock_client): the mutexes a late call must not touch */

TestSuite(lifecycle, .timeout = 120);

static rlock_client *client_with(const char *url, int64_t wd_ms, int64_t cmd_ms,
                                 void (*on_lost)(const char *, uint64_t, void *), void *arg)
{
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.watchdog_timeout_ms = wd_ms;
    cfg.command_timeout_ms = cmd_ms;
    cfg.connect_timeout_ms = 1000;
    cfg.retry_timeout_ms = 5000;
    cfg.on_lock_lost = on_lost;
    cfg.on_lock_lost_arg = arg;
    return th_client_cfg(&cfg);
}

static uint64_t stat_of(rlock_client *c, rlock_stat s)
{
    uint64_t v = 0;
    th_ok(rlock_client_stat(c, s, &v));
    return v;
}

/* ---- item 3: a call leaving while the client is freed ----------------- */

/* A forced schedule, from the test's side only: the library has no hooks.
 * The test binary defines pthread_mutex_lock and pthread_cond_wait, which
 * the (statically linked) library then calls. While armed:
 *   - the closer (the thread in rlock_client_free()) records the mutex and
 *     condition variable of its first wait: the wait for calls to leave;
 *   - the leaver (a thread woken with RLOCK_ECLOSED) holds back its locks
 *     until the closer waits, and before it locks that mutex it wakes the
 *     closer (a spurious wake-up, which POSIX allows) and pauses, so the
 *     closer looks at the count of calls right then;
 *   - a lock the leaver begins after rlock_client_free() returned is a
 *     touch of freed memory, and is counted.
 * Not under ThreadSanitizer, whose own wrappers of these calls it would
 * replace. */
#if defined(__GLIBC__) && !defined(__SANITIZE_THREAD__)
#define FORCED_SCHEDULE 1
typedef int (*lock_fn)(pthread_mutex_t *);
typedef int (*cond_wait_fn)(pthread_cond_t *, pthread_mutex_t *);
static lock_fn real_lock;
static cond_wait_fn real_cond_wait;
static atomic_bool fs_armed;
static atomic_bool fs_freed;
static atomic_int fs_late;
static atomic_int fs_forced;
static _Atomic(pthread_mutex_t *) fs_mu;
static _Atomic(pthread_cond_t *) fs_cv;
static _Atomic(const char *) fs_lo, fs_hi; /* the client being freed */
static __thread bool fs_closer, fs_leaver;

int pthread_mutex_lock(pthread_mutex_t *m)
{
    if (!real_lock) {
        real_lock = (lock_fn)dlsym(RTLD_NEXT, "pthread_mutex_lock");
    }
    if (fs_leaver && atomic_load(&fs_armed)) {
        TH_POLL(atomic_load(&fs_mu) != NULL, 2000);
        if (m == atomic_load(&fs_mu)) {
            atomic_fetch_add(&fs_forced, 1);
            pthread_cond_broadcast(atomic_load(&fs_cv));
            th_sleep_ms(th_ms(200));
        }
        /* Only a mutex of the freed client counts: the thread's own exit
         * and process-wide locks (the library's thread registry, glibc's)
         * may run after the free and touch nothing of it (memcheck and
         * ASan see no access of freed memory in those). */
        if (atomic_load(&fs_freed) && (const char *)m >= atomic_load(&fs_lo) &&
            (const char *)m < atomic_load(&fs_hi)) {
            atomic_fetch_add(&fs_late, 1);
        }
    }
    return real_lock(m);
}

int pthread_cond_wait(pthread_cond_t *cv, pthread_mutex_t *m)
{
    if (!real_cond_wait) {
        real_cond_wait = (cond_wait_fn)dlvsym(RTLD_NEXT, "pthread_cond_wait", "GLIBC_2.3.2");
    }
    if (fs_closer && atomic_load(&fs_armed) && atomic_load(&fs_mu) == NULL) {
        atomic_store(&fs_cv, cv);
        atomic_store(&fs_mu, m);
    }
    return real_cond_wait(cv, m);
}
#else
#define FORCED_SCHEDULE 0
#endif

#if FORCED_SCHEDULE
typedef struct leaver {
    rlock *l;
    rlock_status st;
    pthread_t th;
} leaver;

static void *leaver_main(void *arg)
{
    leaver *v = arg;
    fs_leaver = true;
    v->st = rlock_lock(v->l, RLOCK_WATCHDOG);
    return NULL;
}
#endif

Test(lifecycle, leaving_call_never_touches_a_freed_client)
{
#if !FORCED_SCHEDULE
    cr_skip_test("the forced schedule replaces pthread calls ThreadSanitizer wraps");
#else
    char *name = th_name("leave");
    rlock_client *a = th_client(NULL, 0);
    rlock *la;
    th_ok(rlock_new(a, name, &la));
    th_ok(rlock_lock(la, 60000));
    for (int round = 0; round < 3; round++) {
        rlock_client *b = th_client(NULL, 0);
        leaver v = {.st = RLOCK_EINVAL};
        th_ok(rlock_new(b, name, &v.l));
        uint64_t sent = stat_of(b, RLOCK_STAT_COMMANDS);
        cr_assert_eq(pthread_create(&v.th, NULL, leaver_main, &v), 0);
        /* Its attempt went out and it subscribed: it waits inside rlock_lock(). */
        cr_assert(TH_POLL(stat_of(b, RLOCK_STAT_COMMANDS) > sent, 3000));
        th_wait_waiters(0, name, 1, 3000);
        atomic_store(&fs_mu, NULL);
        atomic_store(&fs_freed, false);
        atomic_store(&fs_late, 0);
        atomic_store(&fs_forced, 0);
        atomic_store(&fs_lo, (const char *)b);
        atomic_store(&fs_hi, (const char *)b + sizeof(struct rlock_client));
        fs_closer = true;
        atomic_store(&fs_armed, true);
        rlock_client_free(b);
        atomic_store(&fs_freed, true);
        fs_closer = false;
        pthread_join(v.th, NULL);
        atomic_store(&fs_armed, false);
        th_assert_status(v.st, RLOCK_ECLOSED);
        cr_log_info("round %d: forced wake-ups %d, locks after the free %d", round,
                    atomic_load(&fs_forced), atomic_load(&fs_late));
        cr_assert(atomic_load(&fs_forced) > 0, "the schedule was not forced (round %d)", round);
        cr_assert_eq(atomic_load(&fs_late), 0,
                     "a call leaving rlock_lock() locked a mutex of the client after "
                     "rlock_client_free() returned (round %d)",
                     round);
        rlock_free(v.l);
    }
    th_ok(rlock_unlock(la));
    rlock_free(la);
    rlock_client_free(a);
    free(name);
#endif
}

/* The same race without a forced schedule, many times: threads blocked in
 * rlock_try_lock() all leave at once while the client is freed. Plain runs
 * rarely show it; AddressSanitizer and ThreadSanitizer builds do. */
typedef struct quick {
    rlock *l;
    rlock_status st;
    pthread_t th;
} quick;

static void *quick_main(void *arg)
{
    quick *q = arg;
    q->st = rlock_try_lock(q->l, 20000, 5000);
    return NULL;
}

Test(lifecycle, many_calls_leaving_while_the_client_is_freed)
{
    enum { ROUNDS = 20, THREADS = 8 };
    rlock_client *a = th_client(NULL, 0);
    char *names[THREADS];
    char chans[THREADS][512];
    rlock *la[THREADS];
    /* One lock per thread: a newcomer queued behind a local waiter of the
     * same lock would sleep without an attempt of its own. */
    for (int i = 0; i < THREADS; i++) {
        names[i] = th_name("leave-many");
        cr_assert(rlock_channel_name(names[i], chans[i], sizeof chans[i]) < sizeof chans[i]);
        th_ok(rlock_new(a, names[i], &la[i]));
        th_ok(rlock_lock(la[i], 60000));
    }
    for (int round = 0; round < ROUNDS; round++) {
        /* The previous round's subscriptions are gone. */
        for (int i = 0; i < THREADS; i++) {
            cr_assert(TH_POLL(th_numsub(0, chans[i]) == 0, 3000), "round %d", round);
        }
        rlock_client *b = th_client(NULL, 0);
        quick q[THREADS];
        for (int i = 0; i < THREADS; i++) {
            q[i].st = RLOCK_EINVAL;
            th_ok(rlock_new(b, names[i], &q[i].l));
            cr_assert_eq(pthread_create(&q[i].th, NULL, quick_main, &q[i]), 0);
        }
        /* Every lock's channel has b's subscriber: each thread is inside
         * its call, waiting. (A count of commands sent could not tell: one
         * thread's attempt, subscribe and second attempt count as much as
         * two threads' attempts, and a thread not yet in its call when the
         * client is freed calls a freed client, the test's own defect.) */
        for (int i = 0; i < THREADS; i++) {
            cr_assert(TH_POLL(th_numsub(0, chans[i]) >= 1, 3000), "round %d: thread %d waits",
                      round, i);
        }
        rlock_client_free(b);
        for (int i = 0; i < THREADS; i++) {
            pthread_join(q[i].th, NULL);
            th_assert_status(q[i].st, RLOCK_ECLOSED);
            rlock_free(q[i].l);
        }
    }
    for (int i = 0; i < THREADS; i++) {
        th_ok(rlock_unlock(la[i]));
        rlock_free(la[i]);
        free(names[i]);
    }
    rlock_client_free(a);
}

/* ---- item 4: fork() while a parent thread holds a client's mutex ------ */

typedef struct poller {
    rlock_client *c;
    atomic_bool stop;
    atomic_ullong polls;
    pthread_t th;
} poller;

static void *poller_main(void *arg)
{
    poller *p = arg;
    while (!atomic_load(&p->stop)) {
        uint64_t v;
        rlock_client_stat(p->c, RLOCK_STAT_HELD, &v);
        atomic_fetch_add(&p->polls, 1);
    }
    return NULL;
}

static void *takes_an_id(void *arg)
{
    (void)arg;
    rlock_thread_id();
    return NULL;
}

static int child_thread_exits(void *arg)
{
    rlock_client *c = arg;
    /* The thread's exit runs the library's thread-exit hook. */
    pthread_t t;
    if (pthread_create(&t, NULL, takes_an_id, NULL) != 0) {
        return 2;
    }
    pthread_join(t, NULL);
    rlock_client_free(c); /* the child's copy: memory only */
    return 0;
}

Test(lifecycle, forked_child_thread_exits_while_parent_polls_held)
{
    if (!TH_FORKED_CHILD_CAN_MAKE_CLIENTS) {
        cr_skip_test("a forked child cannot start threads under this sanitizer");
    }
    enum { HOLDS = 200, CHILDREN = 8 };
    rlock_client *c = th_client(NULL, 0);
    rlock *l[HOLDS];
    char *names[HOLDS];
    /* Many holds, so that counting them keeps the hold mutex locked most
     * of the time. */
    for (int i = 0; i < HOLDS; i++) {
        names[i] = th_name("fork-held");
        th_ok(rlock_new(c, names[i], &l[i]));
        th_ok(rlock_lock(l[i], 60000));
    }
    poller p = {.c = c};
    cr_assert_eq(pthread_create(&p.th, NULL, poller_main, &p), 0);
    cr_assert(TH_POLL(atomic_load(&p.polls) > 100, 2000));
    int hung = 0;
    for (int i = 0; i < CHILDREN; i++) {
        pid_t pid = th_fork(child_thread_exits, c);
        int rc = th_wait_bounded(pid, 5000);
        if (rc != 0) {
            cr_log_error("child %d: %s (%d)", i, rc < 0 ? "hung, killed" : "failed", rc);
            hung++;
        }
    }
    atomic_store(&p.stop, true);
    pthread_join(p.th, NULL);
    cr_assert_eq(hung, 0, "%d of %d children did not finish", hung, CHILDREN);
    for (int i = 0; i < HOLDS; i++) {
        th_ok(rlock_unlock(l[i]));
        rlock_free(l[i]);
        free(names[i]);
    }
    rlock_client_free(c);
}

/* ---- item 11: a report whose hold ended before delivery --------------- */

#define MAX_REPORTS 16

typedef struct reports {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool blocking; /* the first report blocks until released */
    bool released;
    bool first_entered;
    int n;
    char name[MAX_REPORTS][128];
    uint64_t tid[MAX_REPORTS];
} reports;

static void reports_init(reports *r, bool blocking)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->blocking = blocking;
}

static void on_report(const char *name, uint64_t tid, void *arg)
{
    reports *r = arg;
    pthread_mutex_lock(&r->mu);
    if (r->n < MAX_REPORTS) {
        snprintf(r->name[r->n], sizeof r->name[0], "%s", name);
        r->tid[r->n] = tid;
    }
    r->n++;
    if (r->blocking && !r->first_entered) {
        r->first_entered = true;
        pthread_cond_broadcast(&r->cv);
        while (!r->released) {
            pthread_cond_wait(&r->cv, &r->mu);
        }
    }
    pthread_mutex_unlock(&r->mu);
}

static int reports_count(reports *r)
{
    pthread_mutex_lock(&r->mu);
    int n = r->n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static bool reports_first_entered(reports *r)
{
    pthread_mutex_lock(&r->mu);
    bool e = r->first_entered;
    pthread_mutex_unlock(&r->mu);
    return e;
}

static void reports_release(reports *r)
{
    pthread_mutex_lock(&r->mu);
    r->released = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static int reports_of(reports *r, const char *name)
{
    int k = 0;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->n && i < MAX_REPORTS; i++) {
        k += strcmp(r->name[i], name) == 0;
    }
    pthread_mutex_unlock(&r->mu);
    return k;
}

Test(lifecycle, stale_lost_report_is_not_delivered)
{
    reports rep;
    reports_init(&rep, true);
    rlock_client *c = client_with(th_url(), 1500, 1000, on_report, &rep);
    char *nb = th_name("stale-block"), *na = th_name("stale-a"), *nc = th_name("stale-c");
    rlock *lb, *la, *lc;
    th_ok(rlock_new(c, nb, &lb));
    th_ok(rlock_new(c, na, &la));
    th_ok(rlock_new(c, nc, &lc));
    redisContext *r = th_redis(0);
    uint64_t me = rlock_thread_id();

    /* B's loss occupies the callback thread. */
    th_ok(rlock_lock(lb, RLOCK_WATCHDOG));
    th_run(r, "DEL %s", nb);
    cr_assert(TH_POLL(reports_first_entered(&rep), 3000), "B's loss was not reported");

    /* A's loss is found and queued behind it; then this thread learns of
     * the loss at its unlock and takes A again, validly. */
    th_ok(rlock_lock(la, RLOCK_WATCHDOG));
    th_run(r, "DEL %s", na);
    cr_assert(TH_POLL(stat_of(c, RLOCK_STAT_HELD) == 0, 3000), "A's loss was not found");
    th_assert_status(rlock_unlock(la), RLOCK_ELOST);
    th_ok(rlock_lock(la, RLOCK_WATCHDOG));

    /* C's loss is queued too, and C stays lost. */
    th_ok(rlock_lock(lc, RLOCK_WATCHDOG));
    th_run(r, "DEL %s", nc);
    cr_assert(TH_POLL(stat_of(c, RLOCK_STAT_HELD) == 1, 3000), "C's loss was not found");

    reports_release(&rep);
    cr_assert(TH_POLL(reports_of(&rep, nc) == 1, 3000), "C's report was not delivered");
    cr_assert_eq(reports_of(&rep, na), 0,
                 "the report of A's first hold was delivered while A is held again");
    cr_assert_eq(reports_count(&rep), 2, "reports delivered: %d", reports_count(&rep));
    pthread_mutex_lock(&rep.mu);
    cr_assert_eq(rep.tid[1], me);
    pthread_mutex_unlock(&rep.mu);

    /* The healthy hold of A is still ours and still renewed. */
    char *owner = th_owner(c, me);
    cr_assert_eq(th_hget_int(r, na, owner), 1);
    th_ok(rlock_unlock(la));
    th_assert_status(rlock_unlock(lc), RLOCK_ELOST);
    th_assert_status(rlock_unlock(lb), RLOCK_ELOST);
    rlock_free(la);
    rlock_free(lb);
    rlock_free(lc);
    rlock_client_free(c);
    redisFree(r);
    free(owner);
    free(na);
    free(nb);
    free(nc);
}

/* ---- item 19: a thread's exit among thousands of other holds ---------- */

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

typedef struct exiting {
    rlock_client *c;
    char *names[4];
    uint64_t tid;
    int64_t returned_us;
    rlock_status st;
} exiting;

static void *exiting_main(void *arg)
{
    exiting *e = arg;
    e->tid = rlock_thread_id();
    e->st = RLOCK_OK;
    for (int i = 0; i < 4 && e->st == RLOCK_OK; i++) {
        rlock *l;
        e->st = rlock_new(e->c, e->names[i], &l);
        if (e->st == RLOCK_OK) {
            /* Three watchdog holds, one with an explicit lease. */
            e->st = rlock_lock(l, i < 3 ? RLOCK_WATCHDOG : 30000);
            rlock_free(l);
        }
    }
    e->returned_us = now_us();
    return NULL;
}

Test(lifecycle, thread_exit_among_thousands_of_holds)
{
    enum { OTHERS = 2000 };
    reports rep;
    reports_init(&rep, false);
    rlock_client *c = client_with(th_url(), 30000, 3000, on_report, &rep);
    char *others = th_name("exit-other");
    size_t olen = strlen(others) + 16;
    rlock **l = calloc(OTHERS, sizeof *l);
    char *buf = malloc(olen);
    for (int i = 0; i < OTHERS; i++) {
        snprintf(buf, olen, "%s:%d", others, i);
        th_ok(rlock_new(c, buf, &l[i]));
        th_ok(rlock_lock(l[i], 60000));
    }
    exiting e = {.c = c};
    for (int i = 0; i < 4; i++) {
        e.names[i] = th_name("exit-own");
    }
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, exiting_main, &e), 0);
    pthread_join(t, NULL);
    int64_t exit_us = now_us() - e.returned_us;
    th_ok(e.st);
    cr_log_info("thread exit with %d other holds: %lld us (return to join)", OTHERS,
                (long long)exit_us);

    /* Its three watchdog holds are reported lost, the explicit one is not
     * (its lease ends it), and every other hold is still counted. */
    cr_assert(TH_POLL(reports_count(&rep) == 3, 3000), "reports: %d", reports_count(&rep));
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(reports_of(&rep, e.names[i]), 1, "%s reported %d times", e.names[i],
                     reports_of(&rep, e.names[i]));
    }
    cr_assert_eq(reports_of(&rep, e.names[3]), 0);
    pthread_mutex_lock(&rep.mu);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(rep.tid[i], e.tid);
    }
    pthread_mutex_unlock(&rep.mu);
    cr_assert_eq(stat_of(c, RLOCK_STAT_HELD), OTHERS);

    /* The exited thread's holds stay in Redis until their leases end (as
     * if the process had died); nothing of them is renewed. */
    redisContext *r = th_redis(0);
    char *owner = th_owner(c, e.tid);
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(th_hget_int(r, e.names[i], owner), 1);
        th_run(r, "DEL %s", e.names[i]);
    }
    for (int i = 0; i < OTHERS; i++) {
        th_ok(rlock_unlock(l[i]));
        rlock_free(l[i]);
    }
    cr_assert_eq(stat_of(c, RLOCK_STAT_HELD), 0);
    rlock_client_free(c);
    redisFree(r);
    for (int i = 0; i < 4; i++) {
        free(e.names[i]);
    }
    free(owner);
    free(buf);
    free(others);
    free(l);
}

/* ---- on a private server: stalls ------------------------------------- */

static th_server srv;
static char *srv_url;

static void srv_setup(void)
{
    th_server_start(&srv);
    srv_url = th_server_url(&srv);
}

static void srv_teardown(void)
{
    th_server_stop(&srv);
    free(srv_url);
}

TestSuite(lifecycle_stalled, .init = srv_setup, .fini = srv_teardown, .timeout = 120);

/* DEBUG SLEEP on its own connection, from a thread. */
typedef struct sleeper {
    const char *seconds;
    pthread_t th;
} sleeper;

static void *sleeper_main(void *arg)
{
    sleeper *s = arg;
    struct timeval tv = {20, 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", srv.port, tv);
    if (r && !r->err) {
        redisSetTimeout(r, tv);
        redisReply *rep = redisCommand(r, "DEBUG SLEEP %s", s->seconds);
        if (rep) {
            freeReplyObject(rep);
        }
    }
    if (r) {
        redisFree(r);
    }
    return NULL;
}

static void stall(sleeper *s, const char *seconds)
{
    s->seconds = seconds;
    cr_assert_eq(pthread_create(&s->th, NULL, sleeper_main, s), 0);
    th_wait_stalled(srv.port, 1000);
}

/* ---- item 12: a thread exits with an acquire in doubt ----------------- */

typedef struct doubter {
    rlock *l;
    uint64_t tid;
    rlock_status st;
} doubter;

static void *doubter_main(void *arg)
{
    doubter *d = arg;
    d->tid = rlock_thread_id();
    d->st = rlock_try_lock(d->l, 0, 20000);
    return NULL;
}

Test(lifecycle_stalled, exited_thread_doubtful_acquire_is_released_at_free)
{
    char *name = th_name("exit-doubt");
    rlock_client *c = client_with(srv_url, 1500, 300, NULL, NULL);
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, 1000)); /* connect and load the scripts first */
    th_ok(rlock_unlock(l));

    sleeper s;
    stall(&s, "2");
    doubter d = {.l = l, .st = RLOCK_EINVAL};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, doubter_main, &d), 0);
    pthread_join(t, NULL); /* the thread has exited */
    th_assert_status(d.st, RLOCK_ETIMEDOUT);
    pthread_join(s.th, NULL);

    /* The acquire waited in the sleeping server's socket buffer and may
     * run once it wakes up: a hold the exited thread never knew it had.
     * The watchdog settles it as soon as Redis answers (since it does so
     * for exited threads), the free at the latest: never its 20 s lease. */
    redisContext *r = th_redis(srv.port);
    rlock_free(l);
    rlock_client_free(c);
    cr_assert_eq(th_exists(r, name), 0, "the late acquire of an exited thread is still held "
                                        "after rlock_client_free() (PTTL %lld)",
                 th_pttl(r, name));
    redisFree(r);
    free(name);
}

/* ---- item 13: a loss found while the client closes -------------------- */

Test(lifecycle_stalled, loss_found_during_free_is_delivered)
{
    reports rep;
    reports_init(&rep, false);
    /* The unlock below is tried twice, each for command_timeout_ms: the
     * first stall outlasts both, so it ends in doubt. */
    rlock_client *c = client_with(srv_url, 1500, 1000, on_report, &rep);
    char *nb = th_name("close-doubt"), *na = th_name("close-lost");
    rlock *lb, *la;
    th_ok(rlock_new(c, nb, &lb));
    th_ok(rlock_new(c, na, &la));
    th_ok(rlock_lock(lb, 30000));
    sleeper s;
    stall(&s, "3");
    th_assert_status(rlock_unlock(lb), RLOCK_ETIMEDOUT);
    pthread_join(s.th, NULL);
    th_wait_awake(srv.port, 3000);

    /* A watchdog hold, then a stall that the free's settling of B waits
     * through (about 2 x command_timeout_ms); meanwhile the watchdog finds
     * that A can no longer be confirmed and reports it. */
    th_ok(rlock_lock(la, RLOCK_WATCHDOG));
    redisContext *r = th_redis(srv.port);
    th_wait_renewal(r, na, 3000);
    stall(&s, "4");
    int64_t t0 = th_now_ms();
    rlock_free(la);
    rlock_free(lb);
    rlock_client_free(c);
    int64_t took = th_now_ms() - t0;
    int n = reports_count(&rep);
    cr_log_info("rlock_client_free took %lld ms; reports delivered: %d", (long long)took, n);
    cr_assert(took > 1500, "the free did not wait for the stalled server (%lld ms): the "
                           "loss was not found during it",
              (long long)took);
    cr_assert_eq(reports_of(&rep, na), 1,
                 "the loss of %s found during rlock_client_free() was not delivered", na);
    pthread_join(s.th, NULL);
    redisFree(r);
    free(na);
    free(nb);
}
