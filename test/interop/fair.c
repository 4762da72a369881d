/*
 * Interop tests of the fair lock (Redisson getFairLock, rlock_new_fair):
 * Java and C waiters in one FIFO queue, each release publishing once, to
 * the queue's head only; a waiter that gives up on either side leaves the
 * queue and moves the deadlines behind it forward. See interop.c.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interop.h"

static long long queue_len(const char *n)
{
    return r_int("LLEN redisson_lock_queue:{%s}", n);
}

/* Waits until the queue of n holds len waiters. */
static int wait_queue(const char *n, long long len)
{
    for (int64_t t = 0; t < tms(5000); t += 5) {
        if (queue_len(n) == len) {
            return 0;
        }
        sleep_ms(5);
    }
    return -1;
}

static long long deadline_of(const char *n, const char *owner)
{
    char key[200];
    snprintf(key, sizeof key, "redisson_lock_timeout:{%s}", n);
    redisReply *rep = redisCommand(R, "ZSCORE %s %s", key, owner);
    long long v = rep && rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : -1;
    if (rep) {
        freeReplyObject(rep);
    }
    return v;
}

/* The channels of the PUBLISH commands the tap saw from index from on
 * whose channel starts with redisson_lock__channel:{n}, in order, joined by
 * spaces into out; their number. */
static int publishes(struct tap *t, size_t from, const char *n, char *out, size_t size)
{
    char prefix[200];
    channel_of(n, prefix, sizeof prefix);
    size_t plen = strlen(prefix), used = 0;
    int count = 0;
    out[0] = '\0';
    pthread_mutex_lock(&t->mu);
    for (size_t i = from; i < t->n; i++) {
        char a[2][160];
        if (tap_args(t->lines[i], a, 2) == 2 && strcasecmp(a[0], "publish") == 0 &&
            strncmp(a[1], prefix, plen) == 0) {
            int w = snprintf(out + used, size - used, "%s%s", count ? " " : "", a[1]);
            if (w > 0 && (size_t)w < size - used) {
                used += (size_t)w;
            }
            count++;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return count;
}

/* Java, C, Java, C queue behind a C holder; each release wakes exactly the
 * next in line, on its own channel, whichever side released. */
int t_fair_mixed_fifo(void)
{
    char n[128], base[200], jf1[160], jf2[160], cf1[160], cf2[160];
    struct reply r;
    struct tap *tap = NULL;
    rlock *l;
    new_name(n, sizeof n, "fair_mixed_fifo");
    channel_of(n, base, sizeof base);
    CHECK(java_field("f1", jf1, sizeof jf1) == 0, "whoami");
    CHECK(java_field("f2", jf2, sizeof jf2) == 0, "whoami");
    struct cworker *c1 = cw_new(), *c2 = cw_new();
    CHECK(c1 && c2, "cw_new");
    c_field(c1->tid, cf1, sizeof cf1);
    c_field(c2->tid, cf2, sizeof cf2);
    CHECK_ST(rlock_new_fair(C, n, &l), RLOCK_OK);
    CHECK_ST(rlock_lock(l, 60000), RLOCK_OK);
    CHECK((tap = tap_new()) != NULL, "MONITOR");
    unsigned j1 = agent_send(&J, "f1", "fair.lock %s -1", n);
    CHECK(wait_queue(n, 1) == 0, "Java waiter 1 never queued");
    cw_post(c1, l, COP_LOCK, RLOCK_WATCHDOG, 0);
    CHECK(wait_queue(n, 2) == 0, "C waiter 1 never queued");
    unsigned j2 = agent_send(&J, "f2", "fair.lock %s -1", n);
    CHECK(wait_queue(n, 3) == 0, "Java waiter 2 never queued");
    cw_post(c2, l, COP_LOCK, RLOCK_WATCHDOG, 0);
    CHECK(wait_queue(n, 4) == 0, "C waiter 2 never queued");
    /* Redisson's deadlines: each one the previous one's plus 300 s. */
    long long d1 = deadline_of(n, jf1);
    CHECK_INT(deadline_of(n, cf1), d1 + 300000);
    CHECK_INT(deadline_of(n, jf2), d1 + 600000);
    CHECK_INT(deadline_of(n, cf2), d1 + 900000);
    long mark = tap_mark(tap);
    CHECK(mark >= 0, "MONITOR mark");

    /* C holder -> Java 1 */
    int64_t t0 = now_us();
    CHECK_ST(rlock_unlock(l), RLOCK_OK);
    CHECK(agent_wait(&J, j1, tms(1000), &r) == 0 && r.ok, "Java waiter 1 not woken");
    measure("fair: rlock_unlock -> Redisson head acquires", (double)(now_us() - t0) / 1000.0);
    CHECK_HOLD(n, jf1, 1);
    CHECK(!cw_idle(c1) && !agent_done(&J, j2) && !cw_idle(c2), "someone else woke");
    /* Everybody moved one slot forward. */
    CHECK_INT(deadline_of(n, cf1), d1);
    /* Java 1 -> C 1 */
    t0 = now_us();
    JOK(&r, "f1", "fair.unlock %s", n);
    CHECK_ST(cw_wait(c1, tms(1000)), RLOCK_OK);
    measure("fair: Redisson unlock -> rlock head acquires", (double)(now_us() - t0) / 1000.0);
    CHECK_HOLD(n, cf1, 1);
    CHECK(!agent_done(&J, j2) && !cw_idle(c2), "someone else woke");
    /* C 1 -> Java 2 */
    cw_post(c1, l, COP_UNLOCK, 0, 0);
    CHECK_ST(cw_wait(c1, tms(5000)), RLOCK_OK);
    CHECK(agent_wait(&J, j2, tms(1000), &r) == 0 && r.ok, "Java waiter 2 not woken");
    CHECK_HOLD(n, jf2, 1);
    CHECK(!cw_idle(c2), "C waiter 2 woke early");
    /* Java 2 -> C 2 */
    JOK(&r, "f2", "fair.unlock %s", n);
    CHECK_ST(cw_wait(c2, tms(1000)), RLOCK_OK);
    CHECK_HOLD(n, cf2, 1);
    cw_post(c2, l, COP_UNLOCK, 0, 0);
    CHECK_ST(cw_wait(c2, tms(5000)), RLOCK_OK);
    CHECK_INT(r_int("EXISTS %s redisson_lock_queue:{%s} redisson_lock_timeout:{%s}", n, n, n), 0);

    /* One publish per release, to the head's own channel, none on the
     * lock's base channel. */
    CHECK(tap_stop(tap) == 0, "MONITOR marker");
    char got[2048], want[2048];
    int k = publishes(tap, (size_t)mark, n, got, sizeof got);
    snprintf(want, sizeof want, "%s:%s %s:%s %s:%s %s:%s", base, jf1, base, cf1, base, jf2, base,
             cf2);
    CHECK(k == 4, "%d publishes: %s", k, got);
    CHECK_STR(got, want);
    tap_free(tap);
    cw_stop(c1);
    cw_stop(c2);
    rlock_free(l);
    return 0;
}

/* A Java waiter whose tryLock(wait) runs out leaves the queue and moves
 * the C waiter behind it forward by its wait, and the reverse. */
int t_fair_give_up_both_ways(void)
{
    char n[128], jf[160], cf[160];
    struct reply r;
    rlock *l;
    new_name(n, sizeof n, "fair_give_up");
    CHECK(java_field("g1", jf, sizeof jf) == 0, "whoami");
    struct cworker *w = cw_new();
    CHECK(w != NULL, "cw_new");
    c_field(w->tid, cf, sizeof cf);
    CHECK_ST(rlock_new_fair(C, n, &l), RLOCK_OK);
    CHECK_ST(rlock_lock(l, 60000), RLOCK_OK);

    /* Java first, with a wait of 1 s (its slot); C behind, waiting on. */
    int64_t jwait = tms(1000);
    unsigned tj = agent_send(&J, "g1", "fair.trylock %s %lld -1", n, (long long)jwait);
    CHECK(wait_queue(n, 1) == 0, "Java waiter never queued");
    cw_post(w, l, COP_LOCK, RLOCK_WATCHDOG, 0);
    CHECK(wait_queue(n, 2) == 0, "C waiter never queued");
    long long dc = deadline_of(n, cf);
    CHECK_INT(dc, deadline_of(n, jf) + 300000);
    CHECK(agent_wait(&J, tj, tms(5000), &r) == 0 && r.ok, "Java tryLock did not return");
    CHECK(strncmp(r.text, "false ", 6) == 0, "Java tryLock: expected false, got %s", r.text);
    CHECK(wait_queue(n, 1) == 0, "the Java waiter did not leave the queue");
    CHECK_INT(deadline_of(n, jf), -1);
    CHECK_INT(deadline_of(n, cf), dc - jwait);

    /* C (a try_lock of 1 s on another thread) ahead of a Java waiter. */
    CHECK_ST(rlock_unlock(l), RLOCK_OK);
    CHECK_ST(cw_wait(w, tms(1000)), RLOCK_OK); /* the C waiter holds it now */
    struct cworker *t = cw_new();
    CHECK(t != NULL, "cw_new");
    char tf[160];
    c_field(t->tid, tf, sizeof tf);
    cw_post(t, l, COP_TRYLOCK, tms(1000), RLOCK_WATCHDOG);
    CHECK(wait_queue(n, 1) == 0, "C try_lock never queued");
    unsigned tj2 = agent_send(&J, "g1", "fair.lock %s -1", n);
    CHECK(wait_queue(n, 2) == 0, "Java waiter never queued");
    long long dj = deadline_of(n, jf);
    CHECK_INT(dj, deadline_of(n, tf) + 300000);
    CHECK_ST(cw_wait(t, tms(5000)), RLOCK_EBUSY);
    CHECK(wait_queue(n, 1) == 0, "the C waiter did not leave the queue");
    CHECK_INT(deadline_of(n, jf), dj - tms(1000));
    /* And the Java waiter gets the lock when the C holder releases. */
    cw_post(w, l, COP_UNLOCK, 0, 0);
    CHECK_ST(cw_wait(w, tms(5000)), RLOCK_OK);
    CHECK(agent_wait(&J, tj2, tms(1000), &r) == 0 && r.ok, "Java waiter not woken");
    CHECK_HOLD(n, jf, 1);
    JOK(&r, "g1", "fair.unlock %s", n);
    CHECK_INT(r_int("EXISTS %s redisson_lock_queue:{%s} redisson_lock_timeout:{%s}", n, n, n), 0);
    cw_stop(t);
    cw_stop(w);
    rlock_free(l);
    return 0;
}
