/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * port_spin — Redisson's getSpinLock() and its back-off options, in C.
 *
 * The Java this ports (Redisson):
 *
 *     RLock lock = redisson.getSpinLock("example:port_spin");
 *     lock.lock();
 *     try {
 *         updateInventory();
 *     } finally {
 *         lock.unlock();
 *     }
 *
 *     RLock quick = redisson.getSpinLock("example:port_spin",
 *             new LockOptions.ExponentialBackOff().initialDelay(2).maxDelay(64));
 *
 * A spin lock keeps the same hash as getLock() but uses no pub/sub: its
 * unlock publishes nothing and a waiter polls, sleeping longer after each
 * failed attempt. In rlock the back-off is the client's
 * (spin_min_delay_ms, spin_max_delay_ms), not the lock object's. Here a
 * second thread waits while the main thread holds the lock, and takes it
 * within spin_max_delay_ms of the unlock.
 *
 * Usage: port_spin [redis-url]
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

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void update_inventory(void)
{
    printf("thread %llu: updating the inventory\n", (unsigned long long)rlock_thread_id());
}

static int with_spin_lock(rlock *lock)
{
    rlock_status st = rlock_lock(lock, RLOCK_WATCHDOG); /* lock.lock() */
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_lock: %s\n", rlock_strerror(st));
        return -1;
    }
    update_inventory();
    st = rlock_unlock(lock); /* finally { lock.unlock(); }: no publish */
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_unlock: %s\n", rlock_strerror(st));
        return -1;
    }
    return 0;
}

struct waiter {
    rlock *lock;
    long got_at;
    int rc;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    w->rc = with_spin_lock(w->lock);
    w->got_at = now_ms();
    return NULL;
}

int main(int argc, char **argv)
{
    int rc = 1;
    rlock_client *client = NULL;
    rlock *lock = NULL;
    rlock_config cfg;
    rlock_status st;

    rlock_config_init(&cfg);
    cfg.url = example_url(argc, argv);
    /* new LockOptions.ExponentialBackOff().initialDelay(2).maxDelay(64),
     * for every spin lock of this client (0, 0: Redisson's 1 and 128). */
    cfg.spin_min_delay_ms = 2;
    cfg.spin_max_delay_ms = 64;
    st = rlock_client_new(&cfg, &client);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_client_new(%s): %s\n", cfg.url, rlock_strerror(st));
        goto cleanup;
    }
    st = rlock_new_spin(client, "example:port_spin", &lock); /* getSpinLock() */
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_new_spin: %s\n", rlock_strerror(st));
        goto cleanup;
    }
    if (with_spin_lock(lock) != 0) {
        goto cleanup;
    }

    /* Held by this thread while another one spins on it. */
    st = rlock_lock(lock, 10000);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_lock: %s\n", rlock_strerror(st));
        goto cleanup;
    }
    struct waiter w = {lock, 0, -1};
    pthread_t t;
    if (pthread_create(&t, NULL, waiter_main, &w) != 0) {
        fprintf(stderr, "pthread_create failed\n");
        rlock_unlock(lock);
        goto cleanup;
    }
    sleep_ms(500); /* the waiter's delay grows to 64 ms meanwhile */
    long released_at = now_ms();
    st = rlock_unlock(lock);
    pthread_join(t, NULL);
    if (st != RLOCK_OK || w.rc != 0) {
        fprintf(stderr, "unlock: %s, waiter %d\n", rlock_status_name(st), w.rc);
        goto cleanup;
    }
    printf("the waiter took the lock %ld ms after the unlock (at most about 64)\n",
           w.got_at - released_at);
    rc = 0;
    printf("port_spin: ok\n");

cleanup:
    rlock_free(lock);
    rlock_client_free(client);
    return rc;
}
