/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * port_fair — Redisson's getFairLock() and getNonReentrantFairLock(), in C.
 *
 * The Java this ports (Redisson):
 *
 *     RLock lock = redisson.getFairLock("example:port_fair");
 *     lock.lock();               // waiters are served in arrival order
 *     try {
 *         printTicket();
 *     } finally {
 *         lock.unlock();
 *     }
 *
 *     RLock once = redisson.getNonReentrantFairLock("example:port_fair:once");
 *     once.lock();
 *     once.lock();               // IllegalMonitorStateException
 *
 * The main thread holds the fair lock while three threads queue for it,
 * one after the other; when it unlocks they get it in the order they
 * came, each woken by the release before it (only the queue's head is
 * woken). Then the non-reentrant form: asked again by its holder, it
 * answers RLOCK_EDEADLK at once.
 *
 * Usage: port_fair [redis-url]
 * The URL comes from argv[1], else $RLOCK_URL, else redis://127.0.0.1:6379.
 * Exits 0 on success, 1 on any failure.
 */
#include <pthread.h>
#include <rlock.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static const char *example_url(int argc, char **argv)
{
    const char *env = getenv("RLOCK_URL");
    if (argc > 1) {
        return argv[1];
    }
    return env && *env ? env : "redis://127.0.0.1:6379";
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

enum { WAITERS = 3 };

static pthread_mutex_t served_mu = PTHREAD_MUTEX_INITIALIZER;
static int served[WAITERS], nserved;

struct customer {
    rlock *lock;
    int number;
    rlock_status st;
};

/* lock(); try { printTicket(); } finally { unlock(); } */
static void *customer_main(void *arg)
{
    struct customer *cu = arg;
    rlock_status st = rlock_lock(cu->lock, RLOCK_WATCHDOG); /* queues in Redis */
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_lock: %s\n", rlock_strerror(st));
        cu->st = st;
        return NULL;
    }
    pthread_mutex_lock(&served_mu);
    served[nserved++] = cu->number; /* printTicket() */
    pthread_mutex_unlock(&served_mu);
    cu->st = rlock_unlock(cu->lock); /* wakes the next in the queue */
    return NULL;
}

static int fifo(rlock_client *c)
{
    rlock *lock;
    if (rlock_new_fair(c, "example:port_fair", &lock) != RLOCK_OK) {
        return 1;
    }
    int rc = 1;
    struct customer cu[WAITERS];
    pthread_t th[WAITERS];
    int started = 0;
    if (rlock_lock(lock, RLOCK_WATCHDOG) != RLOCK_OK) {
        goto out;
    }
    for (; started < WAITERS; started++) {
        cu[started] = (struct customer){lock, started, RLOCK_OK};
        pthread_create(&th[started], NULL, customer_main, &cu[started]);
        sleep_ms(200); /* in the queue before the next one comes */
    }
    printf("%d threads queued behind the holder\n", WAITERS);
    rlock_unlock(lock);
    rc = 0;
out:
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        if (cu[i].st != RLOCK_OK) {
            rc = 1;
        }
    }
    for (int i = 0; i < nserved; i++) {
        printf("served: thread %d\n", served[i]);
        if (served[i] != i) {
            fprintf(stderr, "thread %d was served out of turn\n", served[i]);
            rc = 1;
        }
    }
    if (nserved != started) {
        rc = 1;
    }
    rlock_free(lock);
    return rc;
}

static int non_reentrant(rlock_client *c)
{
    rlock *once;
    if (rlock_new_fair_nonreentrant(c, "example:port_fair:once", &once) != RLOCK_OK) {
        return 1;
    }
    int rc = 1;
    rlock_status st = rlock_lock(once, RLOCK_WATCHDOG);
    if (st == RLOCK_OK) {
        st = rlock_lock(once, RLOCK_WATCHDOG); /* Java: IllegalMonitorStateException */
        if (st == RLOCK_EDEADLK) {
            printf("asked again by its holder: %s\n", rlock_status_name(st));
            rc = 0;
        } else {
            fprintf(stderr, "second lock: %s, expected RLOCK_EDEADLK\n", rlock_status_name(st));
        }
        if (rlock_unlock(once) != RLOCK_OK) { /* one unlock releases it */
            rc = 1;
        }
    }
    rlock_free(once);
    return rc;
}

int main(int argc, char **argv)
{
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = example_url(argc, argv);
    rlock_client *c;
    rlock_status st = rlock_client_new(&cfg, &c);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_client_new: %s (%s)\n", rlock_strerror(st), rlock_last_error());
        return 1;
    }
    int rc = fifo(c) || non_reentrant(c);
    rlock_client_free(c);
    printf(rc ? "FAILED\n" : "OK\n");
    return rc;
}
