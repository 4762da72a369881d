/*
 * Interop tests of single locks: re-entry and queries, wake-ups both ways,
 * leases, force unlock and on_lock_lost. See interop.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "interop.h"

/* ---- re-entry and queries ------------------------------------------ */

int t_reentry_java(void)
{
    char n[128], jf[160];
    struct reply r;
    rlock *l;
    new_name(n, sizeof n, "reentry_java");
    CHECK(java_field("w1", jf, sizeof jf) == 0, "whoami");
    CHECK(strncmp(jf, J.id, strlen(J.id)) == 0, "owner %s does not start with %s", jf, J.id);
    for (int i = 1; i <= 3; i++) {
        JOK(&r, "w1", "lock %s -1", n);
        CHECK_HOLD(n, jf, i);
        JOK(&r, "w1", "count %s", n);
        CHECK_INT(reply_word(&r, 0), i);
    }
    CHECK_ST(rlock_new(C, n, &l), RLOCK_OK);
    int64_t count = -1, ttl = -9;
    bool b = false;
    CHECK_ST(rlock_hold_count(l, &count), RLOCK_OK);
    CHECK_INT(count, 0);
    CHECK_ST(rlock_is_locked(l, &b), RLOCK_OK);
    CHECK(b, "rlock_is_locked: expected true");
    CHECK_ST(rlock_is_held_by_current_thread(l, &b), RLOCK_OK);
    CHECK(!b, "rlock_is_held_by_current_thread: expected false");
    CHECK_ST(rlock_remain_ttl(l, &ttl), RLOCK_OK);
    long long pttl = r_int("PTTL %s", n);
    JOK(&r, "w1", "ttl %s", n);
    long long jttl = reply_word(&r, 0);
    CHECK_RANGE(pttl, 1, JWD);
    CHECK_RANGE(ttl, pttl - tms(300), pttl + tms(300));
    CHECK_RANGE(jttl, pttl - tms(300), pttl + tms(300));
    CHECK_ST(rlock_try_lock(l, 0, RLOCK_WATCHDOG), RLOCK_EBUSY);
    CHECK_HOLD(n, jf, 3);
    for (int i = 2; i >= 0; i--) {
        JOK(&r, "w1", "unlock %s", n);
        JOK(&r, "w1", "count %s", n);
        CHECK_INT(reply_word(&r, 0), i);
        if (i > 0) {
            CHECK_HOLD(n, jf, i);
            CHECK_RANGE(r_int("PTTL %s", n), 1, JWD);
        }
    }
    CHECK_INT(r_int("EXISTS %s", n), 0);
    CHECK_ST(rlock_is_locked(l, &b), RLOCK_OK);
    CHECK(!b, "rlock_is_locked: expected false");
    CHECK_ST(rlock_remain_ttl(l, &ttl), RLOCK_OK);
    CHECK_INT(ttl, -2);
    CHECK(agent_call(&J, &r, "w1", "unlock %s", n) == 0, "agent call");
    CHECK(!r.ok && strncmp(r.text, "IllegalMonitorStateException", 28) == 0,
          "4th Java unlock: expected IllegalMonitorStateException, got %s", r.text);
    rlock_free(l);
    return 0;
}

int t_reentry_c(void)
{
    char n[128], cf[160];
    struct reply r;
    rlock *l;
    new_name(n, sizeof n, "reentry_c");
    CHECK_ST(rlock_new(C, n, &l), RLOCK_OK);
    c_field(rlock_thread_id(), cf, sizeof cf);
    for (int i = 1; i <= 3; i++) {
        int64_t count = 0;
        CHECK_ST(rlock_lock(l, RLOCK_WATCHDOG), RLOCK_OK);
        CHECK_HOLD(n, cf, i);
        CHECK_ST(rlock_hold_count(l, &count), RLOCK_OK);
        CHECK_INT(count, i);
    }
    JOK(&r, "w1", "count %s", n);
    CHECK_INT(reply_word(&r, 0), 0);
    JOK(&r, "w1", "held %s", n);
    CHECK_STR(r.text, "false");
    JOK(&r, "w1", "locked %s", n);
    CHECK_STR(r.text, "true");
    JOK(&r, "w1", "ttl %s", n);
    long long jttl = reply_word(&r, 0);
    long long pttl = r_int("PTTL %s", n);
    CHECK_RANGE(pttl, 1, CWD);
    CHECK_RANGE(jttl, pttl - tms(300), pttl + tms(300));
    JOK(&r, "w1", "trylock %s 0 -1", n);
    CHECK(strncmp(r.text, "false ", 6) == 0, "Java tryLock(): expected false, got %s", r.text);
    CHECK_HOLD(n, cf, 3);
    for (int i = 2; i >= 0; i--) {
        int64_t count = -1;
        CHECK_ST(rlock_unlock(l), RLOCK_OK);
        CHECK_ST(rlock_hold_count(l, &count), RLOCK_OK);
        CHECK_INT(count, i);
        if (i > 0) {
            CHECK_HOLD(n, cf, i);
        }
    }
    CHECK_INT(r_int("EXISTS %s", n), 0);
    JOK(&r, "w1", "locked %s", n);
    CHECK_STR(r.text, "false");
    JOK(&r, "w1", "ttl %s", n);
    CHECK_INT(reply_word(&r, 0), -2);
    CHECK_ST(rlock_unlock(l), RLOCK_ENOTOWNER);
    rlock_free(l);
    return 0;
}

/* Re-entry with a longer explicit lease resets the TTL to it, and a partial
 * release resets it to the last lease, on both sides alike. */
int t_lease_reentry(void)
{
    char n[128], jf[160], cf[160];
    struct reply r;
    rlock *l;
    int64_t ttl;
    CHECK(java_field("w1", jf, sizeof jf) == 0, "whoami");
    new_name(n, sizeof n, "lease_reentry_java");
    JOK(&r, "w1", "lock %s %lld", n, (long long)tms(3000));
    CHECK_RANGE(r_int("PTTL %s", n), tms(3000) - tms(500), tms(3000));
    JOK(&r, "w1", "lock %s %lld", n, (long long)tms(8000));
    CHECK_HOLD(n, jf, 2);
    CHECK_RANGE(r_int("PTTL %s", n), tms(8000) - tms(500), tms(8000));
    CHECK_ST(rlock_new(C, n, &l), RLOCK_OK);
    CHECK_ST(rlock_remain_ttl(l, &ttl), RLOCK_OK);
    CHECK_RANGE(ttl, tms(8000) - tms(500), tms(8000));
    JOK(&r, "w1", "unlock %s", n);
    CHECK_HOLD(n, jf, 1);
    CHECK_RANGE(r_int("PTTL %s", n), tms(8000) - tms(500), tms(8000));
    JOK(&r, "w1", "unlock %s", n);
    CHECK_INT(r_int("EXISTS %s", n), 0);
    rlock_free(l);

    new_name(n, sizeof n, "lease_reentry_c");
    CHECK_ST(rlock_new(C, n, &l), RLOCK_OK);
    c_field(rlock_thread_id(), cf, sizeof cf);
    CHECK_ST(rlock_lock(l, tms(3000)), RLOCK_OK);
    CHECK_ST(rlock_lock(l, tms(8000)), RLOCK_OK);
    CHECK_HOLD(n, cf, 2);
    CHECK_RANGE(r_int("PTTL %s", n), tms(8000) - tms(500), tms(8000));
    JOK(&r, "w1", "ttl %s", n);
    CHECK_RANGE(reply_word(&r, 0), tms(8000) - tms(500), tms(8000));
    CHECK_ST(rlock_unlock(l), RLOCK_OK);
    CHECK_HOLD(n, cf, 1);
    CHECK_RANGE(r_int("PTTL %s", n), tms(8000) - tms(500), tms(8000));
    CHECK_ST(rlock_unlock(l), RLOCK_OK);
    CHECK_INT(r_int("EXISTS %s", n), 0);
    rlock_free(l);
    return 0;
}

/* ---- wake-ups ------------------------------------------------------- */

#define WAKE_ROUNDS 5

/* Redisson holds with a 60 s lease, rlock waits; Redisson unlocks and rlock
 * must acquire within 1 s: only the published "0" can do that. */
int t_wake_java_to_c(void)
{
    struct cworker *w = cw_new();
    struct reply r;
    struct tap *tap = NULL;
    CHECK(w != NULL, "cw_new");
    CHECK((tap = tap_new()) != NULL, "MONITOR");
    char cf[160];
    c_field(w->tid, cf, sizeof cf);
    for (int round = 0; round < WAKE_ROUNDS; round++) {
        char n[128], ch[200];
        rlock *l;
        new_name(n, sizeof n, "wake_java_to_c");
        channel_of(n, ch, sizeof ch);
        CHECK_ST(rlock_new(C, n, &l), RLOCK_OK);
        JOK(&r, "w1", "lock %s 60000", n);
        cw_post(w, l, COP_LOCK, RLOCK_WATCHDOG, 0);
        CHECK(wait_subscribers(n, 1) == 0, "rlock waiter never subscribed");
        sleep_ms(20);
        CHECK(!cw_idle(w), "rlock_lock returned while Redisson held the lock");
        JOK(&r, "w1", "unlock %s", n);
        int64_t t_unlock = reply_word(&r, 0);
        CHECK_ST(cw_wait(w, tms(2000)), RLOCK_OK);
        double ms = (double)(w->t_returned - t_unlock) / 1000.0;
        measure("Redisson unlock() called -> rlock_lock returns", ms);
        CHECK(ms < (double)tms(1000), "woken after %.1f ms (> 1 s)", ms);
        long mark = tap_mark(tap);
        int64_t t_pub = tap_find(tap, 0, "publish", ch);
        CHECK(mark >= 0 && t_pub > 0, "no publish on %s seen", ch);
        measure("Redisson's publish -> rlock_lock returns",
                (double)(w->t_returned - t_pub) / 1000.0);
        CHECK_HOLD(n, cf, 1);
        cw_post(w, l, COP_UNLOCK, 0, 0);
        CHECK_ST(cw_wait(w, tms(5000)), RLOCK_OK);
        CHECK_INT(r_int("EXISTS %s", n), 0);
        rlock_free(l);
    }
    CHECK(tap_stop(tap) == 0, "MONITOR marker");
    tap_free(tap);
    cw_stop(w);
    return 0;
}

int t_wake_c_to_java(void)
{
    struct reply r;
    struct tap *tap = NULL;
    char jf[160];
    CHECK(java_field("w1", jf, sizeof jf) == 0, "whoami");
    CHECK((tap = tap_new()) != NULL, "MONITOR");
    for (int round = 0; round < WAKE_ROUNDS; round++) {
        char n[128], ch[200];
        rlock *l;
        new_name(n, sizeof n, "wake_c_to_java");
        channel_of(n, ch, sizeof ch);
        CHECK_ST(rlock_new(C, n, &l), RLOCK_OK);
        CHECK_ST(rlock_lock(l, 60000), RLOCK_OK);
        unsigned tag = agent_send(&J, "w1", "lock %s -1", n);
        CHECK(wait_subscribers(n, 1) == 0, "Redisson waiter never subscribed");
        sleep_ms(20);
        CHECK(!agent_done(&J, tag), "Redisson lock() returned while rlock held the lock");
        int64_t t0 = now_us();
        CHECK_ST(rlock_unlock(l), RLOCK_OK);
        CHECK(agent_wait(&J, tag, tms(2000), &r) == 0, "Redisson lock() not woken in 2 s");
        CHECK(r.ok, "Redisson lock(): %s", r.text);
        int64_t t_acq = reply_word(&r, 1);
        double ms = (double)(t_acq - t0) / 1000.0;
        measure("rlock_unlock called -> Redisson lock() returns", ms);
        CHECK(ms < (double)tms(1000), "woken after %.1f ms (> 1 s)", ms);
        long mark = tap_mark(tap);
        int64_t t_pub = tap_find(tap, 0, "publish", ch);
        CHECK(mark >= 0 && t_pub > 0, "no publish on %s seen", ch);
        measure("rlock's publish -> Redisson lock() returns", (double)(t_acq - t_pub) / 1000.0);
        CHECK_HOLD(n, jf, 1);
        JOK(&r, "w1", "unlock %s", n);
        CHECK_INT(r_int("EXISTS %s", n), 0);
        rlock_free(l);
    }
    CHECK(tap_stop(tap) == 0, "MONITOR marker");
    tap_free(tap);
    return 0;
}

/* With leases and no unlock, the waiter on the other side gets the lock
 * when the lease runs out (it sleeps on the holder's TTL), and the late
 * unlock of the old holder fails on its side. */
int t_lease_expiry(void)
{
    struct cworker *w = cw_new();
    struct reply r;
    char n[128], cf[160], jf[160];
    rlock *l;
    int64_t lease = tms(500);
    CHECK(w != NULL, "cw_new");
    c_field(w->tid, cf, sizeof cf);
    CHECK(java_field("w1", jf, sizeof jf) == 0, "whoami");

    new_name(n, sizeof n, "lease_expiry_java");
    CHECK_ST(rlock_new(C, n, &l), RLOCK_OK);
    JOK(&r, "w1", "lock %s %lld", n, (long long)lease);
    int64_t t_locked = reply_word(&r, 1);
    cw_post(w, l, COP_LOCK, RLOCK_WATCHDOG, 0);
    CHECK_ST(cw_wait(w, lease + tms(2000)), RLOCK_OK);
    double ms = (double)(w->t_returned - t_locked) / 1000.0;
    CHECK(ms >= (double)lease - 50 && ms < (double)(lease + tms(1000)),
          "rlock acquired %.1f ms after a %lld ms Redisson lease began", ms, (long long)lease);
    CHECK_HOLD(n, cf, 1);
    CHECK(agent_call(&J, &r, "w1", "unlock %s", n) == 0, "agent call");
    CHECK(!r.ok && strncmp(r.text, "IllegalMonitorStateException", 28) == 0,
          "late Java unlock: expected IllegalMonitorStateException, got %s", r.text);
    CHECK_HOLD(n, cf, 1);
    cw_post(w, l, COP_UNLOCK, 0, 0);
    CHECK_ST(cw_wait(w, tms(5000)), RLOCK_OK);
    rlock_free(l);

    new_name(n, sizeof n, "lease_expiry_c");
    CHECK_ST(rlock_new(C, n, &l), RLOCK_OK);
    cw_post(w, l, COP_LOCK, lease, 0);
    CHECK_ST(cw_wait(w, tms(5000)), RLOCK_OK);
    unsigned tag = agent_send(&J, "w1", "lock %s -1", n);
    CHECK(agent_wait(&J, tag, lease + tms(2000), &r) == 0 && r.ok, "Redisson lock(): %s", r.text);
    ms = (double)(reply_word(&r, 1) - w->t_returned) / 1000.0;
    CHECK(ms >= (double)lease - 50 && ms < (double)(lease + tms(1000)),
          "Redisson acquired %.1f ms after a %lld ms rlock lease began", ms, (long long)lease);
    CHECK_HOLD(n, jf, 1);
    cw_post(w, l, COP_UNLOCK, 0, 0);
    CHECK_ST(cw_wait(w, tms(5000)), RLOCK_ELOST);
    CHECK_HOLD(n, jf, 1);
    JOK(&r, "w1", "unlock %s", n);
    rlock_free(l);
    cw_stop(w);
    return 0;
}

/* ---- force unlock --------------------------------------------------- */

int t_force_java_wakes_c(void)
{
    struct cworker *w = cw_new();
    struct reply r;
    char cf[160];
    CHECK(w != NULL, "cw_new");
    c_field(w->tid, cf, sizeof cf);
    for (int round = 0; round < 3; round++) {
        char n[128];
        rlock *l;
        new_name(n, sizeof n, "force_java_wakes_c");
        CHECK_ST(rlock_new(C, n, &l), RLOCK_OK);
        JOK(&r, "w1", "lock %s 60000", n);
        cw_post(w, l, COP_LOCK, RLOCK_WATCHDOG, 0);
        CHECK(wait_subscribers(n, 1) == 0, "rlock waiter never subscribed");
        sleep_ms(20);
        CHECK(!cw_idle(w), "rlock_lock returned while Redisson held the lock");
        JOK(&r, "w2", "force %s", n);
        CHECK(strncmp(r.text, "true ", 5) == 0, "forceUnlock(): expected true, got %s", r.text);
        int64_t t_force = reply_word(&r, 1);
        CHECK_ST(cw_wait(w, tms(2000)), RLOCK_OK);
        double ms = (double)(w->t_returned - t_force) / 1000.0;
        measure("Redisson forceUnlock -> rlock_lock returns", ms);
        CHECK(ms < (double)tms(1000), "woken after %.1f ms (> 1 s)", ms);
        CHECK_HOLD(n, cf, 1);
        CHECK(agent_call(&J, &r, "w1", "unlock %s", n) == 0, "agent call");
        CHECK(!r.ok && strncmp(r.text, "IllegalMonitorStateException", 28) == 0,
              "Java unlock after forceUnlock: expected IllegalMonitorStateException, got %s",
              r.text);
        CHECK_HOLD(n, cf, 1);
        cw_post(w, l, COP_UNLOCK, 0, 0);
        CHECK_ST(cw_wait(w, tms(5000)), RLOCK_OK);
        rlock_free(l);
    }
    cw_stop(w);
    return 0;
}

int t_force_c_wakes_java(void)
{
    struct cworker *w = cw_new();
    struct reply r;
    char jf[160];
    CHECK(w != NULL, "cw_new");
    CHECK(java_field("w1", jf, sizeof jf) == 0, "whoami");
    for (int round = 0; round < 3; round++) {
        char n[128];
        rlock *l;
        bool was = false;
        new_name(n, sizeof n, "force_c_wakes_java");
        CHECK_ST(rlock_new(C, n, &l), RLOCK_OK);
        cw_post(w, l, COP_LOCK, 60000, 0);
        CHECK_ST(cw_wait(w, tms(5000)), RLOCK_OK);
        unsigned tag = agent_send(&J, "w1", "lock %s -1", n);
        CHECK(wait_subscribers(n, 1) == 0, "Redisson waiter never subscribed");
        sleep_ms(20);
        CHECK(!agent_done(&J, tag), "Redisson lock() returned while rlock held the lock");
        int64_t t0 = now_us();
        CHECK_ST(rlock_force_unlock(l, &was), RLOCK_OK);
        CHECK(was, "rlock_force_unlock: was_locked false");
        CHECK(agent_wait(&J, tag, tms(2000), &r) == 0 && r.ok, "Redisson lock() not woken");
        double ms = (double)(reply_word(&r, 1) - t0) / 1000.0;
        measure("rlock_force_unlock -> Redisson lock() returns", ms);
        CHECK(ms < (double)tms(1000), "woken after %.1f ms (> 1 s)", ms);
        CHECK_HOLD(n, jf, 1);
        cw_post(w, l, COP_UNLOCK, 0, 0);
        CHECK_ST(cw_wait(w, tms(5000)), RLOCK_ELOST);
        CHECK_HOLD(n, jf, 1);
        JOK(&r, "w1", "unlock %s", n);
        CHECK_INT(r_int("EXISTS %s", n), 0);
        rlock_free(l);
    }
    cw_stop(w);
    return 0;
}

/* Redisson force-unlocks a watchdog hold of rlock: on_lock_lost reports it
 * within one renewal period, and the holder's unlock returns RLOCK_ELOST. */
int t_lock_lost(void)
{
    struct cworker *w = cw_new();
    struct reply r;
    struct lost_event ev;
    char n[128], cf[160];
    rlock *l;
    CHECK(w != NULL, "cw_new");
    c_field(w->tid, cf, sizeof cf);
    new_name(n, sizeof n, "lock_lost");
    CHECK_ST(rlock_new(C, n, &l), RLOCK_OK);
    int lost0 = lost_count();
    cw_post(w, l, COP_LOCK, RLOCK_WATCHDOG, 0);
    CHECK_ST(cw_wait(w, tms(5000)), RLOCK_OK);
    sleep_ms(CWD / 2); /* past one renewal: the hold is a renewed one */
    CHECK_HOLD(n, cf, 1);
    CHECK(lost_count() == lost0, "on_lock_lost before the force unlock");
    JOK(&r, "w1", "force %s", n);
    CHECK(strncmp(r.text, "true ", 5) == 0, "forceUnlock(): expected true, got %s", r.text);
    int64_t t_force = reply_word(&r, 1);
    CHECK(lost_wait(n, CWD / 3 + tms(1000), &ev) == 0, "on_lock_lost not called within %lld ms",
          (long long)(CWD / 3 + tms(1000)));
    CHECK_INT(ev.tid, w->tid);
    double ms = (double)(ev.t_us - t_force) / 1000.0;
    measure("Redisson forceUnlock -> on_lock_lost", ms);
    CHECK(ms <= (double)(CWD / 3 + tms(200)), "on_lock_lost after %.1f ms (> %lld)", ms,
          (long long)(CWD / 3 + tms(200)));
    CHECK_INT(lost_count(), lost0 + 1);
    CHECK_INT(r_int("EXISTS %s", n), 0);
    cw_post(w, l, COP_UNLOCK, 0, 0);
    CHECK_ST(cw_wait(w, tms(5000)), RLOCK_ELOST);
    rlock_free(l);
    cw_stop(w);
    return 0;
}
