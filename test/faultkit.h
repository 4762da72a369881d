/* Helpers of the fault tests (test_faults, test_kindfaults): a forked
 * holder telling its parent it holds, cutting the reply of one acquire or
 * unlock of a name at the proxy, a proxy and a client behind it, forking
 * between two renewal rounds, and telling a loading server. Header only
 * (static inline): include it after harness.h and proxy.h. */
#ifndef RLOCK_TEST_FAULTKIT_H
#define RLOCK_TEST_FAULTKIT_H

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "proxy.h"

/* ---- a forked holder's "I hold it" ------------------------------------ */

typedef struct th_ready {
    int fd[2];
} th_ready;

static inline void th_ready_init(th_ready *r)
{
    cr_assert_eq(pipe(r->fd), 0);
}

/* In the child: tells the parent. */
static inline bool th_ready_signal(th_ready *r)
{
    char b = 1;
    return write(r->fd[1], &b, 1) == 1;
}

/* In the parent: waits th_ms(timeout_ms) for child pid's signal; fails the
 * test with the child's exit code if it does not come. */
static inline void th_ready_wait(th_ready *r, pid_t pid, int64_t timeout_ms)
{
    struct pollfd p = {r->fd[0], POLLIN, 0};
    char b;
    bool ok = poll(&p, 1, (int)th_ms(timeout_ms)) == 1 && read(r->fd[0], &b, 1) == 1;
    if (!ok) {
        int code = th_wait_bounded(pid, 100);
        cr_assert_fail("the child did not take the lock (exit %d)", code);
    }
}

static inline void th_ready_close(th_ready *r)
{
    close(r->fd[0]);
    close(r->fd[1]);
}

/* ---- cutting one request's reply ---------------------------------------
 * Every kind's acquire attempt names its acquire latch,
 * rlock_acquire_latch:{name}:<rid>, and every unlock its unlock latch,
 * redisson_unlock_latch:{name}:<rid>; no other request does. The next one
 * of name runs in Redis and its reply is dropped with the connection. */

static inline void th_cut_acquire(tp_proxy *px, const char *name)
{
    char *needle = NULL;
    cr_assert(asprintf(&needle,
                       strchr(name, '{') ? "rlock_acquire_latch:%s:" : "rlock_acquire_latch:{%s}:",
                       name) > 0);
    tp_cut_next(px, needle);
    free(needle);
}

static inline void th_cut_unlock(tp_proxy *px, const char *name)
{
    char *needle = NULL;
    cr_assert(
        asprintf(&needle,
                 strchr(name, '{') ? "redisson_unlock_latch:%s:" : "redisson_unlock_latch:{%s}:",
                 name) > 0);
    tp_cut_next(px, needle);
    free(needle);
}

/* A proxy in front of port (0: the shared server), relaying at once. */
static inline tp_proxy *th_proxy_start(int port)
{
    tp_proxy *p = tp_new(port ? port : th_port());
    cr_assert(p != NULL && tp_start(p) == 0, "cannot start the proxy");
    return p;
}

/* A client through proxy p: 1 s command and connect timeouts, 5 s retry,
 * 2 s subscribe timeout, watchdog_ms (0: default). Run warm() before cutting anything: a cut
 * EVALSHA that Redis answered NOSCRIPT ran nothing and proves nothing. */
static inline rlock_client *th_proxy_client(tp_proxy *p, int64_t watchdog_ms)
{
    char u[64];
    snprintf(u, sizeof u, "redis://127.0.0.1:%d", tp_port(p));
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = u;
    cfg.watchdog_timeout_ms = watchdog_ms;
    cfg.command_timeout_ms = 1000;
    cfg.connect_timeout_ms = 1000;
    cfg.retry_timeout_ms = 5000;
    cfg.subscribe_timeout_ms = 2000;
    return th_client_cfg(&cfg);
}

/* A client of the server (or proxy) at port with the given command and
 * retry timeouts, the rest default. */
static inline rlock_client *th_client_at(int port, int64_t command_ms, int64_t retry_ms)
{
    char u[64];
    snprintf(u, sizeof u, "redis://127.0.0.1:%d", port);
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = u;
    cfg.command_timeout_ms = command_ms;
    cfg.retry_timeout_ms = retry_ms;
    return th_client_cfg(&cfg);
}

/* Loads the acquire and unlock scripts of handles made by make into the
 * server's cache: one lock (and a re-entry when reentrant), unlocked. */
static inline void th_warm_scripts(rlock_client *c,
                                   rlock_status (*make)(rlock_client *, const char *, rlock **),
                                   bool reentrant)
{
    char *warm = th_name("warm");
    rlock *w = NULL;
    th_ok(make(c, warm, &w));
    th_ok(rlock_lock(w, 1000));
    if (reentrant) {
        th_ok(rlock_lock(w, 1000));
        th_ok(rlock_unlock(w));
    }
    th_ok(rlock_unlock(w));
    rlock_free(w);
    free(warm);
}

/* ---- fork between renewal rounds ---------------------------------------
 * Waits for the next renewal round of c to be sent and answered: memory a
 * thread of the parent is using at the instant of fork() is out of the
 * child's reach (docs/operations.md), and valgrind would count it as lost
 * in the child; right after a round, the next is a third of a lease away. */
static inline void th_after_renewal_round(rlock_client *c)
{
    uint64_t calls0 = 0, calls = 0;
    th_ok(rlock_client_stat(c, RLOCK_STAT_RENEWAL_CALLS, &calls0));
    bool renewed = TH_POLL(
        rlock_client_stat(c, RLOCK_STAT_RENEWAL_CALLS, &calls) == RLOCK_OK && calls > calls0, 2000);
    cr_assert(renewed, "no renewal within 2 s");
    th_sleep_ms(50); /* the round records its answers after the call counts */
}

/* ---- a loading server ------------------------------------------------- */

/* Whether the server on port answers PING with LOADING. */
static inline bool th_loading(int port)
{
    redisContext *rd = redisConnect("127.0.0.1", port);
    bool yes = false;
    if (rd && !rd->err) {
        redisReply *rep = redisCommand(rd, "PING");
        yes = rep && rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "LOADING", 7) == 0;
        if (rep) {
            freeReplyObject(rep);
        }
    }
    if (rd) {
        redisFree(rd);
    }
    return yes;
}

#endif
