/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * port_interruptible — an alternative to lockInterruptibly(), in C.
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
 * C threads have no interrupt. rlock has no lock_interruptibly() (yet);
 * instead wait in bounded slices with rlock_try_lock() and check a flag of
 * your own between slices. A cancel is noticed within one slice; each slice
 * is still woken at once by an unlock, so no latency is added when the
 * lock comes free.
 *
 * Usage: port_interruptible [redis-url]
 * The URL comes from argv[1], else $RLOCK_URL, else redis://127.0.0.1:6379.
 * Exits 0 on success, 1 on any failure.
 */
#include <pthread.h>
#include <rlock.h>
#include <stdatomic.h>
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

/* How long one slice waits before the cancel flag is checked again. */
#define SLICE_MS 100

/* Like lockInterruptibly(): RLOCK_OK when acquired, RLOCK_EBUSY when
 * *cancel was set before the lock came free, or any rlock_lock() status. */
static rlock_status lock_cancellable(rlock *lock, int64_t lease_ms, atomic_bool *cancel)
{
    for (;;) {
        if (atomic_load(cancel)) {
            return RLOCK_EBUSY;
        }
        rlock_status st = rlock_try_lock(lock, SLICE_MS, lease_ms);
        if (st != RLOCK_EBUSY) {
            return st;
        }
    }
}

struct worker {
    rlock *lock;
    atomic_bool cancel;
    rlock_status result;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    w->result = lock_cancellable(w->lock, RLOCK_WATCHDOG, &w->cancel);
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
    struct worker w;

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

    /* Round 1: the worker waits, then is "interrupted". */
    w.lock = lock;
    atomic_init(&w.cancel, false);
    w.result = RLOCK_EINVAL;
    if (pthread_create(&t, NULL, worker_main, &w) != 0) {
        goto cleanup;
    }
    sleep_ms(300);
    atomic_store(&w.cancel, true); /* worker.interrupt() */
    pthread_join(t, NULL);
    printf("round 1 (cancelled): %s\n", rlock_status_name(w.result));
    if (w.result != RLOCK_EBUSY) {
        goto cleanup;
    }

    /* Round 2: the worker waits, and gets the lock when main unlocks. */
    atomic_store(&w.cancel, false);
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
    return rc;
}
