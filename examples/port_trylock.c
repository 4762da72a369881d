/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * port_trylock — Redisson's tryLock(), tryLock(wait, unit) and
 * tryLock(wait, lease, unit), in C.
 *
 * The Java this ports (Redisson):
 *
 *     RLock lock = redisson.getLock("example:port_trylock");
 *     if (lock.tryLock(200, 10_000, TimeUnit.MILLISECONDS)) {
 *         try {
 *             sendReport();
 *         } finally {
 *             lock.unlock();
 *         }
 *     } else {
 *         skipThisRound();               // someone else holds it
 *     }
 *
 * In C "false" is the status RLOCK_EBUSY, and an exception is any other
 * status that is not RLOCK_OK. The main thread holds the lock while a
 * second thread tries it (and gets RLOCK_EBUSY), then a third thread waits
 * for it and is woken by the unlock.
 *
 * Usage: port_trylock [redis-url]
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

enum outcome { DONE, SKIPPED, FAILED };

/* tryLock(wait, lease): DONE = did the work, SKIPPED = busy. */
static enum outcome send_report_if_free(rlock *lock, int64_t wait_ms)
{
    rlock_status st = rlock_try_lock(lock, wait_ms, 10000);
    if (st == RLOCK_EBUSY) {
        return SKIPPED; /* tryLock returned false */
    }
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_try_lock: %s\n", rlock_strerror(st));
        return FAILED; /* tryLock threw */
    }
    printf("thread %llu: sending the report\n", (unsigned long long)rlock_thread_id());
    st = rlock_unlock(lock); /* finally { lock.unlock(); } */
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_unlock: %s\n", rlock_strerror(st));
        return FAILED;
    }
    return DONE;
}

struct job {
    rlock *lock;
    int64_t wait_ms;
    enum outcome result;
};

static void *worker(void *arg)
{
    struct job *job = arg;
    job->result = send_report_if_free(job->lock, job->wait_ms);
    return NULL;
}

static int run_worker(struct job *job, pthread_t *t)
{
    if (pthread_create(t, NULL, worker, job) != 0) {
        fprintf(stderr, "pthread_create failed\n");
        return -1;
    }
    return 0;
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
    st = rlock_new(client, "example:port_trylock", &lock);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_new: %s\n", rlock_strerror(st));
        goto cleanup;
    }

    /* Nobody holds it: tryLock() (no wait) succeeds at once. */
    if (send_report_if_free(lock, 0) != DONE) {
        fprintf(stderr, "tryLock() on a free lock did not succeed\n");
        goto cleanup;
    }

    /* The main thread holds it; another thread gives up after 200 ms.
     * (Both threads share the handle: ownership belongs to threads.) */
    st = rlock_lock(lock, RLOCK_WATCHDOG);
    if (st != RLOCK_OK) {
        fprintf(stderr, "rlock_lock: %s\n", rlock_strerror(st));
        goto cleanup;
    }
    held = true;
    struct job busy = {lock, 200, FAILED};
    if (run_worker(&busy, &t) != 0) {
        goto cleanup;
    }
    pthread_join(t, NULL);
    if (busy.result != SKIPPED) {
        fprintf(stderr, "expected RLOCK_EBUSY while main holds the lock\n");
        goto cleanup;
    }
    printf("other thread: busy, skipped this round\n");

    /* A thread that may wait 10 s is woken by our unlock (pub/sub), long
     * before its wait or our 30 s watchdog lease would run out. */
    struct job patient = {lock, 10000, FAILED};
    if (run_worker(&patient, &t) != 0) {
        goto cleanup;
    }
    sleep_ms(100);
    st = rlock_unlock(lock);
    held = false;
    pthread_join(t, NULL);
    if (st != RLOCK_OK || patient.result != DONE) {
        fprintf(stderr, "unlock %s, waiting thread did not get the lock\n", rlock_status_name(st));
        goto cleanup;
    }
    rc = 0;
    printf("port_trylock: ok\n");

cleanup:
    if (held) {
        rlock_unlock(lock);
    }
    rlock_free(lock);
    rlock_client_free(client);
    return rc;
}
