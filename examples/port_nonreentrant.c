/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * port_nonreentrant — Redisson 4.4's getNonReentrantLock(), in C.
 *
 * The Java this ports (Redisson 4.4 or later):
 *
 *     RLock lock = redisson.getNonReentrantLock("example:port_nonreentrant");
 *     lock.lock();
 *     try {
 *         lock.tryLock();   // throws IllegalMonitorStateException
 *     } catch (IllegalMonitorStateException e) {
 *         // the holder asked again
 *     } finally {
 *         lock.unlock();
 *     }
 *
 * The lock is getLock()'s (same hash, channel and unlock), except that the
 * thread holding it cannot take it again: rlock answers RLOCK_EDEADLK at
 * once, where Redisson throws, and nothing changes in Redis. One unlock
 * releases it.
 *
 * Usage: port_nonreentrant [redis-url]
 * The URL comes from argv[1], else $RLOCK_URL, else redis://127.0.0.1:6379.
 * Exits 0 on success, 1 on any failure.
 */
#include <rlock.h>
#include <stdio.h>
#include <stdlib.h>

static const char *example_url(int argc, char **argv)
{
    const char *env = getenv("RLOCK_URL");
    if (argc > 1) {
        return argv[1];
    }
    return env && *env ? env : "redis://127.0.0.1:6379";
}

static int lock_twice(rlock *lock)
{
    rlock_status st = rlock_lock(lock, RLOCK_WATCHDOG);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_lock: %s\n", rlock_strerror(st));
        return -1;
    }
    int rc = 0;
    /* The holder asks again: Java throws IllegalMonitorStateException. */
    st = rlock_try_lock(lock, 0, RLOCK_WATCHDOG);
    if (st != RLOCK_EDEADLK) {
        fprintf(stderr, "second lock: expected RLOCK_EDEADLK, got %s\n", rlock_status_name(st));
        rc = -1;
    }
    printf("second lock by the holder: %s\n", rlock_status_name(st));
    int64_t count = 0;
    if (rlock_hold_count(lock, &count) != RLOCK_OK || count != 1) {
        fprintf(stderr, "hold count %lld, expected 1\n", (long long)count);
        rc = -1;
    }
    st = rlock_unlock(lock); /* one unlock releases it */
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_unlock: %s\n", rlock_strerror(st));
        rc = -1;
    }
    return rc;
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
    st = rlock_client_new(&cfg, &client);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_client_new(%s): %s\n", cfg.url, rlock_strerror(st));
        goto cleanup;
    }
    st = rlock_new_nonreentrant(client, "example:port_nonreentrant", &lock);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_new_nonreentrant: %s\n", rlock_strerror(st));
        goto cleanup;
    }
    if (lock_twice(lock) != 0) {
        goto cleanup;
    }
    bool locked = true;
    st = rlock_is_locked(lock, &locked);
    if (st != RLOCK_OK || locked) {
        fprintf(stderr, "still locked after one unlock (%s)\n", rlock_status_name(st));
        goto cleanup;
    }
    rc = 0;
    printf("port_nonreentrant: ok\n");

cleanup:
    rlock_free(lock);
    rlock_client_free(client);
    return rc;
}
