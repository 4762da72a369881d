/* Waiting: pub/sub wake-ups, bounded waits, force unlock, killed holders and
 * mutual exclusion across threads and processes. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

TestSuite(wait, .timeout = 120);

struct waiter {
    rlock_client *c;
    const char *name;
    int64_t wait_ms;
    rlock_status st;
    int64_t returned_at;
    bool unlock_after;
};

static void *wait_thread(void *arg)
{
    struct waiter *w = arg;
    rlock *l;
    th_ok(rlock_new(w->c, w->name, &l));
    w->st = w->wait_ms == RLOCK_WAIT_FOREVER ? rlock_lock(l, RLOCK_WATCHDOG)
                                             : rlock_try_lock(l, w->wait_ms, RLOCK_WATCHDOG);
    w->returned_at = th_now_ms();
    if (w->st == RLOCK_OK && w->unlock_after) {
        th_ok(rlock_unlock(l));
    }
    rlock_free(l);
    return NULL;
}

Test(wait, waiter_wakes_on_unlock_not_on_ttl)
{
    rlock_client *a = th_client(NULL, 0), *b = th_client(NULL, 0);
    char *name = th_name("wake");
    rlock *l;
    th_ok(rlock_new(a, name, &l));
    th_ok(rlock_lock(l, 30000));
    struct waiter w = {b, name, RLOCK_WAIT_FOREVER, RLOCK_EINVAL, 0, true};
    pthread_t t;
    pthread_create(&t, NULL, wait_thread, &w);
    th_wait_waiters(0, name, 1, 3000); /* the waiter's subscription is in place */
    cr_assert_eq(w.returned_at, 0, "still waiting behind a 30 s lease");
    int64_t released = th_now_ms();
    th_ok(rlock_unlock(l));
    pthread_join(t, NULL);
    th_ok(w.st);
    cr_assert(w.returned_at - released < th_ms(1000), "woken by pub/sub in %lld ms, not the TTL",
              (long long)(w.returned_at - released));
    uint64_t wakeups = 0;
    th_ok(rlock_client_stat(b, RLOCK_STAT_WAKEUPS, &wakeups));
    cr_assert(wakeups >= 1, "the waiter's client received the release message");
    rlock_free(l);
    rlock_client_free(a);
    rlock_client_free(b);
    free(name);
}

Test(wait, try_lock_gives_up_after_its_wait)
{
    rlock_client *a = th_client(NULL, 0);
    redisContext *r = th_redis(0);
    char *name = th_name("trywait");
    th_run(r, "HSET %s other-client:1 1", name);
    th_run(r, "PEXPIRE %s 30000", name);
    rlock *l;
    th_ok(rlock_new(a, name, &l));
    int64_t t0 = th_now_ms();
    th_assert_status(rlock_try_lock(l, 700, RLOCK_WATCHDOG), RLOCK_EBUSY);
    int64_t took = th_now_ms() - t0;
    /* Not before its 700 ms wait (a time the library keeps; 10 ms of clock
     * granularity), and well before the holder's 30 s lease. */
    cr_assert(took >= 690 && took < 700 + th_ms(2300), "returned after %lld ms", (long long)took);
    cr_assert_eq(th_hget_int(r, name, "other-client:1"), 1, "holder untouched");
    rlock_free(l);
    rlock_client_free(a);
    redisFree(r);
    free(name);
}

Test(wait, force_unlock_wakes_waiters)
{
    rlock_client *a = th_client(NULL, 0), *b = th_client(NULL, 0);
    char *name = th_name("forcewake");
    rlock *l;
    th_ok(rlock_new(a, name, &l));
    th_ok(rlock_lock(l, 30000));
    struct waiter w = {b, name, 20000, RLOCK_EINVAL, 0, true};
    pthread_t t;
    pthread_create(&t, NULL, wait_thread, &w);
    th_wait_waiters(0, name, 1, 3000);
    cr_assert_eq(w.returned_at, 0, "still waiting behind a 30 s lease");
    int64_t forced = th_now_ms();
    bool was = false;
    th_ok(rlock_force_unlock(l, &was));
    cr_assert(was);
    pthread_join(t, NULL);
    th_ok(w.st);
    cr_assert(w.returned_at - forced < th_ms(1000), "woken by the force unlock's message");
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    rlock_free(l);
    rlock_client_free(a);
    rlock_client_free(b);
    free(name);
}

Test(wait, redisson_holder_and_release_by_hand)
{
    /* A Java process holds the lock: its field, its 30 s lease. Releasing
     * it the way Redisson's unlock does (DEL + PUBLISH "0") wakes us. */
    rlock_client *a = th_client(NULL, 0);
    redisContext *r = th_redis(0);
    char *name = th_name("java");
    const char *java = "1b4e28ba-2fa1-41d2-883f-0016d3cca427:1";
    th_run(r, "HSET %s %s 2", name, java);
    th_run(r, "PEXPIRE %s 30000", name);
    struct waiter w = {a, name, 20000, RLOCK_EINVAL, 0, false};
    pthread_t t;
    pthread_create(&t, NULL, wait_thread, &w);
    th_wait_waiters(0, name, 1, 3000);
    cr_assert_eq(w.returned_at, 0);
    cr_assert_eq(th_hget_int(r, name, java), 2, "our waiter never touches the holder");
    int64_t released = th_now_ms();
    th_run(r, "DEL %s", name);
    char *chan = NULL;
    cr_assert(asprintf(&chan, "redisson_lock__channel:{%s}", name) > 0);
    redisReply *rep = th_cmd(r, "PUBLISH %s 0", chan);
    cr_assert_eq(rep->integer, 1, "our client is the one subscriber");
    freeReplyObject(rep);
    pthread_join(t, NULL);
    th_ok(w.st);
    cr_assert(w.returned_at - released < th_ms(1000), "woken by the message, not the TTL");
    /* Our hold now looks exactly like a Redisson hold to a Java client. */
    cr_assert_eq(th_hlen(r, name), 1);
    cr_assert(th_pttl(r, name) > 25000);
    th_run(r, "DEL %s", name);
    free(chan);
    rlock_client_free(a);
    redisFree(r);
    free(name);
}

static int kill_child(void *arg)
{
    int *fds = arg;
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = th_url();
    cfg.watchdog_timeout_ms = 1500;
    rlock_client *c = NULL;
    if (rlock_client_new(&cfg, &c) != RLOCK_OK) {
        return 1;
    }
    rlock *l;
    if (rlock_new(c, getenv("RLOCK_KILL_NAME"), &l) != RLOCK_OK ||
        rlock_lock(l, RLOCK_WATCHDOG) != RLOCK_OK) {
        return 2;
    }
    char b = 1;
    if (write(fds[1], &b, 1) != 1) {
        return 3;
    }
    for (;;) {
        pause();
    }
}

Test(wait, killed_holder_frees_lock_after_watchdog_lease)
{
    char *name = th_name("killed");
    setenv("RLOCK_KILL_NAME", name, 1);
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = th_fork(kill_child, fds);
    char b;
    cr_assert_eq(read(fds[0], &b, 1), 1, "child took the lock");
    /* The child's watchdog renews it at least once before the kill. */
    redisContext *r = th_redis(0);
    th_wait_renewal(r, name, 3000);
    kill(pid, SIGKILL);
    int64_t killed = th_now_ms();
    cr_assert_eq(th_wait_bounded(pid, 10000), 128 + SIGKILL);
    cr_assert_eq(th_exists(r, name), 1, "still held right after the kill");
    rlock_client *a = th_client(NULL, 0);
    rlock *l;
    th_ok(rlock_new(a, name, &l));
    th_ok(rlock_try_lock(l, th_ms(10000), RLOCK_WATCHDOG));
    int64_t took = th_now_ms() - killed;
    cr_assert(took < th_ms(3000), "free after the 1.5 s lease, took %lld ms", (long long)took);
    th_ok(rlock_unlock(l));
    rlock_free(l);
    rlock_client_free(a);
    redisFree(r);
    close(fds[0]);
    close(fds[1]);
    free(name);
}

/* ---- mutual exclusion: N threads x M processes ------------------------ */

enum { PROCS = 3, THREADS = 4, ITERS = 60 };

struct counter_arg {
    rlock_client *c;
    const char *name;
    const char *counter;
    int errors;
};

static void *counter_thread(void *arg)
{
    struct counter_arg *a = arg;
    rlock *l;
    if (rlock_new(a->c, a->name, &l) != RLOCK_OK) {
        a->errors++;
        return NULL;
    }
    redisContext *r = redisConnect("127.0.0.1", th_port());
    for (int i = 0; i < ITERS; i++) {
        int depth = 1 + i % 3;
        for (int d = 0; d < depth; d++) {
            if (rlock_lock(l, RLOCK_WATCHDOG) != RLOCK_OK) {
                a->errors++;
            }
        }
        /* A non-atomic read-modify-write: only the lock keeps it exact. */
        redisReply *rep = redisCommand(r, "GET %s", a->counter);
        long long v = rep && rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
        freeReplyObject(rep);
        rep = redisCommand(r, "SET %s %lld", a->counter, v + 1);
        freeReplyObject(rep);
        for (int d = 0; d < depth; d++) {
            if (rlock_unlock(l) != RLOCK_OK) {
                a->errors++;
            }
        }
    }
    redisFree(r);
    rlock_free(l);
    return NULL;
}

static int counter_process(void *arg)
{
    char **names = arg;
    rlock_client *c = NULL;
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = th_url();
    if (rlock_client_new(&cfg, &c) != RLOCK_OK) {
        return 1;
    }
    pthread_t t[THREADS];
    struct counter_arg a[THREADS];
    for (int i = 0; i < THREADS; i++) {
        a[i] = (struct counter_arg){c, names[0], names[1], 0};
        pthread_create(&t[i], NULL, counter_thread, &a[i]);
    }
    int errors = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        errors += a[i].errors;
    }
    rlock_client_free(c);
    return errors ? 2 : 0;
}

Test(wait, threads_times_processes_keep_an_exact_count)
{
    char *name = th_name("count");
    char *counter = th_name("counter");
    char *names[2] = {name, counter};
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        pids[p] = th_fork(counter_process, names);
    }
    for (int p = 0; p < PROCS; p++) {
        cr_assert_eq(th_wait_bounded(pids[p], 60000), 0, "process %d: every call returned RLOCK_OK",
                     p);
    }
    redisContext *r = th_redis(0);
    redisReply *rep = th_cmd(r, "GET %s", counter);
    cr_assert_eq(atoll(rep->str), PROCS * THREADS * ITERS);
    freeReplyObject(rep);
    cr_assert_eq(th_exists(r, name), 0, "released at the end");
    redisFree(r);
    free(name);
    free(counter);
}

Test(wait, local_waiters_queue_in_order)
{
    /* Threads of one client waiting on one name are served in arrival
     * order: nobody barges ahead of a queued waiter. */
    rlock_client *a = th_client(NULL, 0);
    char *name = th_name("fifo");
    rlock *l;
    th_ok(rlock_new(a, name, &l));
    th_ok(rlock_lock(l, 30000));
    enum { N = 4 };
    struct waiter w[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        w[i] = (struct waiter){a, name, 20000, RLOCK_EINVAL, 0, true};
        pthread_create(&t[i], NULL, wait_thread, &w[i]);
        /* Arrival order: no call tells from outside that a thread has
         * queued, so each gets time to before the next one starts. */
        th_sleep_ms(th_ms(200));
    }
    th_ok(rlock_unlock(l));
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        th_ok(w[i].st);
    }
    for (int i = 1; i < N; i++) {
        cr_assert(w[i].returned_at >= w[i - 1].returned_at, "waiter %d before %d", i - 1, i);
    }
    rlock_free(l);
    rlock_client_free(a);
    free(name);
}
