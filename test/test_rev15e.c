/* Adversarial review of e695efa (exact reply deadlines), 796d497 (an
 * unlock resent past its latch's horizon keeps its new id) and 27f30a0
 * (a surplus give-back's id derived from a base and Redis's count). Each
 * test is a finding or a check that held. The finding (a give-back id
 * derived from a count that can repeat) failed against 27f30a0; fixed by
 * sending an unanswered give-back again under its own id, first, and
 * giving the rest back under fresh ids. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "proxy.h"
#include "faultkit.h"

/* Finding 1 (27f30a0). A give-back's id is derived from the episode's base
 * and the count in Redis it takes away. The design assumes the owner's
 * count in Redis only goes down during an episode; but what starts an
 * episode, an acquire copy that runs past its latch's horizon, can happen
 * again during it (each unanswered acquire left a copy on its way). Here:
 * the first give-back (Redis 3 -> 2) goes unanswered but runs; then a
 * second late acquire copy runs (Redis 2 -> 3, modelled by the HINCRBY that
 * acquire.lua does). The next settling reads 3 again and sends the same id
 * as the first give-back: its latch (20 s) answers "done" and nothing is
 * given back; the loop counts it as given back and clears the doubt. Redis
 * keeps a level the thread does not know of: after the thread's last
 * unlock the key is still held (for its whole lease, nobody renewing it),
 * where fresh ids (before 27f30a0) gave the level back. */
Test(rev15e, surplus_count_seen_again_in_one_episode_is_given_back, .timeout = 60)
{
    tp_proxy *px = tp_new(th_port());
    cr_assert(px && tp_start(px) == 0);
    tp_deliver_after_close(px, true);
    rlock_client *c = th_client_at(tp_port(px), 1000, 1);
    char *name = th_name("rev15e-surplus");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_warm_scripts(c, rlock_new, false);
    char *owner = th_owner(c, rlock_thread_id());
    redisContext *r = th_redis(0);

    th_ok(rlock_lock(l, 120000));
    /* A late acquire copy of the thread's runs past its latch's horizon. */
    th_run(r, "HINCRBY %s %s 1", name, owner);
    /* The re-entry is answered 3 where the thread expected 2: surplus. */
    th_ok(rlock_lock(l, 120000));
    cr_assert_eq(th_hget_int(r, name, owner), 3);

    /* The give-back (3 -> 2) is held back: the settling unlock times out. */
    tp_delay_matching(px, "redisson_unlock_latch", th_ms(2000));
    int64_t t1 = th_now_ms();
    rlock_status st = rlock_unlock(l);
    cr_assert(st == RLOCK_ETIMEDOUT || st == RLOCK_EIO, "got %s", rlock_status_name(st));
    tp_delay_matching(px, "redisson_unlock_latch", 0);
    /* It runs. */
    cr_assert(TH_POLL(th_hget_int(r, name, owner) == 2, th_ms(2000) + 3000),
              "setup: the held-back give-back never ran (Redis %lld)", th_hget_int(r, name, owner));
    cr_log_info("the give-back ran %lld ms after the unlock", (long long)(th_now_ms() - t1));
    /* Another late acquire copy of the thread's runs. */
    th_run(r, "HINCRBY %s %s 1", name, owner);
    cr_assert_eq(th_hget_int(r, name, owner), 3);

    /* The thread holds 2 levels; Redis counts 3. Its next unlock settles the
     * surplus (one level) and releases one of its own. */
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_hget_int(r, name, owner), 1,
                 "the thread holds 1 level, Redis counts %lld: the surplus found again was "
                 "answered by the first give-back's latch and not given back",
                 th_hget_int(r, name, owner));
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0, "the thread released every level; the key is held");
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    th_run(r, "DEL %s", name);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    tp_free(px);
    free(owner);
    free(name);
}

/* Check that held (e695efa). The blocking recv() is kept while at least a
 * slice (100 ms) is left, and a socket's receive timeout of 100 ms is not
 * exactly 100 ms (on a socketpair here: 104 ms on average, up to 108 ms),
 * so a deadline between 100 ms and about 108 ms away could end past
 * itself. Command timeouts just above the slice, the smallest overshoot of
 * 5 rounds each (scheduling noise only adds): measured 0-1 ms, so the
 * suspicion did not hold over TCP. */
Test(rev15e, reply_wait_just_over_a_slice_ends_at_the_deadline, .timeout = 60)
{
    tp_proxy *px = tp_new(th_port());
    cr_assert(px && tp_start(px) == 0);
    char *name = th_name("rev15e-slice");
    int64_t worst = 0, worst_cmd = 0;
    for (int64_t cmd = 101; cmd <= 110; cmd += 3) {
        rlock_config cfg;
        char url[64];
        snprintf(url, sizeof url, "redis://127.0.0.1:%d", tp_port(px));
        rlock_config_init(&cfg);
        cfg.url = url;
        cfg.command_timeout_ms = cmd;
        cfg.connect_timeout_ms = th_ms(2000);
        cfg.retry_timeout_ms = 0;
        rlock_client *c = th_client_cfg(&cfg);
        rlock *l;
        th_ok(rlock_new(c, name, &l));
        int64_t best = INT64_MAX;
        for (int i = 0; i < 5; i++) {
            bool locked = true;
            th_ok(rlock_is_locked(l, &locked));
            tp_mute(px, true);
            int64_t t0 = th_now_ms();
            rlock_status st = rlock_is_locked(l, &locked);
            int64_t took = th_now_ms() - t0;
            tp_mute(px, false);
            th_assert_status(st, RLOCK_ETIMEDOUT);
            if (took - cmd < best) {
                best = took - cmd;
            }
        }
        cr_log_info("command timeout %lld ms: the wait ended at best %lld ms past it",
                    (long long)cmd, (long long)best);
        if (best > worst) {
            worst = best;
            worst_cmd = cmd;
        }
        rlock_free(l);
        rlock_client_free(c);
    }
    /* 1 ms of rounding (both clocks read whole ms) and 1 ms for the
     * scheduler, scaled for slow runs. */
    cr_assert(worst <= th_ms(3) - 1,
              "a command timeout of %lld ms ended, at best of 5 rounds, %lld ms past it (the "
              "socket's 100 ms receive timeout, rounded up by the kernel)",
              (long long)worst_cmd, (long long)worst);
    tp_free(px);
    free(name);
}
