/* Concurrency driver for ThreadSanitizer (make tsan).
 *
 * The whole suite also runs under TSan (built against test/lite, since
 * Criterion cannot start there); this plain program adds long threaded runs
 * in one process, against the server of RLOCK_TEST_URL:
 * contended locking with re-entry, waiters woken by unlock and force
 * unlock, the watchdog renewing and detecting a loss while other threads
 * work, latch flushing, and a client freed while threads wait on it.
 * Exits non-zero on a wrong result; TSan makes it exit non-zero on a race.
 */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rlock.h"

static const char *url;
static int failures;

#define CHECK(cond, ...)                                        \
    do {                                                        \
        if (!(cond)) {                                          \
            fprintf(stderr, "race.c:%d: ", __LINE__);           \
            fprintf(stderr, __VA_ARGS__);                       \
            fprintf(stderr, "\n");                              \
            __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST); \
        }                                                       \
    } while (0)

static rlock_client *client(int64_t watchdog_ms, void (*lost)(const char *, uint64_t, void *))
{
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.watchdog_timeout_ms = watchdog_ms;
    cfg.on_lock_lost = lost;
    rlock_client *c = NULL;
    rlock_status st = rlock_client_new(&cfg, &c);
    if (st != RLOCK_OK) {
        fprintf(stderr, "race: rlock_client_new: %s\n", rlock_strerror(st));
        exit(2);
    }
    return c;
}

/* ---- contended counter with re-entry --------------------------------- */

static long counter; /* protected by the distributed lock only */

struct worker {
    rlock_client *c;
    const char *name;
    int iters;
};

static void *contend(void *arg)
{
    struct worker *w = arg;
    rlock *l;
    CHECK(rlock_new(w->c, w->name, &l) == RLOCK_OK, "rlock_new");
    for (int i = 0; i < w->iters; i++) {
        int depth = 1 + i % 3;
        for (int d = 0; d < depth; d++) {
            rlock_status st = rlock_lock(l, RLOCK_WATCHDOG);
            CHECK(st == RLOCK_OK, "lock: %s", rlock_status_name(st));
        }
        /* TSan would flag this if two threads were ever inside together
         * without the happens-before edges the library creates. */
        long v = counter;
        counter = v + 1;
        for (int d = 0; d < depth; d++) {
            rlock_status st = rlock_unlock(l);
            CHECK(st == RLOCK_OK, "unlock: %s", rlock_status_name(st));
        }
    }
    rlock_free(l);
    return NULL;
}

static void scenario_contended(void)
{
    rlock_client *a = client(900, NULL), *b = client(900, NULL);
    char name[64];
    snprintf(name, sizeof name, "race:counter:%d", (int)getpid());
    enum { N = 6, ITERS = 80 };
    pthread_t t[N];
    struct worker w[N];
    for (int i = 0; i < N; i++) {
        w[i] = (struct worker){i % 2 ? a : b, name, ITERS};
        pthread_create(&t[i], NULL, contend, &w[i]);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
    }
    CHECK(counter == N * ITERS, "counter %ld, expected %d", counter, N * ITERS);
    rlock_client_free(a);
    rlock_client_free(b);
    printf("race: contended counter ok (%ld)\n", counter);
}

/* ---- loss detection while others work --------------------------------- */

static atomic_int lost_calls;

static void on_lost(const char *name, uint64_t tid, void *arg)
{
    (void)name;
    (void)tid;
    (void)arg;
    atomic_fetch_add(&lost_calls, 1);
}

static void scenario_lost(void)
{
    rlock_client *c = client(300, on_lost);
    char name[64];
    snprintf(name, sizeof name, "race:lost:%d", (int)getpid());
    rlock *l;
    CHECK(rlock_new(c, name, &l) == RLOCK_OK, "rlock_new");
    CHECK(rlock_lock(l, RLOCK_WATCHDOG) == RLOCK_OK, "lock");
    bool was = false;
    /* A second handle forces it away while the watchdog runs. */
    rlock *other;
    CHECK(rlock_new(c, name, &other) == RLOCK_OK, "rlock_new");
    usleep(250 * 1000);
    CHECK(rlock_force_unlock(other, &was) == RLOCK_OK && was, "force unlock");
    CHECK(rlock_unlock(l) == RLOCK_ELOST, "unlock after force");
    /* Now a loss the watchdog finds: delete by hand. */
    CHECK(rlock_lock(l, RLOCK_WATCHDOG) == RLOCK_OK, "lock again");
    redisContext *r = redisConnect("127.0.0.1", atoi(strrchr(url, ':') + 1));
    redisReply *rep = redisCommand(r, "DEL %s", name);
    freeReplyObject(rep);
    redisFree(r);
    for (int i = 0; i < 100 && atomic_load(&lost_calls) == 0; i++) {
        usleep(20 * 1000);
    }
    CHECK(atomic_load(&lost_calls) == 1, "on_lock_lost calls %d", atomic_load(&lost_calls));
    CHECK(rlock_unlock(l) == RLOCK_ELOST, "unlock after loss");
    rlock_free(other);
    rlock_free(l);
    rlock_client_free(c);
    printf("race: loss detection ok\n");
}

/* ---- closing with waiters --------------------------------------------- */

struct blocked {
    rlock_client *c;
    const char *name;
    rlock_status st;
};

static void *block(void *arg)
{
    struct blocked *b = arg;
    rlock *l;
    if (rlock_new(b->c, b->name, &l) != RLOCK_OK) {
        b->st = RLOCK_EINVAL;
        return NULL;
    }
    b->st = rlock_lock(l, RLOCK_WATCHDOG);
    rlock_free(l);
    return NULL;
}

static void scenario_close(void)
{
    rlock_client *holder = client(0, NULL), *c = client(0, NULL);
    char name[64];
    snprintf(name, sizeof name, "race:close:%d", (int)getpid());
    rlock *l;
    CHECK(rlock_new(holder, name, &l) == RLOCK_OK, "rlock_new");
    CHECK(rlock_lock(l, 30000) == RLOCK_OK, "lock");
    enum { N = 3 };
    pthread_t t[N];
    struct blocked b[N];
    for (int i = 0; i < N; i++) {
        b[i] = (struct blocked){c, name, RLOCK_OK};
        pthread_create(&t[i], NULL, block, &b[i]);
    }
    usleep(300 * 1000);
    rlock_client_free(c);
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        CHECK(b[i].st == RLOCK_ECLOSED, "waiter %d: %s", i, rlock_status_name(b[i].st));
    }
    CHECK(rlock_unlock(l) == RLOCK_OK, "unlock");
    rlock_free(l);
    rlock_client_free(holder);
    printf("race: close with waiters ok\n");
}

int main(void)
{
    url = getenv("RLOCK_TEST_URL");
    if (!url) {
        fprintf(stderr, "race: RLOCK_TEST_URL is not set (run through make tsan)\n");
        return 2;
    }
    scenario_contended();
    scenario_lost();
    scenario_close();
    printf("%d passed, %d failed\n", failures ? 0 : 3, failures ? 1 : 0);
    return failures ? 1 : 0;
}
