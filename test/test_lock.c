/* The reentrant lock against a real Redis: what the caller sees and what
 * Redis holds (hash field, hold count, TTL, published messages). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

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

TestSuite(lock, .init = setup, .fini = teardown, .timeout = 60);

Test(lock, reentrant_hold_count_in_redis)
{
    char *name = th_name("reent");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    char *owner = th_owner(c, rlock_thread_id());
    for (int i = 1; i <= 3; i++) {
        th_ok(rlock_lock(l, RLOCK_WATCHDOG));
        cr_assert_eq(th_hget_int(r, name, owner), i);
        cr_assert_eq(th_hlen(r, name), 1, "exactly one owner field");
        int64_t n;
        th_ok(rlock_hold_count(l, &n));
        cr_assert_eq(n, i);
        long long ttl = th_pttl(r, name);
        cr_assert(ttl > 25000 && ttl <= 30000, "watchdog lease 30 s, got %lld", ttl);
    }
    for (int i = 2; i >= 0; i--) {
        th_ok(rlock_unlock(l));
        if (i > 0) {
            cr_assert_eq(th_hget_int(r, name, owner), i);
            cr_assert(th_pttl(r, name) > 25000, "partial unlock resets the lease");
        }
    }
    cr_assert_eq(th_exists(r, name), 0, "key deleted at count 0");
    bool held = true;
    th_ok(rlock_is_held_by_current_thread(l, &held));
    cr_assert(!held);
    rlock_free(l);
    free(owner);
    free(name);
}

Test(lock, owner_field_format)
{
    char *name = th_name("fmt");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, 10000));
    redisReply *rep = th_cmd(r, "HKEYS %s", name);
    cr_assert_eq(rep->elements, 1);
    const char *f = rep->element[0]->str;
    /* <36-char lowercase v4 uuid>:<decimal thread id> */
    cr_assert_eq(strlen(rlock_client_id(c)), 36);
    cr_assert_eq(strncmp(f, rlock_client_id(c), 36), 0);
    cr_assert_eq(f[36], ':');
    cr_assert_eq(strtoull(f + 37, NULL, 10), rlock_thread_id());
    cr_assert_eq(rlock_client_id(c)[14], '4', "version-4 uuid");
    for (int i = 0; i < 36; i++) {
        char ch = f[i];
        cr_assert(ch == '-' || (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'));
    }
    freeReplyObject(rep);
    th_ok(rlock_unlock(l));
    rlock_free(l);
    free(name);
}

struct other {
    rlock *l;
    rlock_status st;
    int64_t count;
};

static void *unlock_from_other_thread(void *arg)
{
    struct other *o = arg;
    o->st = rlock_unlock(o->l);
    return NULL;
}

Test(lock, unlock_by_non_owner_thread_is_refused)
{
    char *name = th_name("notowner");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    char *owner = th_owner(c, rlock_thread_id());
    long long ttl_before = th_pttl(r, name);
    struct other o = {l, RLOCK_OK, 0};
    pthread_t t;
    pthread_create(&t, NULL, unlock_from_other_thread, &o);
    pthread_join(t, NULL);
    th_assert_status(o.st, RLOCK_ENOTOWNER);
    cr_assert_eq(th_hget_int(r, name, owner), 2, "hash unchanged");
    cr_assert_eq(th_hlen(r, name), 1);
    cr_assert(th_pttl(r, name) <= ttl_before);
    th_ok(rlock_unlock(l));
    th_ok(rlock_unlock(l));
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    cr_assert_eq(th_exists(r, name), 0);
    rlock_free(l);
    free(owner);
    free(name);
}

Test(lock, explicit_lease_expires)
{
    /* A client whose watchdog renews every 100 ms: were the explicit lease
     * put under renewal by mistake, the key would never expire. */
    rlock_client *wc = th_client(NULL, 300);
    char *name = th_name("lease");
    rlock *l;
    th_ok(rlock_new(wc, name, &l));
    th_ok(rlock_lock(l, 400));
    long long ttl = th_pttl(r, name);
    cr_assert(ttl > 0 && ttl <= 400, "PEXPIRE 400, got %lld", ttl);
    int64_t t;
    th_ok(rlock_remain_ttl(l, &t));
    cr_assert(t > 0 && t <= 400);
    th_wait_exists(r, name, 0, 400 + 3000); /* the lease ran out, no renewal */
    th_ok(rlock_remain_ttl(l, &t));
    cr_assert_eq(t, -2);
    bool locked = true;
    th_ok(rlock_is_locked(l, &locked));
    cr_assert(!locked);
    /* The thread held it: its unlock says the lease was lost. */
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    rlock_free(l);
    rlock_client_free(wc);
    free(name);
}

Test(lock, reentry_resets_lease)
{
    char *name = th_name("relase");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, 20000));
    th_ok(rlock_lock(l, 5000));
    long long ttl = th_pttl(r, name);
    cr_assert(ttl > 0 && ttl <= 5000, "re-entry resets the TTL to the new lease: %lld", ttl);
    th_ok(rlock_unlock(l));
    ttl = th_pttl(r, name);
    cr_assert(ttl > 0 && ttl <= 5000, "partial unlock uses the last lease: %lld", ttl);
    th_ok(rlock_unlock(l));
    rlock_free(l);
    free(name);
}

Test(lock, try_lock_zero_wait_on_held_lock)
{
    char *name = th_name("trybusy");
    /* A Redisson-format holder written by hand: another client's field. */
    th_run(r, "HSET %s 6f1c0a4e-2b7d-4c3e-9a51-0d2f8e7b1c44:57 1", name);
    th_run(r, "PEXPIRE %s 10000", name);
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_assert_status(rlock_try_lock(l, 0, RLOCK_WATCHDOG), RLOCK_EBUSY);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    cr_assert_eq(th_hget_int(r, name, "6f1c0a4e-2b7d-4c3e-9a51-0d2f8e7b1c44:57"), 1);
    bool held = true, locked = false;
    th_ok(rlock_is_held_by_current_thread(l, &held));
    th_ok(rlock_is_locked(l, &locked));
    cr_assert(!held && locked);
    int64_t n = -1;
    th_ok(rlock_hold_count(l, &n));
    cr_assert_eq(n, 0);
    bool was = false;
    th_ok(rlock_force_unlock(l, &was));
    cr_assert(was);
    th_ok(rlock_try_lock(l, 0, RLOCK_WATCHDOG));
    th_ok(rlock_unlock(l));
    rlock_free(l);
    free(name);
}

/* The one latch key matching pattern (asserts there is exactly one): its
 * value, and its PTTL through *pttl. Caller frees. */
static char *latch_value(const char *pattern, long long *pttl)
{
    redisReply *keys = th_cmd(r, "KEYS %s", pattern);
    cr_assert_eq(keys->elements, 1, "%zu latch keys match %s, want 1", keys->elements, pattern);
    redisReply *v = th_cmd(r, "GET %s", keys->element[0]->str);
    cr_assert_eq(v->type, REDIS_REPLY_STRING, "the latch key is a string");
    char *out = strdup(v->str);
    *pttl = th_pttl(r, keys->element[0]->str);
    freeReplyObject(v);
    freeReplyObject(keys);
    return out;
}

/* The next keyspace event of the latch keys other than "set" and "expire"
 * (written with PX), or NULL. */
static char *next_latch_removal(redisContext *ks)
{
    for (;;) {
        char *ev = th_next_message(ks, 5000);
        if (!ev || (strcmp(ev, "set") != 0 && strcmp(ev, "expire") != 0)) {
            return ev;
        }
        free(ev);
    }
}

Test(lock, unlock_publishes_zero_and_writes_latch)
{
    char *name = th_name("pub");
    char *chan = th_channel(name);
    redisContext *sub = th_subscribe(0, chan);
    /* Keyspace notifications of the latch keys: how each one goes away. */
    char *pattern = NULL, *events = NULL;
    cr_assert(asprintf(&pattern, "redisson_unlock_latch:{%s}:*", name) > 0);
    cr_assert(asprintf(&events, "__keyspace@0__:%s", pattern) > 0);
    th_run(r, "CONFIG SET notify-keyspace-events K$gx");
    redisContext *ks = th_psubscribe(0, events);
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    /* Each unlock writes its latch (spec: "0" still held, "1" released,
     * with a PX TTL); the library deletes them in a batch about a second
     * later, so they are read right after each unlock. */
    th_ok(rlock_unlock(l));
    long long pttl = 0;
    char *v = latch_value(pattern, &pttl);
    cr_assert_str_eq(v, "0", "latch of a partial unlock");
    cr_assert(pttl > 0, "latch has a PX TTL, PTTL %lld", pttl);
    free(v);
    th_ok(rlock_unlock(l));
    redisReply *keys = th_cmd(r, "KEYS %s", pattern);
    int ones = 0;
    for (size_t i = 0; i < keys->elements; i++) {
        redisReply *g = th_cmd(r, "GET %s", keys->element[i]->str);
        if (g->type == REDIS_REPLY_STRING && strcmp(g->str, "1") == 0) {
            ones++;
            cr_assert(th_pttl(r, keys->element[i]->str) > 0, "latch \"1\" has a PX TTL");
        }
        freeReplyObject(g);
    }
    freeReplyObject(keys);
    cr_assert_eq(ones, 1, "the full unlock wrote one latch \"1\"");
    /* Messages arrive in publishing order: had the partial unlock
     * published, its message would come first. */
    char *m = th_next_message(sub, 2000);
    cr_assert_not_null(m, "full unlock publishes");
    cr_assert_str_eq(m, "0");
    free(m);
    cr_assert_null(th_next_message(sub, 300), "one message: a partial unlock publishes nothing");
    /* Both latches are deleted (a DEL, not their 20 s TTL running out). */
    for (int i = 0; i < 2; i++) {
        char *ev = next_latch_removal(ks);
        cr_assert_not_null(ev, "latch key %d still there", i);
        cr_assert_str_eq(ev, "del", "latch key %d went by %s, not deleted", i, ev);
        free(ev);
    }
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(ks);
    redisFree(sub);
    free(events);
    free(pattern);
    free(chan);
    rlock_free(l);
    free(name);
    th_run(r, "CONFIG SET notify-keyspace-events %s", ""); /* as the other tests expect */
}

Test(lock, force_unlock_publishes_and_forgets)
{
    char *name = th_name("force");
    char *chan = NULL;
    cr_assert(asprintf(&chan, "redisson_lock__channel:{%s}", name) > 0);
    redisContext *sub = th_subscribe(0, chan);
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    bool was = true;
    th_ok(rlock_force_unlock(l, &was));
    cr_assert(!was, "nothing to delete");
    cr_assert_null(th_next_message(sub, 200), "no publish when nothing was deleted");
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_ok(rlock_force_unlock(l, &was));
    cr_assert(was);
    cr_assert_eq(th_exists(r, name), 0);
    char *m = th_next_message(sub, 2000);
    cr_assert_not_null(m);
    cr_assert_str_eq(m, "0");
    free(m);
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_ok(rlock_force_unlock(l, NULL));
    redisFree(sub);
    free(chan);
    rlock_free(l);
    free(name);
}

Test(lock, braces_in_name_keep_the_tag)
{
    char *base = th_name("tag");
    char *name = NULL;
    cr_assert(asprintf(&name, "{%s}.x", base) > 0);
    char *chan = NULL;
    cr_assert(asprintf(&chan, "redisson_lock__channel:%s", name) > 0);
    redisContext *sub = th_subscribe(0, chan);
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    cr_assert_str_eq(rlock_name(l), name);
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    cr_assert_eq(th_exists(r, name), 1);
    th_ok(rlock_unlock(l));
    char *m = th_next_message(sub, 2000);
    cr_assert_not_null(m, "channel has no extra braces when the name has a tag");
    free(m);
    redisFree(sub);
    rlock_free(l);
    free(chan);
    free(name);
    free(base);
}

Test(lock, wrongtype_key_is_ekind)
{
    char *name = th_name("wrongtype");
    th_run(r, "SET %s hello", name);
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    /* EXISTS is true and HEXISTS fails: the script says so. */
    th_assert_status(rlock_try_lock(l, 0, 1000), RLOCK_EKIND);
    int64_t n;
    th_assert_status(rlock_hold_count(l, &n), RLOCK_EKIND);
    bool held;
    th_assert_status(rlock_is_held_by_current_thread(l, &held), RLOCK_EKIND);
    th_assert_status(rlock_unlock(l), RLOCK_EKIND);
    redisReply *rep = th_cmd(r, "GET %s", name);
    cr_assert_str_eq(rep->str, "hello", "the other value is left alone");
    freeReplyObject(rep);
    rlock_free(l);
    free(name);
}

Test(lock, read_write_hash_naming_our_own_field_is_ekind)
{
    /* A read/write lock that this very thread reads: its reader field has
     * the name of our owner field. A reentrant acquire must not count
     * itself into it (it did, before the 'mode' check came first). */
    char *name = th_name("rwown");
    char *owner = th_owner(c, rlock_thread_id());
    th_run(r, "HSET %s mode read %s 1", name, owner);
    th_run(r, "PEXPIRE %s 20000", name);
    redisReply *before = th_cmd(r, "DUMP %s", name);
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_assert_status(rlock_try_lock(l, 0, RLOCK_WATCHDOG), RLOCK_EKIND);
    redisReply *after = th_cmd(r, "DUMP %s", name);
    cr_assert(after->len == before->len && memcmp(after->str, before->str, after->len) == 0,
              "the read/write lock was changed");
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    freeReplyObject(before);
    freeReplyObject(after);
    th_run(r, "DEL %s", name);
    rlock_free(l);
    free(owner);
    free(name);
}

Test(lock, key_without_ttl_is_respected)
{
    /* spec 11.3: a holder that left no TTL. try_lock must not wait forever. */
    char *name = th_name("nottl");
    th_run(r, "HSET %s someone-else:1 1", name);
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    int64_t t0 = th_now_ms();
    th_assert_status(rlock_try_lock(l, 300, RLOCK_WATCHDOG), RLOCK_EBUSY);
    cr_assert(th_now_ms() - t0 < th_ms(5000), "gave up after its 300 ms wait");
    int64_t ttl;
    th_ok(rlock_remain_ttl(l, &ttl));
    cr_assert_eq(ttl, -1);
    th_run(r, "DEL %s", name);
    rlock_free(l);
    free(name);
}
