/* One clock: the hold registry's deadline follows what Redis was last told
 * (the send time of the latest request that set the key's TTL, plus that
 * TTL), whichever request it was: acquire, re-entry, partial unlock or
 * renewal. The watchdog tells a holder before another owner can take the
 * key, even when the link to Redis accepts and never answers and every
 * renewal round has to reconnect into it. Nested watchdog levels are
 * renewed exactly while they are held, with their kind's renewal script.
 *
 * The holder talks to the shared server through a fault proxy
 * (test/proxy.c) that is made half-dead (tp_mute) to cut it off; another
 * client, straight to the server, tries to take the key meanwhile. The
 * assertion that matters compares two instants on CLOCK_MONOTONIC: when
 * on_lock_lost ran, and when the other client sent the acquire that got
 * the key. Library timeouts scale with the test time multiplier, so the
 * proportions stay under the sanitizers. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h" /* the kind table, for the renewal-script test */
#include "proxy.h"

TestSuite(clock, .timeout = 90);

/* ---- helpers ---------------------------------------------------------- */

typedef struct lost_rec {
    pthread_mutex_t mu;
    int count;
    int64_t at_ms; /* th_now_ms() of the first report */
    char name[256];
} lost_rec;

static void on_lost(const char *name, uint64_t tid, void *arg)
{
    (void)tid;
    lost_rec *lr = arg;
    int64_t now = th_now_ms();
    pthread_mutex_lock(&lr->mu);
    if (lr->count++ == 0) {
        lr->at_ms = now;
        snprintf(lr->name, sizeof lr->name, "%s", name);
    }
    pthread_mutex_unlock(&lr->mu);
}

static int64_t lost_at(lost_rec *lr)
{
    pthread_mutex_lock(&lr->mu);
    int64_t at = lr->count > 0 ? lr->at_ms : -1;
    pthread_mutex_unlock(&lr->mu);
    return at;
}

/* A client whose connections all go through proxy px. */
static rlock_client *proxied_client(tp_proxy *px, int64_t wd_ms, int64_t cmd_ms, lost_rec *lr)
{
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", tp_port(px));
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.watchdog_timeout_ms = wd_ms;
    cfg.command_timeout_ms = cmd_ms;
    cfg.connect_timeout_ms = cmd_ms;
    cfg.on_lock_lost = on_lost;
    cfg.on_lock_lost_arg = lr;
    return th_client_cfg(&cfg);
}

static tp_proxy *proxy(void)
{
    tp_proxy *px = tp_new(th_port());
    cr_assert(px != NULL);
    cr_assert_eq(tp_start(px), 0);
    return px;
}

/* Tries to take the lock through `other` (straight to the server) every
 * 5 ms for at most th_ms(bound_ms); returns when the successful attempt
 * was sent (it took the key no earlier), or -1. */
static int64_t take_when_free(rlock *other, int64_t bound_ms)
{
    int64_t end = th_now_ms() + th_ms(bound_ms);
    while (th_now_ms() < end) {
        int64_t sent = th_now_ms();
        rlock_status st = rlock_try_lock(other, 0, 60000);
        if (st == RLOCK_OK) {
            return sent;
        }
        cr_assert(st == RLOCK_EBUSY, "the other client's attempt: %s", rlock_status_name(st));
        th_sleep_ms(5);
    }
    return -1;
}

/* The holder was cut off at cut_ms: on_lock_lost must have come before the
 * other client could take the key, and the other one must have got it (the
 * key really expired: the holder was right to be told). The report is
 * awaited up to th_ms(wait_ms), so that a late one says how late. */
static void assert_told_first(lost_rec *lr, int64_t wd_ms, int64_t cut_ms, int64_t taken_ms,
                              int64_t wait_ms)
{
    /* cut_ms: the holder was cut off, or its lease shortened (time 0). */
    cr_assert(taken_ms >= 0, "the other client never got the lock: the key did not expire");
    cr_assert(TH_POLL(lost_at(lr) >= 0, wait_ms),
              "on_lock_lost never came (other owner in at +%lld ms)",
              (long long)(taken_ms - cut_ms));
    int64_t told = lost_at(lr);
    /* Promised: a tenth of the lease before the key can expire; at least
     * half of it must be left when the report runs (the rest is for the
     * scheduler and the other client's polling). */
    int64_t lead = wd_ms / 20;
    cr_assert(told <= taken_ms - lead,
              "another client took the lock at +%lld ms and the holder was told at +%lld ms: "
              "%lld ms before, less than the %lld ms left of the promised tenth of the lease",
              (long long)(taken_ms - cut_ms), (long long)(told - cut_ms),
              (long long)(taken_ms - told), (long long)lead);
    cr_assert(told < taken_ms,
              "another client took the lock at +%lld ms, but the holder was told only at "
              "+%lld ms: %lld ms of two holders, one of them not told",
              (long long)(taken_ms - cut_ms), (long long)(told - cut_ms),
              (long long)(told - taken_ms));
}

/* The link is back (tp_mute off, the mute connections dropped): the
 * holder's unlock, retried while its outcome is unknown as the header
 * says (a connection closed under it, the pool backing off after failed
 * connects), must say the hold was lost. */
static void unlock_says_lost(tp_proxy *px, rlock *l)
{
    tp_mute(px, false);
    tp_drop(px);
    rlock_status st;
    int64_t end = th_now_ms() + th_ms(5000);
    while (((st = rlock_unlock(l)) == RLOCK_EIO || st == RLOCK_ETIMEDOUT) && th_now_ms() < end) {
        th_sleep_ms(20);
    }
    th_assert_status(st, RLOCK_ELOST);
}

/* Cuts the holder off: its proxy goes half-dead, and (drop) the connections
 * it has are closed, so every later request must reconnect into it. */
static int64_t cut_off(tp_proxy *px, bool drop)
{
    tp_mute(px, true);
    if (drop) {
        tp_drop(px);
    }
    return th_now_ms();
}

/* ---- item 1: one clock for re-entries under a watchdog hold ------------ */

Test(clock, reentry_with_longer_lease_keeps_one_clock)
{
    int64_t wd = th_ms(1000);
    lost_rec lr = {PTHREAD_MUTEX_INITIALIZER, 0, 0, ""};
    tp_proxy *px = proxy();
    rlock_client *c = proxied_client(px, wd, wd / 5, &lr);
    rlock_client *o = th_client(NULL, 0);
    redisContext *r = th_redis(0);
    char *name = th_name("clock-reenter");
    rlock *l, *ol;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_new(o, name, &ol));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_ok(rlock_lock(l, 5 * wd)); /* the key lives 5 x wd now */
    long long ttl = th_pttl(r, name);
    cr_assert(ttl > wd, "the re-entry set the explicit lease: pttl %lld", ttl);
    /* A renewal extends, never shortens (unlike Redisson's, which cut such
     * a lease back to the watchdog's): the explicit lease stands, and the
     * holder's deadline follows the TTL the renewal saw, not its own. */
    uint64_t before = 0, now = 0;
    th_ok(rlock_client_stat(c, RLOCK_STAT_RENEWED, &before));
    cr_assert(TH_POLL((rlock_client_stat(c, RLOCK_STAT_RENEWED, &now), now > before), 3000),
              "no renewal ran");
    ttl = th_pttl(r, name);
    cr_assert(ttl > wd, "a renewal cut the explicit lease back: pttl %lld", ttl);
    int64_t cut = cut_off(px, false);
    int64_t taken = take_when_free(ol, 5 * wd + 3000);
    assert_told_first(&lr, wd, cut, taken, 5 * wd + 2000);
    /* The holder learns it at its unlock too, once the link is back. */
    unlock_says_lost(px, l);
    th_ok(rlock_unlock(ol));
    rlock_free(l);
    rlock_free(ol);
    rlock_client_free(c);
    rlock_client_free(o);
    tp_free(px);
    redisFree(r);
    free(name);
}

/* ---- item 8: a nested watchdog level is renewed while it is held ------- */

Test(clock, watchdog_level_inside_explicit_lease_stops_renewal_at_its_unlock)
{
    int64_t wd = th_ms(600), lease = 3 * wd;
    lost_rec lr = {PTHREAD_MUTEX_INITIALIZER, 0, 0, ""};
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = th_url();
    cfg.watchdog_timeout_ms = wd;
    cfg.on_lock_lost = on_lost;
    cfg.on_lock_lost_arg = &lr;
    rlock_client *c = th_client_cfg(&cfg);
    redisContext *r = th_redis(0);
    char *name = th_name("clock-nest-wd");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, lease));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_wait_renewal(r, name, 3000); /* the watchdog level is renewed */
    int64_t unlocked = th_now_ms();
    th_ok(rlock_unlock(l));
    /* Only the explicit level is left: the partial unlock set its lease,
     * and nothing renews it any more. */
    long long first = th_pttl(r, name);
    cr_assert(first > wd && first <= lease,
              "after the inner unlock the key should live by the explicit %lld ms lease "
              "(not the watchdog's %lld): pttl %lld",
              (long long)lease, (long long)wd, first);
    uint64_t ren0 = 0, ren1 = 0;
    th_ok(rlock_client_stat(c, RLOCK_STAT_RENEWED, &ren0));
    /* Time passes on purpose: three renewal periods, sampled; the TTL only
     * ever goes down. */
    long long prev = first;
    for (int i = 0; i < 9; i++) {
        th_sleep_ms(wd / 9);
        long long now = th_pttl(r, name);
        cr_assert(now <= prev + 5, "renewed after the watchdog level was released: pttl %lld "
                  "after %lld", now, prev);
        prev = now;
    }
    th_ok(rlock_client_stat(c, RLOCK_STAT_RENEWED, &ren1));
    cr_assert_eq(ren1, ren0, "%llu renewals after the watchdog level's unlock",
                 (unsigned long long)(ren1 - ren0));
    /* It runs out with the explicit lease, counted from the unlock. */
    th_wait_exists(r, name, 0, lease + 1000);
    cr_assert(th_now_ms() - unlocked >= lease - 50, "gone %lld ms after the unlock, lease %lld",
              (long long)(th_now_ms() - unlocked), (long long)lease);
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    cr_assert_eq(lost_at(&lr), -1, "an explicit-lease hold is not reported through on_lock_lost");
    rlock_free(l);
    rlock_client_free(c);
    redisFree(r);
    free(name);
}

Test(clock, explicit_level_inside_watchdog_hold_keeps_renewal_after_its_unlock)
{
    int64_t wd = th_ms(600);
    rlock_client *c = th_client(NULL, wd);
    redisContext *r = th_redis(0);
    char *name = th_name("clock-nest-lease");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_ok(rlock_lock(l, 5 * wd));
    th_ok(rlock_unlock(l));
    long long ttl = th_pttl(r, name);
    cr_assert(ttl > 0 && ttl <= wd,
              "after the inner unlock the watchdog level's lease is back: pttl %lld", ttl);
    /* Renewed on across several leases (time passes on purpose). */
    for (int i = 0; i < 3; i++) {
        th_wait_renewal(r, name, 3000);
    }
    th_sleep_ms(2 * wd);
    ttl = th_pttl(r, name);
    cr_assert(ttl > 0 && ttl <= wd, "still held and renewed to %lld ms: pttl %lld", (long long)wd,
              ttl);
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0);
    rlock_free(l);
    rlock_client_free(c);
    redisFree(r);
    free(name);
}

/* ---- item 2: a round that must reconnect ends by the report deadline --- */

Test(clock, renewal_that_reconnects_into_a_half_dead_link_reports_in_time)
{
    /* A command timeout above a third of the watchdog's lease (as the
     * common 15 s / 3 s settings have): one reconnect's AUTH/SETNAME alone
     * would outlast the lease if it took its own timeout. */
    int64_t wd = th_ms(1200), cmd = th_ms(1500);
    lost_rec lr = {PTHREAD_MUTEX_INITIALIZER, 0, 0, ""};
    tp_proxy *px = proxy();
    rlock_client *c = proxied_client(px, wd, cmd, &lr);
    rlock_client *o = th_client(NULL, 0);
    redisContext *r = th_redis(0);
    char *name = th_name("clock-halfdead");
    rlock *l, *ol;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_new(o, name, &ol));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    /* Half-dead and every connection closed: the next round finds its
     * pooled connection hung up and must connect again, into a link that
     * accepts TCP and never answers AUTH/SETNAME. */
    int64_t cut = cut_off(px, true);
    int64_t taken = take_when_free(ol, 2 * wd + 2 * cmd + 2000);
    assert_told_first(&lr, wd, cut, taken, 2 * cmd + 2000);
    unlock_says_lost(px, l);
    th_ok(rlock_unlock(ol));
    rlock_free(l);
    rlock_free(ol);
    rlock_client_free(c);
    rlock_client_free(o);
    tp_free(px);
    redisFree(r);
    free(name);
}

/* A latch flush (the DEL of completed unlocks' latch keys, about a second
 * after the unlock) on the same half-dead link must not keep the watchdog
 * from its report either. The lease is long enough that the flush comes
 * before the first renewal round, and the command timeout longer still. */
Test(clock, latch_flush_on_a_half_dead_link_does_not_delay_the_report)
{
    int64_t wd = th_ms(4500), cmd = th_ms(6000);
    lost_rec lr = {PTHREAD_MUTEX_INITIALIZER, 0, 0, ""};
    tp_proxy *px = proxy();
    rlock_client *c = proxied_client(px, wd, cmd, &lr);
    rlock_client *o = th_client(NULL, 0);
    char *name = th_name("clock-latch"), *other = th_name("clock-latch-other");
    rlock *l, *ol, *x;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_new(c, other, &x));
    th_ok(rlock_new(o, name, &ol));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    /* An unlock queues its latch key; the batch is deleted about a second
     * later, after the cut. */
    th_ok(rlock_lock(x, 10000));
    th_ok(rlock_unlock(x));
    int64_t cut = cut_off(px, true);
    int64_t taken = take_when_free(ol, 2 * wd + 2000);
    assert_told_first(&lr, wd, cut, taken, 2 * cmd + 2000);
    unlock_says_lost(px, l);
    th_ok(rlock_unlock(ol));
    rlock_free(l);
    rlock_free(x);
    rlock_free(ol);
    rlock_client_free(c);
    rlock_client_free(o);
    tp_free(px);
    free(name);
    free(other);
}

/* ---- item 20: the kind's renewal script is the one the watchdog runs --- */

/* renew.lua, and a count of its calls per lock name beside it. */
static const char marked_renew[] =
    "local out = {} "
    "for i = 1, #KEYS do "
    "  redis.call('incr', 'clock-renew-marker:' .. KEYS[i]) "
    "  if redis.pcall('hexists', KEYS[i], ARGV[i + 1]) == 1 then "
    "    redis.call('pexpire', KEYS[i], ARGV[1]) out[i] = 1 "
    "  else out[i] = 0 end "
    "end "
    "return out";

Test(clock, watchdog_renews_with_the_kinds_script)
{
    int64_t wd = th_ms(600);
    rlock_client *c = th_client(NULL, wd);
    redisContext *r = th_redis(0);
    redisReply *sha = th_cmd(r, "SCRIPT LOAD %s", marked_renew);
    cr_assert_eq(sha->type, REDIS_REPLY_STRING);
    rlock__script script = {"marked_renew", sha->str, marked_renew};
    rlock__kind kind = rlock__kind_reentrant;
    kind.renew = &script;
    char *name = th_name("clock-kind"), *plain = th_name("clock-kind-plain");
    char marker[300], plain_marker[300];
    snprintf(marker, sizeof marker, "clock-renew-marker:%s", name);
    snprintf(plain_marker, sizeof plain_marker, "clock-renew-marker:%s", plain);
    rlock h, *p;
    th_ok(rlock__handle_init(&h, c, &kind, name, strlen(name)));
    th_ok(rlock_new(c, plain, &p));
    th_ok(rlock__enter(c));
    th_ok(rlock__acquire(&h, -1, RLOCK_WATCHDOG, NULL, NULL));
    rlock__leave(c);
    th_ok(rlock_lock(p, RLOCK_WATCHDOG));
    /* Both are renewed, each by its own kind's script (two calls, one per
     * script, in the same round). */
    th_wait_renewal(r, name, 3000);
    th_wait_renewal(r, plain, 3000);
    cr_assert(TH_POLL(th_exists(r, marker) == 1, 3000),
              "the hold of a kind whose renewal script is marked was renewed by another script");
    redisReply *n = th_cmd(r, "GET %s", marker);
    cr_assert(n->type == REDIS_REPLY_STRING && atoll(n->str) >= 1);
    freeReplyObject(n);
    cr_assert_eq(th_exists(r, plain_marker), 0, "the reentrant kind's hold was renewed by the "
                                                 "other kind's script");
    th_ok(rlock__enter(c));
    th_ok(rlock__release(&h));
    rlock__leave(c);
    th_ok(rlock_unlock(p));
    rlock__handle_fini(&h);
    rlock_free(p);
    rlock_client_free(c);
    th_run(r, "DEL %s", marker);
    freeReplyObject(sha);
    redisFree(r);
    free(name);
    free(plain);
}

/* ---- a shorter re-entry lease under a watchdog hold -------------------- */

/* lock(WATCHDOG), then a re-entry with a lease shorter than the renewal
 * period, made just after a renewal: Redis expires the key before the next
 * round. The re-entry brought the deadline nearer, so the watchdog must
 * re-time its wait and report before another client can take the key. */
Test(clock, shorter_reentry_lease_wakes_the_watchdog_to_report_in_time)
{
    int64_t wd = th_ms(3000), lease = wd / 5; /* next round in wd / 3 */
    lost_rec lr = {PTHREAD_MUTEX_INITIALIZER, 0, 0, ""};
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = th_url();
    cfg.watchdog_timeout_ms = wd;
    cfg.on_lock_lost = on_lost;
    cfg.on_lock_lost_arg = &lr;
    rlock_client *c = th_client_cfg(&cfg);
    rlock_client *o = th_client(NULL, 0);
    redisContext *r = th_redis(0);
    char *name = th_name("clock-short");
    rlock *l, *ol;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_new(o, name, &ol));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_wait_renewal(r, name, 3 * wd);
    int64_t at = th_now_ms();
    th_ok(rlock_lock(l, lease));
    int64_t taken = take_when_free(ol, 2 * wd);
    assert_told_first(&lr, wd, at, taken, 2 * wd);
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_ok(rlock_unlock(ol));
    rlock_free(l);
    rlock_free(ol);
    rlock_client_free(c);
    rlock_client_free(o);
    redisFree(r);
    free(name);
}

/* ---- item 2: a wait for a reply ends at its deadline -------------------- */

/* Every deadline is read from the one clock, to the millisecond: a reply
 * that never comes ends the wait at the command timeout, not at the next
 * tick of some coarser timer of the socket's. The watchdog's report
 * deadline is such a deadline (a renewal round reads its replies until
 * then), and its margin is a tenth of the lease: a read that overran it
 * by a fixed slice let another owner in first with short leases. */
Test(clock, reply_wait_ends_at_the_command_timeout)
{
    /* 130 ms: not a multiple of any slice a socket timeout might use; the
     * time allowed past it scales with the sanitizers' multiplier. */
    const int64_t cmd = 130;
    lost_rec lr = {PTHREAD_MUTEX_INITIALIZER, 0, 0, ""};
    tp_proxy *px = proxy();
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", tp_port(px));
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.command_timeout_ms = cmd;
    cfg.connect_timeout_ms = th_ms(2000);
    cfg.retry_timeout_ms = 0;
    cfg.on_lock_lost = on_lost;
    cfg.on_lock_lost_arg = &lr;
    rlock_client *c = th_client_cfg(&cfg);
    char *name = th_name("clock-deadline");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    for (int i = 0; i < 3; i++) {
        /* Connected (again: the muted connection timed out and was closed)
         * and answered; then the link goes half-dead. */
        bool locked = true;
        th_ok(rlock_is_locked(l, &locked));
        cr_assert(!locked);
        tp_mute(px, true);
        int64_t t0 = th_now_ms();
        rlock_status st = rlock_is_locked(l, &locked);
        int64_t took = th_now_ms() - t0;
        th_assert_status(st, RLOCK_ETIMEDOUT);
        cr_assert(took >= cmd - 1 && took <= cmd + th_ms(40),
                  "round %d: a command timeout of %lld ms ended the wait after %lld ms", i,
                  (long long)cmd, (long long)took);
        tp_mute(px, false);
    }
    rlock_free(l);
    rlock_client_free(c);
    tp_free(px);
    free(name);
}
