/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * port_fenced — RFencedLock (lockAndGetToken, tryLockAndGetToken,
 * getToken) in C, and writes that only the holder can make.
 *
 * The Java this ports (Redisson):
 *
 *     RFencedLock lock = redisson.getFencedLock("example:port_fenced");
 *     Long token = lock.lockAndGetToken();
 *     try {
 *         storage.write(balance, token);   // refuses tokens older than
 *     } finally {                          // the newest it has seen
 *         lock.unlock();
 *     }
 *
 * Each acquisition takes a token larger than every one before it for the
 * name. A holder paused past its lease (a stopped process, a long stall)
 * still believes it holds the lock; a store that refuses writes carrying
 * an older token than one it has seen keeps it from overwriting what the
 * next holder wrote. When the store is Redis, rlock does the check:
 * rlock_fenced_set() and rlock_guarded() run the write in one script with
 * the check that the calling thread still holds the lock.
 *
 * Usage: port_fenced [redis-url]
 * The URL comes from argv[1], else $RLOCK_URL, else redis://127.0.0.1:6379.
 * Exits 0 on success, 1 on any failure.
 */
#include <rlock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *example_url(int argc, char **argv)
{
    const char *env = getenv("RLOCK_URL");
    if (argc > 1) {
        return argv[1];
    }
    return env && *env ? env : "redis://127.0.0.1:6379";
}

static int fail(const char *what, rlock_status st)
{
    fprintf(stderr, "%s: %s (%s)\n", what, rlock_status_name(st), rlock_last_error());
    return -1;
}

/* lockAndGetToken(), a fenced write, unlock(). */
static int write_balance(rlock *lock, int64_t *token_out)
{
    rlock_status st = rlock_lock(lock, RLOCK_WATCHDOG); /* lockAndGetToken() */
    int64_t token = 0;
    if (st == RLOCK_OK) {
        st = rlock_fence_token(lock, &token); /* this thread's token */
    }
    if (st != RLOCK_OK) {
        return fail("lock", st);
    }
    printf("token:             %lld\n", (long long)token);
    /* SET only while this thread holds the lock, and only if no newer
     * token has written the key. */
    st = rlock_fenced_set(lock, "example:port_fenced:balance", "100", 3);
    if (st != RLOCK_OK) {
        fail("rlock_fenced_set", st);
    }
    rlock_status ust = rlock_unlock(lock);
    if (ust != RLOCK_OK) {
        return fail("unlock", ust);
    }
    *token_out = token;
    return st == RLOCK_OK ? 0 : -1;
}

/* tryLockAndGetToken(wait, lease, unit) and any command as a guarded
 * write. */
static int append_log(rlock *lock)
{
    rlock_status st = rlock_try_lock(lock, 100, 10000); /* tryLockAndGetToken(100, 10000, ms) */
    if (st == RLOCK_EBUSY) {
        printf("busy:              Java's tryLockAndGetToken() returns null\n");
        return 0;
    }
    if (st != RLOCK_OK) {
        return fail("try_lock", st);
    }
    const char *argv[3] = {"RPUSH", "example:port_fenced:log", "paid"};
    rlock_reply *reply = NULL;
    st = rlock_guarded(lock, 3, argv, NULL, &reply); /* runs only while held */
    if (st == RLOCK_OK) {
        printf("log length:        %lld\n", (long long)rlock_reply_integer(reply));
        rlock_reply_free(reply);
    } else {
        fail("rlock_guarded", st); /* RLOCK_ELOST: the hold is gone, nothing ran */
    }
    rlock_status ust = rlock_unlock(lock);
    if (ust != RLOCK_OK) {
        return fail("unlock", ust);
    }
    return st == RLOCK_OK ? 0 : -1;
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
    st = rlock_new_fenced(client, "example:port_fenced", &lock); /* getFencedLock() */
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_new_fenced: %s\n", rlock_strerror(st));
        goto cleanup;
    }
    int64_t first = 0, second = 0;
    if (write_balance(lock, &first) != 0 || write_balance(lock, &second) != 0) {
        goto cleanup;
    }
    if (second <= first) {
        fprintf(stderr, "tokens went back: %lld then %lld\n", (long long)first,
                (long long)second);
        goto cleanup;
    }
    int64_t latest = 0;
    st = rlock_fence_token_latest(lock, &latest); /* getToken(): 0 if never locked */
    if (st != RLOCK_OK || latest < second) {
        fprintf(stderr, "getToken: %s, %lld\n", rlock_status_name(st), (long long)latest);
        goto cleanup;
    }
    printf("latest token:      %lld\n", (long long)latest);
    if (append_log(lock) != 0) {
        goto cleanup;
    }
    /* Not holding the lock: the write is refused, nothing is written. */
    st = rlock_fenced_set(lock, "example:port_fenced:balance", "0", 1);
    if (st != RLOCK_ENOTOWNER) {
        fprintf(stderr, "write without the lock: expected RLOCK_ENOTOWNER, got %s\n",
                rlock_status_name(st));
        goto cleanup;
    }
    printf("write, not held:   %s\n", rlock_status_name(st));
    /* Tidy up, as the holder: the example leaves no data behind. */
    const char *del[3] = {"DEL", "example:port_fenced:balance", "example:port_fenced:log"};
    st = rlock_lock(lock, 10000);
    if (st == RLOCK_OK) {
        st = rlock_guarded(lock, 3, del, NULL, NULL);
        rlock_status ust = rlock_unlock(lock);
        st = st == RLOCK_OK ? ust : st;
    }
    if (st != RLOCK_OK) {
        fprintf(stderr, "tidy up: %s\n", rlock_status_name(st));
        goto cleanup;
    }
    rc = 0;
    printf("port_fenced: ok\n");

cleanup:
    rlock_free(lock);
    rlock_client_free(client);
    return rc;
}
