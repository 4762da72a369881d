/*
 * Interop tests of the two sides together over time and on the wire:
 * watchdogs taking turns, mixed mutual exclusion, the unlock latch and
 * batched renewal as MONITOR shows them, the porting guide's Java.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "interop.h"

/* ---- watchdogs taking turns ----------------------------------------- */

struct window {
    bool java;
    int64_t from_us, to_us;
};

/* Java and C hold one name in turn, in watchdog mode, each for 1.5 of its
 * own lease (so each hold survives only by renewal), the next holder
 * already waiting. Java's lease (JWD) and C's (CWD) differ, so MONITOR
 * tells whose renewal each PEXPIRE of the key is: every one must fall
 * inside a hold of its own side, each hold must see several, and the key
 * must never lose its holder. */
int t_watchdog_turns(void)
{
    enum { TURNS = 4 };
    struct cworker *w = cw_new();
    struct reply r;
    struct tap *tap = NULL;
    struct window win[TURNS];
    char n[128], cf[160], jf[2][160];
    rlock *l;
    new_name(n, sizeof n, "watchdog_turns");
    CHECK_ST(rlock_new(C, n, &l), RLOCK_OK);
    CHECK(w != NULL, "cw_new");
    c_field(w->tid, cf, sizeof cf);
    CHECK(java_field("t0", jf[0], sizeof jf[0]) == 0, "whoami");
    CHECK(java_field("t1", jf[1], sizeof jf[1]) == 0, "whoami");
    int lost0 = lost_count();
    CHECK((tap = tap_new()) != NULL, "MONITOR");

    JOK(&r, "t0", "lock %s -1", n);
    win[0] = (struct window){true, reply_word(&r, 0), 0};
    unsigned jtag = 0;
    for (int turn = 0; turn < TURNS; turn++) {
        bool java = turn % 2 == 0;
        const char *jworker = turn % 4 == 0 ? "t0" : "t1";
        /* The next holder starts waiting. */
        if (turn + 1 < TURNS) {
            if (java) {
                cw_post(w, l, COP_LOCK, RLOCK_WATCHDOG, 0);
            } else {
                jtag = agent_send(&J, turn % 4 == 1 ? "t1" : "t0", "lock %s -1", n);
            }
        }
        int64_t lease = java ? JWD : CWD;
        for (int64_t t = 0; t < lease * 3 / 2; t += 50) {
            sleep_ms(50);
            long long pttl = r_int("PTTL %s", n);
            CHECK_RANGE(pttl, 1, lease);
            CHECK_HOLD(n, java ? jf[turn % 4 == 0 ? 0 : 1] : cf, 1);
        }
        if (java) {
            CHECK(turn + 1 >= TURNS || !cw_idle(w), "rlock acquired during Redisson's hold");
            JOK(&r, jworker, "unlock %s", n);
            win[turn].to_us = reply_word(&r, 1);
            if (turn + 1 < TURNS) {
                CHECK_ST(cw_wait(w, tms(2000)), RLOCK_OK);
                win[turn + 1] = (struct window){false, w->t_called, 0};
            }
        } else {
            CHECK(turn + 1 >= TURNS || !agent_done(&J, jtag),
                  "Redisson acquired during rlock's hold");
            cw_post(w, l, COP_UNLOCK, 0, 0);
            CHECK_ST(cw_wait(w, tms(5000)), RLOCK_OK);
            win[turn].to_us = w->t_returned;
            if (turn + 1 < TURNS) {
                CHECK(agent_wait(&J, jtag, tms(2000), &r) == 0 && r.ok, "Redisson lock()");
                win[turn + 1] = (struct window){true, reply_word(&r, 0), 0};
            }
        }
    }
    CHECK(tap_stop(tap) == 0, "MONITOR marker");
    CHECK_INT(r_int("EXISTS %s", n), 0);
    CHECK_INT(lost_count(), lost0);

    int per_turn[TURNS] = {0};
    for (size_t i = 0; i < tap->n; i++) {
        char a[8][160];
        int argc = tap_args(tap->lines[i], a, 8);
        if (argc != 3 || strcasecmp(a[0], "pexpire") != 0 || strcmp(a[1], n) != 0) {
            continue;
        }
        long long v = atoll(a[2]);
        int64_t ts = (int64_t)(atof(tap->lines[i]) * 1e6);
        CHECK(v == JWD || v == CWD, "PEXPIRE %s %lld: neither side's lease", n, v);
        int k = 0;
        while (k < TURNS && !(ts >= win[k].from_us - 1000 && ts <= win[k].to_us + 1000 &&
                              win[k].java == (v == JWD))) {
            k++;
        }
        CHECK(k < TURNS, "PEXPIRE %lld (%s's lease) outside that side's holds: %s", v,
              v == JWD ? "Redisson" : "rlock", tap->lines[i]);
        per_turn[k]++;
    }
    for (int k = 0; k < TURNS; k++) {
        /* the acquire's own PEXPIRE, then at least 3 renewals */
        CHECK(per_turn[k] >= 4, "turn %d (%s): %d PEXPIREs, expected >= 4", k,
              win[k].java ? "Redisson" : "rlock", per_turn[k]);
    }
    printf("    PEXPIREs per turn (J C J C): %d %d %d %d\n", per_turn[0], per_turn[1], per_turn[2],
           per_turn[3]);
    tap_free(tap);
    rlock_free(l);
    cw_stop(w);
    return 0;
}

/* ---- mixed mutual exclusion ----------------------------------------- */

#define MUTEX_ITERS 30

struct cmutex {
    pthread_t th;
    rlock *l;
    int64_t lease;
    const char *key;
    int violations, errors;
    int64_t max_wait_us; /* longest rlock_lock */
};

static void *cmutex_main(void *arg)
{
    struct cmutex *m = arg;
    unsigned seed = (unsigned)now_us();
    redisContext *rc = redisConnect(g_host, g_port);
    if (!rc || rc->err) {
        m->errors++;
        return NULL;
    }
    for (int i = 0; i < MUTEX_ITERS; i++) {
        int64_t t0 = now_us();
        if (rlock_lock(m->l, m->lease) != RLOCK_OK) {
            m->errors++;
            continue;
        }
        if (now_us() - t0 > m->max_wait_us) {
            m->max_wait_us = now_us() - t0;
        }
        redisReply *r = redisCommand(rc, "INCR %s:inside", m->key);
        m->violations += !r || r->integer != 1;
        freeReplyObject(r);
        r = redisCommand(rc, "GET %s:counter", m->key);
        long long v = r && r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
        freeReplyObject(r);
        sleep_ms(1);
        freeReplyObject(redisCommand(rc, "SET %s:counter %lld", m->key, v + 1));
        freeReplyObject(redisCommand(rc, "RPUSH %s:log C", m->key));
        r = redisCommand(rc, "DECR %s:inside", m->key);
        m->violations += !r || r->integer != 0;
        freeReplyObject(r);
        if (rlock_unlock(m->l) != RLOCK_OK) {
            m->errors++;
        }
        /* 1-8 ms of work outside the lock: others (both languages) get turns */
        sleep_ms(1 + rand_r(&seed) % 8);
    }
    redisFree(rc);
    return NULL;
}

int t_mutex_mixed(void)
{
    enum { NJ = 3, NC = 3 };
    static const int64_t leases[3] = {RLOCK_WATCHDOG, 5000, RLOCK_WATCHDOG};
    char n[128], key[160];
    static struct cmutex cm[NC]; /* static: threads outlive an early return */
    unsigned tags[NJ];
    rlock *l;
    new_name(n, sizeof n, "mutex_mixed");
    snprintf(key, sizeof key, "%s:data", n);
    CHECK_ST(rlock_new(C, n, &l), RLOCK_OK);
    for (int i = 0; i < NJ; i++) {
        char wn[8];
        snprintf(wn, sizeof wn, "m%d", i);
        tags[i] =
            agent_send(&J, wn, "mutex %s %d %lld %s", n, MUTEX_ITERS, (long long)leases[i], key);
    }
    for (int i = 0; i < NC; i++) {
        cm[i] = (struct cmutex){.l = l, .lease = leases[i], .key = key};
        CHECK(pthread_create(&cm[i].th, NULL, cmutex_main, &cm[i]) == 0, "pthread_create");
    }
    int cviol = 0, cerr = 0;
    for (int i = 0; i < NC; i++) {
        pthread_join(cm[i].th, NULL);
        cviol += cm[i].violations;
        cerr += cm[i].errors;
    }
    long long jviol = 0, jmax = 0;
    for (int i = 0; i < NJ; i++) {
        struct reply r;
        CHECK(agent_wait(&J, tags[i], tms(60000), &r) == 0, "Java mutex worker m%d", i);
        CHECK(r.ok, "Java mutex worker m%d: %s", i, r.text);
        CHECK_INT(reply_word(&r, 0), MUTEX_ITERS);
        jviol += reply_word(&r, 1);
        jmax = reply_word(&r, 2) > jmax ? reply_word(&r, 2) : jmax;
    }
    CHECK_INT(cerr, 0);
    CHECK_INT(cviol, 0);
    CHECK_INT(jviol, 0);
    char *counter = r_str("GET %s:counter", key);
    long long total = counter ? atoll(counter) : -1;
    free(counter);
    CHECK_INT(total, (NJ + NC) * MUTEX_ITERS);
    CHECK_INT(r_int("LLEN %s:log", key), (NJ + NC) * MUTEX_ITERS);
    /* The lock must really have changed hands between the languages. */
    redisReply *lg = redisCommand(R, "LRANGE %s:log 0 -1", key);
    CHECK(lg && lg->type == REDIS_REPLY_ARRAY, "LRANGE");
    int switches = 0;
    for (size_t i = 1; i < lg->elements; i++) {
        switches += strcmp(lg->element[i]->str, lg->element[i - 1]->str) != 0;
    }
    freeReplyObject(lg);
    /* A missed wake-up leaves a waiter asleep on the holder's TTL while the
     * lock is free: up to 5 s with the 5 s leases. Unfairness alone gives
     * waits of a few hundred ms here. */
    int64_t cmax = 0;
    for (int i = 0; i < NC; i++) {
        cmax = cm[i].max_wait_us > cmax ? cm[i].max_wait_us : cmax;
    }
    CHECK(cmax < tms(4000) * 1000, "a C thread waited %.0f ms for one acquisition",
          (double)cmax / 1000.0);
    CHECK(jmax < tms(4000) * 1000, "a Java thread waited %.0f ms for one acquisition",
          (double)jmax / 1000.0);
    printf("    %d critical sections, %d hand-overs between Java and C, longest wait "
           "for one acquisition: Java %.0f ms, C %.0f ms\n",
           (NJ + NC) * MUTEX_ITERS, switches, (double)jmax / 1000.0, (double)cmax / 1000.0);
    CHECK(switches >= 2, "only %d hand-overs between Java and C", switches);
    CHECK_INT(r_int("EXISTS %s", n), 0);
    rlock_free(l);
    return 0;
}

/* ---- wire details that differ between Redisson versions ------------- */

static bool is_hex32(const char *s)
{
    return strlen(s) == 32 && strspn(s, "0123456789abcdef") == 32;
}

/* What one side's unlock did, from lines [from, to) of the tap: latch
 * SETs (redisson_unlock_latch:{N}:<32 hex>), DELs of that latch, DELs of
 * other keys under the latch prefix (the last one's suffix kept), and "0"
 * messages published on the lock's channel. */
struct unlock_seen {
    int sets, dels, other_dels, pubs;
    char other[160];
};

static void scan_unlock(struct tap *t, size_t from, size_t to, const char *name,
                        struct unlock_seen *u)
{
    char prefix[200], ch[200], set_key[200] = "";
    size_t plen;
    snprintf(prefix, sizeof prefix, "redisson_unlock_latch:{%s}:", name);
    plen = strlen(prefix);
    channel_of(name, ch, sizeof ch);
    memset(u, 0, sizeof *u);
    for (size_t i = from; i < to; i++) {
        char a[8][160];
        int argc = tap_args(t->lines[i], a, 8);
        if (argc >= 2 && strncmp(a[1], prefix, plen) == 0) {
            if (strcasecmp(a[0], "set") == 0 && is_hex32(a[1] + plen)) {
                u->sets++;
                snprintf(set_key, sizeof set_key, "%s", a[1]);
            } else if (strcasecmp(a[0], "del") == 0 && strcmp(a[1], set_key) == 0) {
                u->dels++;
            } else if (strcasecmp(a[0], "del") == 0) {
                u->other_dels++;
                snprintf(u->other, sizeof u->other, "%s", a[1] + plen);
            }
        }
        if (argc == 3 && strcasecmp(a[0], "publish") == 0 && strcmp(a[1], ch) == 0 &&
            strcmp(a[2], "0") == 0) {
            u->pubs++;
        }
    }
}

/* Unlock latch (Redisson >= 3.24): the releasing script SETs
 * redisson_unlock_latch:{N}:<32 hex request id>, then the client DELs a
 * latch key: 4.x the one it set; 3.x (seen in 3.52.0) the key named after
 * its client id instead, so its latch lives out its PX TTL (harmless to
 * rlock, whose latch keys end in 32 hex digits). Without the latch
 * (< 3.24) neither happens. rlock writes the same latch shape whatever the
 * Java version. */
int t_wire_unlock_latch(void)
{
    struct reply r;
    struct tap *tap = NULL;
    struct unlock_seen u;
    char n[128];
    rlock *l;
    new_name(n, sizeof n, "unlock_latch");
    CHECK_ST(rlock_new(C, n, &l), RLOCK_OK);
    CHECK((tap = tap_new()) != NULL, "MONITOR");
    JOK(&r, "w1", "lock %s -1", n);
    JOK(&r, "w1", "unlock %s", n);
    sleep_ms(tms(200)); /* Redisson's DEL of the latch is fire-and-forget */
    long mid = tap_mark(tap);
    CHECK(mid >= 0, "MONITOR marker");
    CHECK_ST(rlock_lock(l, RLOCK_WATCHDOG), RLOCK_OK);
    CHECK_ST(rlock_unlock(l), RLOCK_OK);
    CHECK(tap_stop(tap) == 0, "MONITOR marker");

    scan_unlock(tap, 0, (size_t)mid, n, &u);
    printf("    Redisson unlock: %d latch SET, %d DEL of it, %d DEL of latch:{N}:%s, "
           "%d publish \"0\"\n",
           u.sets, u.dels, u.other_dels, u.other_dels ? u.other : "-", u.pubs);
    CHECK_INT(u.pubs, 1);
    if (!version_at_least(VERSION, 3, 24)) {
        CHECK_INT(u.sets + u.dels + u.other_dels, 0);
    } else if (version_at_least(VERSION, 4, 0)) {
        CHECK_INT(u.sets, 1);
        CHECK_INT(u.dels, 1);
        CHECK_INT(u.other_dels, 0);
    } else {
        CHECK_INT(u.sets, 1);
        CHECK_INT(u.dels + u.other_dels, 1);
        CHECK(u.dels == 1 || strcmp(u.other, J.id) == 0,
              "Redisson DELed latch suffix %s, neither its latch nor its client id", u.other);
    }
    scan_unlock(tap, (size_t)mid, tap->n, n, &u);
    printf("    rlock unlock:    %d latch SET, %d publish \"0\"\n", u.sets, u.pubs);
    CHECK_INT(u.pubs, 1);
    CHECK_INT(u.sets, 1);
    tap_free(tap);
    rlock_free(l);
    return 0;
}

/* Renewal (Redisson >= 3.44): one script call renews all of a client's
 * watchdog locks, KEYS = the lock names; before, one call per lock. */
int t_wire_renewal_batch(void)
{
    struct reply r;
    struct tap *tap = NULL;
    char n[3][128];
    for (int i = 0; i < 3; i++) {
        new_name(n[i], sizeof n[i], "renewal_batch");
    }
    CHECK((tap = tap_new()) != NULL, "MONITOR");
    for (int i = 0; i < 3; i++) {
        JOK(&r, "w1", "lock %s -1", n[i]);
    }
    long from = tap_mark(tap); /* renewals only: after the acquires */
    sleep_ms(JWD / 3 * 5 / 2);
    for (int i = 0; i < 3; i++) {
        CHECK_RANGE(r_int("PTTL %s", n[i]), 1, JWD);
    }
    long to = tap_mark(tap);
    CHECK(from >= 0 && to >= 0, "MONITOR marker");
    for (int i = 0; i < 3; i++) {
        JOK(&r, "w1", "unlock %s", n[i]);
    }
    CHECK(tap_stop(tap) == 0, "MONITOR marker");
    int batched = 0, single = 0;
    for (size_t i = (size_t)from; i < (size_t)to; i++) {
        char a[12][160];
        int argc = tap_args(tap->lines[i], a, 12);
        if (argc < 4 || (strcasecmp(a[0], "evalsha") != 0 && strcasecmp(a[0], "eval") != 0)) {
            continue;
        }
        int nkeys = atoi(a[2]);
        int ours = 0;
        for (int k = 3; k < 3 + nkeys && k < argc; k++) {
            for (int j = 0; j < 3; j++) {
                ours += strcmp(a[k], n[j]) == 0;
            }
        }
        /* A renewal's ARGV[1] is the lease: the watchdog timeout. */
        if (ours == 0 || 3 + nkeys >= argc || atoll(a[3 + nkeys]) != JWD) {
            continue;
        }
        if (nkeys == 3 && ours == 3) {
            batched++;
        } else if (nkeys == 1) {
            single++;
        }
    }
    printf("    Redisson renewal calls: %d renewing all 3 locks, %d renewing one\n", batched,
           single);
    if (version_at_least(VERSION, 3, 44)) {
        CHECK(batched >= 1, "no renewal call covered all 3 locks");
    } else {
        CHECK_INT(batched, 0);
        CHECK(single >= 3, "expected per-lock renewal calls, saw %d", single);
    }
    tap_free(tap);
    return 0;
}

/* The porting guide's Java snippets, run on this Redisson. */
int t_porting_guide(void)
{
    struct reply r;
    const char *agent_only = getenv("INTEROP_AGENT_ONLY");
    if (agent_only && *agent_only) {
        /* The guide's API is newer than this Redisson: the agent must say
         * the snippets are not there, rather than pass without them. */
        CHECK(agent_call(&J, &r, "g", "guide") == 0, "agent call");
        CHECK(!r.ok && strncmp(r.text, "ClassNotFoundException", 22) == 0,
              "agent-only build ran the guide: %s", r.text);
        printf("    agent-only build: the guide's snippets need a newer Redisson\n");
        return 0;
    }
    JOK(&r, "g", "guide");
    CHECK_INT(reply_word(&r, 0), 10); /* snippets run: RLock (7), spin, fenced, RReadWriteLock */
    CHECK_INT(r_int("EVAL %s 0", "return #redis.call('keys', 'example:*')"), 0);
    return 0;
}
