/* SPDX-License-Identifier: BSD-3-Clause */
/* The rlock demo: two processes, two threads each, taking one lock nested
 * three deep while the watchdog renews its lease; then one process is
 * killed while holding the lock and the other takes over after the lease.
 * It prints when a thread starts waiting, when it gets the lock, and when
 * the watchdog renews the lease.
 *
 *   make demo                  (starts a throwaway redis-server)
 *   RLOCK_URL=redis://host:port build/examples/demo
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rlock.h"

#define WATCHDOG_MS 3000 /* short, so renewals show: one every second */

static const char *url;
static char lock_name[64];
static struct timespec t0;

static double elapsed(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9;
}

#define say(who, ...)                                       \
    do {                                                    \
        char msg_[200];                                     \
        snprintf(msg_, sizeof msg_, __VA_ARGS__);           \
        printf("%6.2fs  %-10s %s\n", elapsed(), who, msg_); \
        fflush(stdout);                                     \
    } while (0)

static void check(rlock_status st, const char *what)
{
    if (st != RLOCK_OK) {
        fprintf(stderr, "demo: %s: %s\n", what, rlock_strerror(st));
        exit(1);
    }
}

static rlock_client *new_client(void)
{
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.watchdog_timeout_ms = WATCHDOG_MS;
    rlock_client *c = NULL;
    check(rlock_client_new(&cfg, &c), "rlock_client_new");
    return c;
}

struct worker {
    rlock_client *c;
    char who[16];
};

/* Locks taken by this process's watchdog so far: how the demo sees a
 * renewal happen (the lease jumping back up is the effect in Redis). */
static uint64_t renewed_so_far(rlock_client *c)
{
    uint64_t n = 0;
    check(rlock_client_stat(c, RLOCK_STAT_RENEWED, &n), "rlock_client_stat");
    return n;
}

/* Takes the lock, saying so first if someone else holds it. */
static void take(struct worker *w, rlock *l)
{
    rlock_status st = rlock_try_lock(l, 0, RLOCK_WATCHDOG);
    if (st == RLOCK_EBUSY) {
        say(w->who, "waiting   the lock is held by another thread or process");
        double t = elapsed();
        check(rlock_lock(l, RLOCK_WATCHDOG), "rlock_lock");
        say(w->who, "got it    after waiting %.2f s", elapsed() - t);
        return;
    }
    check(st, "rlock_try_lock");
}

/* Nested three deep, then hold for 2.5 s at depth 3, reporting each
 * renewal by the watchdog and the lease it left. */
static void *worker(void *arg)
{
    struct worker *w = arg;
    rlock *l;
    check(rlock_new(w->c, lock_name, &l), "rlock_new");
    for (int depth = 1; depth <= 3; depth++) {
        take(w, l);
        int64_t count = 0, ttl = 0;
        check(rlock_hold_count(l, &count), "rlock_hold_count");
        check(rlock_remain_ttl(l, &ttl), "rlock_remain_ttl");
        say(w->who, "lock      -> hold count %lld, lease %lld ms", (long long)count,
            (long long)ttl);
    }
    uint64_t renewed = renewed_so_far(w->c);
    for (int tick = 1; tick <= 25; tick++) {
        usleep(100 * 1000);
        int64_t ttl = 0;
        uint64_t now = renewed_so_far(w->c);
        if (now != renewed) {
            renewed = now;
            check(rlock_remain_ttl(l, &ttl), "rlock_remain_ttl");
            say(w->who, "watchdog  renewed the lease -> %lld ms left", (long long)ttl);
        } else if (tick % 5 == 0) {
            check(rlock_remain_ttl(l, &ttl), "rlock_remain_ttl");
            say(w->who, "holding   lease %lld ms left", (long long)ttl);
        }
    }
    for (int depth = 3; depth >= 1; depth--) {
        if (depth == 1) {
            say(w->who, "unlock    the last hold: this releases the lock and wakes a waiter");
        }
        check(rlock_unlock(l), "rlock_unlock");
        int64_t count = 0;
        check(rlock_hold_count(l, &count), "rlock_hold_count");
        say(w->who, "unlock    -> hold count %lld", (long long)count);
    }
    rlock_free(l);
    return NULL;
}

static void run_process(const char *proc)
{
    rlock_client *c = new_client();
    pthread_t t[2];
    struct worker w[2];
    for (int i = 0; i < 2; i++) {
        w[i].c = c;
        snprintf(w[i].who, sizeof w[i].who, "%s/t%d", proc, i + 1);
        pthread_create(&t[i], NULL, worker, &w[i]);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
    }
    rlock_client_free(c);
}

int main(void)
{
    url = getenv("RLOCK_URL");
    clock_gettime(CLOCK_MONOTONIC, &t0);
    snprintf(lock_name, sizeof lock_name, "rlock-demo:%d", (int)getpid());
    printf("rlock %s demo on %s, lock \"%s\"\n\n", rlock_version(),
           url ? url : "redis://127.0.0.1:6379", lock_name);
    printf("A lock is a key in Redis that one thread at a time holds, whichever process or "
           "machine it runs on.\n"
           "  hold count  how many times the holding thread has locked it; it unlocks as many "
           "times.\n"
           "  lease       how long Redis keeps the lock if nobody renews it, e.g. after its "
           "holder died.\n"
           "  watchdog    a thread in each process that renews the leases of the locks it holds "
           "(here: every %d ms).\n\n",
           WATCHDOG_MS / 3);

    printf("Part 1: processes A and B, two threads each. Each thread locks three times "
           "(nested), holds\nthe lock for 2.5 s while the watchdog renews it, then unlocks "
           "three times.\n");
    fflush(stdout);
    pid_t a = fork();
    if (a == 0) {
        run_process("A");
        _exit(0);
    }
    pid_t b = fork();
    if (b == 0) {
        run_process("B");
        _exit(0);
    }
    int st_a = 0, st_b = 0;
    waitpid(a, &st_a, 0);
    waitpid(b, &st_b, 0);
    if (!WIFEXITED(st_a) || WEXITSTATUS(st_a) || !WIFEXITED(st_b) || WEXITSTATUS(st_b)) {
        fprintf(stderr, "demo: a worker process failed\n");
        return 1;
    }

    printf("\nPart 2: process A takes the lock and is killed (SIGKILL) while holding it.\n");
    fflush(stdout);
    int ready[2];
    if (pipe(ready) != 0) {
        return 1;
    }
    a = fork();
    if (a == 0) {
        rlock_client *c = new_client();
        rlock *l;
        check(rlock_new(c, lock_name, &l), "rlock_new");
        check(rlock_lock(l, RLOCK_WATCHDOG), "rlock_lock");
        say("A", "holds the lock");
        char one = 1;
        if (write(ready[1], &one, 1) != 1) {
            _exit(1);
        }
        for (;;) {
            pause();
        }
    }
    char one;
    if (read(ready[0], &one, 1) != 1) {
        return 1;
    }
    sleep(1);
    kill(a, SIGKILL);
    waitpid(a, NULL, 0);
    say("main", "killed A; nobody renews its lease now, so the lock ends with it (<= %d ms)",
        WATCHDOG_MS);

    rlock_client *c = new_client();
    rlock *l;
    check(rlock_new(c, lock_name, &l), "rlock_new");
    int64_t ttl = 0;
    check(rlock_remain_ttl(l, &ttl), "rlock_remain_ttl");
    say("B", "waiting   for A's lock; its lease has %lld ms left", (long long)ttl);
    double t_wait = elapsed();
    check(rlock_lock(l, RLOCK_WATCHDOG), "rlock_lock");
    say("B", "got it    after waiting %.2f s: the lease ran out", elapsed() - t_wait);
    check(rlock_unlock(l), "rlock_unlock");
    bool locked = true;
    check(rlock_is_locked(l, &locked), "rlock_is_locked");
    say("B", "unlock    -> locked now: %s", locked ? "yes" : "no");
    rlock_free(l);
    rlock_client_free(c);
    printf("\ndemo done\n");
    return 0;
}
