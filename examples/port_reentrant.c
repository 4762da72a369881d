/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * port_reentrant — re-entry and getHoldCount(), in C.
 *
 * The Java this ports (Redisson):
 *
 *     void transfer(RLock lock) {
 *         lock.lock();
 *         try {
 *             debit(lock);               // takes the same lock again
 *             System.out.println(lock.getHoldCount());   // 1
 *         } finally {
 *             lock.unlock();
 *         }
 *     }
 *     void debit(RLock lock) {
 *         lock.lock();
 *         try {
 *             System.out.println(lock.getHoldCount());   // 2
 *         } finally {
 *             lock.unlock();
 *         }
 *     }
 *
 * The same thread may take a lock it holds; Redis counts the holds in the
 * owner's hash field and the key is deleted (and waiters woken) only by the
 * unlock that brings the count to zero.
 *
 * Usage: port_reentrant [redis-url]
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

/* Fails unless this thread's hold count and the lock state are as given. */
static int expect(rlock *lock, int64_t want_count, bool want_locked, const char *where)
{
    int64_t count = -1;
    bool locked = !want_locked, mine = !want_count;
    rlock_status st = rlock_hold_count(lock, &count);
    if (st == RLOCK_OK) {
        st = rlock_is_locked(lock, &locked);
    }
    if (st == RLOCK_OK) {
        st = rlock_is_held_by_current_thread(lock, &mine);
    }
    printf("%-18s hold count %lld, locked %d, held by me %d\n", where, (long long)count, locked,
           mine);
    if (st != RLOCK_OK || count != want_count || locked != want_locked ||
        mine != (want_count > 0)) {
        fprintf(stderr, "%s: unexpected state (%s)\n", where, rlock_status_name(st));
        return -1;
    }
    return 0;
}

static int debit(rlock *lock)
{
    rlock_status st = rlock_lock(lock, RLOCK_WATCHDOG); /* re-entry */
    if (st != RLOCK_OK) {
        fprintf(stderr, "debit: rlock_lock: %s\n", rlock_strerror(st));
        return -1;
    }
    int rc = expect(lock, 2, true, "in debit()");
    st = rlock_unlock(lock); /* 2 -> 1: the lock stays held */
    if (st != RLOCK_OK) {
        fprintf(stderr, "debit: rlock_unlock: %s\n", rlock_strerror(st));
        rc = -1;
    }
    return rc;
}

static int transfer(rlock *lock)
{
    rlock_status st = rlock_lock(lock, RLOCK_WATCHDOG);
    if (st != RLOCK_OK) {
        fprintf(stderr, "transfer: rlock_lock: %s\n", rlock_strerror(st));
        return -1;
    }
    int rc = debit(lock);
    if (rc == 0) {
        rc = expect(lock, 1, true, "back in transfer()");
    }
    st = rlock_unlock(lock); /* 1 -> 0: key deleted, "0" published */
    if (st != RLOCK_OK) {
        fprintf(stderr, "transfer: rlock_unlock: %s\n", rlock_strerror(st));
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
    st = rlock_new(client, "example:port_reentrant", &lock);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_new: %s\n", rlock_strerror(st));
        goto cleanup;
    }
    if (transfer(lock) != 0 || expect(lock, 0, false, "after transfer()")) {
        goto cleanup;
    }
    /* One unlock too many: Java throws IllegalMonitorStateException. */
    st = rlock_unlock(lock);
    if (st != RLOCK_ENOTOWNER) {
        fprintf(stderr, "extra unlock: expected RLOCK_ENOTOWNER, got %s\n", rlock_status_name(st));
        goto cleanup;
    }
    printf("extra unlock:      %s\n", rlock_status_name(st));
    rc = 0;
    printf("port_reentrant: ok\n");

cleanup:
    rlock_free(lock);
    rlock_client_free(client);
    return rc;
}
