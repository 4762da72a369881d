/* The fair lock (Redisson getFairLock) and its non-reentrant form against a
 * real Redis: the hash, the queue (redisson_lock_queue:{N}) and the
 * deadlines (redisson_lock_timeout:{N}) after each step, FIFO order across
 * threads and processes, only the queue's head woken (on its own channel),
 * waiters that give up, die, or are purged, holds and waiters written by
 * hand in Redisson's format, renewal, loss, force unlock, wrong kinds. */
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "internal.h" /* the kind's table: one attempt, abandon, by request id */
#include "proxy.h"

static redisContext *r;

static void setup(void)
{
    r = th_redis(0);
}

static void teardown(void)
{
    redisFree(r);
}

TestSuite(fair, .init = setup, .fini = teardown, .timeout = 120);

/* ---- helpers ----------------------------------------------------------- */

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static char *qkey(const char *name)
{
    char *s = NULL;
    cr_assert(asprintf(&s, "redisson_lock_queue:{%s}", name) > 0);
    return s;
}

static char *tkey(const char *name)
{
    char *s = NULL;
    cr_assert(asprintf(&s, "redisson_lock_timeout:{%s}", name) > 0);
    return s;
}

/* A waiter's own channel: redisson_lock__channel:{N}:<owner>. */
static char *own_channel(const char *name, const char *owner)
{
    char *s = NULL;
    cr_assert(asprintf(&s, "redisson_lock__channel:{%s}:%s", name, owner) > 0);
    return s;
}

static long long llen(const char *key)
{
    redisReply *rep = th_cmd(r, "LLEN %s", key);
    long long n = rep->integer;
    freeReplyObject(rep);
    return n;
}

static long long zcard(const char *key)
{
    redisReply *rep = th_cmd(r, "ZCARD %s", key);
    long long n = rep->integer;
    freeReplyObject(rep);
    return n;
}

/* ZSCORE key member as an integer; -1 when absent. */
static long long zscore(const char *key, const char *member)
{
    redisReply *rep = th_cmd(r, "ZSCORE %s %s", key, member);
    long long v = rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : -1;
    freeReplyObject(rep);
    return v;
}

/* Element i of the list (LINDEX); a malloc'd copy, NULL when absent. */
static char *lindex(const char *key, long i)
{
    redisReply *rep = th_cmd(r, "LINDEX %s %ld", key, i);
    char *s = rep->type == REDIS_REPLY_STRING ? strdup(rep->str) : NULL;
    freeReplyObject(rep);
    return s;
}

static bool list_is(const char *key, const char *const *want, size_t n)
{
    redisReply *rep = th_cmd(r, "LRANGE %s 0 -1", key);
    bool ok = rep->type == REDIS_REPLY_ARRAY && rep->elements == n;
    for (size_t i = 0; ok && i < n; i++) {
        ok = strcmp(rep->element[i]->str, want[i]) == 0;
    }
    freeReplyObject(rep);
    return ok;
}

/* A pattern subscriber's next message: its channel and payload (malloc'd),
 * false after th_ms(timeout_ms) without one. */
static bool next_pmessage(redisContext *sub, int timeout_ms, char **channel, char **payload)
{
    int64_t deadline = th_now_ms() + th_ms(timeout_ms);
    for (;;) {
        void *rep = NULL;
        if (redisGetReplyFromReader(sub, &rep) != REDIS_OK) {
            return false;
        }
        if (rep) {
            redisReply *m = rep;
            bool ok = m->type == REDIS_REPLY_ARRAY && m->elements == 4 &&
                      strcmp(m->element[0]->str, "pmessage") == 0;
            if (ok) {
                *channel = strdup(m->element[2]->str);
                *payload = strdup(m->element[3]->str);
            }
            freeReplyObject(rep);
            if (ok) {
                return true;
            }
            continue;
        }
        int64_t left = deadline - th_now_ms();
        if (left <= 0) {
            return false;
        }
        struct pollfd pfd = {sub->fd, POLLIN, 0};
        if (poll(&pfd, 1, (int)left) <= 0 || redisBufferRead(sub) != REDIS_OK) {
            return false;
        }
    }
}

static rlock_client *fair_client(int64_t fair_wait_ms, int64_t watchdog_ms)
{
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = th_url();
    cfg.fair_wait_timeout_ms = fair_wait_ms;
    cfg.watchdog_timeout_ms = watchdog_ms;
    return th_client_cfg(&cfg);
}

/* A waiting thread: rlock_lock_ex(wait_ms, lease, cancel) on a fair handle
 * (or its non-reentrant form), then, holding, waits for the test's go
 * (release) and unlocks. */
typedef struct fw {
    rlock_client *c;
    const char *name;
    bool nonreentrant;
    int64_t wait_ms;
    int64_t lease_ms; /* 0: RLOCK_WATCHDOG */
    rlock_cancel *cancel;
    int *order_counter; /* shared by a test's waiters */
    /* results */
    uint64_t tid; /* atomic: set once the thread runs */
    rlock_status st, unlock_st;
    int64_t holder_ttl;
    int64_t got_at; /* th_now_ms() when rlock_lock_ex() returned */
    int order;      /* atomic: 1, 2, ...: its place among the acquisitions */
    bool got;       /* atomic: it holds the lock */
    bool release;   /* atomic: the test lets it unlock */
    bool done;      /* atomic */
    pthread_t th;
} fw;

static void *fw_main(void *arg)
{
    fw *w = arg;
    rlock *l;
    th_ok(w->nonreentrant ? rlock_new_fair_nonreentrant(w->c, w->name, &l)
                          : rlock_new_fair(w->c, w->name, &l));
    __atomic_store_n(&w->tid, rlock_thread_id(), __ATOMIC_RELEASE);
    w->holder_ttl = -3;
    w->st = rlock_lock_ex(l, w->wait_ms, w->lease_ms ? w->lease_ms : RLOCK_WATCHDOG, w->cancel,
                          &w->holder_ttl);
    w->got_at = th_now_ms();
    if (w->st == RLOCK_OK) {
        if (w->order_counter) {
            __atomic_store_n(&w->order, __atomic_add_fetch(w->order_counter, 1, __ATOMIC_ACQ_REL),
                             __ATOMIC_RELEASE);
        }
        __atomic_store_n(&w->got, true, __ATOMIC_RELEASE);
        while (!__atomic_load_n(&w->release, __ATOMIC_ACQUIRE)) {
            th_sleep_ms(2);
        }
        w->unlock_st = rlock_unlock(l);
    }
    rlock_free(l);
    __atomic_store_n(&w->done, true, __ATOMIC_RELEASE);
    return NULL;
}

static void fw_start(fw *w)
{
    cr_assert_eq(pthread_create(&w->th, NULL, fw_main, w), 0);
}

/* The waiter's owner id, once its thread runs (caller frees). */
static char *fw_owner(fw *w)
{
    uint64_t tid = 0;
    cr_assert(TH_POLL((tid = __atomic_load_n(&w->tid, __ATOMIC_ACQUIRE)) != 0, 3000));
    return th_owner(w->c, tid);
}

static bool fw_done(fw *w)
{
    return __atomic_load_n(&w->done, __ATOMIC_ACQUIRE);
}

static bool fw_got(fw *w)
{
    return __atomic_load_n(&w->got, __ATOMIC_ACQUIRE);
}

static int fw_order(fw *w)
{
    return __atomic_load_n(&w->order, __ATOMIC_ACQUIRE);
}

static void fw_release(fw *w)
{
    __atomic_store_n(&w->release, true, __ATOMIC_RELEASE);
}

static void fw_join(fw *w)
{
    fw_release(w);
    pthread_join(w->th, NULL);
}

/* Waits until owner is at position pos of the queue. */
static void wait_queued(const char *q, long pos, const char *owner)
{
    bool ok = TH_POLL(({
                          char *s = lindex(q, pos);
                          bool eq = s && strcmp(s, owner) == 0;
                          free(s);
                          eq;
                      }),
                      3000);
    cr_assert(ok, "%s is not at position %ld of %s", owner, pos, q);
}

/* ---- layout ------------------------------------------------------------ */

Test(fair, layout_after_lock_reentry_queue_partial_and_full_unlock)
{
    rlock_client *c = fair_client(0, 0);
    char *name = th_name("fair-layout");
    char *q = qkey(name), *t = tkey(name);
    rlock *l;
    th_ok(rlock_new_fair(c, name, &l));
    cr_assert_str_eq(rlock_kind(l), "fair");
    char *me = th_owner(c, rlock_thread_id());

    /* First acquisition: HSET owner 1, a 30 s lease, no queue. */
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    cr_assert_eq(th_hget_int(r, name, me), 1);
    cr_assert_eq(th_hlen(r, name), 1);
    long long ttl = th_pttl(r, name);
    cr_assert(ttl > 25000 && ttl <= 30000, "watchdog lease 30 s, got %lld", ttl);
    cr_assert_eq(th_exists(r, q), 0);
    cr_assert_eq(th_exists(r, t), 0);
    /* Re-entry: HINCRBY. */
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    cr_assert_eq(th_hget_int(r, name, me), 2);
    int64_t n = 0;
    th_ok(rlock_hold_count(l, &n));
    cr_assert_eq(n, 2);

    /* Two waiters: slot 10 s (their wait), then the default 300 s. */
    int order = 0;
    fw w1 = {.c = c, .name = name, .wait_ms = 10000, .order_counter = &order};
    fw w2 = {.c = c, .name = name, .wait_ms = RLOCK_WAIT_FOREVER, .order_counter = &order};
    int64_t before = wall_ms();
    fw_start(&w1);
    char *o1 = fw_owner(&w1);
    wait_queued(q, 0, o1);
    int64_t after = wall_ms();
    fw_start(&w2);
    char *o2 = fw_owner(&w2);
    wait_queued(q, 1, o2);
    const char *both[2] = {o1, o2};
    cr_assert(list_is(q, both, 2), "queue = [w1, w2]");
    cr_assert_eq(zcard(t), 2);
    long long s1 = zscore(t, o1), s2 = zscore(t, o2);
    /* Redisson's deadlines: the head's is now + the lock's PTTL + its slot,
     * each later one the previous one's + its own slot. */
    cr_assert(s1 >= before + 25000 + 10000 && s1 <= after + 30000 + 10000,
              "head's deadline %lld not in [%lld, %lld]", s1, (long long)before + 35000,
              (long long)after + 40000);
    cr_assert_eq(s2, s1 + 300000, "second deadline = first + its slot");

    /* Partial unlock: count 1, lease reset, queue untouched. */
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_hget_int(r, name, me), 1);
    cr_assert(th_pttl(r, name) > 25000);
    cr_assert(list_is(q, both, 2));
    cr_assert_eq(zscore(t, o1), s1);
    cr_assert(!fw_got(&w1));

    /* Full unlock: the head takes it, and leaves the queue; everybody
     * behind moves one slot (the taker's: 10 s) forward. */
    th_ok(rlock_unlock(l));
    cr_assert(TH_POLL(fw_order(&w1) == 1, 1000), "the head acquires within 1 s");
    cr_assert_eq(th_hget_int(r, name, o1), 1);
    cr_assert_eq(th_hlen(r, name), 1);
    const char *one[1] = {o2};
    cr_assert(list_is(q, one, 1), "queue = [w2]");
    cr_assert_eq(zcard(t), 1);
    cr_assert_eq(zscore(t, o2), s2 - 10000, "w2's deadline moved one slot (10 s) forward");
    cr_assert(!fw_got(&w2));

    fw_release(&w1);
    cr_assert(TH_POLL(fw_order(&w2) == 2, 1000), "the next head acquires within 1 s");
    cr_assert_eq(th_exists(r, q), 0, "queue empty: key gone");
    cr_assert_eq(th_exists(r, t), 0);
    fw_join(&w1);
    fw_join(&w2);
    th_ok(w1.unlock_st);
    th_ok(w2.unlock_st);
    cr_assert_eq(th_exists(r, name), 0);

    free(o1);
    free(o2);
    free(me);
    free(q);
    free(t);
    rlock_free(l);
    free(name);
    rlock_client_free(c);
}

/* ---- FIFO -------------------------------------------------------------- */

Test(fair, waiting_threads_acquire_in_fifo_order)
{
    rlock_client *c = fair_client(0, 0);
    char *name = th_name("fair-fifo");
    char *q = qkey(name);
    rlock *l;
    th_ok(rlock_new_fair(c, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    int order = 0;
    fw w[3];
    char *o[3];
    for (int i = 0; i < 3; i++) {
        w[i] = (fw){.c = c, .name = name, .wait_ms = RLOCK_WAIT_FOREVER, .order_counter = &order};
        fw_start(&w[i]);
        o[i] = fw_owner(&w[i]);
        wait_queued(q, i, o[i]);
    }
    int64_t released = th_now_ms();
    th_ok(rlock_unlock(l));
    for (int i = 0; i < 3; i++) {
        cr_assert(TH_POLL(fw_order(&w[i]) > 0, 1000), "waiter %d acquires within 1 s", i);
        cr_assert_eq(fw_order(&w[i]), i + 1, "waiter %d acquired in place %d", i, fw_order(&w[i]));
        cr_assert(w[i].got_at - released < th_ms(1000));
        for (int j = i + 1; j < 3; j++) {
            cr_assert(!fw_got(&w[j]), "waiter %d is not let in before %d", j, i);
        }
        released = th_now_ms();
        fw_join(&w[i]);
        th_ok(w[i].unlock_st);
        free(o[i]);
    }
    cr_assert_eq(th_exists(r, q), 0);
    cr_assert_eq(th_exists(r, name), 0);
    free(q);
    rlock_free(l);
    free(name);
    rlock_client_free(c);
}

/* A forked child with its own client queues on the name, then, holding
 * it, appends its number to a list and unlocks. */
typedef struct child_arg {
    const char *name;
    const char *log;
    int index;
} child_arg;

static int child_waiter(void *arg)
{
    child_arg *a = arg;
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = th_url();
    rlock_client *c = NULL;
    if (rlock_client_new(&cfg, &c) != RLOCK_OK) {
        return 10;
    }
    rlock *l;
    if (rlock_new_fair(c, a->name, &l) != RLOCK_OK) {
        return 11;
    }
    if (rlock_lock(l, RLOCK_WATCHDOG) != RLOCK_OK) {
        return 12;
    }
    redisContext *x = th_redis(0);
    redisReply *rep = redisCommand(x, "RPUSH %s %d", a->log, a->index);
    int rc = rep && rep->type == REDIS_REPLY_INTEGER ? 0 : 13;
    if (rep) {
        freeReplyObject(rep);
    }
    redisFree(x);
    if (rlock_unlock(l) != RLOCK_OK) {
        rc = 14;
    }
    rlock_free(l);
    rlock_client_free(c);
    return rc;
}

/* What the parent of the forked waiters holds while they run: kept at file
 * scope, so that a child (which exits without freeing its copy) still
 * reaches it, and valgrind's check at the child's exit counts none of it
 * lost. */
static struct {
    rlock_client *c;
    rlock *l;
    char *name, *q, *log;
    redisContext *x;
} forked;

Test(fair, waiting_processes_acquire_in_fifo_order)
{
    if (!TH_FORKED_CHILD_CAN_MAKE_CLIENTS) {
        cr_skip_test("a fork()ed child cannot make a client under this sanitizer");
    }
    forked.c = fair_client(0, 0);
    forked.name = th_name("fair-procs");
    forked.q = qkey(forked.name);
    cr_assert(asprintf(&forked.log, "%s:log", forked.name) > 0);
    th_ok(rlock_new_fair(forked.c, forked.name, &forked.l));
    th_ok(rlock_lock(forked.l, RLOCK_WATCHDOG));
    enum { N = 4 };
    pid_t pid[N];
    static child_arg a[N];
    for (int i = 0; i < N; i++) {
        a[i] = (child_arg){forked.name, forked.log, i};
        pid[i] = th_fork(child_waiter, &a[i]);
        /* The next child starts once this one is queued. */
        cr_assert(TH_POLL(llen(forked.q) == i + 1, 5000), "child %d queued", i);
    }
    th_ok(rlock_unlock(forked.l));
    for (int i = 0; i < N; i++) {
        cr_assert_eq(th_wait_bounded(pid[i], 10000), 0, "child %d", i);
    }
    redisReply *rep = th_cmd(r, "LRANGE %s 0 -1", forked.log);
    cr_assert_eq(rep->elements, (size_t)N);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(atoi(rep->element[i]->str), i, "place %d went to child %s", i,
                     rep->element[i]->str);
    }
    freeReplyObject(rep);
    cr_assert_eq(th_exists(r, forked.q), 0);
    cr_assert_eq(th_exists(r, forked.name), 0);
    th_run(r, "DEL %s", forked.log);
    free(forked.log);
    free(forked.q);
    rlock_free(forked.l);
    free(forked.name);
    rlock_client_free(forked.c);
}

/* ---- only the head is woken ------------------------------------------- */

Test(fair, release_wakes_only_the_head_on_its_own_channel)
{
    rlock_client *c = fair_client(0, 0);
    char *name = th_name("fair-head");
    char *q = qkey(name);
    char *base = th_channel(name);
    char *pattern = NULL;
    cr_assert(asprintf(&pattern, "redisson_lock__channel:{%s}*", name) > 0);
    redisContext *sub = th_psubscribe(0, pattern);
    rlock *l;
    th_ok(rlock_new_fair(c, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    int order = 0;
    fw w[3];
    char *o[3];
    for (int i = 0; i < 3; i++) {
        w[i] = (fw){.c = c, .name = name, .wait_ms = RLOCK_WAIT_FOREVER, .order_counter = &order};
        fw_start(&w[i]);
        o[i] = fw_owner(&w[i]);
        wait_queued(q, i, o[i]);
        char *ch = own_channel(name, o[i]);
        th_wait_numsub(0, ch, 1, 3000); /* its own channel, subscribed */
        free(ch);
    }
    cr_assert_eq(th_numsub(0, base), 0, "no fair waiter listens on the lock's base channel");
    th_ok(rlock_unlock(l));
    for (int i = 0; i < 3; i++) {
        char *ch = NULL, *msg = NULL;
        cr_assert(next_pmessage(sub, 1000, &ch, &msg), "release %d published", i);
        char *want = own_channel(name, o[i]);
        cr_assert_str_eq(ch, want, "release %d woke %s", i, ch);
        cr_assert_str_eq(msg, "0");
        free(want);
        free(ch);
        free(msg);
        cr_assert(TH_POLL(fw_order(&w[i]) > 0, 1000));
        /* Exactly one message per release: nothing else until the holder
         * releases. */
        cr_assert(!next_pmessage(sub, 200, &ch, &msg), "a second message: %s", ch);
        fw_join(&w[i]);
    }
    /* The last holder's release found nobody queued: no message at all. */
    char *ch = NULL, *msg = NULL;
    cr_assert(!next_pmessage(sub, 200, &ch, &msg), "message with nobody queued: %s", ch);
    for (int i = 0; i < 3; i++) {
        free(o[i]);
    }
    redisFree(sub);
    free(pattern);
    free(base);
    free(q);
    rlock_free(l);
    free(name);
    rlock_client_free(c);
}

/* ---- giving up --------------------------------------------------------- */

Test(fair, waiter_whose_wait_runs_out_leaves_and_later_deadlines_shrink)
{
    rlock_client *c = fair_client(0, 0);
    char *name = th_name("fair-timeout");
    char *q = qkey(name), *t = tkey(name);
    rlock *l;
    th_ok(rlock_new_fair(c, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    int64_t wait = 1500;
    fw w1 = {.c = c, .name = name, .wait_ms = wait};
    fw w2 = {.c = c, .name = name, .wait_ms = RLOCK_WAIT_FOREVER};
    fw_start(&w1);
    char *o1 = fw_owner(&w1);
    wait_queued(q, 0, o1);
    fw_start(&w2);
    char *o2 = fw_owner(&w2);
    wait_queued(q, 1, o2);
    long long s2 = zscore(t, o2);
    cr_assert_eq(s2, zscore(t, o1) + 300000);
    cr_assert(TH_POLL(fw_done(&w1), 1500 + 3000));
    th_assert_status(w1.st, RLOCK_EBUSY);
    cr_assert(w1.holder_ttl > 0 && w1.holder_ttl <= 30000, "holder_ttl %lld",
              (long long)w1.holder_ttl);
    const char *one[1] = {o2};
    cr_assert(list_is(q, one, 1), "w1 left the queue");
    cr_assert_eq(zscore(t, o1), -1);
    cr_assert_eq(zscore(t, o2), s2 - wait, "w2's deadline moved w1's slot forward");
    th_ok(rlock_unlock(l));
    cr_assert(TH_POLL(fw_got(&w2), 1000));
    fw_join(&w1);
    fw_join(&w2);
    th_ok(w2.st);
    cr_assert_eq(th_exists(r, q), 0);
    cr_assert_eq(th_exists(r, t), 0);
    free(o1);
    free(o2);
    free(q);
    free(t);
    rlock_free(l);
    free(name);
    rlock_client_free(c);
}

Test(fair, cancelled_waiter_leaves_and_later_deadlines_shrink)
{
    int64_t slot = 60000;
    rlock_client *c = fair_client(slot, 0);
    char *name = th_name("fair-cancel");
    char *q = qkey(name), *t = tkey(name);
    rlock *l;
    th_ok(rlock_new_fair(c, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    rlock_cancel *tok;
    th_ok(rlock_cancel_new(&tok));
    fw w1 = {.c = c, .name = name, .wait_ms = RLOCK_WAIT_FOREVER, .cancel = tok};
    fw w2 = {.c = c, .name = name, .wait_ms = RLOCK_WAIT_FOREVER};
    fw w3 = {.c = c, .name = name, .wait_ms = RLOCK_WAIT_FOREVER};
    fw_start(&w1);
    char *o1 = fw_owner(&w1);
    wait_queued(q, 0, o1);
    fw_start(&w2);
    char *o2 = fw_owner(&w2);
    wait_queued(q, 1, o2);
    fw_start(&w3);
    char *o3 = fw_owner(&w3);
    wait_queued(q, 2, o3);
    long long s1 = zscore(t, o1), s2 = zscore(t, o2), s3 = zscore(t, o3);
    cr_assert_eq(s2, s1 + slot);
    cr_assert_eq(s3, s2 + slot);
    int64_t fired = th_now_ms();
    rlock_cancel_fire(tok);
    cr_assert(TH_POLL(fw_done(&w1), 1000), "the cancelled waiter returns at once");
    th_assert_status(w1.st, RLOCK_ECANCELED);
    cr_assert(th_now_ms() - fired < th_ms(1000));
    const char *left[2] = {o2, o3};
    cr_assert(list_is(q, left, 2), "w1 left the queue");
    cr_assert_eq(zscore(t, o1), -1);
    cr_assert_eq(zscore(t, o2), s2 - slot);
    cr_assert_eq(zscore(t, o3), s3 - slot);
    th_ok(rlock_unlock(l));
    cr_assert(TH_POLL(fw_got(&w2), 1000));
    fw_join(&w2);
    cr_assert(TH_POLL(fw_got(&w3), 1000));
    fw_join(&w3);
    fw_join(&w1);
    cr_assert_eq(th_exists(r, q), 0);
    rlock_cancel_free(tok);
    free(o1);
    free(o2);
    free(o3);
    free(q);
    free(t);
    rlock_free(l);
    free(name);
    rlock_client_free(c);
}

/* A waiting thread on its own client that, once its wait has ended, waits
 * for the test's go and makes one more call on the name: an unlock. */
typedef struct gw {
    rlock_client *c;
    const char *name;
    rlock_cancel *cancel;
    uint64_t tid;             /* atomic */
    rlock_status st, next_st; /* the wait's, the unlock's */
    char next_err[256];       /* rlock_last_error() of the unlock */
    int64_t next_ms;          /* how long the unlock took */
    bool waited, go, done;    /* atomic */
    bool no_call;             /* go: free the handle only (the client is gone) */
    pthread_t th;
} gw;

static void *gw_main(void *arg)
{
    gw *g = arg;
    rlock *l;
    th_ok(rlock_new_fair(g->c, g->name, &l));
    __atomic_store_n(&g->tid, rlock_thread_id(), __ATOMIC_RELEASE);
    g->st = rlock_lock_ex(l, RLOCK_WAIT_FOREVER, 30000, g->cancel, NULL);
    __atomic_store_n(&g->waited, true, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&g->go, __ATOMIC_ACQUIRE)) {
        th_sleep_ms(2);
    }
    if (!g->no_call) {
        int64_t t0 = th_now_ms();
        g->next_st = rlock_unlock(l);
        g->next_ms = th_now_ms() - t0;
        snprintf(g->next_err, sizeof g->next_err, "%s", rlock_last_error());
    }
    rlock_free(l);
    __atomic_store_n(&g->done, true, __ATOMIC_RELEASE);
    return NULL;
}

/* Common part: H holds the lock; A (through the proxy px, waiting in a
 * thread of its own, slot `slot`) heads the queue and B (direct) waits
 * behind; the link of A goes silent and A's wait is cancelled, so its
 * give-up gets no answer; the link comes back. A's place is still there. */
static void give_up_lost(tp_proxy *px, rlock_client *ca, const char *name, rlock_cancel *tok,
                         gw *a, fw *b, char **ao, char **bo)
{
    char *q = qkey(name);
    a->c = ca;
    a->name = name;
    a->cancel = tok;
    cr_assert_eq(pthread_create(&a->th, NULL, gw_main, a), 0);
    uint64_t tid = 0;
    cr_assert(TH_POLL((tid = __atomic_load_n(&a->tid, __ATOMIC_ACQUIRE)) != 0, 3000));
    *ao = th_owner(ca, tid);
    wait_queued(q, 0, *ao);
    fw_start(b);
    *bo = fw_owner(b);
    wait_queued(q, 1, *bo);
    tp_mute(px, true);
    rlock_cancel_fire(tok);
    cr_assert(TH_POLL(__atomic_load_n(&a->waited, __ATOMIC_ACQUIRE), 5000));
    th_assert_status(a->st, RLOCK_ECANCELED);
    tp_mute(px, false);
    /* The link is back once A's client answers again: a connect tried
     * while it was silent (slow runs: valgrind) leaves the pool backing
     * off, and a call then fails at once without sending anything. */
    rlock *probe;
    th_ok(rlock_new(ca, "fair-giveup-probe", &probe));
    bool locked;
    cr_assert(TH_POLL(rlock_is_locked(probe, &locked) == RLOCK_OK, 5000), "the link is back");
    rlock_free(probe);
    const char *both[2] = {*ao, *bo};
    cr_assert(list_is(q, both, 2), "the give-up got through (or the waiters moved)");
    free(q);
}

/* The thread whose give-up got no answer sends it again on its next call
 * on the name, before anything else: it leaves the queue once, and the
 * waiter behind moves its slot forward, exactly as the give-up would have
 * done (the fair abandon would leave the deadlines behind as they are).
 * The holder's release then goes to that waiter at once. */
Test(fair, give_up_without_an_answer_is_sent_again_by_the_threads_next_call)
{
    int64_t slot = 60000;
    tp_proxy *px = tp_new(th_port());
    cr_assert(px != NULL && tp_start(px) == 0);
    char purl[64];
    snprintf(purl, sizeof purl, "redis://127.0.0.1:%d", tp_port(px));
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = purl;
    cfg.command_timeout_ms = th_ms(1000);
    cfg.fair_wait_timeout_ms = slot;
    rlock_client *ca = th_client_cfg(&cfg);
    rlock_client *c = fair_client(slot, 0);
    char *name = th_name("fair-giveup-next");
    char *q = qkey(name), *t = tkey(name);
    rlock *h;
    th_ok(rlock_new_fair(c, name, &h));
    th_ok(rlock_lock(h, 30000));
    rlock_cancel *tok;
    th_ok(rlock_cancel_new(&tok));
    gw a = {0};
    fw b = {.c = c, .name = name, .wait_ms = th_ms(20000), .lease_ms = 30000};
    char *ao, *bo;
    give_up_lost(px, ca, name, tok, &a, &b, &ao, &bo);
    long long sb = zscore(t, bo);
    __atomic_store_n(&a.go, true, __ATOMIC_RELEASE);
    cr_assert(TH_POLL(__atomic_load_n(&a.done, __ATOMIC_ACQUIRE), 5000));
    cr_assert_eq(a.next_st, RLOCK_ENOTOWNER, "the next call: %s after %lld ms (%s)",
                 rlock_status_name(a.next_st), (long long)a.next_ms, a.next_err);
    const char *one[1] = {bo};
    cr_assert(list_is(q, one, 1), "the give-up was not sent again");
    cr_assert_eq(zscore(t, ao), -1);
    cr_assert_eq(zscore(t, bo), sb - slot, "the waiter behind moved one slot forward");
    int64_t released = th_now_ms();
    th_ok(rlock_unlock(h));
    cr_assert(TH_POLL(fw_got(&b), 1000), "B was not woken by the release");
    cr_assert(th_now_ms() - released < th_ms(1000));
    fw_join(&b);
    th_ok(b.st);
    pthread_join(a.th, NULL);
    cr_assert_eq(th_exists(r, q), 0);
    cr_assert_eq(th_exists(r, t), 0);
    rlock_cancel_free(tok);
    free(ao);
    free(bo);
    free(q);
    free(t);
    rlock_free(h);
    free(name);
    rlock_client_free(ca);
    rlock_client_free(c);
    tp_free(px);
}

/* The same give-up in doubt, its thread alive and silent: the client's
 * close sends it again (as it settles an acquire in doubt). */
Test(fair, give_up_without_an_answer_is_sent_again_by_the_close)
{
    int64_t slot = 60000;
    tp_proxy *px = tp_new(th_port());
    cr_assert(px != NULL && tp_start(px) == 0);
    char purl[64];
    snprintf(purl, sizeof purl, "redis://127.0.0.1:%d", tp_port(px));
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = purl;
    cfg.command_timeout_ms = th_ms(1000);
    cfg.fair_wait_timeout_ms = slot;
    rlock_client *ca = th_client_cfg(&cfg);
    rlock_client *c = fair_client(slot, 0);
    char *name = th_name("fair-giveup-close");
    char *q = qkey(name), *t = tkey(name);
    rlock *h;
    th_ok(rlock_new_fair(c, name, &h));
    th_ok(rlock_lock(h, 30000));
    rlock_cancel *tok;
    th_ok(rlock_cancel_new(&tok));
    gw a = {0};
    fw b = {.c = c, .name = name, .wait_ms = th_ms(20000), .lease_ms = 30000};
    char *ao, *bo;
    give_up_lost(px, ca, name, tok, &a, &b, &ao, &bo);
    long long sb = zscore(t, bo);
    rlock_client_free(ca); /* A's thread is alive, between two calls */
    const char *one[1] = {bo};
    cr_assert(list_is(q, one, 1), "the close did not send the give-up again");
    cr_assert_eq(zscore(t, bo), sb - slot);
    th_ok(rlock_unlock(h));
    cr_assert(TH_POLL(fw_got(&b), 1000), "B was not woken by the release");
    fw_join(&b);
    /* A's thread ends without another call (its client is gone). */
    a.no_call = true;
    __atomic_store_n(&a.go, true, __ATOMIC_RELEASE);
    pthread_join(a.th, NULL);
    cr_assert_eq(th_exists(r, q), 0);
    rlock_cancel_free(tok);
    free(ao);
    free(bo);
    free(q);
    free(t);
    rlock_free(h);
    free(name);
    rlock_client_free(c);
    tp_free(px);
}

Test(fair, try_lock_without_wait_never_queues)
{
    rlock_client *c = fair_client(0, 0);
    char *name = th_name("fair-try0");
    char *q = qkey(name), *t = tkey(name);
    rlock *l;
    th_ok(rlock_new_fair(c, name, &l));
    /* Free, nobody queued: taken. */
    th_ok(rlock_try_lock(l, 0, 10000));
    /* Held: EBUSY with the holder's lease, and no place in the queue. */
    fw w = {.c = c, .name = name, .wait_ms = 0};
    fw_start(&w);
    cr_assert(TH_POLL(fw_done(&w), 3000));
    th_assert_status(w.st, RLOCK_EBUSY);
    cr_assert(w.holder_ttl > 8000 && w.holder_ttl <= 10000, "holder_ttl %lld",
              (long long)w.holder_ttl);
    cr_assert_eq(th_exists(r, q), 0);
    cr_assert_eq(th_exists(r, t), 0);
    pthread_join(w.th, NULL);
    th_ok(rlock_unlock(l));
    /* Free but another waiter heads the queue: not ours, not queued. */
    th_run(r, "RPUSH %s someone:1", q);
    th_run(r, "ZADD %s %lld someone:1", t, (long long)wall_ms() + 60000);
    th_assert_status(rlock_try_lock(l, 0, 10000), RLOCK_EBUSY);
    cr_assert_eq(llen(q), 1);
    cr_assert_eq(zcard(t), 1);
    cr_assert_eq(th_exists(r, name), 0);
    th_run(r, "DEL %s %s", q, t);
    free(q);
    free(t);
    rlock_free(l);
    free(name);
    rlock_client_free(c);
}

/* ---- dead and purged waiters ------------------------------------------- */

Test(fair, dead_head_is_purged_and_the_next_proceeds_at_its_deadline)
{
    rlock_client *c = fair_client(th_ms(1000), 0);
    char *name = th_name("fair-dead");
    char *q = qkey(name), *t = tkey(name);
    /* A waiter whose process died: queued, never coming back. */
    int64_t dead_line = wall_ms() + th_ms(1500);
    th_run(r, "RPUSH %s dead-uuid:7", q);
    th_run(r, "ZADD %s %lld dead-uuid:7", t, (long long)dead_line);
    int order = 0;
    fw w = {.c = c, .name = name, .wait_ms = RLOCK_WAIT_FOREVER, .order_counter = &order};
    uint64_t cmds0 = 0;
    cr_assert_eq(rlock_client_stat(c, RLOCK_STAT_COMMANDS, &cmds0), RLOCK_OK);
    fw_start(&w);
    char *o = fw_owner(&w);
    wait_queued(q, 1, o);
    cr_assert_eq(zscore(t, o), dead_line + th_ms(1000), "queued one slot behind the dead one");
    cr_assert(TH_POLL(fw_order(&w) == 1, 1500 + 1000), "the next waiter proceeds");
    /* Its acquisition's wall-clock time, within a few ms (two clocks). */
    int64_t got_wall = wall_ms() - (th_now_ms() - w.got_at);
    cr_assert(got_wall >= dead_line - 5, "%lld ms before the dead head's deadline",
              (long long)(dead_line - got_wall));
    cr_assert(got_wall <= dead_line + th_ms(500), "%lld ms after the dead head's deadline",
              (long long)(got_wall - dead_line));
    /* It slept until the deadline: no polling loop (Redisson's waiters
     * retry at once, quirk 14). Attempt, attempt after subscribing, the
     * attempt at the deadline. */
    uint64_t cmds = 0;
    cr_assert_eq(rlock_client_stat(c, RLOCK_STAT_COMMANDS, &cmds), RLOCK_OK);
    cr_assert(cmds - cmds0 <= 4, "%llu commands while it waited",
              (unsigned long long)(cmds - cmds0));
    cr_assert_eq(th_exists(r, q), 0, "the dead waiter was purged");
    cr_assert_eq(th_exists(r, t), 0);
    fw_join(&w);
    th_ok(w.unlock_st);
    free(o);
    free(q);
    free(t);
    free(name);
    rlock_client_free(c);
}

Test(fair, waiter_taken_out_of_the_queue_comes_back)
{
    /* The holder's lease is short (watchdog 1.5 s, renewed), so a waiter
     * sleeps at most that long between attempts. */
    rlock_client *hc = fair_client(0, th_ms(1500));
    rlock_client *c = fair_client(0, 0);
    char *name = th_name("fair-purged");
    char *q = qkey(name), *t = tkey(name);
    rlock *l;
    th_ok(rlock_new_fair(hc, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    int order = 0;
    fw w = {.c = c, .name = name, .wait_ms = RLOCK_WAIT_FOREVER, .order_counter = &order};
    fw_start(&w);
    char *o = fw_owner(&w);
    wait_queued(q, 0, o);
    /* As a purge by another client's script would (Redisson #3004: the
     * waiter at the head past its deadline): out of Q and T. */
    th_run(r, "LREM %s 0 %s", q, o);
    th_run(r, "ZREM %s %s", t, o);
    /* It notices at its next attempt and queues again. */
    wait_queued(q, 0, o);
    cr_assert(zscore(t, o) > wall_ms(), "a fresh deadline");
    int64_t released = th_now_ms();
    th_ok(rlock_unlock(l));
    cr_assert(TH_POLL(fw_order(&w) == 1, 1000), "acquires within 1 s of the release");
    cr_assert(w.got_at - released < th_ms(1000));
    fw_join(&w);
    th_ok(w.unlock_st);
    free(o);
    free(q);
    free(t);
    rlock_free(l);
    free(name);
    rlock_client_free(c);
    rlock_client_free(hc);
}

/* ---- the non-reentrant form --------------------------------------------- */

Test(fair, nonreentrant_second_lock_by_the_holder_is_edeadlk_at_once)
{
    rlock_client *c = fair_client(0, 0);
    char *name = th_name("fair-nonre");
    char *q = qkey(name), *t = tkey(name);
    rlock *l;
    th_ok(rlock_new_fair_nonreentrant(c, name, &l));
    cr_assert_str_eq(rlock_kind(l), "fair-nonreentrant");
    char *me = th_owner(c, rlock_thread_id());
    th_ok(rlock_lock(l, 20000));
    long long ttl0 = th_pttl(r, name);
    int64_t t0 = th_now_ms();
    uint64_t cmds0 = 0, cmds1 = 0;
    th_ok(rlock_client_stat(c, RLOCK_STAT_COMMANDS, &cmds0));
    th_assert_status(rlock_lock(l, 60000), RLOCK_EDEADLK);
    th_ok(rlock_client_stat(c, RLOCK_STAT_COMMANDS, &cmds1));
    cr_assert_eq(cmds1 - cmds0, 1, "%llu commands: one attempt, nothing to leave",
                 (unsigned long long)(cmds1 - cmds0));
    th_assert_status(rlock_try_lock(l, 5000, 60000), RLOCK_EDEADLK);
    th_assert_status(rlock_try_lock(l, 0, 60000), RLOCK_EDEADLK);
    cr_assert(th_now_ms() - t0 < th_ms(1000), "at once");
    cr_assert_eq(th_hget_int(r, name, me), 1, "count unchanged");
    cr_assert_eq(th_hlen(r, name), 1);
    long long ttl1 = th_pttl(r, name);
    cr_assert(ttl1 <= ttl0 && ttl1 > 15000, "lease not reset (%lld -> %lld)", ttl0, ttl1);
    cr_assert_eq(th_exists(r, q), 0, "not queued behind itself");
    cr_assert_eq(th_exists(r, t), 0);
    int64_t n = 0;
    th_ok(rlock_hold_count(l, &n));
    cr_assert_eq(n, 1);
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0, "one unlock releases it");
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    free(me);
    free(q);
    free(t);
    rlock_free(l);
    free(name);
    rlock_client_free(c);
}

/* A refused re-acquisition asked with a shorter lease than the hold's
 * changed nothing in Redis: the client must not believe the hold ends at
 * the refused lease. */
Test(fair, nonreentrant_refused_shorter_lease_does_not_shorten_the_hold)
{
    rlock_client *c = fair_client(0, 0);
    char *name = th_name("fair-nonre-lease");
    rlock *l;
    th_ok(rlock_new_fair_nonreentrant(c, name, &l));
    th_ok(rlock_lock(l, 20000));
    th_assert_status(rlock_try_lock(l, 0, 300), RLOCK_EDEADLK);
    th_assert_status(rlock_try_lock(l, 1000, 300), RLOCK_EDEADLK);
    th_sleep_ms(600); /* past the refused lease: the hold is still there */
    cr_assert(th_pttl(r, name) > 15000);
    th_assert_status(rlock_try_lock(l, 0, 300), RLOCK_EDEADLK);
    int64_t n = 0;
    th_ok(rlock_hold_count(l, &n));
    cr_assert_eq(n, 1);
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0);
    rlock_free(l);
    free(name);
    rlock_client_free(c);
}

/* ---- Redisson's side, written by hand ---------------------------------- */

#define JAVA_UUID "6f1c0a4e-2b7d-4c3e-9a51-0d2f8e7b1c44"

Test(fair, redisson_hold_and_waiter_written_by_hand)
{
    rlock_client *c = fair_client(0, 0);
    char *name = th_name("fair-java");
    char *q = qkey(name), *t = tkey(name);
    rlock *l;
    th_ok(rlock_new_fair(c, name, &l));
    const char *java = JAVA_UUID ":57";

    /* A Java thread holds it (first acquisition: HSET owner 1, PEXPIRE). */
    th_run(r, "HSET %s %s 1", name, java);
    th_run(r, "PEXPIRE %s 30000", name);
    th_assert_status(rlock_try_lock(l, 0, RLOCK_WATCHDOG), RLOCK_EBUSY);
    cr_assert_eq(th_exists(r, q), 0);
    /* Our waiter queues behind it, as a Java waiter would. */
    int order = 0;
    fw w = {.c = c, .name = name, .wait_ms = RLOCK_WAIT_FOREVER, .order_counter = &order};
    fw_start(&w);
    char *o = fw_owner(&w);
    wait_queued(q, 0, o);
    char *och = own_channel(name, o);
    th_wait_numsub(0, och, 1, 3000);
    /* The Java holder releases as Redisson does: DEL, publish "0" to the
     * head's channel. */
    th_run(r, "DEL %s", name);
    int64_t released = th_now_ms();
    th_run(r, "PUBLISH %s 0", och);
    cr_assert(TH_POLL(fw_order(&w) == 1, 1000), "woken within 1 s of Redisson's release");
    cr_assert(w.got_at - released < th_ms(1000));
    cr_assert_eq(th_hget_int(r, name, o), 1);

    /* A Java waiter queues behind our holder by hand (its deadline: now +
     * the lock's PTTL + 300 s) and subscribes to its own channel. */
    char *jch = own_channel(name, java);
    redisContext *jsub = th_subscribe(0, jch);
    th_run(r, "RPUSH %s %s", q, java);
    th_run(r, "ZADD %s %lld %s", t, (long long)(wall_ms() + th_pttl(r, name) + 300000), java);
    fw_release(&w); /* our holder unlocks */
    char *msg = th_next_message(jsub, 1000);
    cr_assert(msg != NULL, "the Java head got the release");
    cr_assert_str_eq(msg, "0");
    free(msg);
    pthread_join(w.th, NULL);
    th_ok(w.unlock_st);
    cr_assert_eq(th_exists(r, name), 0);
    /* The Java waiter takes it as Redisson's acquire does; ours waits. */
    th_run(r, "LPOP %s", q);
    th_run(r, "ZREM %s %s", t, java);
    th_run(r, "HSET %s %s 1", name, java);
    th_run(r, "PEXPIRE %s 30000", name);
    th_assert_status(rlock_try_lock(l, 0, RLOCK_WATCHDOG), RLOCK_EBUSY);
    cr_assert_eq(th_hget_int(r, name, java), 1, "the Java hold is untouched");
    cr_assert_eq(th_hlen(r, name), 1);
    th_run(r, "DEL %s", name);
    redisFree(jsub);
    free(jch);
    free(och);
    free(o);
    free(q);
    free(t);
    rlock_free(l);
    free(name);
    rlock_client_free(c);
}

/* ---- renewal, loss, force unlock --------------------------------------- */

Test(fair, watchdog_renews_and_a_lost_hold_is_reported)
{
    th_lost_count lost = {PTHREAD_MUTEX_INITIALIZER, 0};
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = th_url();
    cfg.watchdog_timeout_ms = th_ms(1500);
    cfg.on_lock_lost = th_count_lost;
    cfg.on_lock_lost_arg = &lost;
    rlock_client *c = th_client_cfg(&cfg);
    char *name = th_name("fair-wd");
    char *q = qkey(name), *t = tkey(name);
    rlock *l;
    th_ok(rlock_new_fair(c, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_wait_renewal(r, name, 3000);
    th_wait_renewal(r, name, 3000);
    /* A Java waiter queued by hand hears even the unlock of a lost hold
     * (Redisson's fair unlock of a missing lock notifies the head). */
    const char *java = JAVA_UUID ":9";
    char *jch = own_channel(name, java);
    redisContext *jsub = th_subscribe(0, jch);
    th_run(r, "RPUSH %s %s", q, java);
    th_run(r, "ZADD %s %lld %s", t, (long long)wall_ms() + 300000, java);
    th_run(r, "DEL %s", name); /* lost: deleted behind the holder's back */
    cr_assert(TH_POLL(th_lost_calls(&lost) == 1, 3000), "on_lock_lost called");
    /* Redisson's unlock replies 1, success, here: ours says the hold was
     * lost, with the same effect on Redis (the head is told). */
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    char *msg = th_next_message(jsub, 1000);
    cr_assert(msg != NULL, "the head was notified");
    cr_assert_str_eq(msg, "0");
    free(msg);
    cr_assert_eq(llen(q), 1, "the queue is the head's to leave");
    th_run(r, "DEL %s %s", q, t);
    redisFree(jsub);
    free(jch);
    free(q);
    free(t);
    rlock_free(l);
    free(name);
    rlock_client_free(c);
}

Test(fair, unlock_of_a_lock_never_held_is_enotowner_and_tells_the_head)
{
    rlock_client *c = fair_client(0, 0);
    char *name = th_name("fair-nothing");
    char *q = qkey(name), *t = tkey(name);
    rlock *l;
    th_ok(rlock_new_fair(c, name, &l));
    const char *java = JAVA_UUID ":11";
    char *jch = own_channel(name, java);
    redisContext *jsub = th_subscribe(0, jch);
    th_run(r, "RPUSH %s %s", q, java);
    th_run(r, "ZADD %s %lld %s", t, (long long)wall_ms() + 300000, java);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    char *msg = th_next_message(jsub, 1000);
    cr_assert(msg != NULL, "Redisson's effect: the head is notified");
    free(msg);
    th_run(r, "DEL %s %s", q, t);
    redisFree(jsub);
    free(jch);
    free(q);
    free(t);
    rlock_free(l);
    free(name);
    rlock_client_free(c);
}

Test(fair, force_unlock_publishes_to_the_head)
{
    rlock_client *c = fair_client(0, 0);
    char *name = th_name("fair-force");
    char *q = qkey(name), *t = tkey(name);
    char *base = th_channel(name);
    redisContext *bsub = th_subscribe(0, base);
    rlock *l;
    th_ok(rlock_new_fair(c, name, &l));
    th_run(r, "HSET %s " JAVA_UUID ":3 1", name);
    th_run(r, "PEXPIRE %s 30000", name);
    int order = 0;
    fw w = {.c = c, .name = name, .wait_ms = RLOCK_WAIT_FOREVER, .order_counter = &order};
    fw_start(&w);
    char *o = fw_owner(&w);
    wait_queued(q, 0, o);
    char *och = own_channel(name, o);
    th_wait_numsub(0, och, 1, 3000);
    redisContext *osub = th_subscribe(0, och);
    bool was = false;
    th_ok(rlock_force_unlock(l, &was));
    cr_assert(was);
    char *msg = th_next_message(osub, 1000);
    cr_assert(msg != NULL, "the head's channel got the force unlock");
    cr_assert_str_eq(msg, "0");
    free(msg);
    cr_assert(TH_POLL(fw_order(&w) == 1, 1000), "the head takes it");
    cr_assert_eq(th_next_message(bsub, 200), NULL, "nothing on the base channel");
    fw_join(&w);
    th_ok(rlock_force_unlock(l, &was));
    cr_assert(!was);
    redisFree(osub);
    redisFree(bsub);
    free(och);
    free(o);
    free(base);
    free(q);
    free(t);
    rlock_free(l);
    free(name);
    rlock_client_free(c);
}

/* ---- another kind at the name ------------------------------------------ */

Test(fair, read_write_lock_or_other_type_at_the_name_is_ekind_untouched)
{
    rlock_client *c = fair_client(0, 0);
    char *name = th_name("fair-kind");
    char *q = qkey(name), *t = tkey(name);
    rlock *l;
    th_ok(rlock_new_fair(c, name, &l));
    th_run(r, "HSET %s mode read " JAVA_UUID ":5 1", name);
    th_run(r, "PEXPIRE %s 30000", name);
    th_assert_status(rlock_try_lock(l, 0, RLOCK_WATCHDOG), RLOCK_EKIND);
    int64_t t0 = th_now_ms();
    th_assert_status(rlock_try_lock(l, 5000, RLOCK_WATCHDOG), RLOCK_EKIND);
    th_assert_status(rlock_lock(l, RLOCK_WATCHDOG), RLOCK_EKIND);
    cr_assert(th_now_ms() - t0 < th_ms(1000), "at once, no wait");
    cr_assert_eq(th_hlen(r, name), 2, "the read lock is untouched");
    cr_assert_eq(th_hget_int(r, name, JAVA_UUID ":5"), 1);
    cr_assert(th_pttl(r, name) > 25000);
    cr_assert_eq(th_exists(r, q), 0, "not queued");
    cr_assert_eq(th_exists(r, t), 0);
    th_run(r, "DEL %s", name);
    th_run(r, "SET %s plain", name);
    th_assert_status(rlock_try_lock(l, 0, RLOCK_WATCHDOG), RLOCK_EKIND);
    th_assert_status(rlock_lock(l, RLOCK_WATCHDOG), RLOCK_EKIND);
    redisReply *rep = th_cmd(r, "GET %s", name);
    cr_assert_str_eq(rep->str, "plain");
    freeReplyObject(rep);
    cr_assert_eq(th_exists(r, q), 0);
    th_run(r, "DEL %s", name);
    /* A read/write lock's hash with a field of this very owner's name (a
     * reader field, here one that is no number): 'mode' is looked at
     * first, so it is another kind, not a hash value to refuse. */
    char *owner = th_owner(c, rlock_thread_id());
    th_run(r, "HSET %s mode read %s x", name, owner);
    th_assert_status(rlock_try_lock(l, 0, RLOCK_WATCHDOG), RLOCK_EKIND);
    cr_assert_eq(th_hlen(r, name), 2, "the read lock is untouched");
    cr_assert_eq(th_exists(r, q), 0);
    th_run(r, "DEL %s", name);
    free(owner);
    free(q);
    free(t);
    rlock_free(l);
    free(name);
    rlock_client_free(c);
}

/* ---- contention across processes --------------------------------------- */

/* INFO commandstats' calls of one command (0 when it never ran). */
static long long cmd_calls(redisContext *x, const char *cmd)
{
    redisReply *rep = th_cmd(x, "INFO commandstats");
    cr_assert_eq(rep->type, REDIS_REPLY_STRING);
    char key[64];
    snprintf(key, sizeof key, "cmdstat_%s:calls=", cmd);
    const char *at = strstr(rep->str, key);
    long long n = at ? atoll(at + strlen(key)) : 0;
    freeReplyObject(rep);
    return n;
}

enum { CT_PROCS = 4, CT_THREADS = 2 };

typedef struct ct_arg {
    int port;
    const char *name;
    int64_t run_ms;
    rlock_client *c;
    int count;
    int errors;
} ct_arg;

/* One worker: a warm-up acquisition, then, from "go", lock (30 s lease),
 * GET/SET of a counter on its own connection, unlock, for run_ms; its
 * count goes to the list "<name>:counts". */
static void *ct_worker(void *arg)
{
    ct_arg *a = arg;
    redisContext *x = th_redis(a->port);
    rlock *l;
    if (rlock_new_fair(a->c, a->name, &l) != RLOCK_OK || rlock_lock(l, 30000) != RLOCK_OK ||
        rlock_unlock(l) != RLOCK_OK) {
        a->errors++;
        return NULL;
    }
    freeReplyObject(redisCommand(x, "INCR %s:ready", a->name));
    for (;;) {
        redisReply *rep = redisCommand(x, "EXISTS %s:go", a->name);
        bool go = rep && rep->integer == 1;
        freeReplyObject(rep);
        if (go) {
            break;
        }
        th_sleep_ms(1);
    }
    int64_t end = th_now_ms() + a->run_ms;
    while (th_now_ms() < end) {
        /* An explicit lease: no renewal calls among the scripts counted. */
        if (rlock_lock(l, 30000) != RLOCK_OK) {
            a->errors++;
            break;
        }
        redisReply *rep = redisCommand(x, "GET %s:counter", a->name);
        long long v = rep && rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
        freeReplyObject(rep);
        freeReplyObject(redisCommand(x, "SET %s:counter %lld", a->name, v + 1));
        if (rlock_unlock(l) != RLOCK_OK) {
            a->errors++;
        }
        a->count++;
    }
    freeReplyObject(redisCommand(x, "RPUSH %s:counts %d", a->name, a->errors ? -1 : a->count));
    rlock_free(l);
    redisFree(x);
    return NULL;
}

static int ct_child(void *arg)
{
    ct_arg *proto = arg;
    rlock_config cfg;
    rlock_config_init(&cfg);
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", proto->port);
    cfg.url = url;
    rlock_client *c = NULL;
    if (rlock_client_new(&cfg, &c) != RLOCK_OK) {
        return 10;
    }
    ct_arg a[CT_THREADS];
    pthread_t th[CT_THREADS];
    for (int i = 0; i < CT_THREADS; i++) {
        a[i] = *proto;
        a[i].c = c;
        pthread_create(&th[i], NULL, ct_worker, &a[i]);
    }
    int errors = 0;
    for (int i = 0; i < CT_THREADS; i++) {
        pthread_join(th[i], NULL);
        errors += a[i].errors;
    }
    /* Stay until the parent has read the server's statistics (a client
     * going away unsubscribes). */
    redisContext *x = th_redis(proto->port);
    for (int i = 0; i < 30000; i++) {
        redisReply *rep = redisCommand(x, "EXISTS %s:exit", proto->name);
        bool out = rep && rep->integer == 1;
        freeReplyObject(rep);
        if (out) {
            break;
        }
        th_sleep_ms(2);
    }
    redisFree(x);
    rlock_client_free(c);
    return errors ? 11 : 0;
}

/* 4 processes x 2 threads on one fair lock: the commands Redis runs per
 * acquisition (an attempt that queues, the head's attempt after its
 * wake-up, the unlock: 3) and how evenly the workers are served. */
Test(fair, four_processes_contending_cost_three_commands_per_acquisition)
{
    if (!TH_FORKED_CHILD_CAN_MAKE_CLIENTS) {
        cr_skip_test("a fork()ed child cannot make a client under this sanitizer");
    }
    th_server s;
    th_server_start(&s);
    redisContext *x = forked.x = th_redis(s.port);
    char *name = forked.name = th_name("fair-contend");
    static ct_arg proto;
    proto = (ct_arg){.port = s.port, .name = name, .run_ms = th_ms(2000)};
    pid_t pid[CT_PROCS];
    for (int i = 0; i < CT_PROCS; i++) {
        pid[i] = th_fork(ct_child, &proto);
    }
    char ready[300];
    snprintf(ready, sizeof ready, "%s:ready", name);
    cr_assert(TH_POLL(({
                          redisReply *rep = th_cmd(x, "GET %s", ready);
                          bool ok = rep->type == REDIS_REPLY_STRING &&
                                    atoi(rep->str) == CT_PROCS * CT_THREADS;
                          freeReplyObject(rep);
                          ok;
                      }),
                      10000),
              "workers ready");
    th_run(x, "CONFIG RESETSTAT");
    th_run(x, "SET %s:go 1", name);
    cr_assert(TH_POLL(({
                          redisReply *rep = th_cmd(x, "LLEN %s:counts", name);
                          bool ok = rep->integer == CT_PROCS * CT_THREADS;
                          freeReplyObject(rep);
                          ok;
                      }),
                      2000 + 10000),
              "workers done");
    long long evalsha = cmd_calls(x, "evalsha"), eval = cmd_calls(x, "eval");
    long long sub = cmd_calls(x, "subscribe"), unsub = cmd_calls(x, "unsubscribe");
    th_run(x, "SET %s:exit 1", name);
    for (int i = 0; i < CT_PROCS; i++) {
        cr_assert_eq(th_wait_bounded(pid[i], 10000), 0, "child %d", i);
    }
    redisReply *rep = th_cmd(x, "LRANGE %s:counts 0 -1", name);
    long long total = 0, min = -1, max = 0;
    for (size_t i = 0; i < rep->elements; i++) {
        long long n = atoll(rep->element[i]->str);
        cr_assert(n > 0, "worker %zu failed or never acquired (%lld)", i, n);
        total += n;
        min = min < 0 || n < min ? n : min;
        max = n > max ? n : max;
    }
    freeReplyObject(rep);
    rep = th_cmd(x, "GET %s:counter", name);
    long long counter = atoll(rep->str);
    freeReplyObject(rep);
    double scripts = (double)(evalsha + eval) / (double)total;
    double subs = (double)(sub + unsub) / (double)total;
    double fairness = (double)min / (double)max;
    cr_log_info("fair, %d processes x %d threads: %lld acquisitions, %.4f commands per "
                "acquisition (%.4f scripts, %.4f (un)subscribes), per-worker min/max %lld/%lld "
                "= %.3f",
                CT_PROCS, CT_THREADS, total, scripts + subs, scripts, subs, min, max, fairness);
    cr_assert_eq(counter, total, "mutual exclusion: the counter saw every acquisition");
    /* Each acquisition: the attempt that queues, the head's attempt after
     * its wake-up, the unlock; and a waiter that had to subscribe (its
     * channel no longer lingering) attempts once more after subscribing.
     * A waiter's channel lingers between its turns, so that is rare. */
    cr_assert(evalsha + eval <= 3 * total + sub, "%.4f scripts per acquisition, %lld subscribes",
              scripts, sub);
    cr_assert(subs <= 0.01, "%.4f (un)subscribes per acquisition", subs);
    cr_assert(fairness >= 0.8, "per-worker min/max %lld/%lld", min, max);
    redisFree(x);
    th_server_stop(&s);
    free(name);
}

/* ---- exactness: resends, late copies, abandons --------------------------- */

/* One attempt of the fair kind for the calling thread, with request id
 * rid, as the engine sends it. */
static rlock__attempt fair_attempt(rlock *l, int64_t held, int64_t wait_ms, const char *rid,
                                   bool resend)
{
    char owner[RLOCK__OWNER_MAX];
    rlock__owner(l->c, rlock_thread_id(), owner);
    rlock__attempt a = {0};
    th_ok(rlock__enter(l->c));
    th_ok(l->kind->attempt(l, owner, 30000, held, wait_ms, rid, resend, &a,
                           th_now_ms() + th_ms(3000)));
    rlock__leave(l->c);
    return a;
}

static int fair_abandon(rlock *l, int64_t held, const char *rid)
{
    char owner[RLOCK__OWNER_MAX];
    rlock__owner(l->c, rlock_thread_id(), owner);
    int what = -1;
    th_ok(rlock__enter(l->c));
    th_ok(l->kind->abandon(l, owner, rid, held, 30000, &what, th_now_ms() + th_ms(3000)));
    rlock__leave(l->c);
    return what;
}

Test(fair, queued_attempt_resent_and_abandoned_keeps_one_place_then_none)
{
    rlock_client *c = fair_client(0, 0);
    char *name = th_name("fair-exact-q");
    char *q = qkey(name), *t = tkey(name);
    rlock *l;
    th_ok(rlock_new_fair(c, name, &l));
    char *me = th_owner(c, rlock_thread_id());
    th_run(r, "HSET %s " JAVA_UUID ":1 1", name);
    th_run(r, "PEXPIRE %s 30000", name);
    char rid[33];
    rlock__request_id(rid);
    /* The first copy queues; its reply is lost. */
    rlock__attempt a = fair_attempt(l, 0, RLOCK_WAIT_FOREVER, rid, false);
    cr_assert_eq(a.what, RLOCK__HELD);
    long long s0 = zscore(t, me);
    cr_assert(s0 > 0);
    /* The resend finds its place, keeps it (one place, same deadline) and
     * writes the outcome to the latch. */
    a = fair_attempt(l, 0, RLOCK_WAIT_FOREVER, rid, true);
    cr_assert_eq(a.what, RLOCK__HELD);
    cr_assert(a.ttl > 0 && a.ttl <= 30000, "sleep %lld", (long long)a.ttl);
    const char *one[1] = {me};
    cr_assert(list_is(q, one, 1));
    cr_assert_eq(zscore(t, me), s0);
    /* A late copy of the first send changes nothing. */
    a = fair_attempt(l, 0, RLOCK_WAIT_FOREVER, rid, false);
    cr_assert_eq(a.what, RLOCK__SPENT);
    cr_assert(list_is(q, one, 1));
    /* Abandoned: it took nothing, and leaves the queue. */
    cr_assert_eq(fair_abandon(l, 0, rid), RLOCK__TOOK_NOTHING);
    cr_assert_eq(th_exists(r, q), 0);
    cr_assert_eq(th_exists(r, t), 0);
    a = fair_attempt(l, 0, RLOCK_WAIT_FOREVER, rid, false);
    cr_assert_eq(a.what, RLOCK__SPENT, "a copy after the abandon queues again");
    cr_assert_eq(th_exists(r, q), 0);
    cr_assert_eq(th_hget_int(r, name, JAVA_UUID ":1"), 1, "the holder untouched");
    th_run(r, "DEL %s", name);
    free(me);
    free(q);
    free(t);
    rlock_free(l);
    free(name);
    rlock_client_free(c);
}

Test(fair, acquisition_resent_counts_once_and_abandoned_gives_back_and_wakes_the_head)
{
    rlock_client *c = fair_client(0, 0);
    char *name = th_name("fair-exact-take");
    char *q = qkey(name), *t = tkey(name);
    rlock *l;
    th_ok(rlock_new_fair(c, name, &l));
    char *me = th_owner(c, rlock_thread_id());
    char rid[33];
    rlock__request_id(rid);
    rlock__attempt a = fair_attempt(l, 0, RLOCK_WAIT_FOREVER, rid, false);
    cr_assert_eq(a.what, RLOCK__TAKEN);
    cr_assert_eq(a.count, 1);
    a = fair_attempt(l, 0, RLOCK_WAIT_FOREVER, rid, true);
    cr_assert_eq(a.what, RLOCK__TAKEN, "the resend answers what the first copy did");
    cr_assert_eq(a.count, 1);
    cr_assert_eq(th_hget_int(r, name, me), 1, "counted once");
    /* A Java waiter queues behind the hold we are about to give back. */
    const char *java = JAVA_UUID ":21";
    char *jch = own_channel(name, java);
    redisContext *jsub = th_subscribe(0, jch);
    th_run(r, "RPUSH %s %s", q, java);
    th_run(r, "ZADD %s %lld %s", t, (long long)wall_ms() + 300000, java);
    cr_assert_eq(fair_abandon(l, 0, rid), RLOCK__GAVE_BACK_ALL);
    cr_assert_eq(th_exists(r, name), 0, "given back");
    char *msg = th_next_message(jsub, 1000);
    cr_assert(msg != NULL, "the head was woken");
    free(msg);
    a = fair_attempt(l, 0, RLOCK_WAIT_FOREVER, rid, false);
    cr_assert_eq(a.what, RLOCK__SPENT);
    cr_assert_eq(th_exists(r, name), 0);
    cr_assert_eq(llen(q), 1, "the Java waiter keeps its place");

    /* A re-entry whose reply was lost, abandoned: one hold given back. */
    th_run(r, "DEL %s %s", q, t);
    th_run(r, "HSET %s %s 1", name, me);
    th_run(r, "PEXPIRE %s 30000", name);
    rlock__request_id(rid);
    a = fair_attempt(l, 1, RLOCK_WAIT_FOREVER, rid, false);
    cr_assert_eq(a.what, RLOCK__TAKEN);
    cr_assert_eq(a.count, 2);
    cr_assert_eq(fair_abandon(l, 1, rid), RLOCK__GAVE_BACK);
    cr_assert_eq(th_hget_int(r, name, me), 1);
    /* The hold gone meanwhile: reported lost. */
    th_run(r, "DEL %s", name);
    rlock__request_id(rid);
    cr_assert_eq(fair_abandon(l, 1, rid), RLOCK__TOOK_LOST);
    redisFree(jsub);
    free(jch);
    free(me);
    free(q);
    free(t);
    rlock_free(l);
    free(name);
    rlock_client_free(c);
}

/* The fair acquire's EVALSHA: 1 + sha + numkeys + 4 keys + 9 arguments. */
#define FAIR_ACQUIRE_PREFIX "*16\r\n$7\r\nEVALSHA"

Test(fair, queued_attempt_whose_reply_is_cut_waits_in_one_place)
{
    th_server s;
    th_server_start(&s);
    tp_proxy *px = tp_new(s.port);
    cr_assert(px != NULL && tp_start(px) == 0);
    char purl[64], durl[64];
    snprintf(purl, sizeof purl, "redis://127.0.0.1:%d", tp_port(px));
    snprintf(durl, sizeof durl, "redis://127.0.0.1:%d", s.port);
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = durl;
    rlock_client *h = th_client_cfg(&cfg);
    cfg.url = purl;
    cfg.command_timeout_ms = 1000;
    rlock_client *c = th_client_cfg(&cfg);
    redisContext *x = th_redis(s.port);
    char *name = th_name("fair-cut");
    char *q = qkey(name), *t = tkey(name);
    rlock *hl;
    th_ok(rlock_new_fair(h, name, &hl));
    /* Loads the scripts, so that the cut request runs the script itself. */
    th_ok(rlock_lock(hl, RLOCK_WATCHDOG));
    th_ok(rlock_unlock(hl));
    th_ok(rlock_lock(hl, RLOCK_WATCHDOG));
    tp_cut_next_request(px, FAIR_ACQUIRE_PREFIX, name);
    int order = 0;
    fw w = {.c = c, .name = name, .wait_ms = 20000, .order_counter = &order};
    fw_start(&w);
    char *o = fw_owner(&w);
    cr_assert(TH_POLL(tp_cuts(px) == 1, 3000), "the proxy did not cut the acquire");
    char *och = own_channel(name, o);
    cr_assert(TH_POLL(th_numsub(s.port, och) == 1, 3000), "waiting");
    free(och);
    redisReply *rep = th_cmd(x, "LRANGE %s 0 -1", q);
    cr_assert_eq(rep->elements, 1, "one place in the queue, not %zu", rep->elements);
    cr_assert_str_eq(rep->element[0]->str, o);
    freeReplyObject(rep);
    rep = th_cmd(x, "ZCARD %s", t);
    cr_assert_eq(rep->integer, 1);
    freeReplyObject(rep);
    int64_t released = th_now_ms();
    th_ok(rlock_unlock(hl));
    cr_assert(TH_POLL(fw_order(&w) == 1, 1000), "woken by the release");
    cr_assert(w.got_at - released < th_ms(1000));
    fw_join(&w);
    th_ok(w.unlock_st);
    rep = th_cmd(x, "EXISTS %s %s %s", name, q, t);
    cr_assert_eq(rep->integer, 0);
    freeReplyObject(rep);
    free(o);
    free(q);
    free(t);
    free(name);
    rlock_free(hl);
    redisFree(x);
    rlock_client_free(c);
    rlock_client_free(h);
    tp_free(px);
    th_server_stop(&s);
}

/* A fair acquisition whose replies are all lost (it ran: the lock is the
 * thread's in Redis) is left in doubt; the thread's next call on the name
 * comes through a handle of another kind of the same layout (the plain
 * lock's unlock). The doubt is settled with the fair lock's own abandon,
 * which gives the hold back and wakes the fair waiter queued behind it on
 * its own channel at once (the plain lock's abandon would publish on the
 * base channel, which no fair waiter hears, and leave it asleep until the
 * lease it saw). */
Test(fair, acquisition_in_doubt_is_settled_by_its_own_kind_through_another_handle)
{
    tp_proxy *px = tp_new(th_port());
    cr_assert(px != NULL && tp_start(px) == 0);
    char purl[64];
    snprintf(purl, sizeof purl, "redis://127.0.0.1:%d", tp_port(px));
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = purl;
    cfg.command_timeout_ms = 500;
    rlock_client *c = th_client_cfg(&cfg);
    rlock_client *wc = fair_client(0, 0);
    char *name = th_name("fair-doubt-kind");
    char *q = qkey(name);
    rlock *fl, *pl;
    th_ok(rlock_new_fair(c, name, &fl));
    th_ok(rlock_new(c, name, &pl));
    char *me = th_owner(c, rlock_thread_id());
    /* Loads the scripts through the proxy first. */
    th_ok(rlock_try_lock(fl, 0, 30000));
    th_ok(rlock_unlock(fl));
    int64_t t0 = th_now_ms();
    int64_t window = th_ms(2500);
    tp_delay(px, TP_REPLIES, window, th_ms(4000));
    rlock_status st = rlock_try_lock(fl, 0, 30000);
    cr_assert(st == RLOCK_ETIMEDOUT || st == RLOCK_EIO, "got %s", rlock_status_name(st));
    cr_assert(th_now_ms() - t0 < window, "the call outlived the window of lost replies");
    cr_assert_eq(th_hget_int(r, name, me), 1, "the acquisition ran");
    /* A fair waiter of another client queues behind the hold in doubt. */
    fw w = {.c = wc, .name = name, .wait_ms = th_ms(20000), .lease_ms = 30000};
    fw_start(&w);
    char *wo = fw_owner(&w);
    wait_queued(q, 0, wo);
    char *och = own_channel(name, wo);
    th_wait_numsub(0, och, 1, 3000);
    free(och);
    while (th_now_ms() - t0 < window + th_ms(200)) {
        th_sleep_ms(20); /* past the window: the next call is answered */
    }
    int64_t settled = th_now_ms();
    th_assert_status(rlock_unlock(pl), RLOCK_ENOTOWNER);
    cr_assert(TH_POLL(fw_got(&w), 3000), "the fair waiter was not woken (%lld ms)",
              (long long)(th_now_ms() - settled));
    th_ok(w.st);
    fw_join(&w);
    th_ok(w.unlock_st);
    cr_assert_eq(th_exists(r, name), 0);
    cr_assert_eq(th_exists(r, q), 0);
    free(wo);
    free(me);
    free(q);
    free(name);
    rlock_free(fl);
    rlock_free(pl);
    rlock_client_free(wc);
    rlock_client_free(c);
    tp_free(px);
}

/* The calling thread's place queued through the kind (as an attempt
 * would), behind a Java holder written by hand; then a waiting thread
 * behind it; then the holder's lock vanishes without a release (its lease
 * ran out): the waiter behind sleeps on the lease it saw. */
static void head_of_a_free_lock(rlock *l, const char *name, const char *rid, fw *w,
                                char **w_owner)
{
    th_run(r, "HSET %s " JAVA_UUID ":1 1", name);
    th_run(r, "PEXPIRE %s 30000", name);
    rlock__attempt a = fair_attempt(l, 0, 60000, rid, false);
    cr_assert_eq(a.what, RLOCK__HELD);
    fw_start(w);
    *w_owner = fw_owner(w);
    char *q = qkey(name);
    wait_queued(q, 1, *w_owner);
    char *och = own_channel(name, *w_owner);
    th_wait_numsub(0, och, 1, 3000);
    free(och);
    free(q);
    th_run(r, "DEL %s", name);
}

Test(fair, head_of_a_free_lock_that_gives_up_passes_the_turn_on)
{
    rlock_client *c = fair_client(0, 0);
    char *name = th_name("fair-giveup-head");
    char *q = qkey(name), *t = tkey(name);
    rlock *l;
    th_ok(rlock_new_fair(c, name, &l));
    char rid[33];
    rlock__request_id(rid);
    int order = 0;
    fw w = {.c = c, .name = name, .wait_ms = RLOCK_WAIT_FOREVER, .order_counter = &order};
    char *wo = NULL;
    head_of_a_free_lock(l, name, rid, &w, &wo);
    char owner[RLOCK__OWNER_MAX];
    rlock__owner(c, rlock_thread_id(), owner);
    long long before = zscore(t, wo);
    int64_t left = th_now_ms();
    th_ok(rlock__enter(c));
    th_ok(l->kind->give_up(l, owner, 60000, th_now_ms() + th_ms(3000)));
    rlock__leave(c);
    /* Redisson's give-up tells nobody: the waiter would sleep on until the
     * lease it last saw (30 s). */
    cr_assert(TH_POLL(fw_order(&w) == 1, 1000), "the next waiter was not told");
    cr_assert(w.got_at - left < th_ms(1000));
    cr_assert(before > 0);
    fw_join(&w);
    th_ok(w.unlock_st);
    cr_assert_eq(th_exists(r, q), 0);
    cr_assert_eq(th_exists(r, t), 0);
    free(wo);
    free(q);
    free(t);
    rlock_free(l);
    free(name);
    rlock_client_free(c);
}

Test(fair, head_of_a_free_lock_abandoned_passes_the_turn_on)
{
    rlock_client *c = fair_client(0, 0);
    char *name = th_name("fair-abandon-head");
    char *q = qkey(name), *t = tkey(name);
    rlock *l;
    th_ok(rlock_new_fair(c, name, &l));
    char rid[33];
    rlock__request_id(rid);
    int order = 0;
    fw w = {.c = c, .name = name, .wait_ms = RLOCK_WAIT_FOREVER, .order_counter = &order};
    char *wo = NULL;
    head_of_a_free_lock(l, name, rid, &w, &wo);
    int64_t left = th_now_ms();
    cr_assert_eq(fair_abandon(l, 0, rid), RLOCK__TOOK_NOTHING);
    cr_assert(TH_POLL(fw_order(&w) == 1, 1000), "the next waiter was not told");
    cr_assert(w.got_at - left < th_ms(1000));
    fw_join(&w);
    th_ok(w.unlock_st);
    cr_assert_eq(th_exists(r, q), 0);
    cr_assert_eq(th_exists(r, t), 0);
    free(wo);
    free(q);
    free(t);
    rlock_free(l);
    free(name);
    rlock_client_free(c);
}

/* ---- the ACL ------------------------------------------------------------- */

/* docs/operations.md's ACL for the fair lock: the reentrant lock's plus
 * the queue's and deadlines' commands. Every call runs under it: a waiter
 * queued and woken on its own channel, a waiter giving up, the unlock, and
 * the force unlock (which reads nothing but EXISTS and HEXISTS: no TYPE). */
#define FAIR_DOC_ACL                                                                         \
    "resetkeys resetchannels -@all ~* &redisson_lock__channel:* +evalsha +eval +hexists "    \
    "+hincrby +hget +hset +exists +pexpire +pttl +get +set +del +publish +subscribe "        \
    "+unsubscribe +lindex +lpop +lrange +lrem +ltrim +rpush +zadd +zincrby +zrange +zrem "   \
    "+zscore +client|setname +auth +select"

Test(fair, documented_acl_runs_every_call)
{
    char user[64], url[128];
    snprintf(user, sizeof user, "fair_%d_%lld", (int)getpid(), (long long)th_now_ms() % 100000);
    snprintf(url, sizeof url, "redis://%s:pw@127.0.0.1:%d", user, th_port());
    th_run(r, "ACL SETUSER %s on >pw " FAIR_DOC_ACL, user);
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    rlock_client *ca = th_client_cfg(&cfg);
    char *name = th_name("fair-acl");
    char *q = qkey(name), *t = tkey(name);
    rlock *l;
    th_ok(rlock_new_fair(ca, name, &l));
    th_ok(rlock_lock(l, 30000));
    /* A waiter that gives up leaves the queue. */
    fw quitter = {.c = ca, .name = name, .wait_ms = th_ms(300), .lease_ms = 30000};
    fw_start(&quitter);
    char *qo = fw_owner(&quitter);
    wait_queued(q, 0, qo);
    cr_assert(TH_POLL(__atomic_load_n(&quitter.done, __ATOMIC_ACQUIRE), 3000));
    th_assert_status(quitter.st, RLOCK_EBUSY);
    cr_assert_eq(zscore(t, qo), -1, "the give-up left the deadlines");
    /* A waiter woken by the release on its own channel. */
    fw w = {.c = ca, .name = name, .wait_ms = RLOCK_WAIT_FOREVER, .lease_ms = 30000};
    fw_start(&w);
    char *wo = fw_owner(&w);
    wait_queued(q, 0, wo);
    pthread_join(quitter.th, NULL);
    th_ok(rlock_unlock(l));
    cr_assert(TH_POLL(fw_got(&w), 1000), "the head was not woken by the release");
    bool was = false;
    th_ok(rlock_force_unlock(l, &was));
    cr_assert(was);
    cr_assert_eq(th_exists(r, name), 0);
    fw_join(&w);
    th_assert_status(w.unlock_st, RLOCK_ELOST);
    rlock_free(l);
    rlock_client_free(ca);
    th_run(r, "ACL DELUSER %s", user);
    th_run(r, "DEL %s %s", q, t);
    free(wo);
    free(qo);
    free(q);
    free(t);
    free(name);
}
