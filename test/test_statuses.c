/* Every (call, status) pair include/rlock.h documents, produced by a real
 * fault against a real server: one test per status, each making every call
 * that documents the status return it. The table of which test produces
 * which pair is at the top of test_client.c. Faults come from private
 * servers (stopped, stalled with DEBUG SLEEP, started with commands renamed
 * away, or told to refuse writes), the test proxy (test/proxy.c: replies of
 * another shape, resets, a peer that stops reading), a changed password,
 * a pool of one connection, and a client being closed.
 *
 * Suite "send": writes that really hit a reset connection or a full send
 * buffer (engine::no_sigpipe_when_connections_are_killed never gets that
 * far: the pool sees a killed idle connection before writing to it). */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harness.h"
#include "proxy.h"

TestSuite(statuses, .timeout = 120);
TestSuite(send, .timeout = 120);

/* ---- the calls ---------------------------------------------------------- */

enum {
    C_LOCK,
    C_TRY_LOCK,
    C_LOCK_EX,
    C_UNLOCK,
    C_FORCE_UNLOCK,
    C_IS_LOCKED,
    C_IS_HELD_BY_CURRENT_THREAD,
    C_IS_HELD_BY_THREAD,
    C_HOLD_COUNT,
    C_REMAIN_TTL,
    NCALLS
};

static const char *const call_names[NCALLS] = {
    "rlock_lock",
    "rlock_try_lock",
    "rlock_lock_ex",
    "rlock_unlock",
    "rlock_force_unlock",
    "rlock_is_locked",
    "rlock_is_held_by_current_thread",
    "rlock_is_held_by_thread",
    "rlock_hold_count",
    "rlock_remain_ttl",
};

/* Explicit leases: no watchdog traffic beside the calls under test. */
#define LEASE_MS 60000

/* Makes call `which` on l. rlock_unlock() needs the calling thread to hold
 * l (see hold_for_unlock()); the waits are short, a fault answers first. */
static rlock_status invoke(int which, rlock *l)
{
    bool b;
    int64_t n;
    switch (which) {
    case C_LOCK:
        return rlock_lock(l, LEASE_MS);
    case C_TRY_LOCK:
        return rlock_try_lock(l, 0, LEASE_MS);
    case C_LOCK_EX:
        return rlock_lock_ex(l, 0, LEASE_MS, NULL, NULL);
    case C_UNLOCK:
        return rlock_unlock(l);
    case C_FORCE_UNLOCK:
        return rlock_force_unlock(l, &b);
    case C_IS_LOCKED:
        return rlock_is_locked(l, &b);
    case C_IS_HELD_BY_CURRENT_THREAD:
        return rlock_is_held_by_current_thread(l, &b);
    case C_IS_HELD_BY_THREAD:
        return rlock_is_held_by_thread(l, rlock_thread_id(), &b);
    case C_HOLD_COUNT:
        return rlock_hold_count(l, &n);
    case C_REMAIN_TTL:
        return rlock_remain_ttl(l, &n);
    default:
        return RLOCK_EINVAL;
    }
}

/* One lock name and handle per call, so that what a failed call leaves in
 * doubt for its name never changes the next call's answer. */
typedef struct set {
    char *names[NCALLS];
    rlock *ls[NCALLS];
} set;

static void set_new(set *s, rlock_client *c, const char *prefix)
{
    for (int i = 0; i < NCALLS; i++) {
        s->names[i] = th_name(prefix);
        th_ok(rlock_new(c, s->names[i], &s->ls[i]));
    }
}

static void set_free(set *s)
{
    for (int i = 0; i < NCALLS; i++) {
        rlock_free(s->ls[i]);
        free(s->names[i]);
    }
}

/* The calling thread takes the unlock's lock, so its unlock goes to Redis. */
static void hold_for_unlock(set *s)
{
    th_ok(rlock_lock(s->ls[C_UNLOCK], LEASE_MS));
}

#define assert_call(which, got, want)                                                   \
    do {                                                                                \
        rlock_status g_ = (got), w_ = (want);                                           \
        cr_assert_eq(g_, w_, "%s: expected %s, got %s (%s)", call_names[which],         \
                     rlock_status_name(w_), rlock_status_name(g_), rlock_last_error()); \
    } while (0)

static rlock_config base_config(const char *url)
{
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.connect_timeout_ms = 500;
    cfg.command_timeout_ms = 300;
    cfg.retry_timeout_ms = 300;
    cfg.subscribe_timeout_ms = 500;
    return cfg;
}

/* ---- RLOCK_EIO ------------------------------------------------------------ */

Test(statuses, eio_from_every_call_when_the_server_is_gone)
{
    th_server srv;
    th_server_start(&srv);
    char *url = th_server_url(&srv);
    rlock_config cfg = base_config(url);
    rlock_client *c = th_client_cfg(&cfg);
    set s;
    set_new(&s, c, "eio");
    hold_for_unlock(&s);
    th_server_kill(&srv); /* nothing listens on the port any more */
    for (int i = 0; i < NCALLS; i++) {
        assert_call(i, invoke(i, s.ls[i]), RLOCK_EIO);
    }
    set_free(&s);
    rlock_client_free(c);
    th_server_stop(&srv);
    free(url);
}

/* ---- RLOCK_ETIMEDOUT ------------------------------------------------------ */

Test(statuses, etimedout_from_every_call_when_the_server_stalls)
{
    th_server srv;
    th_server_start(&srv);
    char *url = th_server_url(&srv);
    rlock_config cfg = base_config(url);
    cfg.command_timeout_ms = 200;
    rlock_client *c = th_client_cfg(&cfg);
    set s;
    set_new(&s, c, "etimedout");
    hold_for_unlock(&s); /* also loads the scripts: no NOSCRIPT round trip */
    /* Each call waits at most about 2 x 200 ms: 10 calls fit in the stall
     * however slow the machine (the stall is scaled, the timeouts not). */
    th_stall st;
    th_stall_start(&st, srv.port, th_ms(6000));
    int64_t t0 = th_now_ms();
    for (int i = 0; i < NCALLS; i++) {
        assert_call(i, invoke(i, s.ls[i]), RLOCK_ETIMEDOUT);
    }
    /* A new client cannot finish its handshake either. */
    rlock_client *x = NULL;
    th_assert_status(rlock_client_new(&cfg, &x), RLOCK_ETIMEDOUT);
    cr_assert_null(x);
    cr_assert(th_now_ms() - t0 < th_ms(6000), "the calls outlasted the stall");
    th_stall_end(&st);
    set_free(&s);
    rlock_client_free(c);
    th_server_stop(&srv);
    free(url);
}

/* ---- RLOCK_EINVAL and RLOCK_ELOST where no other test has them -------- */

Test(statuses, einval_from_lock_ex_and_cancel_new)
{
    rlock_client *c = th_client(NULL, 0);
    char *name = th_name("einval-ex");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    int64_t ttl = 77;
    th_assert_status(rlock_lock_ex(NULL, 0, LEASE_MS, NULL, &ttl), RLOCK_EINVAL);
    th_assert_status(rlock_lock_ex(l, -2, LEASE_MS, NULL, &ttl), RLOCK_EINVAL);
    th_assert_status(rlock_lock_ex(l, 0, 0, NULL, &ttl), RLOCK_EINVAL);
    th_assert_status(rlock_lock_ex(l, RLOCK_MAX_TIME_MS + 1, LEASE_MS, NULL, &ttl), RLOCK_EINVAL);
    cr_assert_eq(ttl, 77, "holder_ttl_ms written on EINVAL");
    th_assert_status(rlock_cancel_new(NULL), RLOCK_EINVAL);
    redisContext *r = th_redis(0);
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    free(name);
}

Test(statuses, elost_from_every_acquire_call_and_unlock)
{
    /* A re-entry whose outer hold is gone from Redis (deleted behind the
     * client's back: an operator, a restart without persistence) takes
     * nothing and says so; so does the outer unlock. */
    rlock_client *c = th_client(NULL, 0);
    redisContext *r = th_redis(0);
    const int acquires[] = {C_LOCK, C_TRY_LOCK, C_LOCK_EX};
    for (size_t k = 0; k < 3; k++) {
        int i = acquires[k];
        char *name = th_name("elost");
        rlock *l;
        th_ok(rlock_new(c, name, &l));
        th_ok(rlock_lock(l, LEASE_MS));
        bool held = false;
        th_ok(rlock_is_held_by_thread(l, rlock_thread_id(), &held));
        cr_assert(held);
        th_run(r, "DEL %s", name);
        assert_call(i, invoke(i, l), RLOCK_ELOST);
        cr_assert_eq(th_exists(r, name), 0, "%s: the re-entry took a fresh hold", call_names[i]);
        assert_call(C_UNLOCK, rlock_unlock(l), RLOCK_ELOST);
        th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
        rlock_free(l);
        free(name);
    }
    redisFree(r);
    rlock_client_free(c);
}

/* ---- RLOCK_EREDIS --------------------------------------------------------- */

Test(statuses, eredis_from_every_call_on_error_replies)
{
    /* 1. A key of another type (WRONGTYPE): the acquire script's HGET,
     * HEXISTS and HGET fail on it: RLOCK_EKIND (since 0.3), with the
     * server's text. */
    rlock_client *c = th_client(NULL, 0);
    set s;
    set_new(&s, c, "eredis");
    redisContext *r = th_redis(0);
    const int wrongtype[] = {
        C_LOCK,      C_TRY_LOCK, C_LOCK_EX, C_IS_HELD_BY_CURRENT_THREAD, C_IS_HELD_BY_THREAD,
        C_HOLD_COUNT};
    for (size_t k = 0; k < sizeof wrongtype / sizeof wrongtype[0]; k++) {
        int i = wrongtype[k];
        th_run(r, "SET %s a-string", s.names[i]);
        assert_call(i, invoke(i, s.ls[i]), RLOCK_EKIND);
        cr_assert(strstr(rlock_last_error(), "WRONGTYPE"), "%s: %s", call_names[i],
                  rlock_last_error());
        th_run(r, "DEL %s", s.names[i]);
    }
    set_free(&s);
    rlock_client_free(c);
    redisFree(r);

    /* 2. Writes refused (min-replicas-to-write with no replica: NOREPLICAS):
     * DEL, which force unlock runs, works on any type, and the unlock's
     * script writes too. */
    th_server srv;
    th_server_start(&srv);
    char *url = th_server_url(&srv);
    rlock_config cfg = base_config(url);
    c = th_client_cfg(&cfg);
    set_new(&s, c, "eredis-w");
    hold_for_unlock(&s);
    th_ok(rlock_lock(s.ls[C_FORCE_UNLOCK], LEASE_MS));
    r = th_redis(srv.port);
    th_run(r, "CONFIG SET min-replicas-to-write 1");
    const int writes[] = {C_UNLOCK, C_FORCE_UNLOCK};
    for (size_t k = 0; k < 2; k++) {
        int i = writes[k];
        assert_call(i, invoke(i, s.ls[i]), RLOCK_EREDIS);
        cr_assert(strstr(rlock_last_error(), "NOREPLICAS"), "%s: %s", call_names[i],
                  rlock_last_error());
    }
    th_run(r, "CONFIG SET min-replicas-to-write 0");
    set_free(&s);
    rlock_client_free(c);
    redisFree(r);
    th_server_stop(&srv);
    free(url);

    /* 3. EXISTS and PTTL never fail on a key: a server whose operator
     * renamed them away answers "unknown command". */
    static const char *const renamed[] = {
        "--rename-command", "EXISTS", "", "--rename-command", "PTTL", "", NULL};
    th_server_start_args(&srv, renamed);
    url = th_server_url(&srv);
    cfg = base_config(url);
    c = th_client_cfg(&cfg);
    set_new(&s, c, "eredis-r");
    const int reads[] = {C_IS_LOCKED, C_REMAIN_TTL};
    for (size_t k = 0; k < 2; k++) {
        int i = reads[k];
        assert_call(i, invoke(i, s.ls[i]), RLOCK_EREDIS);
        cr_assert(strstr(rlock_last_error(), "unknown command"), "%s: %s", call_names[i],
                  rlock_last_error());
    }
    set_free(&s);
    rlock_client_free(c);
    th_server_stop(&srv);
    free(url);
}

/* ---- RLOCK_EPROTO --------------------------------------------------------- */

static tp_proxy *proxy_to(int port)
{
    tp_proxy *p = tp_new(port);
    cr_assert(p != NULL && tp_start(p) == 0, "cannot start the proxy");
    return p;
}

static char *proxy_url(tp_proxy *p)
{
    char *u = NULL;
    cr_assert(asprintf(&u, "redis://127.0.0.1:%d", tp_port(p)) > 0);
    return u;
}

Test(statuses, eproto_from_every_call_on_a_reply_of_another_shape)
{
    /* Every call expects an integer, a nil or an array of two integers:
     * "+OK" (what a proxy or a server of another protocol might say) is
     * none of them. The request still runs in Redis. */
    th_server srv;
    th_server_start(&srv);
    tp_proxy *px = proxy_to(srv.port);
    char *url = proxy_url(px);
    rlock_config cfg = base_config(url);
    rlock_client *c = th_client_cfg(&cfg);
    set s;
    set_new(&s, c, "eproto");
    hold_for_unlock(&s);
    for (int i = 0; i < NCALLS; i++) {
        uint64_t before = tp_answered(px);
        tp_answer_next(px, s.names[i], "+OK\r\n");
        assert_call(i, invoke(i, s.ls[i]), RLOCK_EPROTO);
        cr_assert_eq(tp_answered(px), before + 1, "%s: the proxy replaced no answer",
                     call_names[i]);
    }
    set_free(&s);
    rlock_client_free(c);
    tp_free(px);
    th_server_stop(&srv);
    free(url);
}

/* ---- RLOCK_EAUTH ---------------------------------------------------------- */

Test(statuses, eauth_from_every_call_when_a_reconnect_is_refused)
{
    /* The password changes after the client connected (an operator rotates
     * it): connections already made stay logged in, a new one is refused. */
    th_server srv;
    th_server_start(&srv);
    redisContext *r = th_redis(srv.port);
    th_run(r, "CONFIG SET requirepass old-pw");
    char *url = NULL;
    cr_assert(asprintf(&url, "redis://:old-pw@127.0.0.1:%d", srv.port) > 0);
    rlock_config cfg = base_config(url);
    rlock_client *c = th_client_cfg(&cfg);
    set s;
    set_new(&s, c, "eauth");
    hold_for_unlock(&s);
    th_run(r, "CONFIG SET requirepass new-pw");
    redisReply *k = th_cmd(r, "CLIENT KILL TYPE normal SKIPME yes");
    cr_assert(k->type == REDIS_REPLY_INTEGER && k->integer >= 1, "no command connection killed");
    freeReplyObject(k);
    for (int i = 0; i < NCALLS; i++) {
        assert_call(i, invoke(i, s.ls[i]), RLOCK_EAUTH);
    }
    set_free(&s);
    rlock_client_free(c);
    redisFree(r);
    th_server_stop(&srv);
    free(url);
}

/* ---- RLOCK_EPOOL ---------------------------------------------------------- */

/* A thread that makes one call when told to; unlock's thread holds its
 * lock first. */
typedef struct caller {
    rlock *l;
    int which;
    pthread_t th;
    pthread_barrier_t *ready, *go, *done;
    atomic_bool quit;
    rlock_status st;
} caller;

static void *caller_main(void *arg)
{
    caller *k = arg;
    if (k->which == C_UNLOCK) {
        th_ok(rlock_lock(k->l, LEASE_MS));
    }
    pthread_barrier_wait(k->ready);
    for (;;) {
        pthread_barrier_wait(k->go);
        if (atomic_load(&k->quit)) {
            return NULL;
        }
        k->st = invoke(k->which, k->l);
        pthread_barrier_wait(k->done);
    }
}

/* The occupier: its call, and whether it has returned. */
typedef struct occupier {
    rlock *l;
    pthread_t th;
    atomic_bool done;
    rlock_status st;
} occupier;

static void *occupy(void *arg)
{
    occupier *o = arg;
    bool b;
    o->st = rlock_force_unlock(o->l, &b);
    atomic_store(&o->done, true);
    return NULL;
}

static uint64_t commands(rlock_client *c)
{
    uint64_t n = 0;
    th_ok(rlock_client_stat(c, RLOCK_STAT_COMMANDS, &n));
    return n;
}

Test(statuses, epool_from_every_call_when_the_pool_stays_busy)
{
    /* One pooled connection, taken by a script call that the server holds
     * back (CLIENT PAUSE WRITE: scripts wait, connecting and reads do not)
     * for its command timeout: every other call waits as long for the
     * connection and gives up with RLOCK_EPOOL. All calls start together
     * behind the occupier; the one that gets the connection when the
     * occupier gives it back answers otherwise (a query OK, a script
     * ETIMEDOUT), so rounds repeat until each call has seen RLOCK_EPOOL. */
    th_server srv;
    th_server_start(&srv);
    char *url = th_server_url(&srv);
    rlock_config cfg = base_config(url);
    cfg.pool_size = 1;
    cfg.command_timeout_ms = 400;
    rlock_client *c = th_client_cfg(&cfg);
    set s;
    set_new(&s, c, "epool");
    char *oname = th_name("epool-occupier");
    rlock *occ;
    th_ok(rlock_new(c, oname, &occ));
    th_ok(rlock_force_unlock(occ, NULL)); /* script cached */
    pthread_barrier_t ready, go, done;
    pthread_barrier_init(&ready, NULL, NCALLS + 1);
    pthread_barrier_init(&go, NULL, NCALLS + 1);
    pthread_barrier_init(&done, NULL, NCALLS + 1);
    caller k[NCALLS];
    for (int i = 0; i < NCALLS; i++) {
        k[i] = (caller){.l = s.ls[i], .which = i, .ready = &ready, .go = &go, .done = &done};
        atomic_init(&k[i].quit, false);
        cr_assert_eq(pthread_create(&k[i].th, NULL, caller_main, &k[i]), 0);
    }
    pthread_barrier_wait(&ready);
    redisContext *r = th_redis(srv.port);
    th_run(r, "CLIENT PAUSE 60000 WRITE");
    bool seen[NCALLS] = {false};
    int rounds = 0, left = NCALLS;
    while (left > 0 && rounds < 8) {
        rounds++;
        /* The occupier has the connection once its command is counted. A
         * call that failed before sending (the pool backing off after a
         * reconnect the pause held up) is made again. */
        occupier o = {.l = occ};
        for (int tries = 0;; tries++) {
            cr_assert(tries < 20, "the occupier never got its command out");
            uint64_t sent = commands(c);
            atomic_init(&o.done, false);
            cr_assert_eq(pthread_create(&o.th, NULL, occupy, &o), 0);
            cr_assert(TH_POLL(commands(c) > sent || atomic_load(&o.done), 2000));
            if (commands(c) > sent) {
                break;
            }
            pthread_join(o.th, NULL);
            th_sleep_ms(th_ms(100));
        }
        pthread_barrier_wait(&go);
        pthread_barrier_wait(&done);
        pthread_join(o.th, NULL);
        th_assert_status(o.st, RLOCK_ETIMEDOUT);
        left = 0;
        for (int i = 0; i < NCALLS; i++) {
            rlock_status g = k[i].st;
            /* RLOCK_EIO: the call that got the connection as its own time
             * ran out had none left to make it again (a reconnect). */
            cr_assert(g == RLOCK_EPOOL || g == RLOCK_ETIMEDOUT || g == RLOCK_OK || g == RLOCK_EIO,
                      "%s: got %s", call_names[i], rlock_status_name(g));
            seen[i] = seen[i] || g == RLOCK_EPOOL;
            left += !seen[i];
        }
    }
    th_run(r, "CLIENT UNPAUSE");
    for (int i = 0; i < NCALLS; i++) {
        cr_assert(seen[i], "%s never returned RLOCK_EPOOL in %d rounds", call_names[i], rounds);
    }
    cr_log_info("every call returned RLOCK_EPOOL within %d round(s)", rounds);
    for (int i = 0; i < NCALLS; i++) {
        atomic_store(&k[i].quit, true);
    }
    pthread_barrier_wait(&go);
    for (int i = 0; i < NCALLS; i++) {
        pthread_join(k[i].th, NULL);
    }
    pthread_barrier_destroy(&ready);
    pthread_barrier_destroy(&go);
    pthread_barrier_destroy(&done);
    rlock_free(occ);
    free(oname);
    set_free(&s);
    rlock_client_free(c);
    redisFree(r);
    th_server_stop(&srv);
    free(url);
}

/* ---- RLOCK_ECLOSED -------------------------------------------------------- */

typedef struct closing {
    rlock_client *c;
    rlock *l;
    atomic_int tid;
    atomic_bool done;
    rlock_status st;
    pthread_t th;
} closing;

static void *closing_call(void *arg)
{
    closing *k = arg;
    bool b;
    k->st = rlock_is_locked(k->l, &b);
    atomic_store(&k->done, true);
    return NULL;
}

static void *closing_wait(void *arg)
{
    closing *k = arg;
    atomic_store(&k->tid, (int)th_gettid());
    k->st = rlock_lock(k->l, LEASE_MS);
    atomic_store(&k->done, true);
    return NULL;
}

static void *closing_free(void *arg)
{
    closing *k = arg;
    rlock_client_free(k->c);
    atomic_store(&k->done, true);
    return NULL;
}

Test(statuses, eclosed_from_every_call_entering_a_closing_client)
{
    /* rlock_client_free() waits for the calls in progress; a call that
     * enters meanwhile must be refused at once. A call stalled on the
     * server keeps the close waiting (up to its 5 s command timeout); a
     * waiter woken with RLOCK_ECLOSED shows that the close has begun. */
    th_server srv;
    th_server_start(&srv);
    char *url = th_server_url(&srv);
    rlock_client *holder = th_client(url, 0);
    rlock_config cfg = base_config(url);
    cfg.command_timeout_ms = 5000;
    rlock_client *c = th_client_cfg(&cfg);
    set s;
    set_new(&s, c, "eclosed");
    hold_for_unlock(&s);
    rlock *hl, *wl, *sl;
    th_ok(rlock_new(holder, s.names[C_LOCK], &hl));
    th_ok(rlock_lock(hl, LEASE_MS));
    th_ok(rlock_new(c, s.names[C_LOCK], &wl));
    th_ok(rlock_new(c, s.names[C_IS_LOCKED], &sl));
    closing waiter = {.c = c, .l = wl}, stalled = {.c = c, .l = sl}, closer = {.c = c};
    atomic_init(&waiter.done, false);
    atomic_init(&waiter.tid, 0);
    atomic_init(&stalled.done, false);
    atomic_init(&closer.done, false);
    pthread_create(&waiter.th, NULL, closing_wait, &waiter);
    th_wait_waiters(srv.port, s.names[C_LOCK], 1, 3000);
    cr_assert(TH_POLL(atomic_load(&waiter.tid) != 0, 3000));
    th_wait_blocked(atomic_load(&waiter.tid), 3000); /* asleep between attempts */
    th_stall st;
    th_stall_start(&st, srv.port, th_ms(4000));
    uint64_t sent0 = 0, sent = 0;
    th_ok(rlock_client_stat(c, RLOCK_STAT_COMMANDS, &sent0));
    pthread_create(&stalled.th, NULL, closing_call, &stalled);
    cr_assert(
        TH_POLL(rlock_client_stat(c, RLOCK_STAT_COMMANDS, &sent) == RLOCK_OK && sent > sent0, 2000),
        "the stalled call sent nothing");
    pthread_create(&closer.th, NULL, closing_free, &closer);
    cr_assert(TH_POLL(atomic_load(&waiter.done), 3000), "the close did not wake the waiter");
    th_assert_status(waiter.st, RLOCK_ECLOSED);
    /* The close is under way and waits for the stalled call. */
    cr_assert(!atomic_load(&stalled.done) && !atomic_load(&closer.done),
              "the stalled call returned too early (%s): no window left",
              rlock_status_name(stalled.st));
    rlock *x = NULL;
    th_assert_status(rlock_new(c, "entering", &x), RLOCK_ECLOSED);
    cr_assert_null(x);
    for (int i = 0; i < NCALLS; i++) {
        assert_call(i, invoke(i, s.ls[i]), RLOCK_ECLOSED);
    }
    cr_assert(!atomic_load(&closer.done), "the close ended while calls were entering it");
    pthread_join(stalled.th, NULL);
    pthread_join(closer.th, NULL);
    pthread_join(waiter.th, NULL);
    th_stall_end(&st);
    rlock_free(wl);
    rlock_free(sl);
    set_free(&s);
    th_ok(rlock_unlock(hl));
    rlock_free(hl);
    rlock_client_free(holder);
    th_server_stop(&srv);
    free(url);
}

/* ---- RLOCK_ENOMEM --------------------------------------------------------- */

/* A name of RLOCK_NAME_MAX (longer is RLOCK_EINVAL): the handle keeps
 * three copies of it (name, channel, latch prefix), about 192 KiB that
 * rlock_new() must allocate. */
__attribute__((unused)) /* not under TSan, where the ENOMEM test skips */
static char *
max_name(void)
{
    char *n = malloc((size_t)RLOCK_NAME_MAX + 1);
    if (n) {
        memset(n, 'n', RLOCK_NAME_MAX);
        n[RLOCK_NAME_MAX] = '\0';
    }
    return n;
}

#if defined(__SANITIZE_ADDRESS__)
/* Under ASan an address-space limit does not reach malloc() (its heap is
 * reserved at start), so the out-of-memory is ASan's own: above
 * soft_rss_limit_mb of resident memory every malloc() returns NULL
 * (allocator_may_return_null) until the process is back below it. The
 * limit is far above what any test of this program uses. Exported (the
 * build hides symbols by default): the runtime looks the hook up at start. */
#define ENOMEM_RSS_MB 512
#define ENOMEM_STR_(x) #x
#define ENOMEM_STR(x) ENOMEM_STR_(x)
__attribute__((visibility("default"))) const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1:soft_rss_limit_mb=" ENOMEM_STR(ENOMEM_RSS_MB);
}

/* Whether malloc() refuses a block the size of a name (volatile: the
 * compiler may not drop the pair and assume success). */
static bool heap_refuses(void)
{
    void *volatile b = malloc(RLOCK_NAME_MAX);
    bool refused = b == NULL;
    free(b);
    return refused;
}

static long resident_mb(void)
{
    long size = 0, pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    cr_assert(f && fscanf(f, "%ld %ld", &size, &pages) == 2);
    fclose(f);
    return pages * (sysconf(_SC_PAGESIZE) / 1024) / 1024;
}

static void enomem_under_asan(void)
{
    rlock_client *c = th_client(NULL, 0);
    char *name = max_name();
    cr_assert(name != NULL);
    /* Resident memory past the limit, mapped rather than allocated, and
     * touched; ASan's background thread sees it within about 100 ms. */
    size_t fill = (size_t)(ENOMEM_RSS_MB - resident_mb() + 64) << 20;
    char *m = mmap(NULL, fill, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert(m != MAP_FAILED);
    memset(m, 1, fill);
    bool full = TH_POLL(heap_refuses(), 5000);
    rlock *l = NULL;
    rlock_status st = full ? rlock_new(c, name, &l) : RLOCK_OK;
    munmap(m, fill);
    /* Asserted only once malloc() works again (a failed assertion
     * allocates). */
    cr_assert(TH_POLL(!heap_refuses(), 5000), "malloc() still refuses below the limit");
    cr_assert(full, "malloc() never refused above soft_rss_limit_mb=%d", ENOMEM_RSS_MB);
    th_assert_status(st, RLOCK_ENOMEM);
    cr_assert_null(l);
    free(name);
    rlock_client_free(c);
}
#endif

#if !TH_UNDER_SANITIZER
/* Without a sanitizer: an address-space limit, and a heap used up below
 * it, in a child so that both end with it (a child may make a client of
 * its own here: TH_FORKED_CHILD_CAN_MAKE_CLIENTS). */
static int enomem_child(void *arg)
{
    (void)arg;
    /* Its own client: the parent's refuses calls in a child (ECLOSED). */
    rlock_client *c = NULL;
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = th_url();
    if (rlock_client_new(&cfg, &c) != RLOCK_OK) {
        return 2;
    }
    char *name = max_name();
    if (!name) {
        return 3;
    }
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld", &pages) != 1) {
        return 4;
    }
    fclose(f);
    struct rlimit rl;
    rl.rlim_cur = rl.rlim_max = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE);
    if (setrlimit(RLIMIT_AS, &rl) != 0) {
        return 5;
    }
    /* Use up what the heap still has, then give back a few KiB: room for
     * the handle itself, none for the copies of the name. */
    void *blocks = NULL, *b;
    while ((b = malloc(1024)) != NULL) {
        *(void **)b = blocks;
        blocks = b;
    }
    for (int i = 0; i < 4 && blocks; i++) {
        b = *(void **)blocks;
        free(blocks);
        blocks = b;
    }
    rlock *l = NULL;
    rlock_status st = rlock_new(c, name, &l);
    return st == RLOCK_ENOMEM && l == NULL ? 0 : 10 + (int)st;
}
#endif

Test(statuses, enomem_from_rlock_new_when_the_name_cannot_be_copied)
{
    /* The other calls that document RLOCK_ENOMEM allocate only small,
     * bounded amounts once the handle exists: their ENOMEM cannot be
     * produced without a malloc hook, which the tests do not use. */
#if defined(__SANITIZE_ADDRESS__)
    enomem_under_asan();
#elif defined(__SANITIZE_THREAD__)
    /* GCC 12's TSan has no out-of-memory below 1 MiB for one allocation
     * (max_allocation_size_mb; a name is at most 64 KiB), never acts on
     * soft_rss_limit_mb, and dies in its own mmap() under RLIMIT_AS. */
    cr_skip_test("ThreadSanitizer has no allocator limit small enough");
#else
    if (th_under_valgrind()) {
        cr_skip_test("an address-space limit stops valgrind itself, not a malloc");
    }
    int code = th_wait(th_fork(enomem_child, NULL));
    cr_assert_eq(code, 0, "child exit %d (10 + status of rlock_new)", code);
#endif
}

/* ---- send failures ------------------------------------------------------- */

/* A name of RLOCK_NAME_MAX: its acquire (about 64 KiB) cannot sit whole in
 * the socket buffers between the client and a narrow proxy (tp_new_narrow:
 * about 40 KiB), so while the proxy does not read, the client's send has
 * to wait for room. */
#define LONG_NAME ((size_t)RLOCK_NAME_MAX)

static char *long_name(void)
{
    char *n = malloc(LONG_NAME + 1);
    cr_assert(n != NULL);
    memset(n, 'L', LONG_NAME);
    snprintf(n, 40, "send:%d:", (int)getpid());
    n[strlen(n)] = 'L';
    n[LONG_NAME] = '\0';
    return n;
}

static tp_proxy *small_proxy_to(int port)
{
    tp_proxy *p = tp_new_narrow(port);
    cr_assert(p != NULL && tp_start(p) == 0, "cannot start the proxy");
    return p;
}

/* SIGPIPE is fatal by default; the test process keeps the default so that
 * a write to a reset connection would kill it. */
static void default_sigpipe(void)
{
    signal(SIGPIPE, SIG_DFL);
}

typedef struct sender {
    rlock *l;
    rlock_status st;
    int64_t took;
    char err[256];
    atomic_int tid;
    atomic_bool done;
} sender;

static void *send_long(void *arg)
{
    sender *k = arg;
    atomic_store(&k->tid, (int)th_gettid());
    int64_t t0 = th_now_ms();
    k->st = rlock_try_lock(k->l, 0, LEASE_MS);
    k->took = th_now_ms() - t0;
    snprintf(k->err, sizeof k->err, "%s", rlock_last_error());
    atomic_store(&k->done, true);
    return NULL;
}

/* Whether thread tid is in poll(): the library's send waits there for
 * room (its receive waits in recv()). */
static bool waits_for_room(int tid)
{
    char path[64], line[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
    FILE *f = tid > 0 ? fopen(path, "r") : NULL;
    long nr = -1;
    if (f) {
        if (fgets(line, sizeof line, f)) {
            nr = strtol(line, NULL, 10);
        }
        fclose(f);
    }
#ifdef SYS_poll
    if (nr == SYS_poll) {
        return true;
    }
#endif
    return nr == SYS_ppoll;
}

Test(send, a_send_into_a_reset_connection_fails_without_sigpipe)
{
    default_sigpipe();
    th_server srv;
    th_server_start(&srv);
    tp_proxy *px = small_proxy_to(srv.port);
    char *url = proxy_url(px);
    rlock_config cfg = base_config(url);
    cfg.command_timeout_ms = 30000; /* the send must fail by the reset, not time out */
    rlock_client *c = th_client_cfg(&cfg);
    char *name = long_name();
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    /* The proxy stops reading: the request fills the buffers and the
     * client's send waits for room. Then the proxy resets the connection:
     * the client's next send meets ECONNRESET/EPIPE. */
    tp_stall_requests(px, true);
    sender k = {.l = l};
    atomic_init(&k.done, false);
    atomic_init(&k.tid, 0);
    pthread_t t;
    pthread_create(&t, NULL, send_long, &k);
    cr_assert(TH_POLL(tp_unread(px) > 0 && waits_for_room(atomic_load(&k.tid)), 5000),
              "the send never waited for room (%llu bytes unread)",
              (unsigned long long)tp_unread(px));
    /* Still sending: the buffers are full, the request is not. */
    cr_assert(!atomic_load(&k.done), "the call returned (%s) with its request unread",
              rlock_status_name(k.st));
    cr_log_info("%llu bytes of a %zu-byte name unread by the proxy",
                (unsigned long long)tp_unread(px), LONG_NAME);
    cr_assert(tp_unread(px) < LONG_NAME, "the whole request reached the proxy");
    tp_reset(px);
    /* Reading again, for the outcome check the failed acquire makes on a
     * new connection. */
    tp_stall_requests(px, false);
    pthread_join(t, NULL);
    cr_log_info("try_lock after the reset: %s in %lld ms (%s)", rlock_status_name(k.st),
                (long long)k.took, k.err);
    /* The process is alive (SIGPIPE's default would have ended it), and
     * the send met EPIPE. The acquire carries a request id, so the engine
     * may send it again on a new connection within its command timeout:
     * whatever it answers must agree with Redis. */
    cr_assert(strstr(k.err, strerror(EPIPE)) != NULL, "the send met EPIPE: %s", k.err);
    cr_assert(k.took < 20000, "answered by the reset, not by the 30 s timeout (%lld ms)",
              (long long)k.took);
    redisContext *r = th_redis(srv.port);
    if (k.st == RLOCK_OK) {
        cr_assert_eq(th_hlen(r, name), 1, "one hold after one successful try_lock");
    } else {
        th_assert_status(k.st, RLOCK_EIO);
        cr_assert_eq(th_exists(r, name), 0, "RLOCK_EIO, yet the acquire ran");
    }
    th_run(r, "DEL %s", name);
    /* The client goes on working. */
    bool locked = true;
    th_ok(rlock_is_locked(l, &locked));
    cr_assert(!locked);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    tp_free(px);
    th_server_stop(&srv);
    free(name);
    free(url);
}

Test(send, a_send_that_finds_no_room_times_out)
{
    default_sigpipe();
    th_server srv;
    th_server_start(&srv);
    tp_proxy *px = small_proxy_to(srv.port);
    char *url = proxy_url(px);
    rlock_config cfg = base_config(url);
    cfg.command_timeout_ms = 1000;
    rlock_client *c = th_client_cfg(&cfg);
    char *name = long_name();
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    /* A peer that stops reading (a stalled proxy, a full link): the send
     * cannot finish, and command_timeout_ms bounds it. */
    tp_stall_requests(px, true);
    sender k = {.l = l};
    atomic_init(&k.done, false);
    atomic_init(&k.tid, 0);
    send_long(&k);
    cr_log_info("try_lock with no room to send: %s in %lld ms (%s); %llu bytes unread",
                rlock_status_name(k.st), (long long)k.took, k.err,
                (unsigned long long)tp_unread(px));
    th_assert_status(k.st, RLOCK_ETIMEDOUT);
    /* The request did not fit: the send itself waited for room until the
     * timeout (a sent request would time out waiting for its reply). */
    cr_assert(strstr(k.err, "did not take the request"), "the send timed out: %s", k.err);
    cr_assert(tp_unread(px) < LONG_NAME, "the whole request was buffered: no full send buffer");
    cr_assert(k.took >= 900 && k.took < th_ms(5000), "took %lld ms", (long long)k.took);
    tp_stall_requests(px, false);
    redisContext *r = th_redis(srv.port);
    /* The half-sent request went with its connection: nothing ran. */
    cr_assert(TH_POLL(th_exists(r, name) == 0, 1000));
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    tp_free(px);
    th_server_stop(&srv);
    free(name);
    free(url);
}

/* The server's INFO field `field` (an integer). */
static long long info_field(redisContext *r, const char *section, const char *field)
{
    redisReply *x = th_cmd(r, "INFO %s", section);
    cr_assert(x->type == REDIS_REPLY_STRING);
    char key[64];
    snprintf(key, sizeof key, "\r\n%s:", field);
    const char *at = strstr(x->str, key);
    cr_assert(at != NULL, "no %s in INFO %s", field, section);
    long long v = strtoll(at + strlen(key), NULL, 10);
    freeReplyObject(x);
    return v;
}

Test(send, a_send_the_server_cuts_off_fails_without_sigpipe)
{
    /* The server itself gives up on a request while it is still being sent:
     * the request's query buffer takes the clients' memory past
     * maxmemory-clients, and the server evicts (closes) the connection.
     * (proto-max-bulk-len and client-query-buffer-limit, the limits on one
     * request, go no lower than 1 MiB in Redis 7, above RLOCK_NAME_MAX.)
     * The narrow proxy stands for a slow link, so that the request is
     * still on its way; it passes the server's close on to the client
     * (a FIN, or a reset with the unread rest of the request), and the
     * client's next send meets ECONNRESET or EPIPE: SIGPIPE, unless the
     * library sends with MSG_NOSIGNAL. */
    default_sigpipe();
    th_server srv;
    th_server_start(&srv);
    redisContext *r = th_redis(srv.port);
    th_run(r, "CLIENT NO-EVICT on");
    tp_proxy *px = small_proxy_to(srv.port);
    char *url = proxy_url(px);
    rlock_config cfg = base_config(url);
    cfg.command_timeout_ms = 2000; /* the acquire is resent until then */
    rlock_client *c = th_client_cfg(&cfg);
    char *name = long_name();
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    /* Room for the clients as they are and a quarter of the request: the
     * request's query buffer (the name is one bulk, read whole) does not
     * fit. */
    long long mem = info_field(r, "memory", "mem_clients_normal");
    th_run(r, "CONFIG SET maxmemory-clients %lld", mem + (long long)LONG_NAME / 4);
    long long evicted = info_field(r, "stats", "evicted_clients");
    /* The request waits for room first (the link is slow), then flows. */
    tp_stall_requests(px, true);
    sender k = {.l = l};
    atomic_init(&k.done, false);
    atomic_init(&k.tid, 0);
    pthread_t t;
    pthread_create(&t, NULL, send_long, &k);
    cr_assert(TH_POLL(tp_unread(px) > 0 && waits_for_room(atomic_load(&k.tid)), 5000),
              "the send never waited for room (%llu unread, done %d: %s)",
              (unsigned long long)tp_unread(px), (int)atomic_load(&k.done), k.err);
    tp_stall_requests(px, false);
    pthread_join(t, NULL);
    cr_log_info("try_lock of a request the server cut off: %s in %lld ms (%s)",
                rlock_status_name(k.st), (long long)k.took, k.err);
    th_run(r, "CONFIG SET maxmemory-clients 0");
    cr_assert(info_field(r, "stats", "evicted_clients") > evicted, "the server evicted no client");
    th_assert_status(k.st, RLOCK_EIO);
    /* The eviction closes the connection while the request is still being
     * written; whether the client notices on its send (EPIPE) or on the
     * read that follows (the last resend's reset) depends on how fast the
     * build is. Either way: no SIGPIPE (the process is alive with the
     * default disposition), a connection-loss status, nothing ran. The
     * send-side EPIPE itself is shown by
     * send::a_send_into_a_reset_connection_fails_without_sigpipe. */
    cr_assert(strstr(k.err, "connection lost") || strstr(k.err, "closed") || strstr(k.err, "reset"),
              "not a connection loss: %s", k.err);
    cr_assert(k.took < th_ms(10000), "took %lld ms", (long long)k.took);
    cr_assert_eq(th_exists(r, name), 0, "the request ran");
    bool locked = true;
    th_ok(rlock_is_locked(l, &locked)); /* a fresh connection works */
    cr_assert(!locked);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    tp_free(px);
    th_server_stop(&srv);
    free(name);
    free(url);
}
