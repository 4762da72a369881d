/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * port_forceunlock — forceUnlock(), in C.
 *
 * The Java this ports (Redisson):
 *
 *     // An admin path: the holder is stuck; free the lock whoever holds it.
 *     RLock lock = redisson.getLock("example:port_forceunlock");
 *     boolean wasLocked = lock.forceUnlock();   // DEL + publish "0"
 *
 *     // Meanwhile, in the holder:
 *     lock.unlock();                     // IllegalMonitorStateException
 *
 * Here one thread holds the lock (watchdog mode), a second thread waits for
 * it, and the main thread force-unlocks it: the waiter is woken at once by
 * the published "0", and the old holder's unlock returns RLOCK_ELOST.
 *
 * Usage: port_forceunlock [redis-url]
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

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

struct holder {
    rlock *lock;
    pthread_barrier_t *step; /* shared with main: 2 parties */
    rlock_status lock_st;
    rlock_status unlock_st;
};

/* Takes the lock, waits while main force-unlocks it, then unlocks. */
static void *holder_main(void *arg)
{
    struct holder *h = arg;
    h->lock_st = rlock_lock(h->lock, RLOCK_WATCHDOG);
    pthread_barrier_wait(h->step); /* 1: "I hold it" */
    pthread_barrier_wait(h->step); /* 2: "it was force-unlocked" */
    h->unlock_st = h->lock_st == RLOCK_OK ? rlock_unlock(h->lock) : h->lock_st;
    return NULL;
}

struct waiter {
    rlock *lock;
    rlock_status lock_st;
    rlock_status unlock_st;
};

/* tryLock(10 s): woken by the force unlock's message, not by a timeout. */
static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    w->lock_st = rlock_try_lock(w->lock, 10000, RLOCK_WATCHDOG);
    w->unlock_st = w->lock_st == RLOCK_OK ? rlock_unlock(w->lock) : w->lock_st;
    return NULL;
}

int main(int argc, char **argv)
{
    int rc = 1;
    rlock_client *client = NULL;
    rlock *lock = NULL;
    rlock_config cfg;
    rlock_status st;
    pthread_barrier_t step;
    pthread_t ht, wt;
    struct holder h = {NULL, &step, RLOCK_EINVAL, RLOCK_EINVAL};
    struct waiter w = {NULL, RLOCK_EINVAL, RLOCK_EINVAL};
    bool was_locked = false, locked = true, have_barrier = false;

    rlock_config_init(&cfg);
    cfg.url = example_url(argc, argv);
    st = rlock_client_new(&cfg, &client);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_client_new(%s): %s\n", cfg.url, rlock_strerror(st));
        goto cleanup;
    }
    st = rlock_new(client, "example:port_forceunlock", &lock);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_new: %s\n", rlock_strerror(st));
        goto cleanup;
    }
    h.lock = w.lock = lock;
    have_barrier = pthread_barrier_init(&step, NULL, 2) == 0;
    if (!have_barrier || pthread_create(&ht, NULL, holder_main, &h) != 0) {
        fprintf(stderr, "cannot start the holder thread\n");
        goto cleanup;
    }
    pthread_barrier_wait(&step); /* 1 */
    if (h.lock_st != RLOCK_OK) {
        fprintf(stderr, "holder: rlock_lock: %s\n", rlock_strerror(h.lock_st));
        pthread_barrier_wait(&step);
        pthread_join(ht, NULL);
        goto cleanup;
    }
    if (pthread_create(&wt, NULL, waiter_main, &w) != 0) {
        fprintf(stderr, "cannot start the waiter thread\n");
        pthread_barrier_wait(&step);
        pthread_join(ht, NULL);
        goto cleanup;
    }
    sleep_ms(200); /* let the waiter block */

    /* boolean wasLocked = lock.forceUnlock(); */
    st = rlock_force_unlock(lock, &was_locked);
    printf("force unlock: %s, was locked %d\n", rlock_status_name(st), was_locked);
    pthread_join(wt, NULL);
    pthread_barrier_wait(&step); /* 2 */
    pthread_join(ht, NULL);
    printf("waiter: lock %s, unlock %s\n", rlock_status_name(w.lock_st),
           rlock_status_name(w.unlock_st));
    printf("old holder's unlock: %s\n", rlock_status_name(h.unlock_st));
    if (st != RLOCK_OK || !was_locked || w.lock_st != RLOCK_OK || w.unlock_st != RLOCK_OK ||
        h.unlock_st != RLOCK_ELOST) {
        fprintf(stderr, "unexpected outcome\n");
        goto cleanup;
    }

    /* Nothing left to delete: forceUnlock() returns false. */
    st = rlock_force_unlock(lock, &was_locked);
    if (st == RLOCK_OK) {
        st = rlock_is_locked(lock, &locked);
    }
    if (st != RLOCK_OK || was_locked || locked) {
        fprintf(stderr, "second force unlock: %s, was locked %d\n", rlock_status_name(st),
                was_locked);
        goto cleanup;
    }
    rc = 0;
    printf("port_forceunlock: ok\n");

cleanup:
    if (have_barrier) {
        pthread_barrier_destroy(&step);
    }
    rlock_free(lock);
    rlock_client_free(client);
    return rc;
}
