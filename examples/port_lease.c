/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * port_lease — lock(leaseTime, unit) and remainTimeToLive(), in C.
 *
 * The Java this ports (Redisson):
 *
 *     RLock lock = redisson.getLock("example:port_lease");
 *     lock.lock(10, TimeUnit.SECONDS);   // expires after 10 s, no watchdog
 *     try {
 *         long ttl = lock.remainTimeToLive();   // <= 10000 ms
 *     } finally {
 *         lock.unlock();
 *     }
 *     lock.remainTimeToLive();           // -2: not locked
 *
 *     lock.lock(300, TimeUnit.MILLISECONDS);
 *     Thread.sleep(600);                 // the lease runs out
 *     lock.unlock();                     // IllegalMonitorStateException
 *
 * With an explicit lease nothing renews the lock: if the work outlasts the
 * lease the lock expires and another owner may take it. rlock reports that
 * at unlock as RLOCK_ELOST.
 *
 * Usage: port_lease [redis-url]
 * The URL comes from argv[1], else $RLOCK_URL, else redis://127.0.0.1:6379.
 * Exits 0 on success, 1 on any failure.
 */
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

int main(int argc, char **argv)
{
    int rc = 1;
    rlock_client *client = NULL;
    rlock *lock = NULL;
    rlock_config cfg;
    rlock_status st;
    int64_t ttl = 0;
    bool locked = true;

    rlock_config_init(&cfg);
    cfg.url = example_url(argc, argv);
    st = rlock_client_new(&cfg, &client);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_client_new(%s): %s\n", cfg.url, rlock_strerror(st));
        goto cleanup;
    }
    st = rlock_new(client, "example:port_lease", &lock);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_new: %s\n", rlock_strerror(st));
        goto cleanup;
    }

    /* lock.lock(10, TimeUnit.SECONDS) */
    st = rlock_lock(lock, 10000);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_lock: %s\n", rlock_strerror(st));
        goto cleanup;
    }
    st = rlock_remain_ttl(lock, &ttl); /* lock.remainTimeToLive() */
    printf("leased for 10 s, %lld ms left\n", (long long)ttl);
    if (st != RLOCK_OK || ttl <= 0 || ttl > 10000) {
        fprintf(stderr, "rlock_remain_ttl: %s, ttl %lld\n", rlock_status_name(st), (long long)ttl);
        rlock_unlock(lock);
        goto cleanup;
    }
    st = rlock_unlock(lock);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_unlock: %s\n", rlock_strerror(st));
        goto cleanup;
    }
    st = rlock_remain_ttl(lock, &ttl);
    printf("after unlock: remain ttl %lld\n", (long long)ttl);
    if (st != RLOCK_OK || ttl != -2) {
        fprintf(stderr, "expected -2 after unlock, got %lld (%s)\n", (long long)ttl,
                rlock_status_name(st));
        goto cleanup;
    }

    /* A lease shorter than the work: the lock expires while "held". */
    st = rlock_lock(lock, 300);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_lock: %s\n", rlock_strerror(st));
        goto cleanup;
    }
    sleep_ms(600);
    st = rlock_is_locked(lock, &locked);
    if (st != RLOCK_OK || locked) {
        fprintf(stderr, "expected the lease to have run out (%s)\n", rlock_status_name(st));
        goto cleanup;
    }
    st = rlock_unlock(lock);
    printf("unlock after the lease ran out: %s (%s)\n", rlock_status_name(st), rlock_strerror(st));
    if (st != RLOCK_ELOST) {
        fprintf(stderr, "expected RLOCK_ELOST\n");
        goto cleanup;
    }
    rc = 0;
    printf("port_lease: ok\n");

cleanup:
    rlock_free(lock);
    rlock_client_free(client);
    return rc;
}
