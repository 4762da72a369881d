/* The read/write lock (rlock_new_read, rlock_new_write; Redisson's
 * RReadWriteLock, spec 4) against a real Redis: the hash at the name
 * (mode, reader and writer fields), the readers' timeout keys and their
 * PTTLs, the messages on redisson_rwlock:{name}, and what the caller sees:
 * readers share and do not serialise, writers exclude everyone across
 * processes, wake-ups, the upgrade refused at once, the downgrade, writer
 * starvation as in Redisson, renewal of only our own readers, lost holds,
 * force unlock, holds written by hand in Redisson's format, other kinds
 * at the name, and exact outcomes through a faulty link. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "proxy.h"

static rlock_client *c;
static redisContext *r;

static void setup(void)
{
    c = th_client(NULL, 0);
    r = th_redis(0);
}

static void teardown(void)
{
    redisFree(r);
    rlock_client_free(c);
}

TestSuite(rwlock, .init = setup, .fini = teardown, .timeout = 90);

/* A Redisson-shaped owner of another client (spec 1). */
#define JAVA "6f1c0a4e-2b7d-4c3e-9a51-0d2f8e7b1c44:57"

/* redisson_rwlock:{name} (the name's own tag when it has one). */
static char *rw_chan(const char *name)
{
    char *s = NULL;
    if (strchr(name, '{')) {
        cr_assert(asprintf(&s, "redisson_rwlock:%s", name) > 0);
    } else {
        cr_assert(asprintf(&s, "redisson_rwlock:{%s}", name) > 0);
    }
    return s;
}

/* A read hold's timeout key: suffix(name, owner ":rwlock_timeout:" k). */
static char *tkey(const char *name, const char *owner, int k)
{
    char *s = NULL;
    if (strchr(name, '{')) {
        cr_assert(asprintf(&s, "%s:%s:rwlock_timeout:%d", name, owner, k) > 0);
    } else {
        cr_assert(asprintf(&s, "{%s}:%s:rwlock_timeout:%d", name, owner, k) > 0);
    }
    return s;
}

static char *writer_field(const char *owner)
{
    char *s = NULL;
    cr_assert(asprintf(&s, "%s:write", owner) > 0);
    return s;
}

/* HGET as a string ("" when absent), for 'mode'. */
static char *hget_str(const char *key, const char *field)
{
    redisReply *rep = th_cmd(r, "HGET %s %s", key, field);
    char *s = strdup(rep->type == REDIS_REPLY_STRING ? rep->str : "");
    freeReplyObject(rep);
    return s;
}

static void assert_mode(const char *name, const char *want)
{
    char *m = hget_str(name, "mode");
    cr_assert_str_eq(m, want, "mode is '%s', expected '%s'", m, want);
    free(m);
}

static long long hexists(const char *key, const char *field)
{
    redisReply *rep = th_cmd(r, "HEXISTS %s %s", key, field);
    long long v = rep->integer;
    freeReplyObject(rep);
    return v;
}

/* DUMP of a key (its exact serialized value), for byte-for-byte checks. */
static redisReply *dump(const char *key)
{
    redisReply *rep = th_cmd(r, "DUMP %s", key);
    cr_assert_eq(rep->type, REDIS_REPLY_STRING, "DUMP %s", key);
    return rep;
}

static void assert_same_dump(redisReply *before, const char *key)
{
    redisReply *after = dump(key);
    cr_assert(after->len == before->len && memcmp(after->str, before->str, after->len) == 0,
              "%s changed", key);
    freeReplyObject(after);
}

/* ---- a lock call on its own thread ----------------------------------- */

typedef struct bg {
    rlock_client *c;
    const char *name;
    bool write;
    int64_t wait_ms;
    int64_t hold_ms;    /* held this long, then unlocked (< 0: kept) */
    rlock_cancel *cancel;
    pid_t tid;
    rlock_status st;
    int64_t got_at, released_at;
    pthread_t th;
} bg;

static void *bg_main(void *arg)
{
    bg *b = arg;
    __atomic_store_n(&b->tid, th_gettid(), __ATOMIC_RELEASE);
    rlock *l;
    th_ok(b->write ? rlock_new_write(b->c, b->name, &l) : rlock_new_read(b->c, b->name, &l));
    b->st = rlock_lock_ex(l, b->wait_ms, RLOCK_WATCHDOG, b->cancel, NULL);
    __atomic_store_n(&b->got_at, th_now_ms(), __ATOMIC_RELEASE);
    if (b->st == RLOCK_OK && b->hold_ms >= 0) {
        th_sleep_ms(b->hold_ms);
        b->released_at = th_now_ms();
        th_ok(rlock_unlock(l));
    }
    rlock_free(l);
    return NULL;
}

static void bg_start_ex(bg *b, rlock_client *cl, const char *name, bool write, int64_t wait_ms,
                        int64_t hold_ms, rlock_cancel *cancel)
{
    memset(b, 0, sizeof *b);
    b->c = cl;
    b->name = name;
    b->write = write;
    b->wait_ms = wait_ms;
    b->hold_ms = hold_ms;
    b->cancel = cancel;
    b->st = RLOCK_EINVAL;
    cr_assert_eq(pthread_create(&b->th, NULL, bg_main, b), 0);
}

/* A thread that takes one half of name (wait_ms -1: forever), holds it
 * hold_ms and unlocks (hold_ms < 0: keeps it; its hold outlives it). */
static void bg_start(bg *b, rlock_client *cl, const char *name, bool write, int64_t wait_ms,
                     int64_t hold_ms)
{
    bg_start_ex(b, cl, name, write, wait_ms, hold_ms, NULL);
}

/* Whether the thread's call has returned. */
static bool bg_returned(bg *b)
{
    return __atomic_load_n(&b->got_at, __ATOMIC_ACQUIRE) != 0;
}

static pid_t bg_tid(bg *b)
{
    pid_t tid = 0;
    cr_assert(TH_POLL((tid = __atomic_load_n(&b->tid, __ATOMIC_ACQUIRE)) != 0, 3000));
    return tid;
}

static void bg_join(bg *b)
{
    pthread_join(b->th, NULL);
}

/* ---- layout ----------------------------------------------------------- */

Test(rwlock, read_layout_through_reentry_partial_and_full_unlock)
{
    char *name = th_name("rlay");
    char *chan = rw_chan(name);
    redisContext *sub = th_subscribe(0, chan);
    rlock *l;
    th_ok(rlock_new_read(c, name, &l));
    cr_assert_str_eq(rlock_kind(l), "read");
    char *owner = th_owner(c, rlock_thread_id());
    for (int i = 1; i <= 3; i++) {
        th_ok(rlock_lock(l, RLOCK_WATCHDOG));
        assert_mode(name, "read");
        cr_assert_eq(th_hget_int(r, name, owner), i);
        cr_assert_eq(th_hlen(r, name), 2, "mode and one reader");
        for (int k = 1; k <= i; k++) {
            char *t = tkey(name, owner, k);
            redisReply *v = th_cmd(r, "GET %s", t);
            cr_assert(v->type == REDIS_REPLY_STRING && strcmp(v->str, "1") == 0, "%s = \"1\"", t);
            freeReplyObject(v);
            long long p = th_pttl(r, t);
            cr_assert(p > 25000 && p <= 30000, "%s PTTL %lld", t, p);
            free(t);
        }
        long long p = th_pttl(r, name);
        cr_assert(p > 25000 && p <= 30000, "name PTTL %lld", p);
        int64_t n;
        th_ok(rlock_hold_count(l, &n));
        cr_assert_eq(n, i);
    }
    bool held = false;
    th_ok(rlock_is_held_by_current_thread(l, &held));
    cr_assert(held);
    for (int i = 2; i >= 1; i--) {
        th_ok(rlock_unlock(l));
        cr_assert_eq(th_hget_int(r, name, owner), i);
        char *gone = tkey(name, owner, i + 1);
        cr_assert_eq(th_exists(r, gone), 0, "the released hold's timeout key is deleted");
        free(gone);
        char *kept = tkey(name, owner, i);
        cr_assert_eq(th_exists(r, kept), 1);
        free(kept);
        assert_mode(name, "read");
    }
    cr_assert_null(th_next_message(sub, 200), "a partial read unlock publishes nothing");
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0, "the last read unlock deletes the name");
    char *t1 = tkey(name, owner, 1);
    cr_assert_eq(th_exists(r, t1), 0);
    free(t1);
    char *m = th_next_message(sub, 2000);
    cr_assert_not_null(m, "the last read unlock publishes");
    cr_assert_str_eq(m, "0");
    free(m);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    /* Redisson's read unlock publishes even when nothing is held (spec
     * 11.9), and so does ours. */
    m = th_next_message(sub, 2000);
    cr_assert_not_null(m, "an unlock of nothing publishes \"0\" as Redisson's does");
    cr_assert_str_eq(m, "0");
    free(m);
    redisFree(sub);
    rlock_free(l);
    free(owner);
    free(chan);
    free(name);
}

Test(rwlock, read_unlock_sets_the_ttl_of_the_longest_reader_left)
{
    char *name = th_name("rttl");
    rlock *l;
    th_ok(rlock_new_read(c, name, &l));
    char *owner = th_owner(c, rlock_thread_id());
    th_ok(rlock_lock(l, 4000));
    th_ok(rlock_lock(l, 20000));
    char *t1 = tkey(name, owner, 1), *t2 = tkey(name, owner, 2);
    cr_assert(th_pttl(r, t1) <= 4000 && th_pttl(r, t2) > 15000);
    long long p = th_pttl(r, name);
    cr_assert(p > 15000 && p <= 20000, "a re-entry keeps the longer of TTL and lease: %lld", p);
    /* A partial unlock gives the hold left the latest lease, as the
     * reentrant lock's does (Redisson's read unlock would leave it its
     * own 4 s, below what the client counts on). */
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, t2), 0);
    p = th_pttl(r, t1);
    cr_assert(p > 15000 && p <= 20000, "the hold left lives by the lease: %lld", p);
    p = th_pttl(r, name);
    cr_assert(p > 15000 && p <= 20000, "the name follows it: %lld", p);
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name) + th_exists(r, t1), 0);
    /* A reader of another client, in Redisson's exact format, with a
     * timeout key of 9 s beside our 30 s one: our last unlock leaves the
     * name to it, with its TTL (recomputed from the readers left), and
     * publishes nothing. */
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    char *jt = tkey(name, JAVA, 1);
    th_run(r, "HSET %s %s 1", name, JAVA);
    th_run(r, "SET %s 1 PX 9000", jt);
    cr_assert(th_pttl(r, name) > 25000);
    char *chan = rw_chan(name);
    redisContext *sub = th_subscribe(0, chan);
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 1, "the other reader still holds it");
    cr_assert_eq(th_hget_int(r, name, JAVA), 1);
    cr_assert_eq(hexists(name, owner), 0);
    p = th_pttl(r, name);
    cr_assert(p > 5000 && p <= 9000, "the name's TTL is the other reader's: %lld", p);
    cr_assert_null(th_next_message(sub, 200), "no publish while a reader is left");
    bool held = true;
    th_ok(rlock_is_held_by_current_thread(l, &held));
    cr_assert(!held);
    redisFree(sub);
    th_run(r, "DEL %s %s", name, jt);
    rlock_free(l);
    free(t1);
    free(t2);
    free(jt);
    free(chan);
    free(owner);
    free(name);
}

Test(rwlock, write_layout_reentry_adds_the_lease_and_unlock_publishes_one)
{
    char *name = th_name("wlay");
    char *chan = rw_chan(name);
    redisContext *sub = th_subscribe(0, chan);
    rlock *w;
    th_ok(rlock_new_write(c, name, &w));
    cr_assert_str_eq(rlock_kind(w), "write");
    char *owner = th_owner(c, rlock_thread_id());
    char *wf = writer_field(owner);
    th_ok(rlock_lock(w, 10000));
    assert_mode(name, "write");
    cr_assert_eq(th_hget_int(r, name, wf), 1);
    cr_assert_eq(th_hlen(r, name), 2, "mode and the writer");
    long long p = th_pttl(r, name);
    cr_assert(p > 9000 && p <= 10000, "PTTL %lld", p);
    th_ok(rlock_lock(w, 10000));
    cr_assert_eq(th_hget_int(r, name, wf), 2);
    p = th_pttl(r, name);
    cr_assert(p > 18000 && p <= 20000, "a write re-entry adds its lease (spec 11.10): %lld", p);
    int64_t n;
    th_ok(rlock_hold_count(w, &n));
    cr_assert_eq(n, 2);
    bool held = false;
    th_ok(rlock_is_held_by_current_thread(w, &held));
    cr_assert(held);
    /* The read half of the same thread holds nothing. */
    rlock *rd;
    th_ok(rlock_new_read(c, name, &rd));
    th_ok(rlock_hold_count(rd, &n));
    cr_assert_eq(n, 0);
    th_ok(rlock_unlock(w));
    cr_assert_eq(th_hget_int(r, name, wf), 1);
    p = th_pttl(r, name);
    cr_assert(p > 9000 && p <= 10000, "a partial write unlock resets the lease: %lld", p);
    cr_assert_null(th_next_message(sub, 200), "a partial write unlock publishes nothing");
    th_ok(rlock_unlock(w));
    cr_assert_eq(th_exists(r, name), 0);
    char *m = th_next_message(sub, 2000);
    cr_assert_not_null(m);
    cr_assert_str_eq(m, "1", "the write unlock publishes \"1\": every reader wakes");
    free(m);
    th_assert_status(rlock_unlock(w), RLOCK_ENOTOWNER);
    m = th_next_message(sub, 2000);
    cr_assert_not_null(m, "an unlock of nothing publishes \"1\" as Redisson's does");
    cr_assert_str_eq(m, "1");
    free(m);
    redisFree(sub);
    rlock_free(rd);
    rlock_free(w);
    free(wf);
    free(owner);
    free(chan);
    free(name);
}

Test(rwlock, names_with_a_tag_keep_it)
{
    char *base = th_name("rtag");
    char *name = NULL;
    cr_assert(asprintf(&name, "{%s}.x", base) > 0);
    char *chan = rw_chan(name);
    cr_assert(strncmp(chan, "redisson_rwlock:{", 17) == 0);
    redisContext *sub = th_subscribe(0, chan);
    rlock *l;
    th_ok(rlock_new_read(c, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    char *owner = th_owner(c, rlock_thread_id());
    char *t = tkey(name, owner, 1); /* "{base}.x:<owner>:rwlock_timeout:1" */
    cr_assert_eq(th_exists(r, t), 1, "%s", t);
    th_ok(rlock_unlock(l));
    char *m = th_next_message(sub, 2000);
    cr_assert_not_null(m, "published on redisson_rwlock:<name> without extra braces");
    free(m);
    redisFree(sub);
    rlock_free(l);
    free(t);
    free(owner);
    free(chan);
    free(name);
    free(base);
}

/* ---- sharing and exclusion ------------------------------------------- */

typedef struct shared_run {
    rlock_client *c;
    const char *name;
    pthread_barrier_t *start;
    int64_t hold_ms;
    int *inside, *peak;
    pthread_mutex_t *mu;
    rlock_status st;
} shared_run;

static void *reader_main(void *arg)
{
    shared_run *s = arg;
    rlock *l;
    th_ok(rlock_new_read(s->c, s->name, &l));
    pthread_barrier_wait(s->start);
    s->st = rlock_lock(l, RLOCK_WATCHDOG);
    if (s->st == RLOCK_OK) {
        pthread_mutex_lock(s->mu);
        if (++*s->inside > *s->peak) {
            *s->peak = *s->inside;
        }
        pthread_mutex_unlock(s->mu);
        th_sleep_ms(s->hold_ms);
        pthread_mutex_lock(s->mu);
        --*s->inside;
        pthread_mutex_unlock(s->mu);
        s->st = rlock_unlock(l);
    }
    rlock_free(l);
    return NULL;
}

Test(rwlock, readers_of_one_process_hold_at_once)
{
    enum { NT = 8 };
    char *name = th_name("rshare");
    int64_t hold = th_ms(200);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, NT + 1);
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    int inside = 0, peak = 0;
    shared_run s[NT];
    pthread_t th[NT];
    for (int i = 0; i < NT; i++) {
        s[i] = (shared_run){c, name, &start, hold, &inside, &peak, &mu, RLOCK_EINVAL};
        pthread_create(&th[i], NULL, reader_main, &s[i]);
    }
    pthread_barrier_wait(&start);
    int64_t t0 = th_now_ms();
    /* While they hold: one field per reader thread. */
    cr_assert(TH_POLL(th_hlen(r, name) == NT + 1, 2000), "8 readers in the hash at once");
    for (int i = 0; i < NT; i++) {
        pthread_join(th[i], NULL);
        th_ok(s[i].st);
    }
    int64_t took = th_now_ms() - t0;
    cr_assert_eq(peak, NT, "all 8 held it at once, peak %d", peak);
    /* 8 holds of 200 ms one after another would take 1.6 s. */
    cr_assert(took < 3 * hold, "8 readers of %lld ms took %lld ms: they serialised",
              (long long)hold, (long long)took);
    cr_log_info("8 readers holding %lld ms each: %lld ms in all", (long long)hold,
                (long long)took);
    cr_assert_eq(th_exists(r, name), 0);
    pthread_barrier_destroy(&start);
    free(name);
}

/* Each process: writers bump the counter inside the write lock and check
 * that no reader and no other writer is inside; readers check that no
 * writer is inside and the counter stands still while they hold. */
typedef struct mix_job {
    const char *name, *counter, *writers_in, *readers_in;
    bool write;
    int rounds;
} mix_job;

static int mix_proc(void *arg)
{
    const mix_job *j = arg;
    rlock_client *pc = NULL;
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = th_url();
    if (rlock_client_new(&cfg, &pc) != RLOCK_OK) {
        th_child_exit(2);
    }
    redisContext *rr = redisConnect("127.0.0.1", th_port());
    if (!rr || rr->err) {
        th_child_exit(3);
    }
    rlock *l;
    if ((j->write ? rlock_new_write(pc, j->name, &l) : rlock_new_read(pc, j->name, &l)) !=
        RLOCK_OK) {
        th_child_exit(4);
    }
    int bad = 0;
    for (int i = 0; i < j->rounds && !bad; i++) {
        if (rlock_lock(l, RLOCK_WATCHDOG) != RLOCK_OK) {
            th_child_exit(5);
        }
        redisReply *a = redisCommand(rr, "INCR %s", j->write ? j->writers_in : j->readers_in);
        redisReply *o = redisCommand(rr, "GET %s", j->write ? j->readers_in : j->writers_in);
        long long other = o && o->type == REDIS_REPLY_STRING ? atoll(o->str) : 0;
        if (!a || a->type != REDIS_REPLY_INTEGER || (j->write && a->integer != 1) || other != 0) {
            bad = 10; /* two writers, or a writer beside readers */
        }
        freeReplyObject(a);
        freeReplyObject(o);
        redisReply *g = redisCommand(rr, "GET %s", j->counter);
        long long v = g && g->type == REDIS_REPLY_STRING ? atoll(g->str) : 0;
        freeReplyObject(g);
        usleep(500);
        if (j->write) {
            freeReplyObject(redisCommand(rr, "SET %s %lld", j->counter, v + 1));
        } else {
            g = redisCommand(rr, "GET %s", j->counter);
            long long v2 = g && g->type == REDIS_REPLY_STRING ? atoll(g->str) : 0;
            freeReplyObject(g);
            if (v2 != v) {
                bad = 11; /* a writer ran while a reader held */
            }
        }
        freeReplyObject(redisCommand(rr, "DECR %s", j->write ? j->writers_in : j->readers_in));
        if (rlock_unlock(l) != RLOCK_OK) {
            th_child_exit(6);
        }
    }
    rlock_free(l);
    redisFree(rr);
    rlock_client_free(pc);
    th_child_exit(bad);
}

Test(rwlock, writers_exclude_readers_and_writers_across_processes)
{
    if (!TH_FORKED_CHILD_CAN_MAKE_CLIENTS) {
        cr_skip_test("a forked child cannot make clients under this sanitizer");
    }
    enum { NW = 3, NR = 3, ROUNDS = 60 };
    char *name = th_name("rwmix");
    char *counter = th_name("rwmix-counter");
    char *win = th_name("rwmix-w"), *rin = th_name("rwmix-r");
    mix_job jobs[NW + NR];
    pid_t pids[NW + NR];
    for (int i = 0; i < NW + NR; i++) {
        jobs[i] = (mix_job){name, counter, win, rin, i < NW, ROUNDS};
        pids[i] = th_fork(mix_proc, &jobs[i]);
    }
    for (int i = 0; i < NW + NR; i++) {
        int st = th_wait_bounded(pids[i], 60000);
        cr_assert_eq(st, 0, "%s process %d exited %d", i < NW ? "writer" : "reader", i, st);
    }
    redisReply *g = th_cmd(r, "GET %s", counter);
    cr_assert_eq(g->type, REDIS_REPLY_STRING);
    cr_assert_eq(atoll(g->str), NW * ROUNDS, "exact counter: %s of %d", g->str, NW * ROUNDS);
    freeReplyObject(g);
    cr_assert_eq(th_exists(r, name), 0);
    th_run(r, "DEL %s %s %s", counter, win, rin);
    free(name);
    free(counter);
    free(win);
    free(rin);
}

/* ---- wake-ups ----------------------------------------------------------- */

Test(rwlock, waiting_readers_all_wake_within_a_second_of_the_write_unlock)
{
    enum { NT = 4 };
    char *name = th_name("rwake");
    rlock_client *c2 = th_client(NULL, 0);
    rlock *w;
    th_ok(rlock_new_write(c2, name, &w));
    th_ok(rlock_lock(w, RLOCK_WATCHDOG));
    bg b[NT];
    for (int i = 0; i < NT; i++) {
        bg_start(&b[i], c, name, false, -1, -1);
    }
    for (int i = 0; i < NT; i++) {
        th_wait_blocked(bg_tid(&b[i]), 3000);
    }
    int64_t t0 = th_now_ms();
    th_ok(rlock_unlock(w));
    for (int i = 0; i < NT; i++) {
        bg_join(&b[i]);
        th_ok(b[i].st);
        cr_assert(b[i].got_at - t0 < th_ms(1000), "reader %d woke %lld ms after the unlock", i,
                  (long long)(b[i].got_at - t0));
    }
    cr_assert_eq(th_hlen(r, name), NT + 1, "all four hold it");
    /* The threads are gone with their holds still there (kept): force. */
    rlock *rd;
    th_ok(rlock_new_read(c, name, &rd));
    bool was = false;
    th_ok(rlock_force_unlock(rd, &was));
    cr_assert(was);
    rlock_free(rd);
    rlock_free(w);
    rlock_client_free(c2);
    free(name);
}

Test(rwlock, waiting_writer_wakes_on_the_last_read_unlock)
{
    char *name = th_name("wwake");
    char *chan = rw_chan(name);
    redisContext *sub = th_subscribe(0, chan);
    rlock_client *c2 = th_client(NULL, 0), *c3 = th_client(NULL, 0);
    rlock *r1, *r2;
    th_ok(rlock_new_read(c, name, &r1));
    th_ok(rlock_new_read(c3, name, &r2));
    th_ok(rlock_lock(r1, RLOCK_WATCHDOG));
    th_ok(rlock_lock(r2, RLOCK_WATCHDOG));
    cr_assert_eq(th_hlen(r, name), 3, "mode and two readers");
    bg wr;
    bg_start(&wr, c2, name, true, -1, 0);
    th_wait_blocked(bg_tid(&wr), 3000);
    th_ok(rlock_unlock(r1));
    cr_assert_null(th_next_message(sub, 300), "no publish while a reader is left");
    cr_assert(!bg_returned(&wr), "a writer got in beside a reader");
    int64_t t0 = th_now_ms();
    th_ok(rlock_unlock(r2));
    char *m = th_next_message(sub, 2000);
    cr_assert_not_null(m, "the last reader publishes");
    cr_assert_str_eq(m, "0");
    free(m);
    bg_join(&wr);
    th_ok(wr.st);
    cr_assert(wr.got_at - t0 < th_ms(1000), "the writer woke %lld ms after the last reader left",
              (long long)(wr.got_at - t0));
    cr_assert_eq(th_exists(r, name), 0, "the writer held and released it");
    rlock_free(r1);
    rlock_free(r2);
    rlock_client_free(c2);
    rlock_client_free(c3);
    redisFree(sub);
    free(chan);
    free(name);
}

Test(rwlock, try_lock_times_out_and_a_cancelled_reader_returns)
{
    char *name = th_name("rto");
    rlock_client *c2 = th_client(NULL, 0);
    rlock *w, *rd;
    th_ok(rlock_new_write(c2, name, &w));
    th_ok(rlock_new_read(c, name, &rd));
    th_ok(rlock_lock(w, 20000));
    int64_t ttl = 0, t0 = th_now_ms();
    th_assert_status(rlock_lock_ex(rd, 300, RLOCK_WATCHDOG, NULL, &ttl), RLOCK_EBUSY);
    cr_assert(th_now_ms() - t0 >= 300 && th_now_ms() - t0 < th_ms(3000));
    cr_assert(ttl > 15000 && ttl <= 20000, "the writer's TTL: %lld", (long long)ttl);
    rlock_cancel *tok;
    th_ok(rlock_cancel_new(&tok));
    bg b, k; /* one waits for the writer, one is cancelled */
    bg_start(&b, c, name, false, -1, 0);
    bg_start_ex(&k, c, name, false, -1, 0, tok);
    th_wait_blocked(bg_tid(&b), 3000);
    th_wait_blocked(bg_tid(&k), 3000);
    t0 = th_now_ms();
    rlock_cancel_fire(tok);
    bg_join(&k);
    th_assert_status(k.st, RLOCK_ECANCELED);
    cr_assert(k.got_at - t0 < th_ms(1000));
    th_ok(rlock_unlock(w));
    bg_join(&b);
    th_ok(b.st);
    cr_assert_eq(th_exists(r, name), 0);
    rlock_cancel_free(tok);
    rlock_free(w);
    rlock_free(rd);
    rlock_client_free(c2);
    free(name);
}

/* ---- queries ---------------------------------------------------------- */

Test(rwlock, is_locked_answers_per_half_as_redisson)
{
    char *name = th_name("risl");
    rlock *rd, *w;
    th_ok(rlock_new_read(c, name, &rd));
    th_ok(rlock_new_write(c, name, &w));
    bool lr = true, lw = true;
    th_ok(rlock_is_locked(rd, &lr));
    th_ok(rlock_is_locked(w, &lw));
    cr_assert(!lr && !lw);
    th_ok(rlock_lock(rd, RLOCK_WATCHDOG));
    th_ok(rlock_is_locked(rd, &lr));
    th_ok(rlock_is_locked(w, &lw));
    cr_assert(lr, "readers hold: the read half is locked");
    cr_assert(!lw, "only readers hold: the write half is not locked (Redisson's answer)");
    /* A writer waiting (another client) changes nothing in Redis, so the
     * write half still answers false. */
    rlock_client *c2 = th_client(NULL, 0);
    bg wr;
    bg_start(&wr, c2, name, true, -1, -1);
    th_wait_blocked(bg_tid(&wr), 3000);
    th_ok(rlock_is_locked(w, &lw));
    cr_assert(!lw);
    int64_t ttl;
    th_ok(rlock_remain_ttl(w, &ttl));
    cr_assert(ttl > 0, "the name's TTL whichever half asks");
    th_ok(rlock_unlock(rd));
    bg_join(&wr);
    th_ok(wr.st);
    th_ok(rlock_is_locked(rd, &lr));
    th_ok(rlock_is_locked(w, &lw));
    cr_assert(!lr, "a writer alone: the read half is not locked");
    cr_assert(lw);
    rlock *w2;
    th_ok(rlock_new_write(c2, name, &w2));
    bool was = false;
    th_ok(rlock_force_unlock(w2, &was));
    cr_assert(was);
    rlock_free(w2);
    /* A writer with its own read hold: both halves are locked. */
    th_ok(rlock_lock(w, RLOCK_WATCHDOG));
    th_ok(rlock_lock(rd, RLOCK_WATCHDOG));
    th_ok(rlock_is_locked(rd, &lr));
    th_ok(rlock_is_locked(w, &lw));
    cr_assert(lr && lw);
    bool held = false;
    th_ok(rlock_is_held_by_thread(w, rlock_thread_id(), &held));
    cr_assert(held);
    th_ok(rlock_unlock(rd));
    th_ok(rlock_unlock(w));
    cr_assert_eq(th_exists(r, name), 0);
    rlock_free(rd);
    rlock_free(w);
    rlock_client_free(c2);
    free(name);
}

Test(rwlock, wait_unlocked_waits_for_its_own_half)
{
    char *name = th_name("rwu");
    rlock *rd, *w;
    th_ok(rlock_new_read(c, name, &rd));
    th_ok(rlock_new_write(c, name, &w));
    th_ok(rlock_lock(rd, RLOCK_WATCHDOG));
    th_ok(rlock_wait_unlocked(w, 0, NULL)); /* no writer: the write half is free */
    th_assert_status(rlock_wait_unlocked(rd, 1000, NULL), RLOCK_EDEADLK);
    th_ok(rlock_unlock(rd));
    rlock_client *c2 = th_client(NULL, 0);
    rlock *w2;
    th_ok(rlock_new_write(c2, name, &w2));
    th_ok(rlock_lock(w2, RLOCK_WATCHDOG));
    th_ok(rlock_wait_unlocked(rd, 0, NULL)); /* a writer alone: no reader */
    th_assert_status(rlock_wait_unlocked(w, 200, NULL), RLOCK_EBUSY);
    th_ok(rlock_unlock(w2));
    th_ok(rlock_wait_unlocked(w, 0, NULL));
    rlock_free(w2);
    rlock_free(rd);
    rlock_free(w);
    rlock_client_free(c2);
    free(name);
}

/* ---- upgrade, downgrade, starvation ------------------------------------ */

Test(rwlock, upgrade_is_edeadlk_at_once_and_changes_nothing)
{
    char *name = th_name("rup");
    rlock *rd, *w;
    th_ok(rlock_new_read(c, name, &rd));
    th_ok(rlock_new_write(c, name, &w));
    th_ok(rlock_lock(rd, RLOCK_WATCHDOG));
    redisReply *before = dump(name);
    int64_t t0 = th_now_ms();
    th_assert_status(rlock_try_lock(w, 5000, RLOCK_WATCHDOG), RLOCK_EDEADLK);
    th_assert_status(rlock_lock(w, RLOCK_WATCHDOG), RLOCK_EDEADLK);
    cr_assert(th_now_ms() - t0 < th_ms(1000), "answered at once, not after waiting");
    assert_same_dump(before, name);
    int64_t n = -1;
    th_ok(rlock_hold_count(w, &n));
    cr_assert_eq(n, 0);
    uint64_t held = 9;
    th_ok(rlock_client_stat(c, RLOCK_STAT_HELD, &held));
    cr_assert_eq(held, 1, "the read hold only");
    /* With another reader beside it the wait would still never end. */
    bg other;
    bg_start(&other, c, name, false, -1, -1);
    bg_join(&other);
    th_ok(other.st);
    th_assert_status(rlock_try_lock(w, 0, RLOCK_WATCHDOG), RLOCK_EDEADLK);
    freeReplyObject(before);
    /* A thread that does not read just waits. */
    bg wr;
    bg_start(&wr, c, name, true, 300, 0);
    bg_join(&wr);
    th_assert_status(wr.st, RLOCK_EBUSY);
    th_ok(rlock_unlock(rd));
    bool was = false;
    th_ok(rlock_force_unlock(rd, &was)); /* the exited thread's hold */
    cr_assert(was);
    rlock_free(rd);
    rlock_free(w);
    free(name);
}

Test(rwlock, downgrade_leaves_mode_read_with_the_read_hold_and_wakes_readers)
{
    char *name = th_name("rdown");
    char *chan = rw_chan(name);
    redisContext *sub = th_subscribe(0, chan);
    rlock_client *c2 = th_client(NULL, 0);
    rlock *rd, *w;
    th_ok(rlock_new_read(c, name, &rd));
    th_ok(rlock_new_write(c, name, &w));
    char *owner = th_owner(c, rlock_thread_id());
    char *wf = writer_field(owner);
    th_ok(rlock_lock(w, RLOCK_WATCHDOG));
    th_ok(rlock_lock(rd, RLOCK_WATCHDOG)); /* a writer may read */
    assert_mode(name, "write");
    cr_assert_eq(th_hget_int(r, name, wf), 1);
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    char *t1 = tkey(name, owner, 1);
    cr_assert(th_pttl(r, t1) > 25000);
    /* A reader of another client waits on the writer. */
    bg rb;
    bg_start(&rb, c2, name, false, -1, -1);
    th_wait_blocked(bg_tid(&rb), 3000);
    int64_t t0 = th_now_ms();
    th_ok(rlock_unlock(w));
    assert_mode(name, "read");
    cr_assert_eq(hexists(name, wf), 0, "the write field is gone");
    cr_assert_eq(th_hget_int(r, name, owner), 1, "the read hold stays");
    cr_assert_eq(th_exists(r, t1), 1);
    char *m = th_next_message(sub, 2000);
    cr_assert_not_null(m, "the downgrade publishes \"1\" (Redisson's does not, 11.11)");
    cr_assert_str_eq(m, "1");
    free(m);
    bg_join(&rb);
    th_ok(rb.st);
    cr_assert(rb.got_at - t0 < th_ms(1000), "the waiting reader got in %lld ms after",
              (long long)(rb.got_at - t0));
    bool held = true;
    th_ok(rlock_is_held_by_current_thread(w, &held));
    cr_assert(!held);
    th_ok(rlock_is_held_by_current_thread(rd, &held));
    cr_assert(held);
    th_ok(rlock_unlock(rd));
    cr_assert_eq(th_exists(r, name), 1, "the other reader still holds it");
    rlock *r2;
    th_ok(rlock_new_read(c2, name, &r2));
    bool was = false;
    th_ok(rlock_force_unlock(r2, &was));
    cr_assert(was);
    rlock_free(r2);
    redisFree(sub);
    rlock_free(rd);
    rlock_free(w);
    rlock_client_free(c2);
    free(t1);
    free(wf);
    free(owner);
    free(chan);
    free(name);
}

/* Redisson admits readers while a writer waits (no writer preference, spec
 * 4.2 and 11.12): a steady stream of readers can starve a writer. rlock
 * does the same, in one process as across processes, and the writer gets
 * in once the readers stop. */
static void starvation(rlock_client *cw)
{
    char *name = th_name("rstarve");
    rlock *r1;
    th_ok(rlock_new_read(c, name, &r1));
    th_ok(rlock_lock(r1, RLOCK_WATCHDOG));
    bg wr;
    bg_start(&wr, cw, name, true, -1, 0);
    th_wait_blocked(bg_tid(&wr), 3000);
    /* New readers come and go while the writer waits; each is let in at
     * once. */
    for (int i = 0; i < 3; i++) {
        bg rb;
        int64_t t0 = th_now_ms();
        bg_start(&rb, c, name, false, th_ms(3000), 0);
        bg_join(&rb);
        th_ok(rb.st);
        cr_assert(rb.got_at - t0 < th_ms(1000), "reader %d waited %lld ms behind the writer", i,
                  (long long)(rb.got_at - t0));
        cr_assert(!bg_returned(&wr), "the writer is still waiting");
    }
    int64_t t0 = th_now_ms();
    th_ok(rlock_unlock(r1));
    bg_join(&wr);
    th_ok(wr.st);
    cr_assert(wr.got_at - t0 < th_ms(1000));
    rlock_free(r1);
    free(name);
}

Test(rwlock, readers_are_let_in_while_a_writer_of_the_same_process_waits)
{
    starvation(c);
}

Test(rwlock, readers_are_let_in_while_a_writer_of_another_process_waits)
{
    rlock_client *c2 = th_client(NULL, 0);
    starvation(c2);
    rlock_client_free(c2);
}

/* The holds of one thread under its own write lock: neither half's
 * release cuts the TTL the other half's holds live by (Redisson's read
 * unlock would cut the write lock's lease to the reader's key, and its
 * partial write unlock the reader's key's to the write lease). */
Test(rwlock, own_holds_under_a_write_lock_never_cut_each_others_ttl)
{
    char *name = th_name("rcut");
    rlock *rd, *w;
    th_ok(rlock_new_read(c, name, &rd));
    th_ok(rlock_new_write(c, name, &w));
    th_ok(rlock_lock(w, 20000));
    th_ok(rlock_lock(rd, 3000));
    th_ok(rlock_lock(rd, 3000));
    th_ok(rlock_unlock(rd));
    long long p = th_pttl(r, name);
    cr_assert(p > 15000, "a read unlock cut the write lock's TTL to %lld", p);
    th_ok(rlock_unlock(rd));
    p = th_pttl(r, name);
    cr_assert(p > 15000, "the last read unlock cut the write lock's TTL to %lld", p);
    assert_mode(name, "write");
    th_ok(rlock_unlock(w));
    cr_assert_eq(th_exists(r, name), 0);
    /* Now the other way: a long read hold under a short, re-entered
     * write lock. */
    th_ok(rlock_lock(w, 3000));
    th_ok(rlock_lock(rd, 20000));
    th_ok(rlock_lock(w, 3000));
    th_ok(rlock_unlock(w));
    p = th_pttl(r, name);
    cr_assert(p > 15000, "a partial write unlock cut the read hold's TTL to %lld", p);
    th_ok(rlock_unlock(w)); /* downgrade */
    assert_mode(name, "read");
    p = th_pttl(r, name);
    cr_assert(p > 15000, "%lld", p);
    th_ok(rlock_unlock(rd));
    cr_assert_eq(th_exists(r, name), 0);
    rlock_free(rd);
    rlock_free(w);
    free(name);
}

/* An unlock whose PUBLISH the ACL refuses changes nothing (the scripts
 * publish before they write), and runs once permission is back. */
Test(rwlock, unlock_refused_by_the_acl_changes_nothing)
{
    char *u = NULL, *url = NULL;
    cr_assert(asprintf(&u, "rw_acl_%d_%ld", (int)getpid(), (long)th_now_ms() % 100000) > 0);
    cr_assert(asprintf(&url, "redis://%s:pw@127.0.0.1:%d", u, th_port()) > 0);
    /* Every command the read/write scripts use, but only the reentrant
     * lock's channels. */
    th_run(r, "ACL SETUSER %s on >pw resetkeys resetchannels -@all ~* &redisson_lock__channel:* "
              "+evalsha +eval +hexists +hincrby +hget +hgetall +hlen +hset +hdel +exists "
              "+pexpire +pttl +get +set +del +publish +subscribe +unsubscribe +client|setname "
              "+auth +select",
           u);
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    rlock_client *ac = th_client_cfg(&cfg);
    for (int half = 0; half < 2; half++) {
        char *name = th_name(half ? "waclu" : "raclu");
        rlock *l;
        th_ok(half ? rlock_new_write(ac, name, &l) : rlock_new_read(ac, name, &l));
        th_ok(rlock_lock(l, 30000)); /* an acquire publishes nothing */
        redisReply *before = dump(name);
        th_assert_status(rlock_unlock(l), RLOCK_EPERM);
        assert_same_dump(before, name);
        freeReplyObject(before);
        redisReply *keys = th_cmd(r, "KEYS redisson_unlock_latch:{%s}:*", name);
        cr_assert_eq(keys->elements, 0, "a refused unlock wrote a latch");
        freeReplyObject(keys);
        keys = th_cmd(r, "KEYS {%s}:*:rwlock_timeout:*", name);
        cr_assert_eq(keys->elements, half ? 0 : 1, "the read hold's timeout key stays");
        freeReplyObject(keys);
        th_assert_status(rlock_force_unlock(l, NULL), RLOCK_EPERM);
        cr_assert_eq(th_exists(r, name), 1, "a refused force unlock deleted it");
        th_run(r, "ACL SETUSER %s &redisson_rwlock:*", u);
        th_ok(rlock_unlock(l));
        cr_assert_eq(th_exists(r, name), 0);
        th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
        th_run(r, "ACL SETUSER %s resetchannels &redisson_lock__channel:*", u);
        rlock_free(l);
        free(name);
    }
    rlock_client_free(ac);
    th_run(r, "ACL DELUSER %s", u);
    free(u);
    free(url);
}

/* ---- renewal, loss ------------------------------------------------------ */

Test(rwlock, watchdog_keeps_both_halves_and_the_timeout_keys)
{
    rlock_client *wc = th_client(NULL, 600);
    char *rn = th_name("rwdr"), *wn = th_name("rwdw");
    rlock *rd, *w;
    th_ok(rlock_new_read(wc, rn, &rd));
    th_ok(rlock_new_write(wc, wn, &w));
    th_ok(rlock_lock(rd, RLOCK_WATCHDOG));
    th_ok(rlock_lock(rd, RLOCK_WATCHDOG));
    th_ok(rlock_lock(w, RLOCK_WATCHDOG));
    char *owner = th_owner(wc, rlock_thread_id());
    char *t1 = tkey(rn, owner, 1), *t2 = tkey(rn, owner, 2);
    /* 3 s = five watchdog timeouts: without renewal all would be gone.
     * The sleeps are the point: time passes, sampled every 200 ms. */
    for (int i = 0; i < 15; i++) {
        th_sleep_ms(200);
        long long a = th_pttl(r, rn), b = th_pttl(r, t1), d = th_pttl(r, t2), e = th_pttl(r, wn);
        cr_assert(a > 0 && a <= 600, "read name PTTL %lld", a);
        cr_assert(b > 0 && b <= 600, "timeout key 1 PTTL %lld", b);
        cr_assert(d > 0 && d <= 600, "timeout key 2 PTTL %lld", d);
        cr_assert(e > 0 && e <= 600, "write name PTTL %lld", e);
    }
    th_ok(rlock_unlock(rd));
    th_ok(rlock_unlock(rd));
    th_ok(rlock_unlock(w));
    cr_assert_eq(th_exists(r, rn) + th_exists(r, wn) + th_exists(r, t1), 0);
    rlock_free(rd);
    rlock_free(w);
    rlock_client_free(wc);
    free(t1);
    free(t2);
    free(owner);
    free(rn);
    free(wn);
}

Test(rwlock, only_our_own_readers_are_renewed)
{
    rlock_client *wc = th_client(NULL, 600);
    char *name = th_name("rown");
    /* A reader of a process that died, in Redisson's format: its timeout
     * key has 800 ms left. */
    char *jt = tkey(name, JAVA, 1);
    th_run(r, "HSET %s mode read %s 1", name, JAVA);
    th_run(r, "PEXPIRE %s 800", name);
    th_run(r, "SET %s 1 PX 800", jt);
    rlock *rd;
    th_ok(rlock_new_read(wc, name, &rd));
    th_ok(rlock_lock(rd, RLOCK_WATCHDOG));
    char *owner = th_owner(wc, rlock_thread_id());
    char *t1 = tkey(name, owner, 1);
    th_wait_exists(r, jt, 0, 800 + 2000); /* not renewed: it expires */
    th_sleep_ms(700); /* time passes: more renewal rounds */
    cr_assert_eq(th_exists(r, jt), 0, "a foreign reader's timeout key was renewed");
    cr_assert(th_pttl(r, t1) > 0, "ours is renewed");
    cr_assert_eq(th_hget_int(r, name, JAVA), 1, "its field stays, as in Redisson");
    /* Our unlock finds no live reader left: the name goes, and a writer
     * can get in. */
    th_ok(rlock_unlock(rd));
    cr_assert_eq(th_exists(r, name), 0, "the dead reader kept the lock");
    rlock *w;
    th_ok(rlock_new_write(c, name, &w));
    th_ok(rlock_try_lock(w, 0, 5000));
    th_ok(rlock_unlock(w));
    rlock_free(w);
    rlock_free(rd);
    rlock_client_free(wc);
    free(t1);
    free(jt);
    free(owner);
    free(name);
}

static struct {
    pthread_mutex_t mu;
    char name[256];
    int calls;
} lost = {PTHREAD_MUTEX_INITIALIZER, "", 0};

static void on_lost(const char *name, uint64_t tid, void *arg)
{
    (void)tid;
    (void)arg;
    pthread_mutex_lock(&lost.mu);
    snprintf(lost.name, sizeof lost.name, "%s", name);
    lost.calls++;
    pthread_mutex_unlock(&lost.mu);
}

static int lost_calls(void)
{
    pthread_mutex_lock(&lost.mu);
    int n = lost.calls;
    pthread_mutex_unlock(&lost.mu);
    return n;
}

Test(rwlock, lost_holds_of_each_half_are_reported)
{
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = th_url();
    cfg.watchdog_timeout_ms = 600;
    cfg.on_lock_lost = on_lost;
    rlock_client *lc = th_client_cfg(&cfg);
    for (int half = 0; half < 2; half++) {
        char *name = th_name(half ? "rlostw" : "rlostr");
        rlock *l;
        th_ok(half ? rlock_new_write(lc, name, &l) : rlock_new_read(lc, name, &l));
        th_ok(rlock_lock(l, RLOCK_WATCHDOG));
        th_ok(rlock_lock(l, RLOCK_WATCHDOG));
        int before = lost_calls();
        th_run(r, "DEL %s", name); /* an operator deletes it */
        cr_assert(TH_POLL(lost_calls() > before, 3000), "the %s hold's loss is reported",
                  half ? "write" : "read");
        pthread_mutex_lock(&lost.mu);
        cr_assert_str_eq(lost.name, name, "reported by the lock's name");
        pthread_mutex_unlock(&lost.mu);
        cr_assert_eq(th_exists(r, name), 0, "the watchdog does not resurrect it");
        th_assert_status(rlock_unlock(l), RLOCK_ELOST);
        th_assert_status(rlock_unlock(l), RLOCK_ELOST);
        th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
        th_ok(rlock_lock(l, RLOCK_WATCHDOG)); /* a fresh hold after the loss */
        th_ok(rlock_unlock(l));
        cr_assert_eq(th_exists(r, name), 0);
        rlock_free(l);
        free(name);
    }
    rlock_client_free(lc);
}

/* A read hold lives by its own timeout keys, not by the name, whose TTL
 * is the longest reader's: with another client's reader holding the name
 * for a minute, this thread's watchdog read hold whose timeout keys are
 * all gone (deleted here; a stop of the renewals does the same) is
 * exposed (the other reader's unlock would free the lock for a writer),
 * and the next renewal reports it lost instead of taking the name's TTL
 * for the hold's. */
Test(rwlock, read_hold_whose_own_timeout_keys_are_gone_is_reported_lost)
{
    th_lost_count lost = {PTHREAD_MUTEX_INITIALIZER, 0};
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = th_url();
    cfg.watchdog_timeout_ms = 1000;
    cfg.on_lock_lost = th_count_lost;
    cfg.on_lock_lost_arg = &lost;
    rlock_client *lc = th_client_cfg(&cfg);
    char *name = th_name("rownkeys");
    rlock *mine, *other;
    th_ok(rlock_new_read(lc, name, &mine));
    th_ok(rlock_new_read(c, name, &other));
    th_ok(rlock_lock(mine, RLOCK_WATCHDOG));
    th_ok(rlock_lock(mine, RLOCK_WATCHDOG));
    th_ok(rlock_lock(other, 60000));
    char *owner = th_owner(lc, rlock_thread_id());
    char *t1 = tkey(name, owner, 1), *t2 = tkey(name, owner, 2);
    th_run(r, "DEL %s %s", t1, t2);
    cr_assert(TH_POLL(th_lost_calls(&lost) >= 1, 3000), "the hold's loss was not reported");
    cr_assert_eq(th_exists(r, t1) + th_exists(r, t2), 0, "the renewal resurrected a key");
    th_ok(rlock_unlock(other));
    rlock_free(mine);
    rlock_free(other);
    rlock_client_free(lc);
    th_run(r, "DEL %s", name);
    free(t1);
    free(t2);
    free(owner);
    free(name);
}

/* A partial read unlock gives the holds left the lease the client counts
 * on for them, as a partial unlock of the reentrant lock does, also when
 * the timeout key of one of them has run out meanwhile: the owner's field
 * still counts it, so no writer has been in, and its key is written again.
 * Without that, the client believed in a hold with no key left: another
 * reader's unlock freed the lock and a writer got in under it. */
Test(rwlock, partial_read_unlock_gives_the_holds_left_their_keys_back)
{
    char *name = th_name("rpartial");
    rlock_client *lc = th_client(NULL, 0);
    rlock *mine, *other, *w;
    th_ok(rlock_new_read(lc, name, &mine));
    th_ok(rlock_new_read(c, name, &other));
    th_ok(rlock_new_write(c, name, &w));
    char *owner = th_owner(lc, rlock_thread_id());
    char *t1 = tkey(name, owner, 1);
    int64_t outer = th_ms(1000), inner = th_ms(20000);
    th_ok(rlock_lock(mine, outer));
    th_ok(rlock_lock(mine, inner));
    th_ok(rlock_lock(other, inner));
    th_wait_exists(r, t1, 0, 3000); /* the outer hold's key ran out */
    th_ok(rlock_unlock(mine));                    /* the inner hold */
    long long left = th_pttl(r, t1);
    cr_assert(left > inner - th_ms(2000), "the hold left has no key (PTTL %lld)", left);
    bool held;
    th_ok(rlock_is_held_by_current_thread(mine, &held));
    cr_assert(held, "the client no longer counts the hold left");
    th_ok(rlock_unlock(other));
    rlock_status ws = rlock_try_lock(w, 0, 10000);
    if (ws == RLOCK_OK) {
        rlock_unlock(w);
    }
    th_assert_status(ws, RLOCK_EBUSY);
    th_ok(rlock_unlock(mine));
    cr_assert_eq(th_exists(r, name), 0);
    rlock_free(mine);
    rlock_free(other);
    rlock_free(w);
    rlock_client_free(lc);
    free(t1);
    free(owner);
    free(name);
}

/* The body of lua/<file> (the tests run from the tree's root), malloc'd. */
static char *script_body(const char *file)
{
    char path[256];
    snprintf(path, sizeof path, "lua/%s", file);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot read %s (run from the tree's root)", path);
    char *buf = malloc(65536);
    cr_assert(buf);
    size_t n = fread(buf, 1, 65535, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* The abandon of a read re-entry that ran gives the holds left the lease
 * as the partial unlock does, writing again the key of one whose key ran
 * out (it answered "all the owner's holds are gone" and freed the lock,
 * though the field still counted one and no writer had been in). */
Test(rwlock, abandon_of_a_read_reentry_gives_the_holds_left_their_keys_back)
{
    char *name = th_name("rabkeys");
    const char *owner = "7a1c0a4e-2b7d-4c3e-9a51-0d2f8e7b1c44:3";
    char *t1 = tkey(name, owner, 1), *t2 = tkey(name, owner, 2), *ch = rw_chan(name);
    char latch[512];
    snprintf(latch, sizeof latch, "rlock_acquire_latch:{%s}:42", name);
    th_run(r, "HSET %s mode read %s 2", name, owner);
    th_run(r, "PEXPIRE %s 20000", name);
    th_run(r, "SET %s 1 PX 20000", t2); /* the re-entry's key; the first one ran out */
    char *body = script_body("read_abandon.lua");
    redisReply *rep = th_cmd(r, "EVAL %s 3 %s %s %s %s 60000 20000 0 publish 1", body, name, ch,
                             latch, owner);
    cr_assert_eq(rep->type, REDIS_REPLY_INTEGER);
    cr_assert_eq(rep->integer, 1, "reply %lld: the hold left was counted gone", rep->integer);
    freeReplyObject(rep);
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    cr_assert_eq(th_exists(r, t2), 0);
    long long left = th_pttl(r, t1);
    cr_assert(left > 15000 && left <= 20000, "the hold left's key: PTTL %lld", left);
    th_run(r, "DEL %s %s %s", name, t1, latch);
    free(body);
    free(ch);
    free(t1);
    free(t2);
    free(name);
}

/* A reader whose process is killed keeps the lock only until its timeout
 * keys and the name expire; a waiting writer then proceeds. */
static int read_and_stay(void *arg)
{
    const char *name = arg;
    rlock_client *pc = NULL;
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = th_url();
    cfg.watchdog_timeout_ms = 1000;
    if (rlock_client_new(&cfg, &pc) != RLOCK_OK) {
        th_child_exit(2);
    }
    rlock *l;
    if (rlock_new_read(pc, name, &l) != RLOCK_OK || rlock_lock(l, RLOCK_WATCHDOG) != RLOCK_OK) {
        th_child_exit(3);
    }
    for (;;) {
        pause(); /* until killed */
    }
}

Test(rwlock, killed_readers_hold_expires_and_the_writer_proceeds)
{
    if (!TH_FORKED_CHILD_CAN_MAKE_CLIENTS) {
        cr_skip_test("a forked child cannot make clients under this sanitizer");
    }
    char *name = th_name("rkill");
    pid_t pid = th_fork(read_and_stay, name);
    cr_assert(TH_POLL(th_hlen(r, name) == 2, 5000), "the child reads");
    th_sleep_ms(1500); /* time passes: the child's watchdog renews (1 s lease) */
    cr_assert_eq(th_hlen(r, name), 2, "renewed while the child lives");
    redisReply *keys = th_cmd(r, "KEYS {%s}:*:rwlock_timeout:1", name);
    cr_assert_eq(keys->elements, 1);
    char *ckey = strdup(keys->element[0]->str);
    freeReplyObject(keys);
    bg wr;
    bg_start(&wr, c, name, true, -1, 0);
    th_wait_blocked(bg_tid(&wr), 3000);
    kill(pid, SIGKILL);
    int64_t t0 = th_now_ms();
    th_wait(pid);
    bg_join(&wr);
    th_ok(wr.st);
    int64_t took = wr.got_at - t0;
    cr_assert(took < th_ms(1000) + 1000, "the writer got in %lld ms after the kill (lease 1 s)",
              (long long)took);
    cr_assert_eq(th_exists(r, ckey), 0, "the dead reader's timeout key expired");
    free(ckey);
    free(name);
}

/* ---- force unlock ------------------------------------------------------- */

Test(rwlock, force_unlock_of_each_half_only_in_its_mode)
{
    char *name = th_name("rforce");
    char *chan = rw_chan(name);
    redisContext *sub = th_subscribe(0, chan);
    rlock_client *c2 = th_client(NULL, 0);
    rlock *rd, *w, *w2;
    th_ok(rlock_new_read(c, name, &rd));
    th_ok(rlock_new_write(c, name, &w));
    th_ok(rlock_new_write(c2, name, &w2));
    bool was = true;
    th_ok(rlock_force_unlock(rd, &was));
    cr_assert(!was);
    th_ok(rlock_force_unlock(w, &was));
    cr_assert(!was);
    cr_assert_null(th_next_message(sub, 200), "nothing deleted, nothing published");
    /* mode write: the read half leaves it alone; the write half deletes
     * it and publishes "1". */
    th_ok(rlock_lock(w2, RLOCK_WATCHDOG));
    redisReply *before = dump(name);
    th_ok(rlock_force_unlock(rd, &was));
    cr_assert(!was, "the read half does not delete a write lock");
    assert_same_dump(before, name);
    freeReplyObject(before);
    cr_assert_null(th_next_message(sub, 200));
    th_ok(rlock_force_unlock(w, &was));
    cr_assert(was);
    cr_assert_eq(th_exists(r, name), 0);
    char *m = th_next_message(sub, 2000);
    cr_assert_not_null(m);
    cr_assert_str_eq(m, "1");
    free(m);
    th_assert_status(rlock_unlock(w2), RLOCK_ELOST);
    m = th_next_message(sub, 2000);
    cr_assert_not_null(m, "a write unlock that finds nothing publishes \"1\" (11.9)");
    cr_assert_str_eq(m, "1");
    free(m);
    /* mode read: the write half leaves it alone; the read half deletes it
     * and publishes "0". */
    rlock *r2;
    th_ok(rlock_new_read(c2, name, &r2));
    th_ok(rlock_lock(r2, RLOCK_WATCHDOG));
    th_ok(rlock_force_unlock(w, &was));
    cr_assert(!was, "the write half does not delete a read lock");
    cr_assert_eq(th_exists(r, name), 1);
    cr_assert_null(th_next_message(sub, 200));
    th_ok(rlock_force_unlock(rd, &was));
    cr_assert(was);
    cr_assert_eq(th_exists(r, name), 0);
    m = th_next_message(sub, 2000);
    cr_assert_not_null(m);
    cr_assert_str_eq(m, "0");
    free(m);
    th_assert_status(rlock_unlock(r2), RLOCK_ELOST);
    rlock_free(r2);
    rlock_free(rd);
    rlock_free(w);
    rlock_free(w2);
    rlock_client_free(c2);
    redisFree(sub);
    free(chan);
    free(name);
}

/* ---- Redisson's state, other kinds -------------------------------------- */

Test(rwlock, holds_written_by_hand_in_redissons_format_are_respected)
{
    char *name = th_name("rhand");
    char *chan = rw_chan(name);
    rlock *rd, *w;
    th_ok(rlock_new_read(c, name, &rd));
    th_ok(rlock_new_write(c, name, &w));
    /* A Java writer. */
    th_run(r, "HSET %s mode write %s:write 1", name, JAVA);
    th_run(r, "PEXPIRE %s 20000", name);
    int64_t ttl = 0;
    th_assert_status(rlock_lock_ex(rd, 0, RLOCK_WATCHDOG, NULL, &ttl), RLOCK_EBUSY);
    cr_assert(ttl > 15000 && ttl <= 20000);
    th_assert_status(rlock_try_lock(w, 0, RLOCK_WATCHDOG), RLOCK_EBUSY);
    /* Its unlock as Redisson does it (the write unlock's effect by hand)
     * wakes our waiting reader through the "1" it publishes. */
    bg rb;
    bg_start(&rb, c, name, false, -1, -1);
    th_wait_blocked(bg_tid(&rb), 3000);
    th_run(r, "DEL %s", name);
    th_run(r, "PUBLISH %s 1", chan);
    bg_join(&rb);
    th_ok(rb.st);
    cr_assert(rb.got_at > 0);
    th_ok(rlock_force_unlock(rd, NULL));
    /* A Java reader: ours shares with it, a writer of ours waits. */
    char *jt = tkey(name, JAVA, 1);
    th_run(r, "HSET %s mode read %s 1", name, JAVA);
    th_run(r, "SET %s 1 PX 20000", jt);
    th_run(r, "PEXPIRE %s 20000", name);
    th_ok(rlock_try_lock(rd, 0, 5000));
    cr_assert_eq(th_hget_int(r, name, JAVA), 1);
    cr_assert_eq(th_hlen(r, name), 3);
    long long p = th_pttl(r, name);
    cr_assert(p > 15000, "our shorter lease does not cut the name's TTL: %lld", p);
    th_ok(rlock_unlock(rd));
    cr_assert_eq(th_hlen(r, name), 2, "the Java reader is left");
    rlock_client *c2 = th_client(NULL, 0);
    rlock *w2;
    th_ok(rlock_new_write(c2, name, &w2));
    th_assert_status(rlock_try_lock(w2, 0, 5000), RLOCK_EBUSY);
    /* Our write lock's waiter is woken by the Java reader's last unlock
     * ("0"), written by hand as Redisson's script does it. */
    bg wr;
    bg_start(&wr, c2, name, true, -1, 0);
    th_wait_blocked(bg_tid(&wr), 3000);
    th_run(r, "DEL %s %s", name, jt);
    int64_t t0 = th_now_ms();
    th_run(r, "PUBLISH %s 0", chan);
    bg_join(&wr);
    th_ok(wr.st);
    cr_assert(wr.got_at - t0 < th_ms(1000));
    rlock_free(w2);
    rlock_client_free(c2);
    rlock_free(rd);
    rlock_free(w);
    free(jt);
    free(chan);
    free(name);
}

Test(rwlock, another_kind_at_the_name_is_ekind_and_left_alone)
{
    char *name = th_name("rkind");
    rlock *rd, *w, *re;
    th_ok(rlock_new_read(c, name, &rd));
    th_ok(rlock_new_write(c, name, &w));
    th_ok(rlock_new(c, name, &re));
    /* A reentrant lock of another client at a read/write lock's name:
     * Redisson's read/write lock would take it (11.1); ours refuses. */
    th_run(r, "HSET %s %s 1", name, JAVA);
    th_run(r, "PEXPIRE %s 20000", name);
    redisReply *before = dump(name);
    th_assert_status(rlock_try_lock(rd, 0, RLOCK_WATCHDOG), RLOCK_EKIND);
    th_assert_status(rlock_try_lock(w, 1000, RLOCK_WATCHDOG), RLOCK_EKIND);
    th_assert_status(rlock_lock(rd, RLOCK_WATCHDOG), RLOCK_EKIND);
    assert_same_dump(before, name);
    cr_assert(th_pttl(r, name) <= 20000);
    freeReplyObject(before);
    redisReply *keys = th_cmd(r, "KEYS {%s}:*", name);
    cr_assert_eq(keys->elements, 0, "no timeout key written");
    freeReplyObject(keys);
    th_run(r, "DEL %s", name);
    /* Our own read lock at a reentrant lock's name, asked by the very
     * thread that holds the read lock (its field is the reentrant lock's
     * field too): refused, nothing counted. */
    th_ok(rlock_lock(rd, RLOCK_WATCHDOG));
    before = dump(name);
    th_assert_status(rlock_try_lock(re, 0, RLOCK_WATCHDOG), RLOCK_EKIND);
    assert_same_dump(before, name);
    freeReplyObject(before);
    /* ... and by another thread. */
    bg other;
    memset(&other, 0, sizeof other);
    th_ok(rlock_unlock(rd));
    rlock_client *c2 = th_client(NULL, 0);
    rlock *w2, *re2;
    th_ok(rlock_new_write(c2, name, &w2));
    th_ok(rlock_new(c2, name, &re2));
    th_ok(rlock_lock(w2, RLOCK_WATCHDOG));
    before = dump(name);
    th_assert_status(rlock_try_lock(re, 0, RLOCK_WATCHDOG), RLOCK_EKIND);
    assert_same_dump(before, name);
    freeReplyObject(before);
    th_ok(rlock_unlock(w2));
    /* A key of another type: every call that reaches it says so. */
    th_run(r, "SET %s hello", name);
    th_assert_status(rlock_try_lock(rd, 0, 1000), RLOCK_EKIND);
    th_assert_status(rlock_try_lock(w, 0, 1000), RLOCK_EKIND);
    th_assert_status(rlock_unlock(rd), RLOCK_EKIND);
    th_assert_status(rlock_unlock(w), RLOCK_EKIND);
    th_assert_status(rlock_force_unlock(rd, NULL), RLOCK_EKIND);
    th_assert_status(rlock_force_unlock(w, NULL), RLOCK_EKIND);
    bool locked;
    th_assert_status(rlock_is_locked(rd, &locked), RLOCK_EKIND);
    th_assert_status(rlock_is_locked(w, &locked), RLOCK_EKIND);
    int64_t n;
    th_assert_status(rlock_hold_count(w, &n), RLOCK_EKIND);
    redisReply *v = th_cmd(r, "GET %s", name);
    cr_assert_str_eq(v->str, "hello");
    freeReplyObject(v);
    th_run(r, "DEL %s", name);
    rlock_free(w2);
    rlock_free(re2);
    rlock_client_free(c2);
    rlock_free(rd);
    rlock_free(w);
    rlock_free(re);
    free(name);
}

/* A thread that holds a name through one layout (the read lock, or a lock
 * of the reentrant lock's hash) and calls a lock of the other layout on
 * it: the two never share the field both name after the thread, so the
 * call is refused before anything is sent (RLOCK_EKIND), Redis is left as
 * it was, and the hold goes on as before (renewed by its own kind). An
 * unlock through the other layout used to reach Redis: the plain unlock
 * deleted the read/write lock, the read unlock found no read hold and
 * counted the thread's plain hold as lost, so nothing renewed it. */
Test(rwlock, other_layout_on_a_name_the_thread_holds_is_refused_before_it_is_sent)
{
    rlock_client *wc = th_client(NULL, 1000);
    char *name = th_name("rwlayout");
    rlock *rd, *re, *fa, *fe, *sp, *nr;
    th_ok(rlock_new_read(wc, name, &rd));
    th_ok(rlock_new(wc, name, &re));
    th_ok(rlock_new_fair(wc, name, &fa));
    th_ok(rlock_new_fenced(wc, name, &fe));
    th_ok(rlock_new_spin(wc, name, &sp));
    th_ok(rlock_new_nonreentrant(wc, name, &nr));
    char *owner = th_owner(wc, rlock_thread_id());
    char *t1 = tkey(name, owner, 1);
    rlock *hash_kinds[] = {re, fa, fe, sp, nr};

    th_ok(rlock_lock(rd, RLOCK_WATCHDOG));
    redisReply *before = dump(name);
    for (size_t i = 0; i < sizeof hash_kinds / sizeof hash_kinds[0]; i++) {
        th_assert_status(rlock_try_lock(hash_kinds[i], 0, RLOCK_WATCHDOG), RLOCK_EKIND);
        th_assert_status(rlock_unlock(hash_kinds[i]), RLOCK_EKIND);
    }
    assert_same_dump(before, name);
    freeReplyObject(before);
    /* Three leases: only the read lock's renewal keeps the timeout key. */
    th_sleep_ms(3000);
    cr_assert(th_pttl(r, t1) > 0, "the read hold's timeout key ran out");
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    th_ok(rlock_unlock(rd));
    cr_assert_eq(th_exists(r, name), 0);

    th_ok(rlock_lock(re, RLOCK_WATCHDOG));
    before = dump(name);
    th_assert_status(rlock_try_lock(rd, 0, RLOCK_WATCHDOG), RLOCK_EKIND);
    th_assert_status(rlock_unlock(rd), RLOCK_EKIND);
    assert_same_dump(before, name);
    freeReplyObject(before);
    th_sleep_ms(3000);
    cr_assert(th_pttl(r, name) > 0, "the plain hold was not renewed");
    th_ok(rlock_unlock(re));
    cr_assert_eq(th_exists(r, name), 0);

    for (size_t i = 0; i < sizeof hash_kinds / sizeof hash_kinds[0]; i++) {
        rlock_free(hash_kinds[i]);
    }
    rlock_free(rd);
    rlock_client_free(wc);
    free(t1);
    free(owner);
    free(name);
}

/* ---- exact outcomes through a faulty link ------------------------------- */

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

/* A read re-entry whose first send is held back: the same request sent
 * again takes the hold; the held-back copy, when it arrives, finds the
 * latch and counts nothing: one field, one timeout key more, not two. */
Test(rwlock, late_copy_of_an_answered_read_acquire_takes_nothing)
{
    tp_proxy *px = tp_new(th_port());
    cr_assert(px && tp_start(px) == 0);
    rlock_client *pc = client_at(tp_port(px), 300, 10000);
    char *name = th_name("rlate");
    rlock *l;
    th_ok(rlock_new_read(pc, name, &l));
    th_ok(rlock_lock(l, 60000)); /* scripts cached, connection made */
    char *owner = th_owner(pc, rlock_thread_id());
    int64_t delay = th_ms(1500);
    tp_delay(px, TP_REQUESTS, 100, delay);
    int64_t t0 = th_now_ms();
    th_ok(rlock_lock(l, 60000));
    cr_assert_eq(th_hget_int(r, name, owner), 2);
    while (th_now_ms() - t0 < delay + th_ms(500)) {
        th_sleep_ms(20); /* until the held-back copy has surely run */
    }
    cr_assert_eq(th_hget_int(r, name, owner), 2, "the late copy counted another hold (%lld)",
                 th_hget_int(r, name, owner));
    char *t3 = tkey(name, owner, 3);
    cr_assert_eq(th_exists(r, t3), 0);
    th_ok(rlock_unlock(l));
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0, "two locks, two unlocks: the name is still there");
    rlock_free(l);
    rlock_client_free(pc);
    tp_free(px);
    free(t3);
    free(owner);
    free(name);
}

/* An acquire of each half whose every send is held back: the caller gives
 * up, the thread's next call abandons it, and the copies that reach Redis
 * afterwards take nothing. */
Test(rwlock, abandoned_acquires_of_each_half_take_nothing_when_their_copies_arrive)
{
    tp_proxy *px = tp_new(th_port());
    cr_assert(px && tp_start(px) == 0);
    rlock_client *pc = client_at(tp_port(px), 300, 10000);
    for (int half = 0; half < 2; half++) {
        char *name = th_name(half ? "wabandon" : "rabandon");
        rlock *l;
        th_ok(half ? rlock_new_write(pc, name, &l) : rlock_new_read(pc, name, &l));
        th_ok(rlock_lock(l, 60000));
        th_ok(rlock_unlock(l));
        int64_t delay = th_ms(2000);
        tp_delay(px, TP_REQUESTS, th_ms(900), delay);
        int64_t t0 = th_now_ms();
        th_assert_status(rlock_try_lock(l, 0, 60000), RLOCK_ETIMEDOUT);
        while (th_now_ms() - t0 < th_ms(1000)) {
            th_sleep_ms(20); /* past the window: the next call goes through */
        }
        th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER); /* abandons first */
        redisReply *keys = th_cmd(r, "KEYS rlock_acquire_latch:{%s}:*", name);
        cr_assert_eq(keys->elements, 1, "a latch marks the request abandoned");
        redisReply *v = th_cmd(r, "GET %s", keys->element[0]->str);
        cr_assert_str_eq(v->str, "0");
        freeReplyObject(v);
        freeReplyObject(keys);
        while (th_now_ms() - t0 < delay + th_ms(1500)) {
            th_sleep_ms(20);
        }
        cr_assert_eq(th_exists(r, name), 0, "a late copy of the abandoned %s acquire took it",
                     half ? "write" : "read");
        keys = th_cmd(r, "KEYS {%s}:*:rwlock_timeout:*", name);
        cr_assert_eq(keys->elements, 0);
        freeReplyObject(keys);
        rlock_free(l);
        free(name);
    }
    rlock_client_free(pc);
    tp_free(px);
}

/* A read acquire that ran but whose reply was cut: the next call abandons
 * it and gives the hold back exactly as an unlock would (its timeout key
 * too), leaving the earlier hold with the lease. */
Test(rwlock, abandoned_read_acquire_that_ran_is_given_back)
{
    tp_proxy *px = tp_new(th_port());
    cr_assert(px && tp_start(px) == 0);
    rlock_client *pc = client_at(tp_port(px), 300, 10000);
    char *name = th_name("rgiveback");
    rlock *l;
    th_ok(rlock_new_read(pc, name, &l));
    th_ok(rlock_lock(l, 60000));
    char *owner = th_owner(pc, rlock_thread_id());
    /* Replies held back: the request runs, its answer comes too late. */
    int64_t delay = th_ms(2000);
    tp_delay(px, TP_REPLIES, th_ms(900), delay);
    int64_t t0 = th_now_ms();
    th_assert_status(rlock_try_lock(l, 0, 60000), RLOCK_ETIMEDOUT);
    cr_assert_eq(th_hget_int(r, name, owner), 2, "the request ran");
    while (th_now_ms() - t0 < delay + th_ms(500)) {
        th_sleep_ms(20);
    }
    int64_t n = 0;
    th_ok(rlock_hold_count(l, &n)); /* a query: settles nothing */
    cr_assert_eq(n, 2);
    th_ok(rlock_unlock(l)); /* abandons (gives hold 2 back), then unlocks hold 1 */
    cr_assert_eq(th_exists(r, name), 0, "count %lld left", th_hget_int(r, name, owner));
    char *t1 = tkey(name, owner, 1), *t2 = tkey(name, owner, 2);
    cr_assert_eq(th_exists(r, t1) + th_exists(r, t2), 0);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    rlock_free(l);
    rlock_client_free(pc);
    tp_free(px);
    free(t1);
    free(t2);
    free(owner);
    free(name);
}

/* A key of another type at the name: the read/write halves' queries and
 * rlock_wait_unlocked() read its 'mode' field, so they answer RLOCK_EKIND
 * and the key is left as it was; the reentrant lock's look only at the
 * key's existence and TTL, and take it for a lock held until it expires. */
Test(rwlock, queries_and_wait_unlocked_on_a_key_of_another_type)
{
    char *name = th_name("rwt");
    th_run(r, "SET %s foreign PX 60000", name);
    rlock *rd, *w, *plain;
    th_ok(rlock_new_read(c, name, &rd));
    th_ok(rlock_new_write(c, name, &w));
    th_ok(rlock_new(c, name, &plain));
    bool locked = false;
    th_assert_status(rlock_wait_unlocked(rd, 0, NULL), RLOCK_EKIND);
    th_assert_status(rlock_wait_unlocked(w, 200, NULL), RLOCK_EKIND);
    th_assert_status(rlock_is_locked(rd, &locked), RLOCK_EKIND);
    th_ok(rlock_is_locked(plain, &locked));
    cr_assert(locked, "the reentrant lock takes the foreign key for a lock held");
    th_assert_status(rlock_wait_unlocked(plain, 200, NULL), RLOCK_EBUSY);
    redisReply *rep = th_cmd(r, "GET %s", name);
    cr_assert(rep->type == REDIS_REPLY_STRING && strcmp(rep->str, "foreign") == 0,
              "the foreign key is left as it was");
    freeReplyObject(rep);
    cr_assert(th_pttl(r, name) > 0);
    th_run(r, "DEL %s", name);
    rlock_free(rd);
    rlock_free(w);
    rlock_free(plain);
    free(name);
}
