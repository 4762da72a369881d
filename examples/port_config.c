/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * port_config — a Redisson Config, in C.
 *
 * The Java this ports (Redisson, single server):
 *
 *     Config config = new Config();
 *     config.setLockWatchdogTimeout(10_000);
 *     config.useSingleServer()
 *           .setAddress("redis://127.0.0.1:6379")
 *           .setDatabase(0)
 *           .setPassword(null)
 *           .setConnectionPoolSize(8)
 *           .setConnectTimeout(2_000)
 *           .setTimeout(3_000)
 *           .setSubscriptionTimeout(7_500);
 *     RedissonClient redisson = Redisson.create(config);
 *
 * In rlock the address, user, password and database all go in the URL,
 * e.g. redis://app:s3cret@10.0.0.5:6379/2. Fields left at 0 take their
 * defaults; rlock_config_init() writes every default.
 *
 * Usage: port_config [redis-url]
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

/* Config has no listener for lost locks; rlock calls this on its watchdog
 * thread when a renewal finds a watchdog-mode hold gone. */
static void lock_lost(const char *name, uint64_t thread_id, void *arg)
{
    (void)arg;
    fprintf(stderr, "lost lock %s held by thread %llu\n", name, (unsigned long long)thread_id);
}

int main(int argc, char **argv)
{
    int rc = 1;
    rlock_client *client = NULL;
    rlock *lock = NULL;
    rlock_config cfg;
    rlock_status st;
    int64_t ttl = 0;

    rlock_config_init(&cfg);
    cfg.url = example_url(argc, argv); /* address, user, password, db */
    cfg.watchdog_timeout_ms = 10000;   /* lockWatchdogTimeout */
    cfg.pool_size = 8;                 /* connectionPoolSize */
    cfg.connect_timeout_ms = 2000;     /* connectTimeout */
    cfg.command_timeout_ms = 3000;     /* timeout */
    cfg.subscribe_timeout_ms = 7500;   /* subscriptionTimeout */
    cfg.watchdog_batch_size = 100;     /* lockWatchdogBatchSize */
    cfg.retry_timeout_ms = 30000;      /* ~ retryAttempts x retryDelay */
    cfg.on_lock_lost = lock_lost;      /* no Redisson equivalent */
    cfg.on_lock_lost_arg = NULL;

    st = rlock_client_new(&cfg, &client); /* Redisson.create(config) */
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_client_new(%s): %s (%s)\n", cfg.url, rlock_strerror(st),
                rlock_status_name(st));
        goto cleanup;
    }
    printf("rlock %s, client id %s\n", rlock_version(), rlock_client_id(client));

    /* A watchdog-mode hold is leased for watchdog_timeout_ms. */
    st = rlock_new(client, "example:port_config", &lock);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_new: %s\n", rlock_strerror(st));
        goto cleanup;
    }
    st = rlock_lock(lock, RLOCK_WATCHDOG);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_lock: %s\n", rlock_strerror(st));
        goto cleanup;
    }
    st = rlock_remain_ttl(lock, &ttl);
    rlock_status ust = rlock_unlock(lock);
    printf("watchdog lease: %lld ms left of 10000\n", (long long)ttl);
    if (st != RLOCK_OK || ttl <= 0 || ttl > 10000 || ust != RLOCK_OK) {
        fprintf(stderr, "remain ttl %s, unlock %s\n", rlock_status_name(st),
                rlock_status_name(ust));
        goto cleanup;
    }
    rc = 0;
    printf("port_config: ok\n");

cleanup:
    rlock_free(lock);
    rlock_client_free(client); /* redisson.shutdown() */
    return rc;
}
