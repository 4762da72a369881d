/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * port_threads — thread identity: isHeldByThread(), isHeldByCurrentThread()
 * and unlocking from the wrong thread, in C.
 *
 * The Java this ports (Redisson):
 *
 *     lock.lock();                                   // on thread A
 *     long a = Thread.currentThread().getId();
 *     executor.submit(() -> {                        // thread B
 *         lock.isHeldByCurrentThread();              // false
 *         lock.isHeldByThread(a);                    // true
 *         lock.unlock();      // IllegalMonitorStateException: not the owner
 *     }).get();
 *     lock.unlock();                                 // thread A: fine
 *
 * The owner of a hold is "<client uuid>:<thread id>", where the thread id is
 * rlock_thread_id() (Java: Thread.getId()). A hold taken on one thread must
 * be released on that thread.
 *
 * Usage: port_threads [redis-url]
 * The URL comes from argv[1], else $RLOCK_URL, else redis://127.0.0.1:6379.
 * Exits 0 on success, 1 on any failure.
 */
#include <pthread.h>
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

struct other {
    rlock *lock;
    uint64_t owner_tid; /* thread A's rlock_thread_id() */
    bool mine, owners;
    rlock_status query_st, unlock_st;
};

/* Thread B: sees A's hold, cannot release it. */
static void *other_main(void *arg)
{
    struct other *o = arg;
    o->query_st = rlock_is_held_by_current_thread(o->lock, &o->mine);
    if (o->query_st == RLOCK_OK) {
        o->query_st = rlock_is_held_by_thread(o->lock, o->owner_tid, &o->owners);
    }
    o->unlock_st = rlock_unlock(o->lock);
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

    rlock_config_init(&cfg);
    cfg.url = example_url(argc, argv);
    st = rlock_client_new(&cfg, &client);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_client_new(%s): %s\n", cfg.url, rlock_strerror(st));
        goto cleanup;
    }
    st = rlock_new(client, "example:port_threads", &lock);
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
    /* The hash field Redis holds for this hold (see docs/protocol.md). */
    printf("owner field: %s:%llu\n", rlock_client_id(client),
           (unsigned long long)rlock_thread_id());

    struct other o = {lock, rlock_thread_id(), true, false, RLOCK_EINVAL, RLOCK_EINVAL};
    if (pthread_create(&t, NULL, other_main, &o) != 0) {
        goto cleanup;
    }
    pthread_join(t, NULL);
    printf("thread B: held by me %d, held by A %d, unlock %s\n", o.mine, o.owners,
           rlock_status_name(o.unlock_st));
    if (o.query_st != RLOCK_OK || o.mine || !o.owners || o.unlock_st != RLOCK_ENOTOWNER) {
        fprintf(stderr, "unexpected outcome on thread B\n");
        goto cleanup;
    }

    st = rlock_unlock(lock); /* the owning thread releases it */
    held = false;
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_unlock: %s\n", rlock_strerror(st));
        goto cleanup;
    }
    rc = 0;
    printf("port_threads: ok\n");

cleanup:
    if (held) {
        rlock_unlock(lock);
    }
    rlock_free(lock);
    rlock_client_free(client);
    return rc;
}
