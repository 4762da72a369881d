/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * port_basic — Redisson's lock() / unlock() with the watchdog, in C.
 *
 * The Java this ports (Redisson):
 *
 *     RLock lock = redisson.getLock("example:port_basic");
 *     lock.lock();                       // no lease: the watchdog renews it
 *     try {
 *         updateInventory();
 *     } finally {
 *         lock.unlock();
 *     }
 *
 * C has no finally: a hold is released on every path that took it, and
 * every resource is freed at one cleanup label.
 *
 * Usage: port_basic [redis-url]
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

/* The critical section: runs only while this thread holds the lock. */
static int update_inventory(rlock *lock)
{
    int64_t count = 0;
    bool locked = false;
    rlock_status st = rlock_hold_count(lock, &count);
    if (st == RLOCK_OK) {
        st = rlock_is_locked(lock, &locked);
    }
    if (st != RLOCK_OK || count != 1 || !locked) {
        fprintf(stderr, "update_inventory: %s, hold count %lld\n", rlock_status_name(st),
                (long long)count);
        return -1;
    }
    printf("holding %s (hold count %lld)\n", rlock_name(lock), (long long)count);
    return 0;
}

int main(int argc, char **argv)
{
    int rc = 1;
    rlock_client *client = NULL;
    rlock *lock = NULL;
    rlock_config cfg;
    rlock_status st;

    /* Redisson.create(config) */
    rlock_config_init(&cfg);
    cfg.url = example_url(argc, argv);
    st = rlock_client_new(&cfg, &client);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_client_new(%s): %s\n", cfg.url, rlock_strerror(st));
        goto cleanup;
    }

    /* redisson.getLock(name): touches no server */
    st = rlock_new(client, "example:port_basic", &lock);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_new: %s\n", rlock_strerror(st));
        goto cleanup;
    }

    /* lock.lock(); try { ... } finally { lock.unlock(); } */
    st = rlock_lock(lock, RLOCK_WATCHDOG);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_lock: %s\n", rlock_strerror(st));
        goto cleanup; /* not acquired: nothing to unlock */
    }
    int work = update_inventory(lock);
    st = rlock_unlock(lock);
    if (st != RLOCK_OK) {
        /* RLOCK_ELOST is Java's IllegalMonitorStateException on unlock: the
         * lock expired (or was force-unlocked) while we held it. */
        fprintf(stderr, "rlock_unlock: %s\n", rlock_strerror(st));
        goto cleanup;
    }
    if (work != 0) {
        goto cleanup;
    }
    rc = 0;
    printf("port_basic: ok\n");

cleanup:
    rlock_free(lock);          /* before or after the client */
    rlock_client_free(client); /* redisson.shutdown() */
    return rc;
}
