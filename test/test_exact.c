/* Exact outcomes (issue 14, findings 5, 14, 16 and the design lesson):
 * every acquire carries a request id whose outcome Redis remembers (the
 * acquire latch), so a lost reply is answered by sending the same request
 * again, never by guessing from hold counts; an unanswered request the
 * caller gives up on is abandoned, after which no late copy can take a
 * hold; an unlock unanswered past the unlock latch's horizon is never
 * reported as done for a hold that is gone. Real server, real faults:
 * the test proxy (test/proxy.h) delaying requests, DEBUG SLEEP, WRONGTYPE. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "proxy.h"
#include "faultkit.h"

/* Keys matching pattern, and the value of the first one (if any). */
static long long count_keys(redisContext *r, const char *pattern, char *first, size_t size)
{
    redisReply *rep = th_cmd(r, "KEYS %s", pattern);
    long long n = (long long)rep->elements;
    if (first && size) {
        first[0] = '\0';
        if (n > 0) {
            redisReply *v = th_cmd(r, "GET %s", rep->element[0]->str);
            if (v->type == REDIS_REPLY_STRING) {
                snprintf(first, size, "%s", v->str);
            }
            freeReplyObject(v);
        }
    }
    freeReplyObject(rep);
    return n;
}

static char *latch_pattern(const char *name)
{
    char *p = malloc(strlen(name) + 64);
    cr_assert(p);
    sprintf(p, "rlock_acquire_latch:{%s}:*", name);
    return p;
}

/* A copy of an answered acquire that arrives late takes nothing: the first
 * send is held back by the proxy, the same request sent again after the
 * command timeout takes the lock, and when the first copy finally reaches
 * Redis its latch answers for it. Before request ids, the library checked
 * the count instead and could not stop that copy. */
Test(exact, late_copy_of_an_answered_acquire_takes_nothing, .timeout = 60)
{
    tp_proxy *px = tp_new(th_port());
    cr_assert(px && tp_start(px) == 0);
    rlock_client *c = th_client_at(tp_port(px), 300, 10000);
    char *name = th_name("latecopy");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, 60000)); /* scripts cached, connection made */
    th_ok(rlock_unlock(l));
    char *owner = th_owner(c, rlock_thread_id());
    redisContext *r = th_redis(0);

    int64_t delay = th_ms(1500);
    tp_delay(px, TP_REQUESTS, 100, delay);
    int64_t t0 = th_now_ms();
    th_ok(rlock_lock(l, 60000));
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    /* Wait until the held-back copy has surely run. */
    while (th_now_ms() - t0 < delay + th_ms(500)) {
        th_sleep_ms(20);
    }
    cr_assert_eq(th_hget_int(r, name, owner), 1,
                 "the late copy of the acquire counted a second hold (%lld)",
                 th_hget_int(r, name, owner));
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0, "one lock, one unlock: the key is still there");
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    tp_free(px);
    free(owner);
    free(name);
}

/* The caller gives up on an acquire whose every send is held back; the
 * thread's next call abandons it; the copies that reach Redis afterwards
 * find the abandoned latch and take nothing. Before request ids, the next
 * call compared counts (nothing there yet) and the copies then took a
 * hold nobody knew of, for a whole lease. */
Test(exact, abandoned_acquire_takes_nothing_when_its_copies_arrive, .timeout = 60)
{
    tp_proxy *px = tp_new(th_port());
    cr_assert(px && tp_start(px) == 0);
    rlock_client *c = th_client_at(tp_port(px), 300, 10000);
    char *name = th_name("abandoned");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, 60000));
    th_ok(rlock_unlock(l));
    char *owner = th_owner(c, rlock_thread_id());
    redisContext *r = th_redis(0);
    char *pattern = latch_pattern(name);

    int64_t delay = th_ms(2000);
    tp_delay(px, TP_REQUESTS, th_ms(900), delay);
    int64_t t0 = th_now_ms();
    /* Every send within the call's one command timeout is held back. */
    th_assert_status(rlock_try_lock(l, 0, 60000), RLOCK_ETIMEDOUT);
    uint64_t held = 1;
    th_ok(rlock_client_stat(c, RLOCK_STAT_HELD, &held));
    cr_assert_eq(held, 0);
    while (th_now_ms() - t0 < th_ms(1000)) {
        th_sleep_ms(20); /* past the window: the next call goes through */
    }
    /* The next call abandons the request first: nothing to release. */
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    char v[16];
    cr_assert_eq(count_keys(r, pattern, v, sizeof v), 1, "no latch marks the request abandoned");
    cr_assert_str_eq(v, "0");
    while (th_now_ms() - t0 < delay + th_ms(1500)) {
        th_sleep_ms(20);
    }
    cr_assert_eq(th_exists(r, name), 0,
                 "a late copy of the abandoned acquire took the lock (count %lld, PTTL %lld)",
                 th_hget_int(r, name, owner), th_pttl(r, name));
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    tp_free(px);
    free(pattern);
    free(owner);
    free(name);
}

/* An acquire whose first send dies with the connection (the server stalls,
 * the pool's connection times out, the reconnect's handshake times out
 * too) is sent again, not reported as RLOCK_ETIMEDOUT (finding 16): the
 * call waits, so it rides out the stall and ends with exactly one hold. */
Test(exact, lock_rides_out_a_stall_with_exactly_one_hold, .timeout = 60)
{
    /* A private server: a stall of the shared one would stall the tests
     * running beside this one. */
    th_server srv;
    th_server_start(&srv);
    rlock_client *c = th_client_at(srv.port, 200, 10000);
    char *name = th_name("rideout");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, 60000));
    th_ok(rlock_unlock(l));
    char *owner = th_owner(c, rlock_thread_id());
    redisContext *r = th_redis(srv.port);
    th_stall s;
    th_stall_start(&s, srv.port, 1200);
    int64_t t0 = th_now_ms();
    th_ok(rlock_lock(l, 60000));
    cr_log_info("rlock_lock returned after %lld ms", (long long)(th_now_ms() - t0));
    th_stall_end(&s);
    th_sleep_ms(th_ms(200)); /* every copy sent during the stall has run */
    cr_assert_eq(th_hget_int(r, name, owner), 1, "one rlock_lock, %lld holds in Redis",
                 th_hget_int(r, name, owner));
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    free(owner);
    free(name);
    th_server_stop(&srv);
}

/* Finding 5: an unlock that went unanswered (here: refused, the key held
 * another type) and is retried after the unlock latch's horizon (15 s)
 * must not answer RLOCK_OK for a hold that is gone: "one fewer in Redis"
 * cannot be told from "lost" when the last hold is gone. */
Test(exact, unlock_retried_past_the_horizon_of_a_lost_hold_is_lost, .timeout = 90)
{
    rlock_client *c = th_client_at(th_port(), 1000, 10000);
    char *name = th_name("horizon");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, 120000));
    redisContext *r = th_redis(0);
    th_run(r, "DEL %s", name);
    th_run(r, "SET %s notahash", name);
    th_assert_status(rlock_unlock(l), RLOCK_EKIND); /* kept, to be sent again */
    th_run(r, "DEL %s", name);
    /* The library's own horizon, not a timing of this test: 20 s after the
     * first send, less a command timeout (1 s here) and a second, a retry
     * can no longer trust the latch. */
    th_sleep_ms(18500);
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    free(name);
}

/* Finding 14, as documented: after an unlock that got no answer, the
 * thread's next lock of the name first completes that unlock (the same
 * request again: it releases one hold, never two), then acquires. */
Test(exact, next_lock_completes_an_unanswered_unlock_first, .timeout = 60)
{
    /* A private server: a stall of the shared one would stall the tests
     * running beside this one. */
    th_server srv;
    th_server_start(&srv);
    rlock_client *c = th_client_at(srv.port, 200, 10000);
    char *name = th_name("completes");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, 60000)); /* the scripts cached: a stalled EVALSHA */
    th_ok(rlock_unlock(l));      /* must not come back NOSCRIPT */
    th_ok(rlock_lock(l, 60000));
    th_ok(rlock_lock(l, 60000));
    char *owner = th_owner(c, rlock_thread_id());
    redisContext *r = th_redis(srv.port);
    th_stall s;
    th_stall_start(&s, srv.port, 800);
    rlock_status st = rlock_unlock(l);
    cr_assert(st == RLOCK_ETIMEDOUT || st == RLOCK_EIO, "got %s", rlock_status_name(st));
    th_stall_end(&s);
    th_sleep_ms(th_ms(200));
    /* Both copies of the unlock reached Redis; the latch let one run. */
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    th_ok(rlock_lock(l, 60000));
    cr_assert_eq(th_hget_int(r, name, owner), 2, "the unlock was completed twice or not at all");
    int64_t n = 0;
    th_ok(rlock_hold_count(l, &n));
    cr_assert_eq(n, 2);
    th_ok(rlock_unlock(l));
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0, "two unlocks for two holds left the key");
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    free(owner);
    free(name);
    th_server_stop(&srv);
}

/* ---- review findings (the adversarial review's repro programs) ---------
 * Each test below turns one repro of the review (repro/ in its worktree)
 * into an assertion on what Redis holds and what the callers are told. */

#include <stdatomic.h>

/* A client on port with the timings a test sets (0: the default), the
 * subscribe timeout short, and an optional on_lock_lost. */
static rlock_client *client_with(int port, int pool, int64_t command_ms, int64_t retry_ms,
                                 int64_t watchdog_ms,
                                 void (*lost)(const char *, uint64_t, void *), void *lost_arg)
{
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.pool_size = pool;
    cfg.command_timeout_ms = command_ms;
    cfg.retry_timeout_ms = retry_ms;
    cfg.watchdog_timeout_ms = watchdog_ms;
    cfg.subscribe_timeout_ms = 300;
    cfg.on_lock_lost = lost;
    cfg.on_lock_lost_arg = lost_arg;
    return th_client_cfg(&cfg);
}

/* The status of a call that may not have returned yet (-1). */
static const char *st_name(int st)
{
    return st < 0 ? "(no answer yet)" : rlock_status_name((rlock_status)st);
}

/* When on_lock_lost was first called, in ms since t0 (-1: not yet). */
typedef struct lost_clock {
    int64_t t0;
    atomic_llong at;
    atomic_int calls;
} lost_clock;

static void lost_clock_cb(const char *name, uint64_t tid, void *arg)
{
    (void)name;
    (void)tid;
    lost_clock *lc = arg;
    long long none = -1;
    atomic_compare_exchange_strong(&lc->at, &none, (long long)(th_now_ms() - lc->t0));
    atomic_fetch_add(&lc->calls, 1);
}

/* A try_lock on its own thread: its thread id, its status (-1 until it
 * returns) and when it returned, in ms since t0. With hold_until_told it
 * mutes px right after an RLOCK_OK and stays alive (a thread's exit is
 * itself reported as a loss) until stay is cleared. */
typedef struct bg_try {
    rlock *l;
    int64_t wait_ms, lease_ms, t0;
    tp_proxy *mute_after;
    atomic_ullong tid;
    atomic_int st;
    atomic_llong at;
    atomic_bool stay;
    pthread_t th;
} bg_try;

static void *bg_try_main(void *arg)
{
    bg_try *b = arg;
    atomic_store(&b->tid, rlock_thread_id());
    rlock_status st = rlock_try_lock(b->l, b->wait_ms, b->lease_ms);
    atomic_store(&b->at, (long long)(th_now_ms() - b->t0));
    if (b->mute_after && st == RLOCK_OK) {
        tp_mute(b->mute_after, true); /* no renewal gets through any more */
    }
    atomic_store(&b->st, (int)st);
    while (atomic_load(&b->stay)) {
        th_sleep_ms(5);
    }
    return NULL;
}

static void bg_try_start(bg_try *b, rlock *l, int64_t wait_ms, int64_t lease_ms, int64_t t0)
{
    b->l = l;
    b->wait_ms = wait_ms;
    b->lease_ms = lease_ms;
    b->t0 = t0;
    atomic_init(&b->tid, 0);
    atomic_init(&b->st, -1);
    atomic_init(&b->at, -1);
    cr_assert_eq(pthread_create(&b->th, NULL, bg_try_main, b), 0);
}

/* Review: an acquire whose reply was lost is sent again; the copy that
 * ran took the lock with an explicit 1 s lease, which then ran out, and
 * another client took the lock. The resend must not be answered "taken"
 * from the acquire latch: the caller would be told RLOCK_OK for a hold
 * that Redis no longer has, while another client holds the lock. */
Test(exact, resend_after_the_hold_expired_is_not_taken, .timeout = 90)
{
    redisContext *r = th_redis(0);
    tp_proxy *px = tp_new(th_port());
    cr_assert(px && tp_start(px) == 0);
    rlock_client *ca = client_with(tp_port(px), 0, 500, 20000, 0, NULL, NULL);
    rlock_client *cb = client_with(th_port(), 0, 500, 0, 0, NULL, NULL);
    char *name = th_name("expiredresend");
    rlock *la, *lb;
    th_ok(rlock_new(ca, name, &la));
    th_ok(rlock_new(cb, name, &lb));
    th_warm_scripts(ca, rlock_new, false);
    char *b_owner = th_owner(cb, rlock_thread_id());

    /* A's first acquire runs in Redis, its answer never comes (held back
     * a minute), and the link goes half-dead as soon as the copy has run:
     * the resend, a command timeout later, gets no answer either. (The
     * repro cut the reply with tp_cut_next() and then muted; the client
     * resends at once after a cut, which often beat the mute.) */
    tp_delay(px, TP_REPLIES, 300, 60000);
    bg_try a = {.mute_after = NULL};
    atomic_init(&a.stay, false);
    bg_try_start(&a, la, 20000, 1000, th_now_ms());
    th_wait_exists(r, name, 1, 2000);
    tp_mute(px, true);
    cr_assert_eq(atomic_load(&a.st), -1,
                 "setup: A's resend got through before the link was muted (A told %s)",
                 st_name(atomic_load(&a.st)));
    char *a_owner = th_owner(ca, atomic_load(&a.tid));
    long long a_count = th_hget_int(r, name, a_owner);
    long long a_pttl = th_pttl(r, name);
    cr_log_info("A's first copy ran: A's count %lld, PTTL %lld", a_count, a_pttl);

    /* A's explicit lease runs out in Redis; B takes the lock. */
    th_wait_exists(r, name, 0, 3000);
    th_ok(rlock_try_lock(lb, 0, 30000));
    int64_t b_at = th_now_ms() - a.t0;
    cr_assert_eq(th_hget_int(r, name, b_owner), 1);

    /* The link comes back: A's call sends its request again. */
    tp_mute(px, false);
    TH_POLL(atomic_load(&a.st) >= 0, 3000);
    int ast = atomic_load(&a.st);
    cr_assert(ast != RLOCK_OK,
              "A was told %s at %lld ms while B has held the lock since %lld ms "
              "(Redis: %lld owner field(s), B's count %lld, A's count %lld)",
              st_name(ast), (long long)atomic_load(&a.at), (long long)b_at, th_hlen(r, name),
              th_hget_int(r, name, b_owner), th_hget_int(r, name, a_owner));
    cr_log_info("A while B holds: %s", st_name(ast));
    cr_assert_eq(th_hlen(r, name), 1, "Redis holds %lld owner fields while B holds the lock",
                 th_hlen(r, name));
    cr_assert_eq(th_hget_int(r, name, b_owner), 1);
    cr_assert_eq(th_hget_int(r, name, a_owner), 0);

    /* B lets go: A may now get the lock, as the only owner. */
    th_ok(rlock_unlock(lb));
    pthread_join(a.th, NULL);
    ast = atomic_load(&a.st);
    cr_log_info("A finally: %s at %lld ms", st_name(ast), (long long)atomic_load(&a.at));
    if (ast == RLOCK_OK) {
        cr_assert(th_hlen(r, name) <= 1, "two owner fields after A took the lock");
        cr_assert_eq(th_hget_int(r, name, b_owner), 0);
    }
    redisFree(r);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_free(ca);
    rlock_client_free(cb);
    tp_free(px);
    free(a_owner);
    free(b_owner);
    free(name);
}

/* Review: the first copy of an acquire runs at once (its TTL counts from
 * then), its reply is held back, and the call's resend is answered from
 * the acquire latch. The hold's deadline must count from the first copy,
 * not from the resend: with the link then half-dead (no renewal gets
 * through), on_lock_lost must come before Redis expires the key and
 * another client can take the lock. */
Test(exact, resend_deadline_counts_from_the_first_copy, .timeout = 60)
{
    redisContext *r = th_redis(0);
    tp_proxy *px = tp_new(th_port());
    cr_assert(px && tp_start(px) == 0);
    lost_clock lc;
    atomic_init(&lc.at, -1);
    atomic_init(&lc.calls, 0);
    rlock_client *ca = client_with(tp_port(px), 0, 600, 20000, 1000, lost_clock_cb, &lc);
    rlock_client *cb = client_with(th_port(), 0, 500, 0, 0, NULL, NULL);
    char *name = th_name("resenddeadline");
    rlock *la, *lb;
    th_ok(rlock_new(ca, name, &la));
    th_ok(rlock_new(cb, name, &lb));
    th_warm_scripts(ca, rlock_new, false);
    char *b_owner = th_owner(cb, rlock_thread_id());

    /* Replies read in the next 300 ms come 5 s late: the first acquire runs
     * at once (TTL 1000 ms from then), the call times out after 600 ms and
     * resends the same request, which is answered. */
    tp_delay(px, TP_REPLIES, 300, 5000);
    bg_try a = {.mute_after = px};
    atomic_init(&a.stay, true);
    lc.t0 = th_now_ms();
    bg_try_start(&a, la, 20000, RLOCK_WATCHDOG, lc.t0);
    th_wait_exists(r, name, 1, 2000); /* the first copy ran */
    int64_t first_ran = th_now_ms() - lc.t0;

    int64_t b_at = -1;
    int64_t end = th_now_ms() + th_ms(4000);
    while (th_now_ms() < end && (b_at < 0 || atomic_load(&lc.at) < 0)) {
        if (b_at < 0 && rlock_try_lock(lb, 0, 30000) == RLOCK_OK) {
            b_at = th_now_ms() - lc.t0;
        }
        th_sleep_ms(5);
    }
    int ast = atomic_load(&a.st);
    long long lost_at = atomic_load(&lc.at);
    cr_log_info("first copy ran by %lld ms; A told %s at %lld ms; B acquired at %lld ms; "
                "on_lock_lost at %lld ms",
                (long long)first_ran, st_name(ast), (long long)atomic_load(&a.at),
                (long long)b_at, lost_at);
    cr_assert_eq(ast, RLOCK_OK, "setup: A's acquire answered %s, expected RLOCK_OK",
                 st_name(ast));
    cr_assert(b_at >= 0, "setup: B never acquired (Redis: B's count %lld, PTTL %lld)",
              th_hget_int(r, name, b_owner), th_pttl(r, name));
    cr_assert_eq(th_hget_int(r, name, b_owner), 1);
    cr_assert(lost_at >= 0 && lost_at <= b_at,
              "B acquired at %lld ms, but A's on_lock_lost came at %lld ms (-1: not at all); "
              "A was told %s at %lld ms",
              (long long)b_at, lost_at, st_name(ast), (long long)atomic_load(&a.at));

    atomic_store(&a.stay, false);
    pthread_join(a.th, NULL);
    th_ok(rlock_unlock(lb));
    redisFree(r);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_free(ca);
    rlock_client_free(cb);
    tp_free(px);
    free(b_owner);
    free(name);
}

/* Review: a nested unlock whose reply never comes (command_timeout_ms 8 s,
 * so the call itself returns about 16 s after the request ran) and that is
 * retried after the unlock latch's 20 s TTL must not run a second time:
 * that would release the outer hold too, and the thread, told RLOCK_OK,
 * would go on believing it holds one level while another client gets in.
 * About 22 s: the latch's TTL is the library's, not a test timing. */
Test(exact, retried_nested_unlock_after_a_long_timeout_releases_one_hold, .timeout = 120)
{
    redisContext *r = th_redis(0);
    tp_proxy *px = tp_new(th_port());
    cr_assert(px && tp_start(px) == 0);
    rlock_client *ca = client_with(tp_port(px), 0, 8000, 0, 0, NULL, NULL);
    rlock_client *cb = client_with(th_port(), 0, 500, 0, 0, NULL, NULL);
    char *name = th_name("unlockhorizon");
    rlock *la, *lb;
    th_ok(rlock_new(ca, name, &la));
    th_ok(rlock_new(cb, name, &lb));
    char *owner = th_owner(ca, rlock_thread_id());
    th_ok(rlock_lock(la, 60000));
    th_ok(rlock_lock(la, 60000));
    long long before = th_hget_int(r, name, owner);
    cr_assert_eq(before, 2);

    int64_t t0 = th_now_ms();
    tp_delay(px, TP_REPLIES, 8500, 60000); /* the unlock runs; no reply in time */
    rlock_status u1 = rlock_unlock(la);
    cr_log_info("unlock #1 (inner): %s after %lld ms", rlock_status_name(u1),
                (long long)(th_now_ms() - t0));
    cr_assert(u1 != RLOCK_OK, "setup: the first unlock was answered (%s)",
              rlock_status_name(u1));
    cr_assert_eq(th_hget_int(r, name, owner), before - 1, "setup: the first unlock did not run");
    /* Past the unlock latch's TTL (RLOCK__LATCH_TTL_MS, 20 s from when the
     * request ran): the library's constant, so not scaled. */
    while (th_now_ms() - t0 < 21000) {
        th_sleep_ms(100);
    }
    rlock_status u1b = rlock_unlock(la); /* the documented retry of that unlock */
    long long after = th_hget_int(r, name, owner);
    cr_log_info("unlock #1 retried: %s; Redis count %lld (was %lld), key exists %lld",
                rlock_status_name(u1b), after, before, th_exists(r, name));
    cr_assert_eq(after, before - 1,
                 "the retried inner unlock (told %s) left %lld hold(s) in Redis; one unlock of "
                 "%lld holds must leave %lld (key exists: %lld)",
                 rlock_status_name(u1b), after, before, before - 1, th_exists(r, name));
    cr_assert_eq(th_exists(r, name), 1);
    th_assert_status(rlock_try_lock(lb, 0, 30000), RLOCK_EBUSY);
    th_ok(rlock_unlock(la));
    cr_assert_eq(th_exists(r, name), 0, "two locks, two unlocks: the key is still there");
    redisFree(r);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_free(ca);
    rlock_client_free(cb);
    tp_free(px);
    free(owner);
    free(name);
}

/* Review: an acquire that ran at once but whose every reply came too late
 * (resent until retry_timeout_ms, 19 s, ran out) is in doubt; freeing the
 * client settles it. Past the acquire latch's 20 s TTL (from when the
 * request ran) the latch no longer answers, and the abandon read "took
 * nothing": the hold stayed, for its whole 120 s lease, with nobody
 * knowing of it. Required: no hold nobody knows of survives
 * rlock_client_free() (rlock.h: "an acquire whose reply never came but
 * that ran is released"). About 22 s: the latch TTL is the library's. */
Test(exact, abandon_after_a_long_retry_releases_the_hold_that_ran, .timeout = 120)
{
    redisContext *r = th_redis(0);
    tp_proxy *px = tp_new(th_port());
    cr_assert(px && tp_start(px) == 0);
    /* retry_timeout_ms 17 s: the last resend starts within it plus one
     * back-off (at most 1 s) and ends a command timeout (1 s) later, so
     * its reply too comes inside the 19.5 s of late replies below. */
    rlock_client *ca = client_with(tp_port(px), 0, 1000, 17000, 0, NULL, NULL);
    char *name = th_name("abandonhorizon");
    rlock *la;
    th_ok(rlock_new(ca, name, &la));
    char *owner = th_owner(ca, rlock_thread_id());
    th_warm_scripts(ca, rlock_new, false); /* a NOSCRIPT held back would keep the acquire from running */

    int64_t t0 = th_now_ms();
    /* Every reply for 19.5 s comes a minute late: the acquire runs at once,
     * the caller never hears of it and resends until retry_timeout_ms. */
    tp_delay(px, TP_REPLIES, 19500, 60000);
    rlock_status s = rlock_try_lock(la, 25000, 120000);
    cr_log_info("try_lock: %s after %lld ms; Redis count %lld, PTTL %lld", rlock_status_name(s),
                (long long)(th_now_ms() - t0), th_hget_int(r, name, owner), th_pttl(r, name));
    cr_assert(s != RLOCK_OK, "setup: the acquire was answered (%s)", rlock_status_name(s));
    cr_assert_eq(th_hget_int(r, name, owner), 1, "setup: the acquire never ran");
    /* Past the acquire latch's TTL (20 s from when the request ran): the
     * library's constant, so not scaled. */
    while (th_now_ms() - t0 < 21000) {
        th_sleep_ms(100);
    }
    rlock_free(la);
    rlock_client_free(ca); /* settles the acquire in doubt */
    cr_assert_eq(th_exists(r, name), 0,
                 "rlock_client_free left the hold the unanswered acquire took: count %lld, "
                 "PTTL %lld (the caller was told %s)",
                 th_hget_int(r, name, owner), th_pttl(r, name), rlock_status_name(s));
    redisFree(r);
    tp_free(px);
    free(owner);
    free(name);
}

/* Review: a re-entry with a short explicit lease (200 ms) under a
 * watchdog hold gets no reply (RLOCK_ETIMEDOUT), but it ran and set the
 * key's TTL to 200 ms. The holder must hear of the loss (on_lock_lost, or
 * RLOCK_ELOST from that call) no later than another client can take the
 * lock; the registry kept the watchdog's deadline and told it only at the
 * next renewal round, seconds after the other client got in. */
Test(exact, unanswered_short_reentry_reports_before_another_owner_gets_in, .timeout = 60)
{
    redisContext *r = th_redis(0);
    tp_proxy *px = tp_new(th_port());
    cr_assert(px && tp_start(px) == 0);
    lost_clock lc;
    atomic_init(&lc.at, -1);
    atomic_init(&lc.calls, 0);
    rlock_client *ca = client_with(tp_port(px), 0, 400, 0, 9000, lost_clock_cb, &lc);
    rlock_client *cb = client_with(th_port(), 0, 500, 0, 0, NULL, NULL);
    char *name = th_name("shortreentry");
    rlock *la, *lb;
    th_ok(rlock_new(ca, name, &la));
    th_ok(rlock_new(cb, name, &lb));
    char *a_owner = th_owner(ca, rlock_thread_id());
    char *b_owner = th_owner(cb, rlock_thread_id());
    th_ok(rlock_lock(la, RLOCK_WATCHDOG));
    th_wait_renewal(r, name, 4000); /* just after a renewal round (every 3 s) */

    lc.t0 = th_now_ms();
    tp_delay(px, TP_REPLIES, 450, 20000);
    rlock_status s = rlock_try_lock(la, 0, 200); /* re-entry, lease 200 ms */
    int64_t s_at = th_now_ms() - lc.t0;
    cr_log_info("re-entry (lease 200 ms, reply held back): %s at %lld ms; A's count %lld, "
                "PTTL %lld",
                rlock_status_name(s), (long long)s_at, th_hget_int(r, name, a_owner),
                th_pttl(r, name));
    cr_assert(s != RLOCK_OK, "setup: the re-entry was answered (%s)", rlock_status_name(s));

    int64_t b_at = -1;
    int64_t end = th_now_ms() + th_ms(6000);
    while (th_now_ms() < end && (b_at < 0 || atomic_load(&lc.at) < 0)) {
        if (b_at < 0 && rlock_try_lock(lb, 0, 30000) == RLOCK_OK) {
            b_at = th_now_ms() - lc.t0;
        }
        th_sleep_ms(5);
    }
    long long told_at = atomic_load(&lc.at);
    if (s == RLOCK_ELOST && (told_at < 0 || told_at > s_at)) {
        told_at = s_at; /* the call itself said so */
    }
    cr_log_info("B acquired at %lld ms; on_lock_lost at %lld ms", (long long)b_at,
                (long long)atomic_load(&lc.at));
    if (b_at >= 0) {
        cr_assert_eq(th_hget_int(r, name, b_owner), 1);
        cr_assert_eq(th_hget_int(r, name, a_owner), 0);
    }
    cr_assert(b_at < 0 || (told_at >= 0 && told_at <= b_at),
              "B acquired at %lld ms; A was told at %lld ms (-1: not at all; the re-entry "
              "answered %s at %lld ms)",
              (long long)b_at, told_at, rlock_status_name(s), (long long)s_at);
    if (b_at >= 0) {
        th_ok(rlock_unlock(lb));
    }
    redisFree(r);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_free(ca);
    rlock_client_free(cb);
    tp_free(px);
    free(a_owner);
    free(b_owner);
    free(name);
}

/* Keeps a pool of one busy: calls rlock_is_locked() over a muted link
 * again and again (each call holds the connection for a command timeout,
 * then comes straight back for it) until told to stop. */
typedef struct pool_hog {
    rlock *l;
    atomic_bool run;
    atomic_int calls;
    pthread_t th;
} pool_hog;

static void *pool_hog_main(void *arg)
{
    pool_hog *h = arg;
    while (atomic_load(&h->run)) {
        bool locked;
        atomic_fetch_add(&h->calls, 1);
        (void)rlock_is_locked(h->l, &locked);
    }
    return NULL;
}

/* Review (read-only finding): an unlock that fails with RLOCK_EPOOL never
 * left the pool, so Redis still counts the hold, and a watchdog hold must
 * go on being renewed. Counting it as an unanswered unlock stops the
 * renewals of a last hold, and the lock then runs out under a thread
 * that still holds it. Pool of one; another thread keeps the only
 * connection busy on a half-dead link. Which thread gets the connection
 * when it comes back is the scheduler's choice, so a round whose unlock
 * got another status (it then went out) is left and tried again on a new
 * name. */
Test(exact, unlock_that_never_left_the_pool_keeps_renewing, .timeout = 120)
{
    redisContext *r = th_redis(0);
    tp_proxy *px = tp_new(th_port());
    cr_assert(px && tp_start(px) == 0);
    const int64_t cmd_ms = 500, wd_ms = 9000;
    rlock_client *ca = client_with(tp_port(px), 1, cmd_ms, 0, wd_ms, NULL, NULL);
    char *other = th_name("poolhog");
    pool_hog hog;
    th_ok(rlock_new(ca, other, &hog.l));
    th_warm_scripts(ca, rlock_new, false);
    char *owner = th_owner(ca, rlock_thread_id());

    char *name = NULL;
    rlock *l = NULL;
    rlock_status u = RLOCK_OK;
    for (int round = 0; round < 8; round++) {
        free(name);
        rlock_free(l);
        name = th_name("epoolunlock");
        th_ok(rlock_new(ca, name, &l));
        th_ok(rlock_lock(l, RLOCK_WATCHDOG));
        cr_assert_eq(th_hget_int(r, name, owner), 1);
        tp_mute(px, true);
        atomic_init(&hog.run, true);
        atomic_init(&hog.calls, 0);
        cr_assert_eq(pthread_create(&hog.th, NULL, pool_hog_main, &hog), 0);
        cr_assert(TH_POLL(atomic_load(&hog.calls) > 0, 2000));
        /* Half-way through the hog's first call: the unlock waits for the
         * pool, and the hog takes the connection back before it. */
        th_sleep_ms(cmd_ms / 2);
        u = rlock_unlock(l);
        atomic_store(&hog.run, false);
        pthread_join(hog.th, NULL);
        tp_mute(px, false);
        cr_log_info("round %d: unlock %s", round, rlock_status_name(u));
        if (u == RLOCK_EPOOL) {
            break;
        }
        if (u == RLOCK_OK) {
            cr_assert_eq(th_exists(r, name), 0);
        }
    }
    cr_assert_eq(u, RLOCK_EPOOL, "setup: no unlock found the pool busy (last: %s)",
                 rlock_status_name(u));

    /* The request never left: the hold is as it was, in Redis and here. */
    cr_assert_eq(th_hget_int(r, name, owner), 1, "an unlock that never left changed the count");
    /* And the watchdog keeps renewing it: the PTTL rises within a round
     * (every wd_ms / 3) plus a command timeout. */
    long long last = th_pttl(r, name), now = last;
    bool renewed =
        TH_POLL((now = th_pttl(r, name)) > last || ((last = now), false), wd_ms / 3 + 2000);
    cr_assert(renewed,
              "no renewal of the hold after its unlock failed with %s: PTTL %lld and falling "
              "(count in Redis %lld)",
              rlock_status_name(u), now, th_hget_int(r, name, owner));
    /* The pool is back by now (a renewal went through). */
    int64_t n = 0;
    th_ok(rlock_hold_count(l, &n));
    cr_assert_eq(n, 1);
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    rlock_free(l);
    rlock_free(hog.l);
    rlock_client_free(ca);
    tp_free(px);
    free(owner);
    free(other);
    free(name);
}

/* Issue 14, finding 12 carried further: a thread that exits with an
 * acquire in doubt leaves it to the watchdog, which abandons it as soon as
 * Redis answers, without waiting for rlock_client_free() (a late acquire
 * with a long explicit lease would otherwise hold the lock that long). */
typedef struct doubtful {
    rlock *l;
    rlock_status st;
} doubtful;

static void *doubtful_main(void *arg)
{
    doubtful *d = arg;
    d->st = rlock_try_lock(d->l, 0, 120000);
    return NULL; /* exits with the acquire in doubt */
}

Test(exact, exited_threads_doubt_is_settled_before_the_close, .timeout = 60)
{
    /* A private server: a stall of the shared one would stall the tests
     * running beside this one. */
    th_server srv;
    th_server_start(&srv);
    rlock_client *c = th_client_at(srv.port, 300, 10000);
    char *name = th_name("orphandoubt");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, 60000)); /* scripts cached, connection made */
    th_ok(rlock_unlock(l));
    redisContext *r = th_redis(srv.port);
    th_stall s;
    th_stall_start(&s, srv.port, 1500);
    doubtful d = {l, RLOCK_OK};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, doubtful_main, &d), 0);
    pthread_join(th, NULL);
    cr_assert(d.st == RLOCK_ETIMEDOUT || d.st == RLOCK_EIO, "got %s", rlock_status_name(d.st));
    th_stall_end(&s);
    /* The copies sent during the stall ran when the server woke (or were
     * dropped with their connections); either way, within a few seconds
     * and with the client still open, nothing of that thread is held. */
    bool gone = TH_POLL(th_exists(r, name) == 0, th_ms(4000));
    cr_assert(gone, "the exited thread's late acquire still holds the lock (PTTL %lld)",
              th_pttl(r, name));
    uint64_t held = 1;
    th_ok(rlock_client_stat(c, RLOCK_STAT_HELD, &held));
    cr_assert_eq(held, 0);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    free(name);
    th_server_stop(&srv);
}

/* Finding 15: a cancellation promises "within about command_timeout_ms".
 * A call that first settles an earlier call's doubt (here an unlock left
 * unanswered by a stalled server) must not add an attempt and an outcome
 * check on top: the steps before the first attempt share one command
 * timeout, and a token fired meanwhile ends the call right after them. */
typedef struct canceller {
    rlock_cancel *t;
    int64_t fire_after_ms, fired_at;
} canceller;

static void *canceller_main(void *arg)
{
    canceller *k = arg;
    th_sleep_ms(k->fire_after_ms);
    k->fired_at = th_now_ms();
    rlock_cancel_fire(k->t);
    return NULL;
}

Test(exact, cancel_during_settling_returns_within_a_command_timeout, .timeout = 60)
{
    th_server srv;
    th_server_start(&srv);
    int64_t cmd = 1000;
    rlock_client *c = th_client_at(srv.port, cmd, 30000);
    char *name = th_name("cancelsettle");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, 60000)); /* scripts cached */
    th_ok(rlock_unlock(l));
    th_ok(rlock_lock(l, 60000));
    th_ok(rlock_lock(l, 60000));
    /* Writes paused: connections and their handshakes still work (no
     * reconnect back-off), but every script waits. */
    redisContext *r = th_redis(srv.port);
    th_run(r, "CLIENT PAUSE 8000 WRITE");
    /* Both sends of this unlock time out: it stays pending. */
    rlock_status st = rlock_unlock(l);
    cr_assert(st == RLOCK_ETIMEDOUT || st == RLOCK_EIO, "got %s", rlock_status_name(st));
    rlock_cancel *t;
    th_ok(rlock_cancel_new(&t));
    canceller k = {t, 200, 0};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, canceller_main, &k), 0);
    /* The lock first resends the pending unlock (the server still sleeps:
     * one command timeout), then must see the token. */
    st = rlock_lock_ex(l, RLOCK_WAIT_FOREVER, 60000, t, NULL);
    int64_t done = th_now_ms();
    pthread_join(th, NULL);
    cr_log_info("lock_ex: %s after %lld ms since the fire (%s)", rlock_status_name(st),
                (long long)(done - k.fired_at), rlock_last_error());
    th_assert_status(st, RLOCK_ECANCELED);
    cr_log_info("cancelled %lld ms after the token fired", (long long)(done - k.fired_at));
    cr_assert(done - k.fired_at < cmd + 400,
              "cancelled %lld ms after the token fired (command timeout %lld ms)",
              (long long)(done - k.fired_at), (long long)cmd);
    th_run(r, "CLIENT UNPAUSE");
    redisFree(r);
    rlock_cancel_free(t);
    rlock_free(l);
    rlock_client_free(c);
    free(name);
    th_server_stop(&srv);
}

/* An unlock unanswered past the latch's horizon is judged from the counts;
 * judged "not run", it is sent again under a new id. If that new request
 * goes unanswered too but runs later (it timed out on the client, its
 * bytes were still on their way), the next call must resend that very
 * request, whose latch then stops the late copy: judging again from the
 * counts while it is on its way ("not run" once more) sends a third
 * unlock, and the two release the outer hold too. About 23 s: the
 * horizon is the library's 20 s latch, not a timing of this test. */
Test(exact, unlock_resent_past_the_horizon_keeps_its_new_id, .timeout = 90)
{
    tp_proxy *px = tp_new(th_port());
    cr_assert(px && tp_start(px) == 0);
    tp_deliver_after_close(px, true);
    rlock_client *c = th_client_at(tp_port(px), 1000, 0);
    char *name = th_name("newid");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_warm_scripts(c, rlock_new, false);
    char *owner = th_owner(c, rlock_thread_id());
    redisContext *r = th_redis(0);
    th_ok(rlock_lock(l, 120000));
    th_ok(rlock_lock(l, 120000));

    /* The first unlock never reaches Redis: in doubt, kept to be sent. */
    tp_mute(px, true);
    rlock_status st = rlock_unlock(l);
    cr_assert(st == RLOCK_ETIMEDOUT || st == RLOCK_EIO, "got %s", rlock_status_name(st));
    tp_mute(px, false);
    tp_drop(px);
    cr_assert_eq(th_hget_int(r, name, owner), 2);
    /* Past the horizon: 20 s after the first send, less a command timeout
     * (1 s) and a second. */
    th_sleep_ms(18500);

    /* The next lock settles it first: judged not run (Redis still counts
     * 2), sent under a new id, which reaches Redis only th_ms(3000) later:
     * the call times out on it before it runs. */
    tp_delay_matching(px, "redisson_unlock_latch", th_ms(3000));
    int64_t t0 = th_now_ms();
    st = rlock_lock(l, 120000);
    cr_assert(st == RLOCK_ETIMEDOUT || st == RLOCK_EIO, "got %s", rlock_status_name(st));
    tp_delay_matching(px, "redisson_unlock_latch", 0);
    cr_assert_eq(th_hget_int(r, name, owner), 2, "the delayed unlock ran early");

    /* While it is on its way, the thread unlocks: one level, either way. */
    st = rlock_unlock(l);
    cr_assert(th_now_ms() - t0 < th_ms(3000), "setup: the delayed copy may have arrived");
    th_assert_status(st, RLOCK_OK);
    int64_t n = 0;
    th_ok(rlock_hold_count(l, &n));
    cr_assert_eq(n, 1);
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    /* The late copy arrives: the thread still holds one level. */
    cr_assert(TH_POLL(tp_delayed(px) > 0 && th_now_ms() - t0 > th_ms(3000) + 200, 6000));
    th_sleep_ms(200);
    cr_assert_eq(th_hget_int(r, name, owner), 1,
                 "the late unlock released the level the thread still holds (Redis counts %lld)",
                 th_hget_int(r, name, owner));
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    tp_free(px);
    free(owner);
    free(name);
}

/* An acquire that runs past its latch's horizon leaves Redis counting a
 * level more than the thread; the thread's next call gives that surplus
 * back. A give-back that goes unanswered and still runs later must be
 * sent again as the same request: sent under a fresh id, the late copy
 * releases one of the thread's own levels too. About 28 s: the acquire
 * latch's 21 s (20 s + retry_timeout_ms 1 ms + command_timeout_ms 1 s) is the
 * library's, not a timing of this test. */
Test(exact, surplus_given_back_again_releases_one_level, .timeout = 120)
{
    tp_proxy *px = tp_new(th_port());
    cr_assert(px && tp_start(px) == 0);
    tp_deliver_after_close(px, true);
    /* retry_timeout_ms 1 (0 is the default, 10 s): the acquire latch
     * lives 20 s + 1 ms + the command timeout. */
    rlock_client *c = th_client_at(tp_port(px), 1000, 1);
    char *name = th_name("surplus");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_warm_scripts(c, rlock_new, false);
    char *owner = th_owner(c, rlock_thread_id());
    redisContext *r = th_redis(0);

    /* An acquire that reaches Redis 23 s late: the call times out, the
     * next one abandons it (its latch says so for 21 s) and takes the
     * lock; then the late copy runs, past the latch: Redis counts 2, the
     * thread 1. */
    int64_t t0 = th_now_ms();
    tp_delay_matching(px, name, 23000);
    rlock_status st = rlock_try_lock(l, 0, 120000);
    cr_assert(st == RLOCK_ETIMEDOUT || st == RLOCK_EIO, "got %s", rlock_status_name(st));
    tp_delay_matching(px, name, 0);
    th_ok(rlock_lock(l, 120000));
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    cr_assert(TH_POLL(th_hget_int(r, name, owner) == 2, 30000 - (th_now_ms() - t0)),
              "setup: the late acquire never ran (Redis counts %lld)",
              th_hget_int(r, name, owner));
    /* A re-entry finds Redis's count off by one: the surplus is noted. */
    th_ok(rlock_lock(l, 120000));
    cr_assert_eq(th_hget_int(r, name, owner), 3);

    /* The give-back reaches Redis th_ms(3000) late: the unlock that
     * settles first times out on it and sends nothing of its own. */
    tp_delay_matching(px, "redisson_unlock_latch", th_ms(3000));
    int64_t t1 = th_now_ms();
    st = rlock_unlock(l);
    cr_assert(st == RLOCK_ETIMEDOUT || st == RLOCK_EIO, "got %s", rlock_status_name(st));
    tp_delay_matching(px, "redisson_unlock_latch", 0);
    cr_assert_eq(th_hget_int(r, name, owner), 3, "the delayed give-back ran early");
    /* The next unlock gives the surplus back and releases one level. */
    th_ok(rlock_unlock(l));
    cr_assert(th_now_ms() - t1 < th_ms(3000), "setup: the delayed copy may have arrived");
    int64_t n = 0;
    th_ok(rlock_hold_count(l, &n));
    cr_assert_eq(n, 1);
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    /* The late copy of the first give-back arrives: one level is left. */
    while (th_now_ms() - t1 < th_ms(3000) + 300) {
        th_sleep_ms(50);
    }
    cr_assert_eq(th_hget_int(r, name, owner), 1,
                 "the late give-back released the level the thread holds (Redis counts %lld)",
                 th_hget_int(r, name, owner));
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    tp_free(px);
    free(owner);
    free(name);
}
