/* Adversarial review of 14929b3 (a call made during the pool's back-off
 * waits for its end), 60aba0f (a surplus give-back in doubt sent again
 * under its own id), 9d772a0 (poll with less than two receive slices
 * left) and 8c9486d (silence in a TLS handshake with a server seen before
 * is RLOCK_ETIMEDOUT). Each test is a finding or a check that held. The
 * four findings were all in 14929b3, which was reverted (ac1153d): the
 * pool fails a borrow during its back-off at once again, and
 * the callers that retry (a waiting lock, an unlock) sleep on their own
 * cancellable back-off. Two findings pass again with that; two describe
 * what a pool that waits out its back-off would still owe and stay
 * disabled, as the acceptance tests of that open item.
 *
 * 9d772a0 has no test here: strace -c of 1000 lock/unlock pairs with the
 * default timeouts (3 s) shows 2008 recvfrom, 2008 sendto and 2007 poll
 * (the pool's idle check per borrow), the same as link.c of 4a8b1d7; only
 * a command timeout in [100, 200) ms adds one poll per reply (4015 poll
 * against 2007), by design. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "proxy.h"
#include "faultkit.h"

static th_server srv;

static void setup(void)
{
    th_server_start(&srv);
}

static void teardown(void)
{
    th_server_stop(&srv);
}

TestSuite(rev15f, .init = setup, .fini = teardown, .timeout = 90);

static rlock_client *client_port(int port, int pool, int64_t cmd_ms, int64_t retry_ms)
{
    char u[64];
    snprintf(u, sizeof u, "redis://127.0.0.1:%d", port);
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = u;
    cfg.pool_size = pool;
    cfg.command_timeout_ms = cmd_ms;
    cfg.retry_timeout_ms = retry_ms;
    return th_client_cfg(&cfg);
}

/* Kills the private server and makes failed connects through l until the
 * pool's back-off reaches its 1 s cap. */
static void backoff_to_cap(rlock *l)
{
    th_server_kill(&srv);
    bool locked;
    int64_t end = th_now_ms() + 2500;
    while (th_now_ms() < end) {
        cr_assert(rlock_is_locked(l, &locked) != RLOCK_OK);
        th_sleep_ms(5);
    }
}

/* ---- 14929b3: the back-off wait --------------------------------------- */

typedef struct call {
    rlock *l;
    int64_t wait_ms;
    rlock_cancel *cancel;
    bool lock;
    atomic_bool done;
    rlock_status st;
    int64_t started, returned;
} call;

static void *call_main(void *arg)
{
    call *k = arg;
    k->started = th_now_ms();
    if (k->lock) {
        k->st = rlock_lock_ex(k->l, k->wait_ms, 30000, k->cancel, NULL);
    } else {
        bool locked;
        k->st = rlock_is_locked(k->l, &locked);
    }
    k->returned = th_now_ms();
    atomic_store(&k->done, true);
    return NULL;
}

/* A cancellation token fired while a waiting rlock_lock_ex() sits in the
 * pool's back-off (server down, the back-off at its 1 s cap): how long
 * until the call returns RLOCK_ECANCELED? */
/* FINDING (14929b3, passes since its revert). The back-off wait in
 * rlock__pool_borrow() does not watch the token: fired at spread points
 * of a waiter's retries during an outage, the call returned
 * RLOCK_ECANCELED 0, 464, 540, 410, 0, 0, 0, 0 ms after the fire (up to
 * the 1 s back-off cap); before 14929b3 (pool.c of 14929b3^) every one
 * returned within 0 ms, the borrow failing at once and the waiter
 * sleeping on its cancellable wait. */
Test(rev15f, cancel_during_pool_backoff_returns_promptly)
{
    char *name = th_name("rev15f-cancel");
    rlock_client *c = client_port(srv.port, 4, 3000, 60000);
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    backoff_to_cap(l);
    rlock_cancel *t;
    th_ok(rlock_cancel_new(&t));
    int64_t worst = 0;
    for (int i = 0; i < 8; i++) {
        rlock_cancel_reset(t);
        call k = {.l = l, .wait_ms = 60000, .cancel = t, .lock = true};
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, call_main, &k), 0);
        th_sleep_ms(1200 + 130 * i); /* fire at spread points of its retries */
        cr_assert(!atomic_load(&k.done), "returned %s early", rlock_status_name(k.st));
        int64_t fired = th_now_ms();
        rlock_cancel_fire(t);
        pthread_join(th, NULL);
        int64_t took = k.returned - fired;
        cr_log_info("cancel fired %lld ms into the wait: %s after %lld ms",
                    (long long)(fired - k.started), rlock_status_name(k.st), (long long)took);
        th_assert_status(k.st, RLOCK_ECANCELED);
        if (took > worst) {
            worst = took;
        }
    }
    cr_assert(worst <= th_ms(200), "a cancelled call returned %lld ms after the fire",
              (long long)worst);
    th_server_restart(&srv);
    rlock_free(l);
    rlock_client_free(c);
    rlock_cancel_free(t);
    free(name);
}

/* rlock_client_free() while a waiting rlock_lock() sits in the back-off:
 * api.md says every thread blocked in rlock_lock() is woken and returns
 * RLOCK_ECLOSED. */
Test(rev15f, close_during_pool_backoff_wakes_lock_with_eclosed)
{
    char *name = th_name("rev15f-close");
    rlock_client *c = client_port(srv.port, 4, 3000, 20000);
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    backoff_to_cap(l);
    call k = {.l = l, .wait_ms = 20000, .lock = true};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, call_main, &k), 0);
    th_sleep_ms(th_ms(1500));
    cr_assert(!atomic_load(&k.done), "returned %s early", rlock_status_name(k.st));
    int64_t t0 = th_now_ms();
    rlock_client_free(c);
    int64_t freed = th_now_ms() - t0;
    pthread_join(th, NULL);
    int64_t took = k.returned - t0;
    cr_log_info("close during the back-off: lock returned %s after %lld ms, free took %lld ms",
                rlock_status_name(k.st), (long long)took, (long long)freed);
    th_assert_status(k.st, RLOCK_ECLOSED);
    cr_assert(took <= th_ms(300), "lock returned %lld ms after the close began", (long long)took);
    rlock_free(l);
    th_server_restart(&srv);
    free(name);
}

/* The same for a single command (rlock_is_locked) waiting in the back-off. */
/* FINDING (14929b3), disabled since its revert: a query during the
 * back-off fails at once again, so there is no wait for a close to cut
 * short. For a pool that waits out its back-off (open): the close wakes the
 * back-off waiter at once (0 ms), but it goes round again, finds
 * p->closing and returns the last connect's status, RLOCK_EIO, where a
 * call cut short by rlock_client_free() is RLOCK_ECLOSED everywhere else
 * (api.md). Low severity: only the status is wrong. */
Test(rev15f, close_during_pool_backoff_wakes_query_with_eclosed, .disabled = true)
{
    char *name = th_name("rev15f-closeq");
    rlock_client *c = client_port(srv.port, 4, 3000, 20000);
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    backoff_to_cap(l);
    /* Start the query right after a failed connect: the back-off (1 s)
     * ends inside its command timeout (3 s), so it waits. */
    bool locked;
    cr_assert(rlock_is_locked(l, &locked) != RLOCK_OK);
    call k = {.l = l, .lock = false};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, call_main, &k), 0);
    th_sleep_ms(th_ms(200));
    cr_assert(!atomic_load(&k.done), "returned %s early", rlock_status_name(k.st));
    int64_t t0 = th_now_ms();
    rlock_client_free(c);
    pthread_join(th, NULL);
    int64_t took = k.returned - t0;
    cr_log_info("close during the back-off: query returned %s after %lld ms",
                rlock_status_name(k.st), (long long)took);
    cr_assert(took <= th_ms(300), "query returned %lld ms after the close began", (long long)took);
    th_assert_status(k.st, RLOCK_ECLOSED);
    rlock_free(l);
    th_server_restart(&srv);
    free(name);
}

/* A call whose own command timeout ends before the back-off does fails at
 * once, not at the back-off's end. */
Test(rev15f, short_command_timeout_fails_at_once_in_backoff)
{
    char *name = th_name("rev15f-short");
    rlock_client *c2 = client_port(srv.port, 4, 50, 20000);
    rlock *l2;
    th_ok(rlock_new(c2, name, &l2));
    backoff_to_cap(l2);
    bool locked;
    /* Right after a failed connect: the back-off ends ~1 s from now. */
    cr_assert(rlock_is_locked(l2, &locked) != RLOCK_OK);
    int64_t t0 = th_now_ms();
    rlock_status st = rlock_is_locked(l2, &locked);
    int64_t took = th_now_ms() - t0;
    cr_log_info("50 ms command timeout in a 1 s back-off: %s after %lld ms", rlock_status_name(st),
                (long long)took);
    cr_assert(st != RLOCK_OK);
    cr_assert(took <= th_ms(60), "waited %lld ms", (long long)took);
    th_server_restart(&srv);
    rlock_free(l2);
    rlock_client_free(c2);
    free(name);
}

/* The pool's back-off exists so that "a dead server is not hammered by
 * every waiting thread" (pool.c). Since 14929b3 every caller that arrives
 * during a back-off sleeps until its end and then borrows again: they all
 * wake at the same instant and each takes an empty slot and connects, up
 * to pool_size connects per back-off period; and each failed connect
 * doubles the back-off, so one such round of 8 takes it from 20 ms to its
 * 1 s cap. Counted at a proxy in front of a stopped server: 8 threads
 * calling in a loop for 3 s, against 1 thread. */
typedef struct hammer {
    rlock *l;
    int64_t until;
    atomic_int calls;
} hammer;

static void *hammer_main(void *arg)
{
    hammer *h = arg;
    bool locked;
    while (th_now_ms() < h->until) {
        (void)rlock_is_locked(h->l, &locked);
        atomic_fetch_add(&h->calls, 1);
    }
    return NULL;
}

static uint64_t connects_during_outage(int threads, int64_t ms, int *calls)
{
    tp_proxy *px = tp_new(srv.port);
    cr_assert(px && tp_start(px) == 0);
    rlock_client *c = client_port(tp_port(px), 8, 3000, 20000);
    char *name = th_name("rev15f-herd");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    bool locked;
    th_ok(rlock_is_locked(l, &locked));
    th_server_kill(&srv);
    uint64_t a0 = tp_accepted(px);
    hammer h = {.l = l, .until = th_now_ms() + ms};
    pthread_t th[16];
    for (int i = 0; i < threads; i++) {
        cr_assert_eq(pthread_create(&th[i], NULL, hammer_main, &h), 0);
    }
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
    }
    uint64_t n = tp_accepted(px) - a0;
    *calls = atomic_load(&h.calls);
    th_server_restart(&srv);
    rlock_free(l);
    rlock_client_free(c);
    tp_free(px);
    free(name);
    return n;
}

/* FINDING (14929b3, passes since its revert). Measured: 1 thread 18-19
 * connect attempts in 4 s, 8 threads 45-51 (14929b3^: 17-18 and 27-34).
 * Under valgrind one thread's loop is slowed more than eight's (14 and 31
 * in CI): the counts of timed windows say nothing there. One connect at a
 * time after a failed one (c42a43e) made 8 threads' count 1's (18 and 18),
 * but a probe that hung kept every other call from connecting for its
 * whole length (test_rev15g) and was reverted. */
Test(rev15f, backoff_waiters_do_not_all_connect_at_its_end)
{
    if (th_under_valgrind()) {
        cr_skip_test("connect counts in timed windows: not under valgrind");
    }
    int calls1 = 0, calls8 = 0;
    uint64_t one = connects_during_outage(1, 4000, &calls1);
    uint64_t eight = connects_during_outage(8, 4000, &calls8);
    cr_log_info("connect attempts in a 4 s outage: 1 thread %llu (%d calls), 8 threads %llu "
                "(%d calls)",
                (unsigned long long)one, calls1, (unsigned long long)eight, calls8);
    cr_assert(eight <= 2 * one + 2,
              "8 waiting threads made %llu connect attempts where 1 made %llu: the back-off "
              "no longer spaces them",
              (unsigned long long)eight, (unsigned long long)one);
}

/* After a failed connect and its back-off, a call that reconnects while
 * another thread's reconnect waits out a CLIENT PAUSE of the restarted
 * server answers once the pause ends, as that one does: it must not fail
 * at once with the failed connect's status (it did on c42a43e, where one
 * connect at a time tried the server: an unlock retried after a stall
 * failed because the watchdog was reconnecting). */
Test(rev15f, call_beside_another_reconnect_answers_after_the_pause)
{
    char *name = th_name("rev15f-probe");
    /* Both reconnects outlast the pause within their command timeout. */
    rlock_client *c = client_port(srv.port, 4, th_ms(3000), th_ms(20000));
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    bool locked;
    th_ok(rlock_is_locked(l, &locked));
    th_server_kill(&srv);
    cr_assert(rlock_is_locked(l, &locked) != RLOCK_OK); /* a failed connect */
    th_server_restart(&srv);
    redisContext *r = th_redis(srv.port);
    int64_t pause_ms = th_ms(800);
    th_run(r, "CLIENT PAUSE %lld ALL", (long long)pause_ms);
    int64_t paused_at = th_now_ms();
    call first = {.l = l}, during = {.l = l};
    pthread_t a, b;
    cr_assert_eq(pthread_create(&a, NULL, call_main, &first), 0);
    th_sleep_ms(th_ms(100));
    cr_assert_eq(pthread_create(&b, NULL, call_main, &during), 0);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    cr_log_info("beside another reconnect: the first %s after %lld ms, the second %s after %lld ms "
                "(pause %lld ms)",
                rlock_status_name(first.st), (long long)(first.returned - first.started),
                rlock_status_name(during.st), (long long)(during.returned - during.started),
                (long long)pause_ms);
    th_assert_status(first.st, RLOCK_OK);
    th_assert_status(during.st, RLOCK_OK);
    cr_assert(during.returned - paused_at >= pause_ms - th_ms(50),
              "the call answered %lld ms into a %lld ms CLIENT PAUSE of every command",
              (long long)(during.returned - paused_at), (long long)pause_ms);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    free(name);
}

/* ---- 8c9486d: silence in a TLS handshake ------------------------------- */

/* A waiting rlock_lock() whose client's first connection meets a stalled
 * server (DEBUG SLEEP: a deploy, a save, a pause) rides it out over
 * redis:// (CLIENT SETNAME times out: RLOCK_ETIMEDOUT, which waiters
 * resend within retry_timeout_ms). Over rediss:// the handshake's silence
 * before any success is RLOCK_ETLS, which waiters do not retry: the lock
 * call fails after one connect timeout, though the server answers a
 * second later. 8c9486d says a stalled TLS server is RLOCK_ETIMEDOUT "as
 * over redis://", but only once a handshake has succeeded. */
static rlock_status lock_through_first_stall(const char *url, const char *ca, int port,
                                             int64_t *took)
{
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.tls_ca_file = ca;
    cfg.connect_timeout_ms = 1000;
    cfg.command_timeout_ms = 1000;
    cfg.retry_timeout_ms = 15000;
    rlock_client *c = th_client_cfg(&cfg);
    char *name = th_name("rev15f-tlsstall");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_stall s;
    th_stall_start(&s, port, 2500);
    int64_t t0 = th_now_ms();
    rlock_status st = rlock_lock(l, 30000);
    *took = th_now_ms() - t0;
    th_stall_end(&s);
    if (st == RLOCK_OK) {
        th_ok(rlock_unlock(l));
    }
    rlock_free(l);
    rlock_client_free(c);
    free(name);
    return st;
}

Test(rev15f, first_connect_into_stalled_tls_server_is_waited_out, .timeout = 120)
{
    int64_t plain_ms = 0, tls_ms = 0;
    char *purl = th_server_url(&srv);
    rlock_status plain = lock_through_first_stall(purl, NULL, srv.port, &plain_ms);
    free(purl);
    th_tls certs;
    th_server tsrv;
    memset(&tsrv, 0, sizeof tsrv);
    char *turl = th_tls_setup(&certs, &tsrv, "no", false);
    rlock_status tls = lock_through_first_stall(turl, certs.ca, tsrv.port, &tls_ms);
    th_tls_teardown(&certs, &tsrv, turl);
    cr_log_info("first connect into a 2.5 s stall: redis:// %s after %lld ms, rediss:// %s "
                "after %lld ms",
                rlock_status_name(plain), (long long)plain_ms, rlock_status_name(tls),
                (long long)tls_ms);
    th_assert_status(plain, RLOCK_OK);
    th_assert_status(tls, RLOCK_OK);
}

/* 16 threads share a pool of 2 through a 1.5 s outage: every call has a
 * 3 s command timeout, so every call made during the outage should be
 * answered once the server is back (it waits out the back-off, or for a
 * slot, within its time). Back-off waiters and slot waiters share one
 * condition variable and a returned slot signals one waiter only. */
typedef struct outage_call {
    rlock *l;
    atomic_int *ok, *bad;
    rlock_status worst;
} outage_call;

static void *outage_main(void *arg)
{
    outage_call *k = arg;
    bool locked;
    rlock_status st = rlock_is_locked(k->l, &locked);
    if (st == RLOCK_OK) {
        atomic_fetch_add(k->ok, 1);
    } else {
        atomic_fetch_add(k->bad, 1);
        k->worst = st;
    }
    return NULL;
}

/* FINDING (14929b3), disabled: fails with and without 14929b3 (open: a
 * pool that lets callers with time left ride out a short outage, one
 * connect per back-off, the others waiting for its outcome). Measured
 * with 14929b3: 9-10 of 16
 * answered, 6-7 RLOCK_EIO with 1.5 s or more of their 3 s left (14929b3^:
 * all 16 RLOCK_EIO at once). A caller that waited out the back-off makes
 * one connect; the waiters all wake at its end, up to pool_size of them
 * connect into the still-dead server and return that connect's
 * RLOCK_EIO at once, with most of their time left; each failed connect
 * doubles the back-off, so one herd takes it to its 1 s cap and the
 * callers whose time ends before it fail at once too. */
Test(rev15f, many_threads_small_pool_ride_out_short_outage, .disabled = true)
{
    rlock_client *c = client_port(srv.port, 2, 3000, 20000);
    char *name = th_name("rev15f-small");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    bool locked;
    th_ok(rlock_is_locked(l, &locked));
    th_server_kill(&srv);
    (void)rlock_is_locked(l, &locked); /* a failed connect: back-off */
    atomic_int ok = 0, bad = 0;
    outage_call k[16];
    pthread_t th[16];
    int64_t t0 = th_now_ms();
    for (int i = 0; i < 16; i++) {
        k[i] = (outage_call){.l = l, .ok = &ok, .bad = &bad, .worst = RLOCK_OK};
        cr_assert_eq(pthread_create(&th[i], NULL, outage_main, &k[i]), 0);
        th_sleep_ms(40);
    }
    int64_t down = 1500 - (th_now_ms() - t0);
    if (down > 0) {
        th_sleep_ms(down);
    }
    th_server_restart(&srv);
    int64_t up = th_now_ms();
    for (int i = 0; i < 16; i++) {
        pthread_join(th[i], NULL);
    }
    rlock_status worst = RLOCK_OK;
    for (int i = 0; i < 16; i++) {
        if (k[i].worst != RLOCK_OK) {
            worst = k[i].worst;
        }
    }
    cr_log_info("16 threads, pool 2, outage ~1.5 s: %d answered, %d failed (%s), last returned "
                "%lld ms after the restart",
                atomic_load(&ok), atomic_load(&bad), rlock_status_name(worst),
                (long long)(th_now_ms() - up));
    cr_assert_eq(atomic_load(&bad), 0, "%d calls failed (%s)", atomic_load(&bad),
                 rlock_status_name(worst));
    rlock_free(l);
    rlock_client_free(c);
    free(name);
}

/* ---- 60aba0f: a surplus give-back in doubt ------------------------------ */

/* A surplus give-back that got no reply, settled by rlock_client_free()
 * (runs: the held-back copy arrives, or dropped: it never runs). Either
 * way the close's settling must leave exactly the thread's own levels in
 * Redis (2). */
static void giveback_in_doubt_then_close(bool runs)
{
    tp_proxy *px = tp_new(srv.port);
    cr_assert(px && tp_start(px) == 0);
    tp_deliver_after_close(px, runs);
    rlock_client *c = th_client_at(tp_port(px), 1000, 1);
    char *name = th_name("rev15f-gbclose");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_warm_scripts(c, rlock_new, false);
    char *owner = th_owner(c, rlock_thread_id());
    redisContext *r = th_redis(srv.port);
    th_ok(rlock_lock(l, 120000));
    th_run(r, "HINCRBY %s %s 1", name, owner); /* a late acquire copy */
    th_ok(rlock_lock(l, 120000));              /* thread 2, Redis 3 */
    cr_assert_eq(th_hget_int(r, name, owner), 3);
    tp_delay_matching(px, "redisson_unlock_latch", th_ms(2000));
    rlock_status st = rlock_unlock(l); /* settles first: its give-back times out */
    cr_assert(st == RLOCK_ETIMEDOUT || st == RLOCK_EIO, "got %s", rlock_status_name(st));
    tp_delay_matching(px, "redisson_unlock_latch", 0);
    int64_t n = -1;
    th_ok(rlock_hold_count(l, &n)); /* Redis's count (HGET): 3 until it runs */
    cr_assert_eq(n, th_hget_int(r, name, owner));
    if (runs) {
        cr_assert(TH_POLL(th_hget_int(r, name, owner) == 2, th_ms(2000) + 3000));
    } else {
        th_sleep_ms(th_ms(2500));
        cr_assert_eq(th_hget_int(r, name, owner), 3, "the dropped give-back ran");
    }
    rlock_free(l);
    rlock_client_free(c);
    cr_assert_eq(th_hget_int(r, name, owner), 2,
                 "after the close's settling Redis counts %lld, the thread held 2",
                 th_hget_int(r, name, owner));
    th_run(r, "DEL %s", name);
    redisFree(r);
    tp_free(px);
    free(owner);
    free(name);
}

Test(rev15f, close_settles_giveback_in_doubt_that_ran)
{
    giveback_in_doubt_then_close(true);
}

Test(rev15f, close_settles_giveback_in_doubt_that_never_ran)
{
    giveback_in_doubt_then_close(false);
}

/* The same doubt left by a thread that exits: the watchdog settles the
 * exited thread's record (holds.c: "the thread holds nothing any more",
 * its count set to 0), so the dropped give-back is sent again and every
 * level Redis counts goes back: the key is deleted. (api.md's "Thread
 * exit" says an exiting thread's locks stay held until their leases run
 * out; with a doubt on the name they are released at once, as before
 * 60aba0f: a documentation gap, not from these commits.) */
typedef struct gb_thread {
    rlock_client *c;
    tp_proxy *px;
    const char *name;
    char *owner;
    redisContext *r;
} gb_thread;

static void *gb_thread_main(void *arg)
{
    gb_thread *g = arg;
    rlock *l;
    th_ok(rlock_new(g->c, g->name, &l));
    g->owner = th_owner(g->c, rlock_thread_id());
    th_ok(rlock_lock(l, 120000));
    th_run(g->r, "HINCRBY %s %s 1", g->name, g->owner);
    th_ok(rlock_lock(l, 120000));
    tp_delay_matching(g->px, "redisson_unlock_latch", th_ms(2000));
    rlock_status st = rlock_unlock(l);
    cr_assert(st == RLOCK_ETIMEDOUT || st == RLOCK_EIO, "got %s", rlock_status_name(st));
    tp_delay_matching(g->px, "redisson_unlock_latch", 0);
    rlock_free(l);
    return NULL;
}

Test(rev15f, watchdog_settles_exited_threads_giveback_in_doubt)
{
    tp_proxy *px = tp_new(srv.port);
    cr_assert(px && tp_start(px) == 0);
    tp_deliver_after_close(px, false);
    rlock_client *c = th_client_at(tp_port(px), 1000, 1);
    char *name = th_name("rev15f-gbexit");
    th_warm_scripts(c, rlock_new, false);
    redisContext *r = th_redis(srv.port);
    gb_thread g = {.c = c, .px = px, .name = name, .r = r};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, gb_thread_main, &g), 0);
    pthread_join(th, NULL);
    cr_assert_eq(th_hget_int(r, name, g.owner), 3);
    cr_assert(TH_POLL(th_exists(r, name) == 0, th_ms(5000)),
              "the watchdog did not settle the exited thread's doubt (Redis %lld)",
              th_hget_int(r, name, g.owner));
    rlock_client_free(c);
    cr_assert_eq(th_exists(r, name), 0);
    th_run(r, "DEL %s", name);
    redisFree(r);
    tp_free(px);
    free(g.owner);
    free(name);
}
