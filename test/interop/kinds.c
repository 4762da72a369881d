/*
 * Interop tests of the rest of the lock family (issue 16): fair,
 * read/write, fenced, spin and the non-reentrant locks, rlock against the
 * same kind of Redisson lock on one name, both directions. See interop.c.
 *
 * What each test checks is in docs/interop.md. Where a Redisson version is
 * at fault (spec §11 item 26), the test says so, checks that the fault is
 * there, and checks the fixed behaviour on the versions that have it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "interop.h"

/* A key or channel: a name (< 128) and an owner field (< 160) fit with
 * room to spare; gcc cannot tell from the 2-D arrays of fields. */
#define KSZ 512
#pragma GCC diagnostic ignored "-Wformat-truncation"

/* The reply is Java's exception of class cls. */
#define CHECK_JERR(r, cls)                                                                    \
    CHECK(!(r).ok && strncmp((r).text, cls, strlen(cls)) == 0, "expected %s, got %s %s", cls, \
          (r).ok ? "ok" : "err", (r).text)

#define CHECK_HFIELD(key, field, want)                                                            \
    do {                                                                                          \
        char *v_ = r_str("HGET %s %s", (key), (field));                                           \
        bool ok_ = v_ && strcmp(v_, (want)) == 0;                                                 \
        CHECK(ok_, "HGET %s %s: expected %s, got %s", (key), (field), (want), v_ ? v_ : "(nil)"); \
        free(v_);                                                                                 \
    } while (0)

static void key_of(const char *prefix, const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "%s:{%s}", prefix, name); /* prefix(P, N), N without '{' */
}

/* redisson_lock__channel:{N}:<owner>, a fair waiter's own channel. */
static void waiter_channel(const char *name, const char *field, char *buf, size_t n)
{
    snprintf(buf, n, "redisson_lock__channel:{%s}:%s", name, field);
}

/* {N}:<owner>:rwlock_timeout:<k>, the k-th read hold's timeout key. */
static void rw_timeout_key(const char *name, const char *field, int k, char *buf, size_t n)
{
    snprintf(buf, n, "{%s}:%s:rwlock_timeout:%d", name, field, k);
}

static int wait_llen(const char *key, long long n)
{
    for (int64_t t = 0; t < tms(5000); t += 5) {
        if (r_int("LLEN %s", key) >= n) {
            return 0;
        }
        sleep_ms(5);
    }
    return -1;
}

static int wait_numsub(const char *channel, long long n)
{
    for (int64_t t = 0; t < tms(5000); t += 5) {
        if (r_numsub(channel) >= n) {
            return 0;
        }
        sleep_ms(5);
    }
    return -1;
}

/* LRANGE key 0 -1 into out (at most max); the number of elements. */
static int lrange(const char *key, char out[][160], int max)
{
    redisReply *r = redisCommand(R, "LRANGE %s 0 -1", key);
    int n = -1;
    if (r && r->type == REDIS_REPLY_ARRAY) {
        n = 0;
        for (size_t i = 0; i < r->elements && n < max; i++) {
            snprintf(out[n++], 160, "%s", r->element[i]->str);
        }
    }
    if (r) {
        freeReplyObject(r);
    }
    return n;
}

/* Java's side of a wait: the reply to tag within 2 s (scaled), ok. */
static int jwait(unsigned tag, struct reply *r)
{
    if (agent_wait(&J, tag, tms(2000), r) != 0) {
        printf("    no reply from Java within %lld ms\n", (long long)tms(2000));
        return -1;
    }
    if (!r->ok) {
        printf("    Java: %s\n", r->text);
        return -1;
    }
    return 0;
}

static double ms_between(int64_t from_us, int64_t to_us)
{
    return (double)(to_us - from_us) / 1000.0;
}

#define CHECK_WAKE(what, from_us, to_us)                                              \
    do {                                                                              \
        double ms_ = ms_between((from_us), (to_us));                                  \
        measure(what, ms_);                                                           \
        CHECK(ms_ < (double)tms(1000), "%s: woken after %.1f ms (> 1 s)", what, ms_); \
    } while (0)

/* ---- fair lock ------------------------------------------------------ */

/* C holds; Java f1, C c1, Java f2, C c2 queue in that order; the lock goes
 * down the queue in that order, each release publishing one "0" on the
 * head's own channel and nothing anywhere else. */
int t_fair_fifo(void)
{
    char n[128], q[KSZ], tk[KSZ], base[KSZ], pat[KSZ], f[4][160], ch[4][KSZ], hf[160];
    struct cworker *h = cw_new(), *c1 = cw_new(), *c2 = cw_new();
    struct cworker *cw[4] = {NULL, c1, NULL, c2};
    const char *jw[4] = {"f1", NULL, "f2", NULL};
    unsigned tag[4] = {0};
    struct reply r;
    struct sub *sub;
    rlock *l;
    CHECK(h && c1 && c2, "cw_new");
    new_name(n, sizeof n, "fair_fifo");
    key_of("redisson_lock_queue", n, q, sizeof q);
    key_of("redisson_lock_timeout", n, tk, sizeof tk);
    channel_of(n, base, sizeof base);
    snprintf(pat, sizeof pat, "%s*", base);
    CHECK((sub = sub_new(pat)) != NULL, "PSUBSCRIBE %s", pat);
    CHECK_ST(rlock_new_fair(C, n, &l), RLOCK_OK);
    CHECK_STR(rlock_kind(l), "fair");
    c_field(h->tid, hf, sizeof hf);
    for (int i = 0; i < 4; i++) {
        if (jw[i]) {
            CHECK(java_field(jw[i], f[i], sizeof f[i]) == 0, "whoami");
        } else {
            c_field(cw[i]->tid, f[i], sizeof f[i]);
        }
        waiter_channel(n, f[i], ch[i], sizeof ch[i]);
    }

    cw_post(h, l, COP_LOCK, 60000, 0);
    CHECK_ST(cw_wait(h, tms(5000)), RLOCK_OK);
    CHECK_HOLD(n, hf, 1);
    CHECK_INT(r_int("EXISTS %s", q), 0);
    for (int i = 0; i < 4; i++) {
        if (jw[i]) {
            tag[i] = agent_send(&J, jw[i], "lock fair:%s -1", n);
        } else {
            cw_post(cw[i], l, COP_LOCK, RLOCK_WATCHDOG, 0);
        }
        CHECK(wait_llen(q, i + 1) == 0, "waiter %d (%s) never joined %s", i, f[i], q);
    }
    char got[8][160];
    CHECK_INT(lrange(q, got, 8), 4);
    for (int i = 0; i < 4; i++) {
        CHECK_STR(got[i], f[i]);
    }
    /* The deadlines: the head's the lock's TTL plus fairLockWaitTimeout
     * (300 s, both sides' default) from now, each later one exactly 300 s
     * after the one before it, whichever side queued it. */
    redisReply *z = redisCommand(R, "ZRANGE %s 0 -1 WITHSCORES", tk);
    CHECK(z && z->type == REDIS_REPLY_ARRAY && z->elements == 8, "ZRANGE %s: 4 members", tk);
    long long score[4];
    for (int i = 0; i < 4; i++) {
        bool same = strcmp(z->element[2 * i]->str, f[i]) == 0;
        score[i] = atoll(z->element[2 * i + 1]->str);
        if (!same) {
            printf("    timeout set member %d: %s, expected %s\n", i, z->element[2 * i]->str, f[i]);
            freeReplyObject(z);
            CHECK(false, "timeout set out of the queue's order");
        }
    }
    freeReplyObject(z);
    long long now_ms = now_us() / 1000;
    CHECK_RANGE(score[0] - now_ms, 300000, 300000 + 60000 + tms(1000));
    for (int i = 1; i < 4; i++) {
        CHECK_INT(score[i] - score[i - 1], 300000);
    }
    /* Each waiter listens on its own channel; nobody on the lock's. */
    for (int i = 0; i < 4; i++) {
        CHECK(wait_numsub(ch[i], 1) == 0, "nobody subscribed to %s", ch[i]);
        CHECK_INT(r_numsub(ch[i]), 1);
    }
    CHECK_INT(r_numsub(base), 0);
    sleep_ms(tms(100));
    for (int i = 0; i < 4; i++) {
        CHECK(jw[i] ? !agent_done(&J, tag[i]) : !cw_idle(cw[i]), "waiter %d acquired early", i);
    }

    /* Down the queue. */
    int prev = -1; /* the holder: h */
    for (int i = 0; i < 4; i++) {
        long mark = sub_mark(sub);
        int64_t t0, t_acq;
        CHECK(mark >= 0, "subscriber marker");
        if (prev < 0 || !jw[prev]) {
            struct cworker *pw = prev < 0 ? h : cw[prev];
            cw_post(pw, l, COP_UNLOCK, 0, 0);
            CHECK_ST(cw_wait(pw, tms(5000)), RLOCK_OK);
            t0 = pw->t_called;
        } else {
            JOK(&r, jw[prev], "unlock fair:%s", n);
            t0 = reply_word(&r, 0);
        }
        if (jw[i]) {
            CHECK(jwait(tag[i], &r) == 0, "Java fair waiter %d not woken", i);
            t_acq = reply_word(&r, 1);
            CHECK_WAKE("fair: rlock unlock -> Redisson head acquires", t0, t_acq);
        } else {
            CHECK_ST(cw_wait(cw[i], tms(2000)), RLOCK_OK);
            t_acq = cw[i]->t_returned;
            CHECK_WAKE("fair: Redisson unlock -> rlock head acquires", t0, t_acq);
        }
        CHECK_HOLD(n, f[i], 1);
        CHECK(sub_mark(sub) >= 0, "subscriber marker");
        if (sub_count(sub, (size_t)mark, NULL, NULL) != 1 ||
            sub_count(sub, (size_t)mark, ch[i], "0") != 1) {
            struct submsg m;
            for (size_t k = (size_t)mark; sub_get(sub, k, &m) == 0; k++) {
                printf("    message on %s: %s\n", m.channel, m.payload);
            }
            CHECK(false, "release %d: expected one \"0\" on %s alone", i, ch[i]);
        }
        int left = lrange(q, got, 8);
        CHECK_INT(left, 3 - i);
        for (int k = 0; k < left; k++) {
            CHECK_STR(got[k], f[i + 1 + k]);
        }
        CHECK_INT(r_int("ZCARD %s", tk), 3 - i);
        for (int k = i + 1; k < 4; k++) {
            CHECK(jw[k] ? !agent_done(&J, tag[k]) : !cw_idle(cw[k]), "waiter %d woke out of turn",
                  k);
        }
        prev = i;
    }
    /* The last release: nobody queued, no message. */
    long mark = sub_mark(sub);
    cw_post(c2, l, COP_UNLOCK, 0, 0);
    CHECK_ST(cw_wait(c2, tms(5000)), RLOCK_OK);
    CHECK(sub_mark(sub) >= 0, "subscriber marker");
    CHECK_INT(sub_count(sub, (size_t)mark, NULL, NULL), 0);
    CHECK_INT(r_int("EXISTS %s %s %s", n, q, tk), 0);
    sub_free(sub);
    rlock_free(l);
    cw_stop(h);
    cw_stop(c1);
    cw_stop(c2);
    return 0;
}

/* Exactly one message since mark: "0" on channel ch. */
static int one_message(struct sub *sub, long mark, const char *ch, const char *payload)
{
    CHECK(mark >= 0 && sub_mark(sub) >= 0, "subscriber marker");
    int all = sub_count(sub, (size_t)mark, NULL, NULL);
    if (all != 1 || sub_count(sub, (size_t)mark, ch, payload) != 1) {
        struct submsg m;
        for (size_t k = (size_t)mark; sub_get(sub, k, &m) == 0; k++) {
            printf("    message on %s: %s\n", m.channel, m.payload);
        }
        CHECK(false, "expected one \"%s\" on %s, got %d messages", payload, ch, all);
    }
    return 0;
}

/* Force unlock from either side wakes the queue's head on the other side,
 * on its own channel; the old holder's unlock fails on its side. */
int t_fair_force(void)
{
    char n[128], q[KSZ], tk[KSZ], base[KSZ], pat[KSZ], cf[160], jf2[160], chc[KSZ], chj[KSZ];
    struct cworker *c1 = cw_new();
    struct reply r;
    struct sub *sub;
    rlock *l;
    bool was = false;
    CHECK(c1 != NULL, "cw_new");
    new_name(n, sizeof n, "fair_force");
    key_of("redisson_lock_queue", n, q, sizeof q);
    key_of("redisson_lock_timeout", n, tk, sizeof tk);
    channel_of(n, base, sizeof base);
    snprintf(pat, sizeof pat, "%s*", base);
    CHECK((sub = sub_new(pat)) != NULL, "PSUBSCRIBE %s", pat);
    CHECK_ST(rlock_new_fair(C, n, &l), RLOCK_OK);
    c_field(c1->tid, cf, sizeof cf);
    CHECK(java_field("f2", jf2, sizeof jf2) == 0, "whoami");
    waiter_channel(n, cf, chc, sizeof chc);
    waiter_channel(n, jf2, chj, sizeof chj);

    /* 1. Java f1 holds; Java f2, then C c1 queue; C forces: f2 wakes. */
    JOK(&r, "f1", "lock fair:%s 60000", n);
    unsigned tag = agent_send(&J, "f2", "lock fair:%s -1", n);
    CHECK(wait_llen(q, 1) == 0, "Java waiter never queued");
    cw_post(c1, l, COP_LOCK, RLOCK_WATCHDOG, 0);
    CHECK(wait_llen(q, 2) == 0, "C waiter never queued");
    CHECK(wait_numsub(chc, 1) == 0 && wait_numsub(chj, 1) == 0, "waiters never subscribed");
    long mark = sub_mark(sub);
    int64_t t0 = now_us();
    CHECK_ST(rlock_force_unlock(l, &was), RLOCK_OK);
    CHECK(was, "rlock_force_unlock: was_locked false");
    CHECK(jwait(tag, &r) == 0, "Java head not woken by rlock_force_unlock");
    CHECK_WAKE("fair: rlock_force_unlock -> Redisson head acquires", t0, reply_word(&r, 1));
    CHECK_HOLD(n, jf2, 1);
    if (one_message(sub, mark, chj, "0") != 0) {
        return -1;
    }
    CHECK(agent_call(&J, &r, "f1", "unlock fair:%s", n) == 0, "agent call");
    CHECK_JERR(r, "IllegalMonitorStateException");
    CHECK_HOLD(n, jf2, 1);
    CHECK(!cw_idle(c1), "C waiter acquired out of turn");

    /* 2. Java f2 holds, C c1 is the head; Java forces: c1 wakes. */
    mark = sub_mark(sub);
    JOK(&r, "f3", "force fair:%s", n);
    CHECK(strncmp(r.text, "true ", 5) == 0, "forceUnlock(): expected true, got %s", r.text);
    t0 = reply_word(&r, 1);
    CHECK_ST(cw_wait(c1, tms(2000)), RLOCK_OK);
    CHECK_WAKE("fair: Redisson forceUnlock -> rlock head acquires", t0, c1->t_returned);
    CHECK_HOLD(n, cf, 1);
    if (one_message(sub, mark, chc, "0") != 0) {
        return -1;
    }
    CHECK(agent_call(&J, &r, "f2", "unlock fair:%s", n) == 0, "agent call");
    CHECK_JERR(r, "IllegalMonitorStateException");
    CHECK_INT(r_int("EXISTS %s %s", q, tk), 0);

    /* 3. C c1 holds, Java f2 is the head; Java forces: the C holder's
     * unlock is RLOCK_ELOST. */
    tag = agent_send(&J, "f2", "lock fair:%s -1", n);
    CHECK(wait_llen(q, 1) == 0, "Java waiter never queued");
    mark = sub_mark(sub);
    JOK(&r, "f3", "force fair:%s", n);
    CHECK(strncmp(r.text, "true ", 5) == 0, "forceUnlock(): expected true, got %s", r.text);
    CHECK(jwait(tag, &r) == 0, "Java head not woken by forceUnlock");
    if (one_message(sub, mark, chj, "0") != 0) {
        return -1;
    }
    cw_post(c1, l, COP_UNLOCK, 0, 0);
    CHECK_ST(cw_wait(c1, tms(5000)), RLOCK_ELOST);
    CHECK_HOLD(n, jf2, 1);
    JOK(&r, "f2", "unlock fair:%s", n);
    CHECK_INT(r_int("EXISTS %s %s %s", n, q, tk), 0);
    sub_free(sub);
    rlock_free(l);
    cw_stop(c1);
    return 0;
}

static long long zscore(const char *key, const char *member)
{
    char *v = r_str("ZSCORE %s %s", key, member);
    long long x = v ? atoll(v) : -1;
    free(v);
    return x;
}

/* Waiters that give up leave a mixed queue: Java f1 (tryLock, wait W1),
 * C c1 (rlock_try_lock, wait W2), Java f2 and C c2 (no wait: 300 s slots)
 * queue behind a C holder. f1 gives up: it leaves the queue and the
 * timeout set, and every deadline behind it moves forward; c1 gives up
 * the same way, by exactly W2 (the wait it queued with). Then the lock
 * goes to f2, then c2. */
int t_fair_giveup(void)
{
    char n[128], q[KSZ], tk[KSZ], f[4][160];
    struct cworker *h = cw_new(), *c1 = cw_new(), *c2 = cw_new();
    struct reply r;
    rlock *l;
    int64_t w1 = tms(600), w2 = tms(1200);
    CHECK(h && c1 && c2, "cw_new");
    new_name(n, sizeof n, "fair_giveup");
    key_of("redisson_lock_queue", n, q, sizeof q);
    key_of("redisson_lock_timeout", n, tk, sizeof tk);
    CHECK_ST(rlock_new_fair(C, n, &l), RLOCK_OK);
    CHECK(java_field("f1", f[0], sizeof f[0]) == 0, "whoami");
    c_field(c1->tid, f[1], sizeof f[1]);
    CHECK(java_field("f2", f[2], sizeof f[2]) == 0, "whoami");
    c_field(c2->tid, f[3], sizeof f[3]);

    cw_post(h, l, COP_LOCK, 60000, 0);
    CHECK_ST(cw_wait(h, tms(5000)), RLOCK_OK);
    unsigned t1 = agent_send(&J, "f1", "trylock fair:%s %lld -1", n, (long long)w1);
    CHECK(wait_llen(q, 1) == 0, "f1 never queued");
    cw_post(c1, l, COP_TRYLOCK, w2, RLOCK_WATCHDOG);
    CHECK(wait_llen(q, 2) == 0, "c1 never queued");
    unsigned t2 = agent_send(&J, "f2", "lock fair:%s -1", n);
    CHECK(wait_llen(q, 3) == 0, "f2 never queued");
    cw_post(c2, l, COP_LOCK, RLOCK_WATCHDOG, 0);
    CHECK(wait_llen(q, 4) == 0, "c2 never queued");
    long long s0[4];
    for (int i = 0; i < 4; i++) {
        s0[i] = zscore(tk, f[i]);
    }
    /* each slot is the one before it plus its own wait */
    CHECK_INT(s0[1] - s0[0], w2);
    CHECK_INT(s0[2] - s0[1], 300000);
    CHECK_INT(s0[3] - s0[2], 300000);

    CHECK(agent_wait(&J, t1, w1 + tms(2000), &r) == 0 && r.ok, "f1's tryLock: %s", r.text);
    CHECK(strncmp(r.text, "false ", 6) == 0, "f1's tryLock: expected false, got %s", r.text);
    char got[8][160];
    CHECK_INT(lrange(q, got, 8), 3);
    CHECK_STR(got[0], f[1]);
    CHECK_INT(zscore(tk, f[0]), -1);
    long long shift = s0[1] - zscore(tk, f[1]);
    printf("    Redisson %s tryLock(%lld ms) gave up: the deadlines behind it moved by %lld ms\n",
           VERSION, (long long)w1, shift);
    CHECK_INT(shift, w1); /* the sync tryLock gives up with its own wait */
    for (int i = 2; i < 4; i++) {
        CHECK_INT(s0[i] - zscore(tk, f[i]), shift);
    }

    CHECK_ST(cw_wait(c1, w2 + tms(2000)), RLOCK_EBUSY);
    CHECK_INT(lrange(q, got, 8), 2);
    CHECK_STR(got[0], f[2]);
    CHECK_STR(got[1], f[3]);
    CHECK_INT(zscore(tk, f[1]), -1);
    for (int i = 2; i < 4; i++) {
        CHECK_INT(s0[i] - zscore(tk, f[i]), shift + w2);
    }
    CHECK(!agent_done(&J, t2) && !cw_idle(c2), "a waiter acquired during the hold");

    cw_post(h, l, COP_UNLOCK, 0, 0);
    CHECK_ST(cw_wait(h, tms(5000)), RLOCK_OK);
    CHECK(jwait(t2, &r) == 0, "f2 not woken");
    CHECK_HOLD(n, f[2], 1);
    CHECK(!cw_idle(c2), "c2 acquired out of turn");
    JOK(&r, "f2", "unlock fair:%s", n);
    CHECK_ST(cw_wait(c2, tms(2000)), RLOCK_OK);
    CHECK_HOLD(n, f[3], 1);
    cw_post(c2, l, COP_UNLOCK, 0, 0);
    CHECK_ST(cw_wait(c2, tms(5000)), RLOCK_OK);
    CHECK_INT(r_int("EXISTS %s %s %s", n, q, tk), 0);
    rlock_free(l);
    cw_stop(h);
    cw_stop(c1);
    cw_stop(c2);
    return 0;
}

/* ---- read/write lock ------------------------------------------------ */

static void rw_channel(const char *name, char *buf, size_t n)
{
    key_of("redisson_rwlock", name, buf, n);
}

/* Java and C readers share one name at once, with Redisson's fields and
 * timeout keys; a writer of either side is kept out. */
int t_rw_share(void)
{
    char n[128], cf[160], jf1[160], jf2[160], jw[160], k[4][KSZ];
    struct reply r;
    rlock *rd, *wr;
    bool b;
    int64_t count;
    new_name(n, sizeof n, "rw_share");
    CHECK_ST(rlock_new_read(C, n, &rd), RLOCK_OK);
    CHECK_ST(rlock_new_write(C, n, &wr), RLOCK_OK);
    CHECK_STR(rlock_kind(rd), "read");
    CHECK_STR(rlock_kind(wr), "write");
    c_field(rlock_thread_id(), cf, sizeof cf);
    CHECK(java_field("r1", jf1, sizeof jf1) == 0, "whoami");
    CHECK(java_field("r2", jf2, sizeof jf2) == 0, "whoami");
    CHECK(java_field("w1", jw, sizeof jw) == 0, "whoami");
    rw_timeout_key(n, jf1, 1, k[0], sizeof k[0]);
    rw_timeout_key(n, cf, 1, k[1], sizeof k[1]);
    rw_timeout_key(n, cf, 2, k[2], sizeof k[2]);
    rw_timeout_key(n, jf2, 1, k[3], sizeof k[3]);

    JOK(&r, "r1", "lock read:%s 60000", n);
    CHECK_HFIELD(n, "mode", "read");
    CHECK_HFIELD(n, jf1, "1");
    CHECK_RANGE(r_int("PTTL %s", k[0]), 1, 60000);
    CHECK_ST(rlock_lock(rd, RLOCK_WATCHDOG), RLOCK_OK);
    CHECK_HFIELD(n, cf, "1");
    CHECK_RANGE(r_int("PTTL %s", k[1]), 1, CWD);
    CHECK_ST(rlock_lock(rd, RLOCK_WATCHDOG), RLOCK_OK);
    CHECK_HFIELD(n, cf, "2");
    CHECK_RANGE(r_int("PTTL %s", k[2]), 1, CWD);
    JOK(&r, "r2", "lock read:%s 60000", n);
    CHECK_HFIELD(n, jf2, "1");
    CHECK_RANGE(r_int("PTTL %s", k[3]), 1, 60000);
    CHECK_INT(r_int("HLEN %s", n), 4);
    CHECK_RANGE(r_int("PTTL %s", n), 60000 - tms(1000), 60000);

    /* Both sides see a read lock and no write lock. */
    JOK(&r, "r1", "locked read:%s", n);
    CHECK_STR(r.text, "true");
    JOK(&r, "r1", "locked write:%s", n);
    CHECK_STR(r.text, "false");
    CHECK_ST(rlock_is_locked(rd, &b), RLOCK_OK);
    CHECK(b, "rlock_is_locked(read): expected true");
    CHECK_ST(rlock_is_locked(wr, &b), RLOCK_OK);
    CHECK(!b, "rlock_is_locked(write): expected false");
    CHECK_ST(rlock_hold_count(rd, &count), RLOCK_OK);
    CHECK_INT(count, 2);
    JOK(&r, "r1", "count read:%s", n);
    CHECK_INT(reply_word(&r, 0), 1);

    /* A writer of either side is kept out, and writes nothing. */
    JOK(&r, "w1", "trylock write:%s 0 -1", n);
    CHECK(strncmp(r.text, "false ", 6) == 0, "Java write tryLock: expected false, got %s", r.text);
    struct cworker *w = cw_new();
    CHECK(w != NULL, "cw_new");
    cw_post(w, wr, COP_TRYLOCK, 0, RLOCK_WATCHDOG);
    CHECK_ST(cw_wait(w, tms(5000)), RLOCK_EBUSY);
    cw_stop(w);
    CHECK_INT(r_int("HLEN %s", n), 4);
    CHECK_HFIELD(n, "mode", "read");

    /* Unwind: each unlock drops its own timeout key. */
    CHECK_ST(rlock_unlock(rd), RLOCK_OK);
    CHECK_HFIELD(n, cf, "1");
    CHECK_INT(r_int("EXISTS %s", k[2]), 0);
    CHECK_RANGE(r_int("PTTL %s", k[1]), 1, CWD);
    CHECK_ST(rlock_unlock(rd), RLOCK_OK);
    CHECK_INT(r_int("HEXISTS %s %s", n, cf), 0);
    CHECK_INT(r_int("EXISTS %s", k[1]), 0);
    JOK(&r, "r1", "unlock read:%s", n);
    CHECK_INT(r_int("EXISTS %s", k[0]), 0);
    CHECK_INT(r_int("HLEN %s", n), 2);
    JOK(&r, "r2", "unlock read:%s", n);
    CHECK_INT(r_int("EXISTS %s %s", n, k[3]), 0);
    CHECK_ST(rlock_unlock(rd), RLOCK_ENOTOWNER);
    rlock_free(rd);
    rlock_free(wr);
    return 0;
}

struct rw_ctx {
    char n[128], ch[KSZ];
    char cf1[160], cf2[160], jr[160], jw[160]; /* C c1, C c2, Java r1, Java w1 */
    char cw_write[KSZ], jw_write[KSZ];         /* the writers' fields */
    struct cworker *c1, *c2;
    struct sub *sub;
    rlock *rd, *wr;
};

static int rw_begin(struct rw_ctx *x, const char *test)
{
    memset(x, 0, sizeof *x);
    x->c1 = cw_new();
    x->c2 = cw_new();
    CHECK(x->c1 && x->c2, "cw_new");
    c_field(x->c1->tid, x->cf1, sizeof x->cf1);
    c_field(x->c2->tid, x->cf2, sizeof x->cf2);
    CHECK(java_field("r1", x->jr, sizeof x->jr) == 0, "whoami");
    CHECK(java_field("w1", x->jw, sizeof x->jw) == 0, "whoami");
    snprintf(x->cw_write, sizeof x->cw_write, "%s:write", x->cf2);
    snprintf(x->jw_write, sizeof x->jw_write, "%s:write", x->jw);
    new_name(x->n, sizeof x->n, test);
    rw_channel(x->n, x->ch, sizeof x->ch);
    CHECK((x->sub = sub_new(x->ch)) != NULL, "PSUBSCRIBE %s", x->ch);
    CHECK_ST(rlock_new_read(C, x->n, &x->rd), RLOCK_OK);
    CHECK_ST(rlock_new_write(C, x->n, &x->wr), RLOCK_OK);
    return 0;
}

static void rw_end(struct rw_ctx *x)
{
    sub_free(x->sub);
    rlock_free(x->rd);
    rlock_free(x->wr);
    cw_stop(x->c1);
    cw_stop(x->c2);
}

/* Exactly one message since mark, payload on the lock's channel. */
static int rw_one_message(struct rw_ctx *x, long mark, const char *payload)
{
    CHECK(mark >= 0 && sub_mark(x->sub) >= 0, "subscriber marker");
    int all = sub_count(x->sub, (size_t)mark, NULL, NULL);
    int want = sub_count(x->sub, (size_t)mark, x->ch, payload);
    if (all != 1 || want != 1) {
        struct submsg m;
        for (size_t k = (size_t)mark; sub_get(x->sub, k, &m) == 0; k++) {
            printf("    message on %s: %s\n", m.channel, m.payload);
        }
        CHECK(false, "expected one \"%s\" on %s, got %d messages", payload, x->ch, all);
    }
    return 0;
}

/* A writer of one side holds; a C reader (c1) and a Java reader (r1) wait;
 * the write unlock publishes one "1" and both get in within 1 s. */
static int rw_readers_wait_on_writer(bool java_writer)
{
    struct rw_ctx x;
    struct reply r;
    if (rw_begin(&x, java_writer ? "rw_wake_jw" : "rw_wake_cw") != 0) {
        return -1;
    }
    const char *n = x.n;
    if (java_writer) {
        JOK(&r, "w1", "lock write:%s 60000", n);
        CHECK_HFIELD(n, x.jw_write, "1");
    } else {
        cw_post(x.c2, x.wr, COP_LOCK, 60000, 0);
        CHECK_ST(cw_wait(x.c2, tms(5000)), RLOCK_OK);
        CHECK_HFIELD(n, x.cw_write, "1");
    }
    CHECK_HFIELD(n, "mode", "write");
    cw_post(x.c1, x.rd, COP_LOCK, RLOCK_WATCHDOG, 0);
    unsigned tag = agent_send(&J, "r1", "lock read:%s -1", n);
    CHECK(wait_numsub(x.ch, 2) == 0, "readers never subscribed to %s", x.ch);
    sleep_ms(20);
    CHECK(!cw_idle(x.c1) && !agent_done(&J, tag), "a reader got in during the write hold");
    long mark = sub_mark(x.sub);
    int64_t t0;
    if (java_writer) {
        JOK(&r, "w1", "unlock write:%s", n);
        t0 = reply_word(&r, 0);
    } else {
        cw_post(x.c2, x.wr, COP_UNLOCK, 0, 0);
        CHECK_ST(cw_wait(x.c2, tms(5000)), RLOCK_OK);
        t0 = x.c2->t_called;
    }
    CHECK_ST(cw_wait(x.c1, tms(2000)), RLOCK_OK);
    CHECK(jwait(tag, &r) == 0, "Java reader not woken");
    if (java_writer) {
        CHECK_WAKE("rw: Redisson write unlock -> rlock reader", t0, x.c1->t_returned);
        CHECK_WAKE("rw: Redisson write unlock -> Redisson reader", t0, reply_word(&r, 1));
    } else {
        CHECK_WAKE("rw: rlock write unlock -> Redisson reader", t0, reply_word(&r, 1));
        CHECK_WAKE("rw: rlock write unlock -> rlock reader", t0, x.c1->t_returned);
    }
    if (rw_one_message(&x, mark, "1") != 0) {
        return -1;
    }
    CHECK_HFIELD(n, "mode", "read");
    CHECK_HFIELD(n, x.cf1, "1");
    CHECK_HFIELD(n, x.jr, "1");
    CHECK_INT(r_int("HLEN %s", n), 3);
    /* The first reader out leaves the lock to the other, silently; the
     * last publishes "0". */
    mark = sub_mark(x.sub);
    cw_post(x.c1, x.rd, COP_UNLOCK, 0, 0);
    CHECK_ST(cw_wait(x.c1, tms(5000)), RLOCK_OK);
    CHECK(sub_mark(x.sub) >= 0, "subscriber marker");
    CHECK_INT(sub_count(x.sub, (size_t)mark, NULL, NULL), 0);
    JOK(&r, "r1", "unlock read:%s", n);
    if (rw_one_message(&x, mark, "0") != 0) {
        return -1;
    }
    CHECK_INT(r_int("EXISTS %s", n), 0);
    rw_end(&x);
    return 0;
}

/* A reader of one side holds, a writer of the other waits; the read
 * unlock publishes one "0" and the writer gets in within 1 s; its unlock
 * publishes "1". */
static int rw_writer_waits_on_reader(bool java_reader)
{
    struct rw_ctx x;
    struct reply r;
    if (rw_begin(&x, java_reader ? "rw_wake_jr" : "rw_wake_cr") != 0) {
        return -1;
    }
    const char *n = x.n;
    unsigned tag = 0;
    if (java_reader) {
        JOK(&r, "r1", "lock read:%s 60000", n);
        cw_post(x.c2, x.wr, COP_LOCK, RLOCK_WATCHDOG, 0);
    } else {
        cw_post(x.c1, x.rd, COP_LOCK, 60000, 0);
        CHECK_ST(cw_wait(x.c1, tms(5000)), RLOCK_OK);
        tag = agent_send(&J, "w1", "lock write:%s -1", n);
    }
    CHECK(wait_numsub(x.ch, 1) == 0, "the writer never subscribed to %s", x.ch);
    sleep_ms(20);
    CHECK(java_reader ? !cw_idle(x.c2) : !agent_done(&J, tag), "the writer got in during a read");
    CHECK_HFIELD(n, "mode", "read");
    long mark = sub_mark(x.sub);
    int64_t t0;
    if (java_reader) {
        JOK(&r, "r1", "unlock read:%s", n);
        t0 = reply_word(&r, 0);
        CHECK_ST(cw_wait(x.c2, tms(2000)), RLOCK_OK);
        CHECK_WAKE("rw: Redisson read unlock -> rlock writer", t0, x.c2->t_returned);
    } else {
        cw_post(x.c1, x.rd, COP_UNLOCK, 0, 0);
        CHECK_ST(cw_wait(x.c1, tms(5000)), RLOCK_OK);
        t0 = x.c1->t_called;
        CHECK(jwait(tag, &r) == 0, "Java writer not woken");
        CHECK_WAKE("rw: rlock read unlock -> Redisson writer", t0, reply_word(&r, 1));
    }
    if (rw_one_message(&x, mark, "0") != 0) {
        return -1;
    }
    CHECK_HFIELD(n, "mode", "write");
    CHECK_HFIELD(n, java_reader ? x.cw_write : x.jw_write, "1");
    CHECK_INT(r_int("HLEN %s", n), 2);
    mark = sub_mark(x.sub);
    if (java_reader) {
        cw_post(x.c2, x.wr, COP_UNLOCK, 0, 0);
        CHECK_ST(cw_wait(x.c2, tms(5000)), RLOCK_OK);
    } else {
        JOK(&r, "w1", "unlock write:%s", n);
    }
    if (rw_one_message(&x, mark, "1") != 0) {
        return -1;
    }
    CHECK_INT(r_int("EXISTS %s", n), 0);
    rw_end(&x);
    return 0;
}

/* Wake-ups across languages within 1 s, each way: readers of both sides
 * waiting on a writer of either side, a writer of either side waiting on
 * the other side's reader. */
int t_rw_wake(void)
{
    for (int round = 0; round < 2; round++) {
        CHECK(rw_readers_wait_on_writer(true) == 0, "readers waiting on a Redisson writer");
        CHECK(rw_readers_wait_on_writer(false) == 0, "readers waiting on an rlock writer");
        CHECK(rw_writer_waits_on_reader(true) == 0, "rlock writer waiting on a Redisson reader");
        CHECK(rw_writer_waits_on_reader(false) == 0, "Redisson writer waiting on an rlock reader");
    }
    return 0;
}

/* Force unlock from either side, of either half: the write half's
 * publishes "1", the read half's "0"; the waiter of the other side gets
 * in; the old holder's unlock fails on its side; a half that is not held
 * is not forced. */
int t_rw_force(void)
{
    struct rw_ctx x;
    struct reply r;
    bool was;
    if (rw_begin(&x, "rw_force") != 0) {
        return -1;
    }
    const char *n = x.n;
    long mark;
    int64_t t0;
    unsigned tag;

    /* 1. Java writes, a C reader waits, C forces the write half. */
    JOK(&r, "w1", "lock write:%s 60000", n);
    cw_post(x.c1, x.rd, COP_LOCK, RLOCK_WATCHDOG, 0);
    CHECK(wait_numsub(x.ch, 1) == 0, "the C reader never subscribed");
    /* a read handle does not force a write hold */
    CHECK_ST(rlock_force_unlock(x.rd, &was), RLOCK_OK);
    CHECK(!was, "rlock_force_unlock(read) forced a write hold");
    CHECK_HFIELD(n, x.jw_write, "1");
    mark = sub_mark(x.sub);
    t0 = now_us();
    CHECK_ST(rlock_force_unlock(x.wr, &was), RLOCK_OK);
    CHECK(was, "rlock_force_unlock(write): was_locked false");
    CHECK_ST(cw_wait(x.c1, tms(2000)), RLOCK_OK);
    CHECK_WAKE("rw: rlock_force_unlock(write) -> rlock reader", t0, x.c1->t_returned);
    if (rw_one_message(&x, mark, "1") != 0) {
        return -1;
    }
    CHECK_HFIELD(n, "mode", "read");
    CHECK(agent_call(&J, &r, "w1", "unlock write:%s", n) == 0, "agent call");
    CHECK_JERR(r, "IllegalMonitorStateException");

    /* 2. C reads (c1 still holds), a Java writer waits, Java forces the
     * read half. */
    tag = agent_send(&J, "w1", "lock write:%s -1", n);
    sleep_ms(tms(50));
    JOK(&r, "f1", "force write:%s", n);
    CHECK(strncmp(r.text, "false ", 6) == 0, "Java write forceUnlock of a read: %s", r.text);
    CHECK_HFIELD(n, x.cf1, "1");
    mark = sub_mark(x.sub);
    JOK(&r, "f1", "force read:%s", n);
    CHECK(strncmp(r.text, "true ", 5) == 0, "Java read forceUnlock: expected true, got %s", r.text);
    t0 = reply_word(&r, 1);
    CHECK(jwait(tag, &r) == 0, "Java writer not woken");
    CHECK_WAKE("rw: Redisson forceUnlock(read) -> Redisson writer", t0, reply_word(&r, 1));
    if (rw_one_message(&x, mark, "0") != 0) {
        return -1;
    }
    CHECK_HFIELD(n, "mode", "write");
    CHECK_HFIELD(n, x.jw_write, "1");
    cw_post(x.c1, x.rd, COP_UNLOCK, 0, 0);
    CHECK_ST(cw_wait(x.c1, tms(5000)), RLOCK_ELOST);
    CHECK_HFIELD(n, x.jw_write, "1");
    JOK(&r, "w1", "unlock write:%s", n);
    CHECK_INT(r_int("EXISTS %s", n), 0);

    /* 3. C writes, a Java reader waits, Java forces the write half. */
    cw_post(x.c2, x.wr, COP_LOCK, 60000, 0);
    CHECK_ST(cw_wait(x.c2, tms(5000)), RLOCK_OK);
    tag = agent_send(&J, "r1", "lock read:%s -1", n);
    CHECK(wait_numsub(x.ch, 1) == 0, "the Java reader never subscribed");
    mark = sub_mark(x.sub);
    JOK(&r, "f1", "force write:%s", n);
    CHECK(strncmp(r.text, "true ", 5) == 0, "Java write forceUnlock: expected true, got %s",
          r.text);
    t0 = reply_word(&r, 1);
    CHECK(jwait(tag, &r) == 0, "Java reader not woken");
    CHECK_WAKE("rw: Redisson forceUnlock(write) -> Redisson reader", t0, reply_word(&r, 1));
    if (rw_one_message(&x, mark, "1") != 0) {
        return -1;
    }
    cw_post(x.c2, x.wr, COP_UNLOCK, 0, 0);
    CHECK_ST(cw_wait(x.c2, tms(5000)), RLOCK_ELOST);
    CHECK_HFIELD(n, "mode", "read");
    CHECK_HFIELD(n, x.jr, "1");

    /* 4. Java reads (r1), a C writer waits, C forces the read half. */
    cw_post(x.c2, x.wr, COP_LOCK, RLOCK_WATCHDOG, 0);
    CHECK(wait_numsub(x.ch, 1) == 0, "the C writer never subscribed");
    CHECK_ST(rlock_force_unlock(x.wr, &was), RLOCK_OK);
    CHECK(!was, "rlock_force_unlock(write) forced a read hold");
    mark = sub_mark(x.sub);
    t0 = now_us();
    CHECK_ST(rlock_force_unlock(x.rd, &was), RLOCK_OK);
    CHECK(was, "rlock_force_unlock(read): was_locked false");
    CHECK_ST(cw_wait(x.c2, tms(2000)), RLOCK_OK);
    CHECK_WAKE("rw: rlock_force_unlock(read) -> rlock writer", t0, x.c2->t_returned);
    if (rw_one_message(&x, mark, "0") != 0) {
        return -1;
    }
    CHECK(agent_call(&J, &r, "r1", "unlock read:%s", n) == 0, "agent call");
    CHECK_JERR(r, "IllegalMonitorStateException");
    CHECK_HFIELD(n, "mode", "write");
    CHECK_HFIELD(n, x.cw_write, "1");
    cw_post(x.c2, x.wr, COP_UNLOCK, 0, 0);
    CHECK_ST(cw_wait(x.c2, tms(5000)), RLOCK_OK);
    CHECK_INT(r_int("EXISTS %s", n), 0);
    rw_end(&x);
    return 0;
}

/* The downgrade (a thread holding the write and the read lock releases
 * the write lock; mode becomes "read"): Redisson publishes nothing (spec
 * §11 item 11), so a reader of either side waits until the lock's TTL
 * runs out; rlock publishes "1" (its documented answer), so a waiting
 * Java reader gets in within 1 s. */
int t_rw_downgrade(void)
{
    struct rw_ctx x;
    struct reply r;
    if (rw_begin(&x, "rw_downgrade") != 0) {
        return -1;
    }
    const char *n = x.n;
    /* rlock: c2 writes then reads; Java r1 waits to read. */
    cw_post(x.c2, x.wr, COP_LOCK, 60000, 0);
    CHECK_ST(cw_wait(x.c2, tms(5000)), RLOCK_OK);
    cw_post(x.c2, x.rd, COP_LOCK, 60000, 0);
    CHECK_ST(cw_wait(x.c2, tms(5000)), RLOCK_OK);
    CHECK_HFIELD(n, x.cw_write, "1");
    CHECK_HFIELD(n, x.cf2, "1");
    unsigned tag = agent_send(&J, "r1", "lock read:%s -1", n);
    CHECK(wait_numsub(x.ch, 1) == 0, "the Java reader never subscribed");
    sleep_ms(20);
    CHECK(!agent_done(&J, tag), "Java read during the write hold");
    long mark = sub_mark(x.sub);
    cw_post(x.c2, x.wr, COP_UNLOCK, 0, 0);
    CHECK_ST(cw_wait(x.c2, tms(5000)), RLOCK_OK);
    CHECK(jwait(tag, &r) == 0, "Java reader not woken by rlock's downgrade");
    CHECK_WAKE("rw: rlock downgrade -> Redisson reader", x.c2->t_called, reply_word(&r, 1));
    if (rw_one_message(&x, mark, "1") != 0) {
        return -1;
    }
    CHECK_HFIELD(n, "mode", "read");
    CHECK_HFIELD(n, x.jr, "1");
    CHECK_INT(r_int("HEXISTS %s %s", n, x.cw_write), 0);
    cw_post(x.c2, x.rd, COP_UNLOCK, 0, 0);
    CHECK_ST(cw_wait(x.c2, tms(5000)), RLOCK_OK);
    JOK(&r, "r1", "unlock read:%s", n);
    CHECK_INT(r_int("EXISTS %s", n), 0);

    /* Redisson: w1 writes (lease L) then reads (its watchdog keeps the
     * read hold); C c1 waits to read; the downgrade publishes nothing and
     * c1 gets in only when it tries again after the TTL its last attempt
     * saw (L). */
    int64_t lease = tms(1500);
    JOK(&r, "w1", "lock write:%s %lld", n, (long long)lease);
    JOK(&r, "w1", "lock read:%s -1", n);
    cw_post(x.c1, x.rd, COP_LOCK, RLOCK_WATCHDOG, 0);
    CHECK(wait_numsub(x.ch, 1) == 0, "the C reader never subscribed");
    sleep_ms(20);
    CHECK(!cw_idle(x.c1), "C read during the write hold");
    mark = sub_mark(x.sub);
    JOK(&r, "w1", "unlock write:%s", n);
    int64_t t0 = reply_word(&r, 0);
    long long ttl = r_int("PTTL %s", n);
    CHECK_HFIELD(n, "mode", "read");
    CHECK_ST(cw_wait(x.c1, lease + tms(1000)), RLOCK_OK);
    double ms = ms_between(t0, x.c1->t_returned);
    CHECK(sub_mark(x.sub) >= 0, "subscriber marker");
    int msgs = sub_count(x.sub, (size_t)mark, NULL, NULL);
    printf("    Redisson %s downgrade: %d messages; the rlock reader got in after %.0f ms "
           "(key TTL %lld ms)\n",
           VERSION, msgs, ms, ttl);
    CHECK_INT(msgs, 0);
    CHECK(ms >= (double)lease / 2, "rlock reader got in %.0f ms after a silent downgrade", ms);
    CHECK_HFIELD(n, x.cf1, "1");
    JOK(&r, "w1", "unlock read:%s", n);
    cw_post(x.c1, x.rd, COP_UNLOCK, 0, 0);
    CHECK_ST(cw_wait(x.c1, tms(5000)), RLOCK_OK);
    CHECK_INT(r_int("EXISTS %s", n), 0);
    rw_end(&x);
    return 0;
}

/* Whose read holds each side's watchdog renews: only its own (rlock, and
 * Redisson since 4.4); Redisson before 4.4 renews every reader's timeout
 * keys, so it keeps an rlock reader whose lease ran out alive (spec §11
 * item 26). And Redisson 3.44-3.52's read renewal fails with a Lua error
 * once any reader of the name has re-entered (an rlock reader here), so
 * its own readers stop being renewed; fixed in 4.0. Its Java readers run
 * on a Redisson client of their own: on 3.44-3.52 one failing read lock
 * stops the renewal of every read lock of a client, other tests' too. */
int t_rw_renewal(void)
{
    struct cworker *c1 = cw_new(), *c2 = cw_new();
    struct reply r;
    char a[128], c[128], b[128], cf1[160], cf2[160], jf1[160], jf2[160];
    char ka_c[KSZ], ka_j[KSZ], kc_c[KSZ], kc_j[KSZ], kb_c1[KSZ], kb_c2[KSZ], kb_j[KSZ];
    rlock *la, *lc, *lb;
    int64_t lease = tms(600);
    CHECK(c1 && c2, "cw_new");
    c_field(c1->tid, cf1, sizeof cf1);
    c_field(c2->tid, cf2, sizeof cf2);
    CHECK(java_field("rwren.r1", jf1, sizeof jf1) == 0, "whoami");
    CHECK(java_field("rwren.r2", jf2, sizeof jf2) == 0, "whoami");
    new_name(a, sizeof a, "rw_renewal_a");
    new_name(c, sizeof c, "rw_renewal_c");
    new_name(b, sizeof b, "rw_renewal_b");
    rw_timeout_key(a, cf1, 1, ka_c, sizeof ka_c);
    rw_timeout_key(a, jf1, 1, ka_j, sizeof ka_j);
    rw_timeout_key(c, cf2, 1, kc_c, sizeof kc_c);
    rw_timeout_key(c, jf2, 1, kc_j, sizeof kc_j);
    CHECK_ST(rlock_new_read(C, a, &la), RLOCK_OK);
    CHECK_ST(rlock_new_read(C, c, &lc), RLOCK_OK);
    CHECK_ST(rlock_new_read(C, b, &lb), RLOCK_OK);

    /* a: a Java reader renewed by its watchdog, a C reader with a lease.
     * c: a C reader renewed by its watchdog, a Java reader with a lease. */
    JOK(&r, "rwren.r1", "lock read:%s -1", a);
    cw_post(c1, la, COP_LOCK, lease, 0);
    CHECK_ST(cw_wait(c1, tms(5000)), RLOCK_OK);
    cw_post(c2, lc, COP_LOCK, RLOCK_WATCHDOG, 0);
    CHECK_ST(cw_wait(c2, tms(5000)), RLOCK_OK);
    JOK(&r, "rwren.r2", "lock read:%s %lld", c, (long long)lease);
    sleep_ms(lease + tms(500));
    /* rlock renews its own reader only: the Java reader's key is gone,
     * the lock is alive for rlock's reader. */
    CHECK_INT(r_int("EXISTS %s", kc_j), 0);
    CHECK_RANGE(r_int("PTTL %s", kc_c), 1, CWD);
    CHECK_RANGE(r_int("PTTL %s", c), 1, CWD);
    /* Redisson: its own reader's key is alive... */
    CHECK_RANGE(r_int("PTTL %s", ka_j), 1, JWD);
    CHECK_RANGE(r_int("PTTL %s", a), 1, JWD);
    /* ...and rlock's, whose lease ran out, only before 4.4. */
    long long foreign = r_int("PTTL %s", ka_c);
    if (version_at_least(VERSION, 4, 4)) {
        CHECK_INT(foreign, -2);
    } else {
        printf("    Redisson %s renews other clients' readers (fixed in 4.4): rlock's "
               "expired reader's timeout key still has %lld ms\n",
               VERSION, foreign);
        CHECK_RANGE(foreign, 1, JWD);
    }
    rlock_status st;
    cw_post(c1, la, COP_UNLOCK, 0, 0);
    st = (rlock_status)cw_wait(c1, tms(5000));
    CHECK(st == RLOCK_ELOST || st == RLOCK_OK, "unlock of a read hold past its lease: %s",
          rlock_status_name(st));
    JOK(&r, "rwren.r1", "unlock read:%s", a);
    cw_post(c2, lc, COP_UNLOCK, 0, 0);
    CHECK_ST(cw_wait(c2, tms(5000)), RLOCK_OK);
    /* r2's lease ran out; Redisson's unlock of it is refused or not */
    CHECK(agent_call(&J, &r, "rwren.r2", "unlock read:%s", c) == 0, "agent call");
    CHECK_INT(r_int("EXISTS %s %s %s", c, kc_c, kc_j), 0);

    /* b: rlock's reader re-entered (count 2), then a Java reader, both
     * renewed by their watchdogs, for 1.5 Java leases. The order matters
     * on 3.44-3.52: their script walks the hash's fields in order and
     * fails at the first re-entered one, before it reaches Java's. */
    rw_timeout_key(b, cf1, 1, kb_c1, sizeof kb_c1);
    rw_timeout_key(b, cf1, 2, kb_c2, sizeof kb_c2);
    rw_timeout_key(b, jf1, 1, kb_j, sizeof kb_j);
    cw_post(c1, lb, COP_LOCK, RLOCK_WATCHDOG, 0);
    CHECK_ST(cw_wait(c1, tms(5000)), RLOCK_OK);
    cw_post(c1, lb, COP_LOCK, RLOCK_WATCHDOG, 0);
    CHECK_ST(cw_wait(c1, tms(5000)), RLOCK_OK);
    JOK(&r, "rwren.r1", "lock read:%s -1", b);
    sleep_ms(JWD * 3 / 2);
    /* (before 4.4 Redisson renews rlock's keys too, to its own lease) */
    CHECK_RANGE(r_int("PTTL %s", kb_c1), 1, JWD);
    CHECK_RANGE(r_int("PTTL %s", kb_c2), 1, JWD);
    long long own = r_int("PTTL %s", kb_j);
    bool broken = version_at_least(VERSION, 3, 44) && !version_at_least(VERSION, 4, 0);
    if (broken) {
        printf("    Redisson %s: its read renewal fails (Lua error) while a reader of the "
               "name has re-entered, so its own reader's timeout key expired (%lld; fixed in "
               "4.0)\n",
               VERSION, own);
        CHECK_INT(own, -2);
    } else {
        CHECK_RANGE(own, 1, JWD);
    }
    CHECK(agent_call(&J, &r, "rwren.r1", "unlock read:%s", b) == 0, "agent call");
    for (int i = 0; i < 2; i++) {
        cw_post(c1, lb, COP_UNLOCK, 0, 0);
        CHECK_ST(cw_wait(c1, tms(5000)), RLOCK_OK);
    }
    CHECK_INT(r_int("EXISTS %s %s %s %s", b, kb_c1, kb_c2, kb_j), 0);
    JOK(&r, "rwren.r1", "shutdown");
    rlock_free(la);
    rlock_free(lc);
    rlock_free(lb);
    cw_stop(c1);
    cw_stop(c2);
    return 0;
}

/* Redisson 3.44-3.52's batched read renewal builds every lock's timeout
 * key names from the first lock's name in the batch (its inner loop's
 * variable shadows the outer one), so of a client's read holds on two
 * names only one keeps its timeout key alive; the other's expires after
 * one lease although its field stays. An rlock reader's (or any) read
 * unlock then counts that Java reader as gone. Fixed in 4.0. Before 3.44
 * each lock is renewed by its own call. On a Redisson client of its own,
 * whose batch holds exactly these two locks. */
int t_rw_renewal_batch(void)
{
    struct reply r;
    char n[2][128], jf[160], k[2][KSZ];
    CHECK(java_field("rwbatch.r1", jf, sizeof jf) == 0, "whoami");
    for (int i = 0; i < 2; i++) {
        new_name(n[i], sizeof n[i], "rw_renewal_batch");
        rw_timeout_key(n[i], jf, 1, k[i], sizeof k[i]);
        JOK(&r, "rwbatch.r1", "lock read:%s -1", n[i]);
    }
    sleep_ms(JWD * 3 / 2);
    int alive = 0;
    long long ttl[2];
    for (int i = 0; i < 2; i++) {
        ttl[i] = r_int("PTTL %s", k[i]);
        alive += ttl[i] > 0;
        CHECK_RANGE(r_int("PTTL %s", n[i]), 1, JWD); /* the names themselves are renewed */
        CHECK_HFIELD(n[i], jf, "1");
    }
    if (version_at_least(VERSION, 3, 44) && !version_at_least(VERSION, 4, 0)) {
        printf("    Redisson %s renews the second read lock's timeout key under the first "
               "lock's name (fixed in 4.0): PTTLs %lld and %lld\n",
               VERSION, ttl[0], ttl[1]);
        CHECK_INT(alive, 1);
    } else {
        CHECK_INT(alive, 2);
    }
    for (int i = 0; i < 2; i++) {
        JOK(&r, "rwbatch.r1", "unlock read:%s", n[i]);
        CHECK_INT(r_int("EXISTS %s", n[i]), 0);
    }
    JOK(&r, "rwbatch.r1", "shutdown");
    return 0;
}

/* ---- fenced lock ---------------------------------------------------- */

static long long token_key(const char *name)
{
    char k[KSZ];
    key_of("redisson_lock_token", name, k, sizeof k);
    char *v = r_str("GET %s", k);
    long long t = v ? atoll(v) : -1;
    free(v);
    return t;
}

/* Tokens strictly increase across both clients: C and Java take turns
 * (re-entries included), each sees the other's token (Java's getToken()
 * and rlock_fence_token_latest() give the newest, whoever took it; the
 * token key holds it); rlock_fence_token() is the holder's own;
 * wake-ups both ways; force unlock either way leaves the token key
 * alone. */
int t_fenced_cross(void)
{
    char n[128], tk[KSZ], cf[160], jf[160];
    struct cworker *w = cw_new();
    struct reply r;
    rlock *l;
    int64_t t;
    bool was;
    CHECK(w != NULL, "cw_new");
    new_name(n, sizeof n, "fenced_cross");
    key_of("redisson_lock_token", n, tk, sizeof tk);
    CHECK_ST(rlock_new_fenced(C, n, &l), RLOCK_OK);
    CHECK_STR(rlock_kind(l), "fenced");
    c_field(rlock_thread_id(), cf, sizeof cf);
    CHECK(java_field("t1", jf, sizeof jf) == 0, "whoami");

    /* No token yet: Java's getToken() and rlock_fence_token_latest() say
     * 0 for the missing key (item 26: Redisson's answer, which rlock
     * keeps); the thread holds nothing, so it has no token of its own. */
    JOK(&r, "t1", "gettoken fenced:%s", n);
    CHECK_STR(r.text, "0");
    CHECK_ST(rlock_fence_token_latest(l, &t), RLOCK_OK);
    CHECK_INT(t, 0);
    CHECK_ST(rlock_fence_token(l, &t), RLOCK_ENOTOWNER);

    long long last = 0;
    for (int round = 0; round < 6; round++) {
        bool c_turn = round % 2 == 0;
        int depth = round >= 2 && round < 4 ? 2 : 1; /* rounds 2, 3 re-enter */
        for (int d = 0; d < depth; d++) {
            if (c_turn) {
                CHECK_ST(rlock_lock(l, RLOCK_WATCHDOG), RLOCK_OK);
                CHECK_ST(rlock_fence_token(l, &t), RLOCK_OK);
            } else {
                JOK(&r, "t1", "locktoken fenced:%s -1", n);
                t = reply_word(&r, 0);
            }
            CHECK_INT(t, last + 1);
            last = t;
            CHECK_INT(token_key(n), t);
            /* each side reads the newest token, whoever took it */
            JOK(&r, "t2", "gettoken fenced:%s", n);
            CHECK_INT(reply_word(&r, 0), t);
            int64_t latest = -1;
            CHECK_ST(rlock_fence_token_latest(l, &latest), RLOCK_OK);
            CHECK_INT(latest, t);
            CHECK_HOLD(n, c_turn ? cf : jf, d + 1);
        }
        /* The other side is kept out, and its attempt takes no token. */
        if (c_turn) {
            JOK(&r, "t2", "trytoken fenced:%s 0 -1", n);
            CHECK(strncmp(r.text, "null ", 5) == 0, "Java tryLockAndGetToken(): %s", r.text);
        } else {
            CHECK_ST(rlock_try_lock(l, 0, RLOCK_WATCHDOG), RLOCK_EBUSY);
            CHECK_ST(rlock_fence_token(l, &t), RLOCK_ENOTOWNER);
        }
        CHECK_INT(token_key(n), last);
        for (int d = 0; d < depth; d++) {
            if (c_turn) {
                CHECK_ST(rlock_unlock(l), RLOCK_OK);
            } else {
                JOK(&r, "t1", "unlock fenced:%s", n);
            }
        }
        CHECK_INT(r_int("EXISTS %s", n), 0);
    }
    CHECK_INT(r_int("PTTL %s", tk), -1); /* the token key never expires */

    /* Wake-ups: C waits on Java, then Java waits on C. */
    JOK(&r, "t1", "lock fenced:%s 60000", n);
    CHECK_INT(token_key(n), ++last); /* a plain lock() takes a token too */
    cw_post(w, l, COP_LOCK, RLOCK_WATCHDOG, 0);
    CHECK(wait_subscribers(n, 1) == 0, "rlock waiter never subscribed");
    sleep_ms(20);
    CHECK(!cw_idle(w), "rlock acquired during Redisson's hold");
    JOK(&r, "t1", "unlock fenced:%s", n);
    CHECK_ST(cw_wait(w, tms(2000)), RLOCK_OK);
    CHECK_WAKE("fenced: Redisson unlock -> rlock acquires", reply_word(&r, 0), w->t_returned);
    cw_post(w, l, COP_TOKEN, 0, 0);
    CHECK_ST(cw_wait(w, tms(5000)), RLOCK_OK);
    CHECK_INT(w->value, ++last);
    unsigned tag = agent_send(&J, "t1", "locktoken fenced:%s -1", n);
    CHECK(wait_subscribers(n, 1) == 0, "Redisson waiter never subscribed");
    sleep_ms(20);
    CHECK(!agent_done(&J, tag), "Redisson acquired during rlock's hold");
    cw_post(w, l, COP_UNLOCK, 0, 0);
    CHECK_ST(cw_wait(w, tms(5000)), RLOCK_OK);
    CHECK(jwait(tag, &r) == 0, "Redisson waiter not woken");
    CHECK_WAKE("fenced: rlock unlock -> Redisson acquires", w->t_called, reply_word(&r, 2));
    CHECK_INT(reply_word(&r, 0), ++last);

    /* Force unlock either way: the token key stays; the next holder's
     * token is the next one. */
    cw_post(w, l, COP_LOCK, RLOCK_WATCHDOG, 0);
    CHECK(wait_subscribers(n, 1) == 0, "rlock waiter never subscribed");
    CHECK_ST(rlock_force_unlock(l, &was), RLOCK_OK);
    CHECK(was, "rlock_force_unlock: was_locked false");
    CHECK_ST(cw_wait(w, tms(2000)), RLOCK_OK);
    CHECK_INT(token_key(n), ++last);
    CHECK(agent_call(&J, &r, "t1", "unlock fenced:%s", n) == 0, "agent call");
    CHECK_JERR(r, "IllegalMonitorStateException");
    tag = agent_send(&J, "t1", "locktoken fenced:%s -1", n);
    CHECK(wait_subscribers(n, 1) == 0, "Redisson waiter never subscribed");
    JOK(&r, "t2", "force fenced:%s", n);
    CHECK(strncmp(r.text, "true ", 5) == 0, "forceUnlock(): expected true, got %s", r.text);
    CHECK(jwait(tag, &r) == 0, "Redisson waiter not woken by forceUnlock");
    CHECK_INT(reply_word(&r, 0), ++last);
    cw_post(w, l, COP_UNLOCK, 0, 0);
    CHECK_ST(cw_wait(w, tms(5000)), RLOCK_ELOST);
    CHECK_HOLD(n, jf, 1);
    JOK(&r, "t1", "unlock fenced:%s", n);
    CHECK_INT(r_int("EXISTS %s", n), 0);
    CHECK_INT(token_key(n), last);
    rlock_free(l);
    cw_stop(w);
    return 0;
}

/* ---- spin lock ------------------------------------------------------ */

/* A Java spin waiter takes the lock a C holder released, and back; force
 * unlock either way; nobody subscribes and nothing is published (a raw
 * subscriber to every channel naming the lock hears nothing). */
int t_spin(void)
{
    char n[128], pat[KSZ], cf[160], jf[160];
    struct cworker *w = cw_new();
    struct reply r;
    struct sub *sub;
    rlock *l;
    bool was;
    CHECK(w != NULL, "cw_new");
    new_name(n, sizeof n, "spin");
    snprintf(pat, sizeof pat, "*%s*", n);
    CHECK((sub = sub_new(pat)) != NULL, "PSUBSCRIBE %s", pat);
    CHECK_ST(rlock_new_spin(C, n, &l), RLOCK_OK);
    CHECK_STR(rlock_kind(l), "spin");
    c_field(w->tid, cf, sizeof cf);
    CHECK(java_field("s1", jf, sizeof jf) == 0, "whoami");
    char ch[KSZ];
    channel_of(n, ch, sizeof ch);

    for (int round = 0; round < 3; round++) {
        /* C holds, Java spins, C unlocks */
        cw_post(w, l, COP_LOCK, 60000, 0);
        CHECK_ST(cw_wait(w, tms(5000)), RLOCK_OK);
        unsigned tag = agent_send(&J, "s1", "lock spin:%s -1", n);
        sleep_ms(tms(150));
        CHECK(!agent_done(&J, tag), "Redisson acquired during rlock's hold");
        CHECK_INT(r_numsub(ch), 0);
        cw_post(w, l, COP_UNLOCK, 0, 0);
        CHECK_ST(cw_wait(w, tms(5000)), RLOCK_OK);
        CHECK(jwait(tag, &r) == 0, "Redisson spin waiter");
        CHECK_WAKE("spin: rlock unlock -> Redisson acquires", w->t_called, reply_word(&r, 1));
        CHECK_HOLD(n, jf, 1);
        /* Java holds, C spins, Java unlocks */
        cw_post(w, l, COP_LOCK, RLOCK_WATCHDOG, 0);
        sleep_ms(tms(150));
        CHECK(!cw_idle(w), "rlock acquired during Redisson's hold");
        CHECK_INT(r_numsub(ch), 0);
        JOK(&r, "s1", "unlock spin:%s", n);
        CHECK_ST(cw_wait(w, tms(2000)), RLOCK_OK);
        CHECK_WAKE("spin: Redisson unlock -> rlock acquires", reply_word(&r, 0), w->t_returned);
        CHECK_HOLD(n, cf, 1);
        cw_post(w, l, COP_UNLOCK, 0, 0);
        CHECK_ST(cw_wait(w, tms(5000)), RLOCK_OK);
        CHECK_INT(r_int("EXISTS %s", n), 0);
    }

    /* Force unlock, each way. */
    JOK(&r, "s1", "lock spin:%s 60000", n);
    cw_post(w, l, COP_LOCK, RLOCK_WATCHDOG, 0);
    sleep_ms(tms(50));
    CHECK_ST(rlock_force_unlock(l, &was), RLOCK_OK);
    CHECK(was, "rlock_force_unlock: was_locked false");
    CHECK_ST(cw_wait(w, tms(2000)), RLOCK_OK);
    CHECK_HOLD(n, cf, 1);
    CHECK(agent_call(&J, &r, "s1", "unlock spin:%s", n) == 0, "agent call");
    CHECK_JERR(r, "IllegalMonitorStateException");
    unsigned tag = agent_send(&J, "s1", "lock spin:%s -1", n);
    sleep_ms(tms(50));
    JOK(&r, "s2", "force spin:%s", n);
    CHECK(strncmp(r.text, "true ", 5) == 0, "forceUnlock(): expected true, got %s", r.text);
    CHECK(jwait(tag, &r) == 0, "Redisson spin waiter after forceUnlock");
    cw_post(w, l, COP_UNLOCK, 0, 0);
    CHECK_ST(cw_wait(w, tms(5000)), RLOCK_ELOST);
    CHECK_HOLD(n, jf, 1);
    JOK(&r, "s1", "unlock spin:%s", n);
    CHECK_INT(r_int("EXISTS %s", n), 0);

    CHECK(sub_mark(sub) >= 0, "subscriber marker");
    if (sub_count(sub, 0, NULL, NULL) != 0) {
        struct submsg m;
        for (size_t k = 0; sub_get(sub, k, &m) == 0; k++) {
            printf("    message on %s: %s\n", m.channel, m.payload);
        }
        CHECK(false, "a spin lock published");
    }
    sub_free(sub);
    rlock_free(l);
    cw_stop(w);
    return 0;
}

/* ---- non-reentrant locks (Redisson 4.4+) ---------------------------- */

/* Whether the agent's Redisson has the kind; on those that have not, the
 * agent must say "Unsupported" (never pass silently). */
static int java_has(const char *kind, const char *n, bool *has)
{
    struct reply r;
    CHECK(agent_call(&J, &r, "x1", "locked %s:%s", kind, n) == 0, "agent call");
    *has = r.ok;
    if (version_at_least(VERSION, 4, 4)) {
        CHECK(r.ok, "Redisson %s has no %s lock: %s", VERSION, kind, r.text);
        CHECK_STR(r.text, "false");
    } else {
        CHECK_JERR(r, "Unsupported");
    }
    return 0;
}

static int nonreentrant_one(const char *jkind,
                            rlock_status (*ctor)(rlock_client *, const char *, rlock **))
{
    char n[128], cf[160], jf[160], q[KSZ];
    struct cworker *w = cw_new();
    struct reply r;
    rlock *l;
    bool has;
    CHECK(w != NULL, "cw_new");
    new_name(n, sizeof n, jkind);
    key_of("redisson_lock_queue", n, q, sizeof q);
    if (java_has(jkind, n, &has) != 0) {
        return -1;
    }
    if (!has) {
        printf("    Redisson %s has no %s lock (4.4+): agent says Unsupported\n", VERSION, jkind);
        cw_stop(w);
        return 0;
    }
    CHECK_ST(ctor(C, n, &l), RLOCK_OK);
    c_field(w->tid, cf, sizeof cf);
    CHECK(java_field("x1", jf, sizeof jf) == 0, "whoami");

    /* C holds: Java is kept out; C's own second lock is RLOCK_EDEADLK at
     * once and changes nothing. */
    cw_post(w, l, COP_LOCK, 60000, 0);
    CHECK_ST(cw_wait(w, tms(5000)), RLOCK_OK);
    CHECK_HOLD(n, cf, 1);
    JOK(&r, "x1", "trylock %s:%s 0 -1", jkind, n);
    CHECK(strncmp(r.text, "false ", 6) == 0, "Java tryLock: expected false, got %s", r.text);
    cw_post(w, l, COP_LOCK, RLOCK_WATCHDOG, 0);
    CHECK_ST(cw_wait(w, tms(2000)), RLOCK_EDEADLK);
    CHECK((w->t_returned - w->t_called) < tms(500) * 1000, "RLOCK_EDEADLK after %.0f ms",
          (double)(w->t_returned - w->t_called) / 1000.0);
    CHECK_HOLD(n, cf, 1);
    CHECK_RANGE(r_int("PTTL %s", n), 60000 - tms(2000), 60000);
    CHECK_INT(r_int("LLEN %s", q), 0);
    /* Java waits; C unlocks; Java gets it and cannot take it again. */
    unsigned tag = agent_send(&J, "x1", "lock %s:%s -1", jkind, n);
    sleep_ms(tms(50));
    CHECK(!agent_done(&J, tag), "Redisson acquired during rlock's hold");
    cw_post(w, l, COP_UNLOCK, 0, 0);
    CHECK_ST(cw_wait(w, tms(5000)), RLOCK_OK);
    CHECK(jwait(tag, &r) == 0, "Redisson waiter");
    CHECK_WAKE("non-reentrant: rlock unlock -> Redisson acquires", w->t_called, reply_word(&r, 1));
    CHECK_HOLD(n, jf, 1);
    CHECK(agent_call(&J, &r, "x1", "lock %s:%s -1", jkind, n) == 0, "agent call");
    CHECK_JERR(r, "IllegalMonitorStateException");
    CHECK_HOLD(n, jf, 1);
    CHECK_INT(r_int("LLEN %s", q), 0);
    cw_post(w, l, COP_TRYLOCK, 0, RLOCK_WATCHDOG);
    CHECK_ST(cw_wait(w, tms(5000)), RLOCK_EBUSY);
    /* C waits; Java unlocks. */
    cw_post(w, l, COP_LOCK, RLOCK_WATCHDOG, 0);
    sleep_ms(tms(50));
    CHECK(!cw_idle(w), "rlock acquired during Redisson's hold");
    JOK(&r, "x1", "unlock %s:%s", jkind, n);
    CHECK_ST(cw_wait(w, tms(2000)), RLOCK_OK);
    CHECK_WAKE("non-reentrant: Redisson unlock -> rlock acquires", reply_word(&r, 0),
               w->t_returned);
    CHECK_HOLD(n, cf, 1);
    /* Java forces C's hold: a Java waiter gets in, C's unlock is
     * RLOCK_ELOST. */
    tag = agent_send(&J, "x1", "lock %s:%s -1", jkind, n);
    sleep_ms(tms(50));
    JOK(&r, "x2", "force %s:%s", jkind, n);
    CHECK(strncmp(r.text, "true ", 5) == 0, "forceUnlock(): expected true, got %s", r.text);
    CHECK(jwait(tag, &r) == 0, "Redisson waiter after forceUnlock");
    CHECK_HOLD(n, jf, 1);
    cw_post(w, l, COP_UNLOCK, 0, 0);
    CHECK_ST(cw_wait(w, tms(5000)), RLOCK_ELOST);
    /* C forces Java's hold. */
    bool was = false;
    CHECK_ST(rlock_force_unlock(l, &was), RLOCK_OK);
    CHECK(was, "rlock_force_unlock: was_locked false");
    CHECK(agent_call(&J, &r, "x1", "unlock %s:%s", jkind, n) == 0, "agent call");
    if (strncmp(jkind, "fair", 4) == 0) {
        /* Redisson's fair unlock of a free lock "succeeds" (spec item 8) */
        CHECK(r.ok, "Java unlock of a free fair lock: %s", r.text);
    } else {
        CHECK_JERR(r, "IllegalMonitorStateException");
    }
    CHECK_INT(r_int("EXISTS %s %s", n, q), 0);
    rlock_free(l);
    cw_stop(w);
    return 0;
}

/* The non-reentrant lock (and below the non-reentrant fair lock): C and
 * Java exclude each other, each side's re-acquire fails at once (Java
 * IllegalMonitorStateException from NON_REENTRANT_REACQUIRE, C
 * RLOCK_EDEADLK), nothing queued or changed; force unlock either way.
 * Redisson 4.4+; older
 * versions must answer Unsupported. */
int t_nonreentrant(void)
{
    return nonreentrant_one("nonreentrant", rlock_new_nonreentrant);
}

int t_fair_nonreentrant(void)
{
    return nonreentrant_one("fairnonreentrant", rlock_new_fair_nonreentrant);
}

/* ---- mixed mutual exclusion, every kind ----------------------------- */

#define KMUTEX_ITERS 20

struct kworker {
    pthread_t th;
    rlock *l;
    int64_t lease;
    const char *key;
    bool shared, fenced;
    int iters, violations, errors;
    int64_t max_wait_us;
    long long max_readers;
};

static long long rc_int(redisContext *rc, const char *fmt, const char *key)
{
    redisReply *r = redisCommand(rc, fmt, key);
    long long v = -1000;
    if (r && r->type == REDIS_REPLY_INTEGER) {
        v = r->integer;
    } else if (r && r->type == REDIS_REPLY_STRING) {
        v = atoll(r->str);
    } else if (r && r->type == REDIS_REPLY_NIL) {
        v = 0;
    }
    if (r) {
        freeReplyObject(r);
    }
    return v;
}

/* The C side of the Java agent's "mutex" command: same keys, same checks. */
static void *kworker_main(void *arg)
{
    struct kworker *m = arg;
    unsigned seed = (unsigned)now_us();
    redisContext *rc = redisConnect(g_host, g_port);
    char k[KSZ];
    if (!rc || rc->err) {
        m->errors++;
        return NULL;
    }
    for (int i = 0; i < m->iters; i++) {
        int64_t t0 = now_us();
        if (rlock_lock(m->l, m->lease) != RLOCK_OK) {
            m->errors++;
            continue;
        }
        if (now_us() - t0 > m->max_wait_us) {
            m->max_wait_us = now_us() - t0;
        }
        if (m->shared) {
            snprintf(k, sizeof k, "%s:readers", m->key);
            long long rd = rc_int(rc, "INCR %s", k);
            m->max_readers = rd > m->max_readers ? rd : m->max_readers;
            snprintf(k, sizeof k, "%s:inside", m->key);
            m->violations += rc_int(rc, "GET %s", k) != 0;
            sleep_ms(2);
            snprintf(k, sizeof k, "%s:reads", m->key);
            rc_int(rc, "INCR %s", k);
            snprintf(k, sizeof k, "%s:readers", m->key);
            rc_int(rc, "DECR %s", k);
        } else {
            snprintf(k, sizeof k, "%s:inside", m->key);
            m->violations += rc_int(rc, "INCR %s", k) != 1;
            snprintf(k, sizeof k, "%s:readers", m->key);
            m->violations += rc_int(rc, "GET %s", k) != 0;
            if (m->fenced) {
                int64_t tok = 0;
                if (rlock_fence_token(m->l, &tok) != RLOCK_OK) {
                    m->errors++;
                }
                snprintf(k, sizeof k, "%s:lasttoken", m->key);
                m->violations += rc_int(rc, "GET %s", k) >= tok;
                freeReplyObject(redisCommand(rc, "SET %s %lld", k, (long long)tok));
            }
            snprintf(k, sizeof k, "%s:counter", m->key);
            long long v = rc_int(rc, "GET %s", k);
            sleep_ms(1);
            freeReplyObject(redisCommand(rc, "SET %s %lld", k, v + 1));
            snprintf(k, sizeof k, "%s:log", m->key);
            freeReplyObject(redisCommand(rc, "RPUSH %s C", k));
            snprintf(k, sizeof k, "%s:inside", m->key);
            m->violations += rc_int(rc, "DECR %s", k) != 0;
        }
        if (rlock_unlock(m->l) != RLOCK_OK) {
            m->errors++;
        }
        sleep_ms(1 + rand_r(&seed) % 8);
    }
    redisFree(rc);
    return NULL;
}

/* nw writers of each side on (jkind, wctor), and nr readers of each side
 * on the read half when nr > 0, KMUTEX_ITERS critical sections each on
 * one name; Java's and C's leases mixed (watchdog, 5 s). */
static int kind_mutex(const char *test, const char *jkind, ctor_fn wctor, int nw, int nr)
{
    enum { MAXW = 8 };
    static const int64_t leases[3] = {RLOCK_WATCHDOG, 5000, RLOCK_WATCHDOG};
    static struct kworker cm[MAXW]; /* static: threads outlive an early return */
    char n[128], key[160], q[KSZ], tk[KSZ];
    unsigned tags[MAXW];
    rlock *wl = NULL, *rl = NULL;
    int nt = nw + nr;
    bool fenced = strcmp(jkind, "fenced") == 0;
    CHECK(nt <= MAXW, "too many workers");
    new_name(n, sizeof n, test);
    snprintf(key, sizeof key, "%s:data", n);
    key_of("redisson_lock_queue", n, q, sizeof q);
    key_of("redisson_lock_timeout", n, tk, sizeof tk);
    CHECK_ST(wctor(C, n, &wl), RLOCK_OK);
    if (nr > 0) {
        CHECK_ST(rlock_new_read(C, n, &rl), RLOCK_OK);
    }
    for (int i = 0; i < nt; i++) {
        bool reader = i >= nw;
        char wn[16];
        snprintf(wn, sizeof wn, "m%c%d", reader ? 'r' : 'w', i);
        tags[i] = agent_send(&J, wn, "mutex %s:%s %d %lld %s", reader ? "read" : jkind, n,
                             KMUTEX_ITERS, (long long)leases[i % 3], key);
    }
    for (int i = 0; i < nt; i++) {
        bool reader = i >= nw;
        cm[i] = (struct kworker){.l = reader ? rl : wl,
                                 .lease = leases[i % 3],
                                 .key = key,
                                 .shared = reader,
                                 .fenced = fenced && !reader,
                                 .iters = KMUTEX_ITERS};
        CHECK(pthread_create(&cm[i].th, NULL, kworker_main, &cm[i]) == 0, "pthread_create");
    }
    int cviol = 0, cerr = 0;
    int64_t cmax = 0;
    long long readers = 0;
    for (int i = 0; i < nt; i++) {
        pthread_join(cm[i].th, NULL);
        cviol += cm[i].violations;
        cerr += cm[i].errors;
        cmax = cm[i].max_wait_us > cmax ? cm[i].max_wait_us : cmax;
        readers = cm[i].max_readers > readers ? cm[i].max_readers : readers;
    }
    long long jviol = 0, jmax = 0;
    for (int i = 0; i < nt; i++) {
        struct reply r;
        CHECK(agent_wait(&J, tags[i], tms(60000), &r) == 0, "Java mutex worker %d", i);
        CHECK(r.ok, "Java mutex worker %d: %s", i, r.text);
        CHECK_INT(reply_word(&r, 0), KMUTEX_ITERS);
        jviol += reply_word(&r, 1);
        jmax = reply_word(&r, 2) > jmax ? reply_word(&r, 2) : jmax;
        readers = reply_word(&r, 3) > readers ? reply_word(&r, 3) : readers;
    }
    CHECK_INT(cerr, 0);
    CHECK_INT(cviol, 0);
    CHECK_INT(jviol, 0);
    char *counter = r_str("GET %s:counter", key);
    long long total = counter ? atoll(counter) : -1;
    free(counter);
    CHECK_INT(total, 2 * nw * KMUTEX_ITERS);
    CHECK_INT(r_int("LLEN %s:log", key), 2 * nw * KMUTEX_ITERS);
    if (nr > 0) {
        char *reads = r_str("GET %s:reads", key);
        long long nreads = reads ? atoll(reads) : -1;
        free(reads);
        CHECK_INT(nreads, 2 * nr * KMUTEX_ITERS);
        CHECK(readers >= 2, "readers never shared the lock (at most %lld at once)", readers);
    }
    if (fenced) { /* one token per acquisition, each above the one before */
        CHECK_INT(token_key(n), 2 * nw * KMUTEX_ITERS);
    }
    redisReply *lg = redisCommand(R, "LRANGE %s:log 0 -1", key);
    CHECK(lg && lg->type == REDIS_REPLY_ARRAY, "LRANGE");
    int switches = 0;
    for (size_t i = 1; i < lg->elements; i++) {
        switches += strcmp(lg->element[i]->str, lg->element[i - 1]->str) != 0;
    }
    freeReplyObject(lg);
    printf("    %s: %d critical sections, %d hand-overs between Java and C, longest wait: "
           "Java %.0f ms, C %.0f ms%s",
           jkind, 2 * nw * KMUTEX_ITERS, switches, (double)jmax / 1000.0, (double)cmax / 1000.0,
           nr > 0 ? "" : "\n");
    if (nr > 0) {
        printf("; %d reads, at most %lld readers at once\n", 2 * nr * KMUTEX_ITERS, readers);
    }
    CHECK(switches >= 2, "only %d hand-overs between Java and C", switches);
    CHECK(cmax < tms(4000) * 1000, "a C thread waited %.0f ms for one acquisition",
          (double)cmax / 1000.0);
    CHECK(jmax < tms(4000) * 1000, "a Java thread waited %.0f ms for one acquisition",
          (double)jmax / 1000.0);
    CHECK_INT(r_int("EXISTS %s %s %s", n, q, tk), 0);
    rlock_free(wl);
    rlock_free(rl);
    return 0;
}

int t_mutex_fair(void)
{
    return kind_mutex("mutex_fair", "fair", rlock_new_fair, 3, 0);
}

int t_mutex_rw(void)
{
    return kind_mutex("mutex_rw", "write", rlock_new_write, 2, 2);
}

int t_mutex_fenced(void)
{
    return kind_mutex("mutex_fenced", "fenced", rlock_new_fenced, 3, 0);
}

int t_mutex_spin(void)
{
    return kind_mutex("mutex_spin", "spin", rlock_new_spin, 3, 0);
}

static int mutex_4_4(const char *test, const char *jkind, ctor_fn ctor)
{
    if (!version_at_least(VERSION, 4, 4)) {
        char n[128];
        bool has;
        new_name(n, sizeof n, test);
        if (java_has(jkind, n, &has) != 0) {
            return -1;
        }
        printf("    Redisson %s has no %s lock (4.4+): agent says Unsupported\n", VERSION, jkind);
        return 0;
    }
    return kind_mutex(test, jkind, ctor, 2, 0);
}

int t_mutex_nonreentrant(void)
{
    return mutex_4_4("mutex_nonreentrant", "nonreentrant", rlock_new_nonreentrant);
}

int t_mutex_fair_nonreentrant(void)
{
    return mutex_4_4("mutex_fair_nonreentrant", "fairnonreentrant", rlock_new_fair_nonreentrant);
}
