/* issue 15 §4 for the lock family of issue 16: every kind of test/kinds.h
 * over rediss://. Each test runs its own redis-server with a TLS port and
 * certificates made by the harness (th_tls_setup, as test_tls does); both
 * clients speak TLS, and the test reads what Redis holds over the same
 * server's plain port. One test per kind takes the lock, re-enters it (or
 * is refused, for the non-reentrant kinds), has a waiter of a second TLS
 * client blocked on it while the watchdog renews the hold past its lease,
 * and releases it: the waiter is woken by the release's message over TLS
 * (the name's channel, the fair lock's per-waiter channel, the read/write
 * channel) or, for the spin lock, by its next poll. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kinds.h"

static th_tls certs;
static th_server srv;
static char *url; /* rediss://127.0.0.1:<tls port> */

static void setup(void)
{
    url = th_tls_setup(&certs, &srv, "optional", false);
}

static void teardown(void)
{
    th_tls_teardown(&certs, &srv, url);
}

TestSuite(tlskinds, .init = setup, .fini = teardown, .timeout = 60);

/* The watchdog lease of the watchdog phase: renewed every third of it;
 * scaled with the suite's multiplier, so that a renewal under valgrind
 * still comes well inside the lease. */
#define WD_MS th_ms(900)
/* The spin waiter's longest sleep between two attempts. */
#define SPIN_MAX_MS 200

static rlock_client *tls_client(int64_t watchdog_ms)
{
    rlock_config cfg;
    th_tls_config(&cfg, url, certs.ca);
    cfg.watchdog_timeout_ms = watchdog_ms;
    cfg.spin_max_delay_ms = SPIN_MAX_MS;
    return th_client_cfg(&cfg);
}

/* A thread of the second client that waits for the lock (the holder's
 * rival kind), takes it, and keeps it until the test has looked at Redis. */
typedef struct waiter {
    rlock_client *c;
    const th_kind *k;
    const char *name;
    pid_t tid;       /* kernel id, for th_wait_blocked */
    uint64_t rid;    /* rlock_thread_id(), for the hash field */
    rlock_status st; /* what rlock_try_lock returned */
    int64_t t_acquired;
    atomic_bool started, done, release;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    w->tid = th_gettid();
    w->rid = rlock_thread_id();
    rlock *l = NULL;
    w->st = w->k->make(w->c, w->name, &l);
    atomic_store(&w->started, true);
    if (w->st == RLOCK_OK) {
        w->st = rlock_try_lock(l, 20000, 10000);
        w->t_acquired = th_now_ms();
    }
    atomic_store(&w->done, true);
    if (w->st == RLOCK_OK) {
        while (!atomic_load(&w->release)) {
            th_sleep_ms(1);
        }
        w->st = rlock_unlock(l);
    }
    rlock_free(l);
    return NULL;
}

/* The watchdog over TLS: a watchdog hold (re-entered, or refused for the
 * non-reentrant kinds) outlives its lease, renewed over TLS, and the
 * unlocks leave nothing. */
static void watchdog_phase(const th_kind *k, redisContext *r)
{
    rlock_client *a = tls_client(WD_MS);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "tlskinds-wd-%s", k->id);
    char *name = th_name(prefix);
    uint64_t me = rlock_thread_id();
    rlock *l = th_kind_new(a, k, name);
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_kind_assert_held(r, k, name, a, me, 1);
    int depth = 1;
    if (k->reentrant) {
        th_ok(rlock_lock(l, RLOCK_WATCHDOG));
        depth = 2;
    } else {
        th_assert_status(rlock_try_lock(l, 0, RLOCK_WATCHDOG), RLOCK_EDEADLK);
    }
    th_kind_assert_held(r, k, name, a, me, depth);
    /* The watchdog's lease; a write re-entry adds it to what is left
     * (spec §11 item 10). */
    long long ttl = th_pttl(r, name), most = k->write ? (long long)depth * WD_MS : WD_MS;
    cr_assert(ttl > 0 && ttl <= most, "%s: PTTL %lld with a %lld ms watchdog lease", k->id, ttl,
              (long long)WD_MS);
    /* Time must pass: a fixed sleep beyond the lease. */
    uint64_t renewed0 = 0, renewed = 0;
    th_ok(rlock_client_stat(a, RLOCK_STAT_RENEWED, &renewed0));
    th_sleep_ms(WD_MS + th_ms(300));
    ttl = th_wait_renewal(r, name, 1000);
    cr_assert(ttl > 0 && ttl <= WD_MS, "%s: PTTL %lld after a renewal", k->id, ttl);
    cr_assert(TH_POLL(rlock_client_stat(a, RLOCK_STAT_RENEWED, &renewed) == RLOCK_OK &&
                          renewed >= renewed0 + 2,
                      2000),
              "%s: renewed %llu times past the lease", k->id,
              (unsigned long long)(renewed - renewed0));
    th_kind_assert_held(r, k, name, a, me, depth);
    for (int i = depth; i > 1; i--) {
        th_ok(rlock_unlock(l));
        th_kind_assert_held(r, k, name, a, me, i - 1);
    }
    th_ok(rlock_unlock(l));
    th_kind_assert_free(r, k, name);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    rlock_free(l);
    rlock_client_free(a);
    free(name);
}

/* Connections of CLIENT LIST (read on the plain port) to port whose
 * line has sub=N (or psub=N) with N > 0: subscribers on that port. */
static int subscribers_on(redisContext *r, int port)
{
    redisReply *rep = th_cmd(r, "CLIENT LIST");
    cr_assert_eq(rep->type, REDIS_REPLY_STRING);
    char laddr[64];
    snprintf(laddr, sizeof laddr, " laddr=127.0.0.1:%d ", port);
    int n = 0;
    for (char *line = rep->str; line && *line;) {
        char *end = strchr(line, '\n');
        if (end) {
            *end = '\0';
        }
        const char *sub = strstr(line, " sub="), *psub = strstr(line, " psub=");
        if (strstr(line, laddr) && ((sub && atoi(sub + 5) > 0) || (psub && atoi(psub + 6) > 0))) {
            n++;
        }
        line = end ? end + 1 : NULL;
    }
    freeReplyObject(rep);
    return n;
}

/* The wake-up over TLS: the holder's lease is 30 s, so a waiter that takes
 * the lock within a second of the release was woken by its message (or,
 * spin, by its own polls), never by the lease running out. */
static void wake_phase(const th_kind *k, redisContext *r)
{
    const th_kind *rv = th_kind_rival(k);
    rlock_client *a = tls_client(0), *b = tls_client(0);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "tlskinds-wake-%s", k->id);
    char *name = th_name(prefix);
    uint64_t me = rlock_thread_id();
    rlock *l = th_kind_new(a, k, name);
    th_ok(rlock_lock(l, 30000));
    int depth = 1;
    if (k->reentrant) {
        th_ok(rlock_lock(l, 30000));
        depth = 2;
    }
    th_kind_assert_held(r, k, name, a, me, depth);
    int64_t n = 0;
    th_ok(rlock_hold_count(l, &n));
    cr_assert_eq(n, depth);
    if (k->fenced) {
        int64_t tok = 0;
        th_ok(rlock_fence_token(l, &tok));
        char *tk = th_prefixed("redisson_lock_token", name);
        redisReply *rep = th_cmd(r, "GET %s", tk);
        cr_assert(rep->type == REDIS_REPLY_STRING && atoll(rep->str) == tok,
                  "token %lld, Redis has %s", (long long)tok,
                  rep->type == REDIS_REPLY_STRING ? rep->str : "nothing");
        freeReplyObject(rep);
        free(tk);
    }

    /* A waiter of the second client, blocked inside rlock_try_lock. */
    waiter w = {.c = b, .k = rv, .name = name};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, waiter_main, &w), 0);
    cr_assert(TH_POLL(atomic_load(&w.started), 3000));
    th_ok(w.st);
    th_kind_wait_waiting(srv.port, rv, name, 3000);
    if (!k->spin) {
        /* A spin waiter wakes every SPIN_MAX_MS: rarely three samples asleep. */
        th_wait_blocked(w.tid, 3000);
        /* Its subscription is on a TLS connection, none on the plain port. */
        cr_assert_eq(subscribers_on(r, srv.tls_port), 1, "%s: no subscriber on the TLS port",
                     k->id);
        cr_assert_eq(subscribers_on(r, srv.port), 0);
    }
    if (rv->fair) {
        /* The fair waiter listens on its own channel (spec §3). */
        char *ch = th_channel(name), *owner = th_owner(b, w.rid), *mine = NULL;
        cr_assert(asprintf(&mine, "%s:%s", ch, owner) > 0);
        th_wait_numsub(srv.port, mine, 1, 3000);
        free(mine);
        free(owner);
        free(ch);
    }
    for (int i = depth; i > 1; i--) {
        th_ok(rlock_unlock(l));
        th_kind_assert_held(r, k, name, a, me, i - 1);
    }
    cr_assert(!atomic_load(&w.done), "%s: the waiter returned %s while the lock was held", k->id,
              rlock_status_name(w.st));

    /* The release: the waiter takes the lock within the bound. */
    int64_t t0 = th_now_ms();
    th_ok(rlock_unlock(l));
    int64_t bound = th_ms(1000) + (k->spin ? SPIN_MAX_MS : 0);
    cr_assert(TH_POLL(atomic_load(&w.done), 10000), "%s: the waiter was never woken", k->id);
    th_ok(w.st);
    int64_t took = w.t_acquired - t0;
    cr_log_info("%s over TLS: waiter woken %lld ms after the release", k->id, (long long)took);
    cr_assert(took < bound, "%s: the waiter took the lock %lld ms after the release (bound %lld)",
              k->id, (long long)took, (long long)bound);
    th_kind_assert_held(r, rv, name, b, w.rid, 1);
    atomic_store(&w.release, true);
    pthread_join(t, NULL);
    th_ok(w.st);
    th_kind_assert_free(r, k, name);
    rlock_free(l);
    rlock_client_free(a);
    rlock_client_free(b);
    free(name);
}

static void lock_wait_renew_unlock(int kind)
{
    const th_kind *k = &th_kinds[kind];
    redisContext *r = th_redis(srv.port);
    wake_phase(k, r);
    watchdog_phase(k, r);
    redisFree(r);
}

#define PER_KIND(tag, kind)           \
    Test(tlskinds, tag##_over_tls)    \
    {                                 \
        lock_wait_renew_unlock(kind); \
    }

PER_KIND(reentrant, TK_REENTRANT)
PER_KIND(fair, TK_FAIR)
PER_KIND(fenced, TK_FENCED)
PER_KIND(spin, TK_SPIN)
PER_KIND(read, TK_READ)
PER_KIND(write, TK_WRITE)
PER_KIND(nonreentrant, TK_NONREENTRANT)
PER_KIND(fair_nonreentrant, TK_FAIR_NONREENTRANT)
