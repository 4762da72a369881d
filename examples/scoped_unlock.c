/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * scoped_unlock — the optional GNU C scope-bound release (gcc, clang):
 * RLOCK_SCOPED_LOCK / RLOCK_SCOPED_UNLOCK unlock when the variable goes
 * out of scope, as Java's try-with-resources or Python's "with" would.
 *
 * Usage: scoped_unlock [redis-url]
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

/* Every return below releases the lock, the early ones included; a lock
 * that failed releases nothing. */
static rlock_status update_inventory(rlock *lock, int items)
{
    rlock_status st;
    RLOCK_SCOPED_LOCK(held, lock, RLOCK_WATCHDOG, &st);
    if (!held) {
        return st; /* not taken: nothing to release */
    }
    if (items == 0) {
        return RLOCK_OK; /* unlocked here */
    }
    printf("updating %d items under %s\n", items, rlock_name(lock));
    return RLOCK_OK; /* and here */
}

int main(int argc, char **argv)
{
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = example_url(argc, argv);
    rlock_client *client = NULL;
    rlock *lock = NULL;
    int rc = 1;
    rlock_status st = rlock_client_new(&cfg, &client);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_client_new: %s\n", rlock_strerror(st));
        return 1;
    }
    if ((st = rlock_new(client, "example:scoped_unlock", &lock)) != RLOCK_OK) {
        fprintf(stderr, "rlock_new: %s\n", rlock_strerror(st));
        goto cleanup;
    }
    for (int items = 0; items < 3; items++) {
        if ((st = update_inventory(lock, items)) != RLOCK_OK) {
            fprintf(stderr, "update_inventory: %s\n", rlock_strerror(st));
            goto cleanup;
        }
    }
    bool locked = true;
    if ((st = rlock_is_locked(lock, &locked)) != RLOCK_OK || locked) {
        fprintf(stderr, "the lock was left held (%s)\n", rlock_strerror(st));
        goto cleanup;
    }
    rc = 0;
cleanup:
    rlock_free(lock);
    rlock_client_free(client);
    return rc;
}
