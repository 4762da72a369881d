/*
 * Interop tests of the fenced lock (issue 16): one token counter for Java
 * (RFencedLock) and C (rlock_new_fenced()), so tokens strictly increase
 * across both, re-entries included; getToken() agrees on both sides; a
 * release of either side wakes the other's waiter; a lost counter is
 * repaired by the C side, and Java goes on from there. See interop.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interop.h"

/* rlock_fence_token() of the calling thread. */
static long long c_token(rlock *l)
{
    int64_t t = -1;
    return rlock_fence_token(l, &t) == RLOCK_OK ? (long long)t : -1;
}

int t_fenced_tokens(void)
{
    char n[128], tk[200], rec[200], jf[160], cf[160];
    struct reply r;
    rlock *l;
    new_name(n, sizeof n, "fenced_tokens");
    rlock_prefixed_name("redisson_lock_token", n, tk, sizeof tk);
    rlock_prefixed_name("rlock_fence", n, rec, sizeof rec);
    CHECK_ST(rlock_new_fenced(C, n, &l), RLOCK_OK);
    CHECK(java_field("w1", jf, sizeof jf) == 0, "whoami");
    c_field(rlock_thread_id(), cf, sizeof cf);
    int64_t t = -1;
    JOK(&r, "w1", "gettoken %s", n);
    CHECK_INT(reply_word(&r, 0), 0); /* Redisson: no counter is 0 */
    CHECK_ST(rlock_fence_token_latest(l, &t), RLOCK_OK);
    CHECK_INT(t, 0);

    long long last = 0;
    for (int round = 0; round < 4; round++) {
        /* Java takes and re-enters: the next two tokens. */
        JOK(&r, "w1", "ftoken %s -1", n);
        CHECK_INT(reply_word(&r, 0), last + 1);
        CHECK_ST(rlock_try_lock(l, 0, 30000), RLOCK_EBUSY);
        JOK(&r, "w1", "ftoken %s 30000", n);
        CHECK_INT(reply_word(&r, 0), last + 2);
        CHECK_HOLD(n, jf, 2);
        CHECK_ST(rlock_fence_token_latest(l, &t), RLOCK_OK);
        CHECK_INT(t, last + 2);
        JOK(&r, "w1", "funlock %s", n);
        JOK(&r, "w1", "funlock %s", n);
        CHECK_INT(r_int("EXISTS %s", n), 0);
        /* C takes and re-enters: the next two. */
        CHECK_ST(rlock_lock(l, RLOCK_WATCHDOG), RLOCK_OK);
        CHECK_INT(c_token(l), last + 3);
        JOK(&r, "w1", "ftrytoken %s 0", n);
        CHECK_STR(r.text, "null"); /* Java's "not acquired" */
        CHECK_ST(rlock_lock(l, 30000), RLOCK_OK);
        CHECK_INT(c_token(l), last + 4);
        CHECK_HOLD(n, cf, 2);
        JOK(&r, "w1", "gettoken %s", n);
        CHECK_INT(reply_word(&r, 0), last + 4);
        CHECK_ST(rlock_unlock(l), RLOCK_OK);
        CHECK_ST(rlock_unlock(l), RLOCK_OK);
        last += 4;
    }

    /* A C release wakes a Java waiter, which takes the next token. */
    CHECK_ST(rlock_lock(l, 30000), RLOCK_OK);
    unsigned tag = agent_send(&J, "w1", "ftoken %s -1", n);
    CHECK(wait_subscribers(n, 1) == 0, "Redisson waiter never subscribed");
    sleep_ms(20);
    CHECK(!agent_done(&J, tag), "lockAndGetToken() returned while rlock held the lock");
    int64_t t_unlock = now_us();
    CHECK_ST(rlock_unlock(l), RLOCK_OK);
    CHECK(agent_wait(&J, tag, tms(5000), &r) == 0 && r.ok, "Java waiter: %s", r.text);
    double ms = (double)(reply_word(&r, 2) - t_unlock) / 1000.0;
    measure("rlock_unlock (fenced) -> Redisson lockAndGetToken() returns", ms);
    CHECK(ms < (double)tms(1000), "woken after %.1f ms (> 1 s)", ms);
    CHECK_INT(reply_word(&r, 0), last + 2);
    JOK(&r, "w1", "funlock %s", n);
    last += 2;

    /* The counter lost: Redisson starts again from 1 (its own acquire
     * cannot know better); rlock's next acquisition goes past the largest
     * token rlock has handed out (its record's max, here last - 1: the
     * Java waiter's last token left no trace there) and repairs the
     * counter, and Java goes on from there. As documented, the tokens
     * Redisson handed out since rlock's latest acquisition (here one,
     * last) can come again after such a loss. */
    char *max = r_str("HGET %s max", rec);
    CHECK(max && atoll(max) == last - 1, "record max %s, expected %lld", max ? max : "nil",
          last - 1);
    free(max);
    CHECK_INT(r_int("DEL %s", tk), 1);
    JOK(&r, "w1", "ftoken %s -1", n);
    CHECK_INT(reply_word(&r, 0), 1);
    JOK(&r, "w1", "funlock %s", n);
    CHECK_ST(rlock_lock(l, 30000), RLOCK_OK);
    CHECK_INT(c_token(l), last); /* max + 1 */
    CHECK_ST(rlock_unlock(l), RLOCK_OK);
    JOK(&r, "w1", "ftoken %s -1", n);
    CHECK_INT(reply_word(&r, 0), last + 1);
    JOK(&r, "w1", "funlock %s", n);
    r_int("DEL %s %s", tk, rec);
    rlock_free(l);
    return 0;
}
