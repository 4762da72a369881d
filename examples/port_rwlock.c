/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * port_rwlock — Redisson's RReadWriteLock (readLock(), writeLock()), in C.
 *
 * The Java this ports (Redisson):
 *
 *     RReadWriteLock rw = redisson.getReadWriteLock("example:port_rwlock");
 *     rw.readLock().lock();              // many readers at once
 *     try {
 *         readPrices();
 *     } finally {
 *         rw.readLock().unlock();
 *     }
 *     rw.writeLock().lock();             // one writer, no reader
 *     try {
 *         updatePrices();
 *     } finally {
 *         rw.writeLock().unlock();
 *     }
 *
 * Two handles on one name, one per half. Readers share: the main thread
 * and a second thread read at once. A thread that reads and then asks for
 * the write lock (an upgrade) gets RLOCK_EDEADLK at once, where Redisson's
 * would wait on itself forever; a writer may take the read lock and then
 * release the write lock (a downgrade), keeping the read lock.
 *
 * Usage: port_rwlock [redis-url]
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

static int check(rlock_status st, const char *what)
{
    if (st != RLOCK_OK) {
        fprintf(stderr, "%s: %s (%s)\n", what, rlock_status_name(st), rlock_last_error());
        return -1;
    }
    return 0;
}

/* A second reader, on its own thread, while the main thread reads. */
static void *second_reader(void *arg)
{
    rlock *rd = arg;
    rlock_status *st = malloc(sizeof *st);
    if (!st) {
        return NULL;
    }
    *st = rlock_try_lock(rd, 0, RLOCK_WATCHDOG); /* no wait: readers share */
    if (*st == RLOCK_OK) {
        *st = rlock_unlock(rd);
    }
    return st;
}

int main(int argc, char **argv)
{
    int rc = 1;
    rlock_client *client = NULL;
    rlock *rd = NULL, *wr = NULL;
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = example_url(argc, argv);
    if (check(rlock_client_new(&cfg, &client), "rlock_client_new") != 0) {
        return 1;
    }
    /* RReadWriteLock rw = redisson.getReadWriteLock(name);
     * rw.readLock() and rw.writeLock(): */
    rlock_status st = rlock_new_read(client, "example:port_rwlock", &rd);
    if (st == RLOCK_OK) {
        st = rlock_new_write(client, "example:port_rwlock", &wr);
    }
    if (check(st, "rlock_new_read/rlock_new_write") != 0) {
        goto cleanup;
    }

    if (rlock_lock(rd, RLOCK_WATCHDOG) == RLOCK_OK) {
        /* readPrices(); another thread may read at the same time */
        pthread_t t;
        void *res = NULL;
        if (pthread_create(&t, NULL, second_reader, rd) == 0) {
            pthread_join(t, &res);
        }
        st = res ? *(rlock_status *)res : RLOCK_ENOMEM;
        free(res);
        if (check(st, "second reader") != 0) {
            goto cleanup;
        }
        /* An upgrade waits on itself in Redisson; rlock says so at once. */
        st = rlock_try_lock(wr, 5000, RLOCK_WATCHDOG);
        if (st != RLOCK_EDEADLK) {
            fprintf(stderr, "upgrade: %s, expected RLOCK_EDEADLK\n", rlock_status_name(st));
            goto cleanup;
        }
        rlock_unlock(rd);
    }

    st = rlock_lock(wr, RLOCK_WATCHDOG);
    if (st == RLOCK_OK) {
        /* updatePrices(); nobody else reads or writes */
        bool readers = true;
        st = rlock_is_locked(rd, &readers); /* false: only a writer holds it */
        if (st == RLOCK_OK && readers) {
            st = RLOCK_EPROTO;
        }
        /* A downgrade: read under the write lock, then let the write go. */
        if (st == RLOCK_OK) {
            st = rlock_lock(rd, RLOCK_WATCHDOG);
        }
        rlock_status wst = rlock_unlock(wr);
        if (check(st, "downgrade") != 0 || check(wst, "write unlock") != 0) {
            goto cleanup;
        }
        if (check(rlock_unlock(rd), "read unlock") != 0) {
            goto cleanup;
        }
    }
    if (check(st, "rlock_lock(write)") != 0) {
        goto cleanup;
    }
    rc = 0;
    printf("port_rwlock: ok\n");

cleanup:
    rlock_free(rd);
    rlock_free(wr);
    rlock_client_free(client);
    return rc;
}
