/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * port_interruptible — lockInterruptibly(), in C.
 *
 * The Java this ports (Redisson):
 *
 *     try {
 *         lock.lockInterruptibly();
 *         try { drainQueue(); } finally { lock.unlock(); }
 *     } catch (InterruptedException e) {
 *         // another thread called worker.interrupt(): give up waiting
 *     }
 *
 * C threads have no interrupt; rlock has cancellation tokens instead
 * (since 0.2). The waiting thread passes a token to rlock_lock_ex(); any
 * other thread calls rlock_cancel_fire() on it, and the wait returns
 * RLOCK_ECANCELED at once, without the lock. worker.interrupt() becomes
 * rlock_cancel_fire(token); Thread.interrupted() clearing the flag becomes
 * rlock_cancel_reset(token).
 *
 * Usage: port_interruptible [redis-url]
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

struct worker {
    rlock *lock;
    rlock_cancel *cancel; /* the worker's "interrupt" */
    rlock_status result;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    /* lock.lockInterruptibly(): wait as long as it takes, unless cancelled
     * (RLOCK_ECANCELED, the lock not taken). */
    w->result = rlock_lock_ex(w->lock, RLOCK_WAIT_FOREVER, RLOCK_WATCHDOG, w->cancel, NULL);
    if (w->result == RLOCK_OK) {
        printf("worker: got the lock, draining the queue\n");
        w->result = rlock_unlock(w->lock);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int rc = 1;
    rlock_client *client = NULL;
    rlock *lock = NULL;
    rlock_config cfg;
    rlock_status st;
    bool held = false;
    pthread_t t;
    struct worker w = {NULL, NULL, RLOCK_EINVAL};

    rlock_config_init(&cfg);
    cfg.url = example_url(argc, argv);
    st = rlock_client_new(&cfg, &client);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_client_new(%s): %s\n", cfg.url, rlock_strerror(st));
        goto cleanup;
    }
    st = rlock_new(client, "example:port_interruptible", &lock);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_new: %s\n", rlock_strerror(st));
        goto cleanup;
    }
    st = rlock_lock(lock, RLOCK_WATCHDOG);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_lock: %s\n", rlock_strerror(st));
        goto cleanup;
    }
    held = true;
    st = rlock_cancel_new(&w.cancel);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_cancel_new: %s\n", rlock_strerror(st));
        goto cleanup;
    }

    /* Round 1: the worker waits, then is "interrupted". */
    w.lock = lock;
    w.result = RLOCK_EINVAL;
    if (pthread_create(&t, NULL, worker_main, &w) != 0) {
        goto cleanup;
    }
    sleep_ms(300);
    rlock_cancel_fire(w.cancel); /* worker.interrupt() */
    pthread_join(t, NULL);
    printf("round 1 (cancelled): %s\n", rlock_status_name(w.result));
    if (w.result != RLOCK_ECANCELED) {
        goto cleanup;
    }

    /* Round 2: the worker waits, and gets the lock when main unlocks. */
    rlock_cancel_reset(w.cancel);
    w.result = RLOCK_EINVAL;
    if (pthread_create(&t, NULL, worker_main, &w) != 0) {
        goto cleanup;
    }
    sleep_ms(300);
    st = rlock_unlock(lock);
    held = false;
    pthread_join(t, NULL);
    printf("round 2 (unlocked): %s\n", rlock_status_name(w.result));
    if (st != RLOCK_OK || w.result != RLOCK_OK) {
        goto cleanup;
    }
    rc = 0;
    printf("port_interruptible: ok\n");

cleanup:
    if (held) {
        rlock_unlock(lock);
    }
    rlock_free(lock);
    rlock_client_free(client);
    rlock_cancel_free(w.cancel);
    return rc;
}
