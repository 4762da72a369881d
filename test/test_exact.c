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

static rlock_client *client_at(int port, int64_t command_ms, int64_t retry_ms)
{
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.command_timeout_ms = command_ms;
    cfg.retry_timeout_ms = retry_ms;
    return th_client_cfg(&cfg);
}

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

typedef struct sleeper {
    int port;
    int ms;
    pthread_t th;
} sleeper;

static void *sleeper_main(void *arg)
{
    sleeper *s = arg;
    redisContext *r = th_redis(s->port);
    struct timeval tv = {60, 0};
    redisSetTimeout(r, tv);
    redisReply *rep = redisCommand(r, "DEBUG SLEEP %.3f", s->ms / 1000.0);
    if (rep) {
        freeReplyObject(rep);
    }
    redisFree(r);
    return NULL;
}

/* DEBUG SLEEP ms on the test server; returns once the server is asleep. */
static void sleep_server(sleeper *s, int ms)
{
    s->port = th_port();
    s->ms = ms;
    cr_assert_eq(pthread_create(&s->th, NULL, sleeper_main, s), 0);
    th_wait_stalled(s->port, th_ms(2000));
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
    rlock_client *c = client_at(tp_port(px), 300, 10000);
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
    rlock_client *c = client_at(tp_port(px), 300, 10000);
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
    rlock_client *c = client_at(th_port(), 200, 10000);
    char *name = th_name("rideout");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, 60000));
    th_ok(rlock_unlock(l));
    char *owner = th_owner(c, rlock_thread_id());
    redisContext *r = th_redis(0);
    sleeper s;
    sleep_server(&s, 1200);
    int64_t t0 = th_now_ms();
    th_ok(rlock_lock(l, 60000));
    cr_log_info("rlock_lock returned after %lld ms", (long long)(th_now_ms() - t0));
    pthread_join(s.th, NULL);
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
}

/* Finding 5: an unlock that went unanswered (here: refused, the key held
 * another type) and is retried after the unlock latch's horizon (15 s)
 * must not answer RLOCK_OK for a hold that is gone: "one fewer in Redis"
 * cannot be told from "lost" when the last hold is gone. */
Test(exact, unlock_retried_past_the_horizon_of_a_lost_hold_is_lost, .timeout = 90)
{
    rlock_client *c = client_at(th_port(), 1000, 10000);
    char *name = th_name("horizon");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, 120000));
    redisContext *r = th_redis(0);
    th_run(r, "DEL %s", name);
    th_run(r, "SET %s notahash", name);
    th_assert_status(rlock_unlock(l), RLOCK_EREDIS); /* kept, to be sent again */
    th_run(r, "DEL %s", name);
    /* The library's own horizon (RLOCK__LATCH_TRUST_MS), not a timing of
     * this test: a retry later than that cannot trust the latch. */
    th_sleep_ms(15500);
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
    rlock_client *c = client_at(th_port(), 200, 10000);
    char *name = th_name("completes");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, 60000));
    th_ok(rlock_lock(l, 60000));
    char *owner = th_owner(c, rlock_thread_id());
    redisContext *r = th_redis(0);
    sleeper s;
    sleep_server(&s, 800);
    rlock_status st = rlock_unlock(l);
    cr_assert(st == RLOCK_ETIMEDOUT || st == RLOCK_EIO, "got %s", rlock_status_name(st));
    pthread_join(s.th, NULL);
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
}
