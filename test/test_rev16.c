/* An outside adversarial review of issue 16 (the Redisson lock family:
 * fair, fenced, spin, non-reentrant, read/write), against a real Redis.
 * Each test is one finding and asserts the correct behaviour: it failed
 * until its defect was fixed, and runs since (each was disabled until
 * then). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
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

TestSuite(rev16, .init = setup, .fini = teardown, .timeout = 120);

/* ---- helpers ------------------------------------------------------------ */

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

/* prefix(p, name): "p:{name}", or "p:name" when the name has a '{'. */
static char *prefixed(const char *p, const char *name)
{
    char *s = NULL;
    if (strchr(name, '{')) {
        cr_assert(asprintf(&s, "%s:%s", p, name) > 0);
    } else {
        cr_assert(asprintf(&s, "%s:{%s}", p, name) > 0);
    }
    return s;
}

static long long llen(const char *key)
{
    redisReply *rep = th_cmd(r, "LLEN %s", key);
    long long v = rep->integer;
    freeReplyObject(rep);
    return v;
}

__attribute__((unused)) static bool list_has(const char *key, const char *member)
{
    redisReply *rep = th_cmd(r, "LRANGE %s 0 -1", key);
    bool found = false;
    for (size_t i = 0; i < rep->elements; i++) {
        found = found || strcmp(rep->element[i]->str, member) == 0;
    }
    freeReplyObject(rep);
    return found;
}

static rlock_client *client_with(const char *url, int64_t watchdog_ms, int64_t cmd_ms,
                                 int64_t fair_wait_ms, th_lost_count *lost)
{
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url ? url : th_url();
    cfg.watchdog_timeout_ms = watchdog_ms;
    cfg.command_timeout_ms = cmd_ms;
    cfg.fair_wait_timeout_ms = fair_wait_ms;
    if (lost) {
        cfg.on_lock_lost = th_count_lost;
        cfg.on_lock_lost_arg = lost;
    }
    return th_client_cfg(&cfg);
}

static char *url_of_port(int port)
{
    char *s = NULL;
    cr_assert(asprintf(&s, "redis://127.0.0.1:%d", port) > 0);
    return s;
}

/* A lock call on its own thread: rlock_lock_ex(wait_ms, lease_ms, cancel)
 * on a handle made by ctor; the hold is kept (the thread exits holding). */
typedef rlock_status (*ctor_fn)(rlock_client *, const char *, rlock **);
typedef struct bgl {
    rlock_client *c;
    const char *name;
    ctor_fn ctor;
    int64_t wait_ms, lease_ms;
    rlock_cancel *cancel;
    rlock_status st;
    int64_t returned_at;
    pthread_t th;
} bgl;

static void *bgl_main(void *arg)
{
    bgl *b = arg;
    rlock *l;
    th_ok(b->ctor(b->c, b->name, &l));
    rlock_status st = rlock_lock_ex(l, b->wait_ms, b->lease_ms, b->cancel, NULL);
    b->st = st;
    __atomic_store_n(&b->returned_at, th_now_ms(), __ATOMIC_RELEASE);
    rlock_free(l);
    return NULL;
}

static void bgl_start(bgl *b, rlock_client *cl, const char *name, ctor_fn ctor, int64_t wait_ms,
                      int64_t lease_ms, rlock_cancel *cancel)
{
    memset(b, 0, sizeof *b);
    b->c = cl;
    b->name = name;
    b->ctor = ctor;
    b->wait_ms = wait_ms;
    b->lease_ms = lease_ms;
    b->cancel = cancel;
    b->st = RLOCK_EINVAL;
    cr_assert_eq(pthread_create(&b->th, NULL, bgl_main, b), 0);
}

static bool bgl_returned(bgl *b)
{
    return __atomic_load_n(&b->returned_at, __ATOMIC_ACQUIRE) != 0;
}

/* ---- FINDING 1 ---------------------------------------------------------- */

/* FINDING 1: a thread that holds the read lock of a name and asks for the
 * fenced lock of the same name is let in: fenced_acquire.lua checks the
 * owner's field ("<uuid>:<tid>", the reader's field too) before the
 * 'mode' field, so it HINCRBYs the read hold's count (a read count of 2
 * with one timeout key), INCRs the token key and answers RLOCK_OK. The
 * docs (api.md, "Never mix kinds on one name") promise RLOCK_EKIND and no
 * change. (acquire.lua and fair_acquire.lua look at 'mode' first, and
 * answer RLOCK_EKIND.) */
Test(rev16, read_holder_asking_the_fenced_lock_of_its_name_is_ekind_untouched)
{
    char *name = th_name("f1");
    rlock *rd, *fe;
    th_ok(rlock_new_read(c, name, &rd));
    th_ok(rlock_new_fenced(c, name, &fe));
    char *owner = th_owner(c, rlock_thread_id());
    char *tk = prefixed("redisson_lock_token", name);
    th_ok(rlock_lock(rd, 30000));
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    rlock_status st = rlock_try_lock(fe, 0, 30000);
    long long count = th_hget_int(r, name, owner);
    long long token_key = th_exists(r, tk);
    if (st == RLOCK_OK) {
        rlock_unlock(fe);
    }
    th_ok(rlock_unlock(rd));
    th_assert_status(st, RLOCK_EKIND);
    cr_assert_eq(count, 1, "the read hold's count was changed to %lld by the fenced lock", count);
    cr_assert_eq(token_key, 0, "a token was taken on a read/write lock's name");
    rlock_free(rd);
    rlock_free(fe);
    free(tk);
    free(owner);
    free(name);
}

/* ---- FINDING 2 ---------------------------------------------------------- */

/* FINDING 2: a refused attempt of another kind re-labels the thread's hold
 * of the name in the registry. rlock__hold_prepare() (core/holds.c:199-202)
 * sets found->kind = kind for any attempt, before Redis answers; after the
 * RLOCK_EKIND the record of the thread's read hold says "reentrant", so the
 * watchdog renews it with renew.lua (the name's TTL only) instead of
 * read_renew.lua: the read hold's timeout key runs out after one
 * watchdog_timeout_ms while the name is kept alive. The next reader's
 * unlock then takes the lock for free (its timeout keys are all gone), a
 * writer gets in, and the holder, still renewing, is not told until
 * after. Expected: the refusal changes nothing, the timeout key is
 * renewed, and the writer stays out. */
Test(rev16, ekind_refusal_does_not_change_how_the_read_hold_is_renewed)
{
    char *name = th_name("f2");
    th_lost_count lost = {PTHREAD_MUTEX_INITIALIZER, 0};
    rlock_client *c1 = client_with(NULL, 1500, 0, 0, &lost);
    rlock *rd, *re;
    th_ok(rlock_new_read(c1, name, &rd));
    th_ok(rlock_new(c1, name, &re));
    char *owner = th_owner(c1, rlock_thread_id());
    char *t1 = tkey(name, owner, 1);
    th_ok(rlock_lock(rd, RLOCK_WATCHDOG));
    th_assert_status(rlock_try_lock(re, 0, RLOCK_WATCHDOG), RLOCK_EKIND);
    /* Three leases: the watchdog renews every 500 ms. */
    th_sleep_ms(4500);
    long long t1_left = th_pttl(r, t1);
    /* Another client's reader comes and goes, then a writer tries. */
    rlock *rd2, *wr2;
    th_ok(rlock_new_read(c, name, &rd2));
    th_ok(rlock_new_write(c, name, &wr2));
    th_ok(rlock_lock(rd2, 10000));
    th_ok(rlock_unlock(rd2));
    rlock_status w = rlock_try_lock(wr2, 0, 10000);
    if (w == RLOCK_OK) {
        rlock_unlock(wr2);
    }
    rlock_status u = rlock_unlock(rd);
    cr_assert(t1_left > 0, "the read hold's timeout key was not renewed (PTTL %lld)", t1_left);
    th_assert_status(w, RLOCK_EBUSY);
    th_ok(u);
    rlock_free(rd2);
    rlock_free(wr2);
    rlock_free(rd);
    rlock_free(re);
    rlock_client_free(c1);
    free(t1);
    free(owner);
    free(name);
}

/* ---- FINDING 3 ---------------------------------------------------------- */

/* FINDING 3: a fair waiter whose give-up cannot reach Redis (the link is
 * down when its wait is cancelled) keeps its place in Redis's queue, and
 * the client never tries again, though it knows the waiter left
 * (sync/acquire.c:271-276, "a give-up that fails leaves the place to be
 * purged when its deadline passes"). The waiter queued behind it then
 * sleeps until the dead place's deadline (the holder's lease plus
 * fair_wait_timeout_ms: 5 minutes by default; 60 s here) although the
 * lock is free and the link is back. Expected: the give-up is kept as a
 * doubt and sent again once Redis answers (as an unanswered acquire is
 * abandoned), so the next waiter gets the free lock at once. */
Test(rev16, fair_give_up_lost_with_the_link_is_sent_again_and_does_not_block_the_queue)
{
    char *name = th_name("f3");
    char *q = prefixed("redisson_lock_queue", name);
    tp_proxy *p = tp_new(th_port());
    cr_assert_not_null(p);
    cr_assert_eq(tp_start(p), 0);
    char *purl = url_of_port(tp_port(p));
    rlock_client *ca = client_with(purl, 0, 1000, 60000, NULL);
    rlock_client *cb = client_with(NULL, 0, 0, 60000, NULL);
    rlock *h;
    th_ok(rlock_new_fair(c, name, &h));
    th_ok(rlock_lock(h, 30000));
    rlock_cancel *tok;
    th_ok(rlock_cancel_new(&tok));
    bgl a, b;
    bgl_start(&a, ca, name, rlock_new_fair, RLOCK_WAIT_FOREVER, 30000, tok);
    cr_assert(TH_POLL(llen(q) == 1, 3000), "A is queued");
    bgl_start(&b, cb, name, rlock_new_fair, 10000, 30000, NULL);
    cr_assert(TH_POLL(llen(q) == 2, 3000), "B is queued behind A");
    /* A's link goes silent; A is cancelled and cannot leave the queue. */
    tp_mute(p, true);
    rlock_cancel_fire(tok);
    cr_assert(TH_POLL(bgl_returned(&a), 5000));
    pthread_join(a.th, NULL);
    th_assert_status(a.st, RLOCK_ECANCELED);
    tp_mute(p, false);
    /* A's client answers again (any call reconnects it). */
    rlock *la;
    th_ok(rlock_new_fair(ca, name, &la));
    bool locked;
    cr_assert(TH_POLL(rlock_is_locked(la, &locked) == RLOCK_OK, 5000));
    long long queued = llen(q); /* A's place and B's */
    int64_t released = th_now_ms();
    th_ok(rlock_unlock(h));
    cr_assert(TH_POLL(bgl_returned(&b), 12000));
    pthread_join(b.th, NULL);
    int64_t took = b.returned_at - released;
    cr_assert_eq(b.st, RLOCK_OK, "B: %s after %lld ms (%lld places queued at the release)",
                 rlock_status_name(b.st), (long long)took, queued);
    cr_assert(took < th_ms(3000),
              "B took the free lock %lld ms after the release (%lld places queued at the "
              "release)",
              (long long)took, queued);
    rlock_free(la);
    rlock_free(h);
    rlock_cancel_free(tok);
    rlock_client_free(ca);
    rlock_client_free(cb);
    tp_free(p);
    free(purl);
    free(q);
    free(name);
}

/* ---- FINDING 4 ---------------------------------------------------------- */

/* FINDING 4: the registry's deadline for a watchdog read hold follows the
 * name's TTL, not the hold's. read_renew.lua answers the name's PTTL after
 * the renewal, and the watchdog takes it as the hold's life
 * (sync/watchdog.c:269-277, rlock__holder_told(x, sent, res[i])); but a
 * read hold lives by its own timeout keys, which the renewal gives only
 * the lease: the name's TTL is the longest reader's (here another
 * client's reader with a 60 s lease). When the renewals stop (a link that
 * accepts and never answers), the hold's timeout key runs out after the
 * lease, the other reader's unlock then frees the lock (expired timeout
 * keys count as gone), a writer gets in, and the holder is told nothing
 * until about 60 s later: engine.md I7 ("a holder is told before another
 * owner can take its lock") is broken for the read lock. Expected: the
 * loss is reported by the time the hold's timeout key can expire, so
 * before the writer is in. */
Test(rev16, read_hold_is_reported_lost_before_a_writer_gets_in_when_renewals_stop)
{
    char *name = th_name("f4");
    tp_proxy *p = tp_new(th_port());
    cr_assert_not_null(p);
    cr_assert_eq(tp_start(p), 0);
    char *purl = url_of_port(tp_port(p));
    th_lost_count lost = {PTHREAD_MUTEX_INITIALIZER, 0};
    rlock_client *c1 = client_with(purl, 1500, 500, 0, &lost);
    rlock *rd1, *rd2, *wr;
    th_ok(rlock_new_read(c1, name, &rd1));
    th_ok(rlock_new_read(c, name, &rd2));
    th_ok(rlock_new_write(c, name, &wr));
    char *owner = th_owner(c1, rlock_thread_id());
    char *t1 = tkey(name, owner, 1);
    th_ok(rlock_lock(rd1, RLOCK_WATCHDOG));
    th_ok(rlock_lock(rd2, 60000)); /* another reader, long explicit lease */
    /* Let a renewal round of c1 run (every 500 ms). */
    th_wait_renewal(r, t1, 3000);
    tp_mute(p, true);
    /* c1's timeout key runs out with its lease; the name lives on. */
    th_wait_exists(r, t1, 0, 4000);
    cr_assert_eq(th_exists(r, name), 1);
    int told_before = th_lost_calls(&lost);
    th_ok(rlock_unlock(rd2));
    rlock_status w = rlock_try_lock(wr, 0, 10000);
    int told_when_writer_tried = th_lost_calls(&lost);
    if (w == RLOCK_OK) {
        th_ok(rlock_unlock(wr));
    }
    tp_mute(p, false);
    cr_assert(told_before >= 1,
              "the read hold's timeout key ran out and its holder was not told (writer: %s, "
              "told when the writer tried: %d)",
              rlock_status_name(w), told_when_writer_tried);
    rlock_free(rd1);
    rlock_free(rd2);
    rlock_free(wr);
    rlock_client_free(c1);
    tp_free(p);
    free(purl);
    free(t1);
    free(owner);
    free(name);
}

/* ---- FINDING 5 ---------------------------------------------------------- */

/* FINDING 5: a read acquire that the server's ACL refuses half-way leaves
 * a lock behind that never expires. The read timeout key
 * ({name}:<owner>:rwlock_timeout:1) is built inside read_acquire.lua and
 * not declared in KEYS, so Redis checks it only when the script SETs it,
 * after HSET mode/owner: a user whose key patterns cover the name but not
 * the '{'-prefixed timeout keys (e.g. ~mylock:*) gets RLOCK_EPERM, and the
 * name is left as {mode: read, <owner>: 1} WITHOUT a TTL (the PEXPIRE comes
 * after the refused SET). No writer ever gets in until someone force-
 * unlocks it; the same thread then gets RLOCK_EDEADLK asking for the write
 * lock. engine.md I12 promises "a refused write changes nothing"
 * (read_acquire.lua:63-70: writes before the timeout key is touched).
 * Expected: RLOCK_EPERM and the name untouched. */
Test(rev16, read_acquire_refused_by_the_acl_leaves_nothing_behind)
{
    char *user = th_name("r16acl");
    for (char *s = user; *s; s++) {
        if (*s == ':') {
            *s = '_';
        }
    }
    redisReply *rep =
        th_cmd(r, "ACL SETUSER %s on >pw ~rev16acl:* ~redisson* ~rlock* &* +@all", user);
    cr_assert(rep->type == REDIS_REPLY_STATUS, "ACL SETUSER");
    freeReplyObject(rep);
    char *url = NULL;
    cr_assert(asprintf(&url, "redis://%s:pw@127.0.0.1:%d", user, th_port()) > 0);
    rlock_client *cl = client_with(url, 0, 0, 0, NULL);
    char *base = th_name("x");
    char *name = NULL;
    cr_assert(asprintf(&name, "rev16acl:%s", base) > 0);
    rlock *rd;
    th_ok(rlock_new_read(cl, name, &rd));
    rlock_status st = rlock_try_lock(rd, 0, 30000);
    long long exists = th_exists(r, name), ttl = th_pttl(r, name);
    th_run(r, "DEL %s", name);
    th_run(r, "ACL DELUSER %s", user);
    th_assert_status(st, RLOCK_EPERM);
    cr_assert_eq(exists, 0, "a refused read acquire left the name behind (PTTL %lld)", ttl);
    rlock_free(rd);
    rlock_client_free(cl);
    free(name);
    free(base);
    free(url);
    free(user);
}

/* FINDING 5, the other read/write scripts: the same order (a key not in
 * KEYS written, or read, after the hash changed) in read_unlock.lua's and
 * read_abandon.lua's partial release (HINCRBY, then the timeout keys) and
 * in write_unlock.lua's partial release (HINCRBY, then the PTTLs of the
 * read holds' timeout keys). Each script is run as an ACL user that may
 * not write (or not touch) '{'-tagged keys: the server refuses it
 * (NOPERM) and the hash, the count and the timeout keys are as they were.
 * read_acquire.lua's re-entry is checked here too (the engine test above
 * takes its first-hold path). */

/* lua/<file>, run from the tree's root. */
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

/* A connection as a fresh ACL user whose key patterns are pats. */
static redisContext *acl_user(const char *pats, char **user)
{
    *user = th_name("r16u");
    for (char *s = *user; *s; s++) {
        if (*s == ':') {
            *s = '_';
        }
    }
    redisReply *set = th_cmd(r, "ACL SETUSER %s on >pw &* +@all", *user);
    cr_assert(set->type == REDIS_REPLY_STATUS, "ACL SETUSER");
    freeReplyObject(set);
    char *copy = strdup(pats), *save = NULL;
    for (char *p = strtok_r(copy, " ", &save); p; p = strtok_r(NULL, " ", &save)) {
        set = th_cmd(r, "ACL SETUSER %s %s", *user, p);
        cr_assert(set->type == REDIS_REPLY_STATUS, "ACL SETUSER %s: %s", p,
                  set->type == REDIS_REPLY_ERROR ? set->str : "?");
        freeReplyObject(set);
    }
    free(copy);
    redisContext *u = redisConnect("127.0.0.1", th_port());
    cr_assert(u && !u->err);
    redisReply *rep = redisCommand(u, "AUTH %s pw", *user);
    cr_assert(rep && rep->type == REDIS_REPLY_STATUS, "AUTH");
    freeReplyObject(rep);
    return u;
}

static void acl_user_free(redisContext *u, char *user)
{
    redisFree(u);
    th_run(r, "ACL DELUSER %s", user);
    free(user);
}

static void assert_noperm(redisReply *rep, const char *what)
{
    cr_assert(rep, "%s: no reply", what);
    /* NOPERM, or (Redis 7.0, from inside a script) "ERR The user executing
     * the script can't access ...": what the library maps to RLOCK_EPERM */
    cr_assert(rep->type == REDIS_REPLY_ERROR &&
                  (strstr(rep->str, "NOPERM") || strstr(rep->str, "script can't access")),
              "%s: not refused by the ACL (reply type %d%s%s)", what, rep->type,
              rep->type == REDIS_REPLY_ERROR ? ": " : "",
              rep->type == REDIS_REPLY_ERROR ? rep->str : "");
    freeReplyObject(rep);
}

Test(rev16, read_scripts_refused_by_the_acl_change_nothing)
{
    /* read-only access to the timeout keys */
    char *user;
    redisContext *u = acl_user("~rev16acl:* %R~{rev16acl:* ~redisson* ~rlock*", &user);
    char *name = th_name("rev16acl:rs");
    char *owner = th_owner(c, 1);
    char *t1 = tkey(name, owner, 1), *t2 = tkey(name, owner, 2);
    char *ch = prefixed("redisson_rwlock", name);
    char *latch = prefixed("redisson_unlock_latch", name);
    char *alatch = prefixed("rlock_acquire_latch", name);
    char *bodies[] = {script_body("read_unlock.lua"), script_body("read_abandon.lua"),
                      script_body("read_acquire.lua")};
    for (int i = 0; i < 3; i++) {
        th_run(r, "DEL %s %s %s %s %s", name, t1, t2, latch, alatch);
        th_run(r, "HSET %s mode read %s 2", name, owner);
        th_run(r, "PEXPIRE %s 20000", name);
        th_run(r, "SET %s 1 PX 5000", t1); /* shorter than the lease: extended */
        th_run(r, "SET %s 1 PX 20000", t2);
        redisReply *rep;
        if (i == 0) { /* a partial read unlock */
            rep = redisCommand(u, "EVAL %s 3 %s %s %s 30000 %s publish 20000", bodies[0], name, ch,
                               latch, owner);
            assert_noperm(rep, "read_unlock.lua");
        } else if (i == 1) { /* the abandon of a read re-entry that ran */
            rep = redisCommand(u, "EVAL %s 3 %s %s %s %s 20000 30000 0 publish 1", bodies[1], name,
                               ch, alatch, owner);
            assert_noperm(rep, "read_abandon.lua");
        } else { /* a read re-entry (a resend: the latch would be written) */
            rep = redisCommand(u, "EVAL %s 2 %s %s 30000 %s 2 20000 1", bodies[2], name, alatch,
                               owner);
            assert_noperm(rep, "read_acquire.lua");
            char *t3 = tkey(name, owner, 3);
            long long e3 = th_exists(r, t3);
            free(t3);
            cr_assert_eq(e3, 0);
        }
        cr_assert_eq(th_hget_int(r, name, owner), 2, "script %d changed the count", i);
        cr_assert_eq(th_exists(r, t2), 1, "script %d deleted a timeout key", i);
        long long p1 = th_pttl(r, t1);
        cr_assert(p1 > 0 && p1 <= 5000, "script %d extended a timeout key (PTTL %lld)", i, p1);
        cr_assert_eq(th_exists(r, latch), 0);
        cr_assert_eq(th_exists(r, alatch), 0);
    }
    th_run(r, "DEL %s %s %s %s %s", name, t1, t2, latch, alatch);
    for (int i = 0; i < 3; i++) {
        free(bodies[i]);
    }
    acl_user_free(u, user);
    free(alatch);
    free(latch);
    free(ch);
    free(t2);
    free(t1);
    free(owner);
    free(name);
}

Test(rev16, write_unlock_refused_by_the_acl_changes_nothing)
{
    /* no access to the timeout keys at all */
    char *user;
    redisContext *u = acl_user("~rev16acl:* ~redisson* ~rlock*", &user);
    char *name = th_name("rev16acl:wu");
    char *owner = th_owner(c, 1);
    char *writer = NULL;
    cr_assert(asprintf(&writer, "%s:write", owner) > 0);
    char *t1 = tkey(name, owner, 1);
    char *ch = prefixed("redisson_rwlock", name);
    char *latch = prefixed("redisson_unlock_latch", name);
    th_run(r, "HSET %s mode write %s 2 %s 1", name, writer, owner); /* it reads under it */
    th_run(r, "PEXPIRE %s 20000", name);
    th_run(r, "SET %s 1 PX 20000", t1);
    char *body = script_body("write_unlock.lua");
    redisReply *rep =
        redisCommand(u, "EVAL %s 3 %s %s %s 30000 %s publish 20000", body, name, ch, latch, owner);
    long long count = th_hget_int(r, name, writer), ttl = th_pttl(r, name);
    th_run(r, "DEL %s %s %s", name, t1, latch);
    assert_noperm(rep, "write_unlock.lua");
    cr_assert_eq(count, 2, "a refused partial write unlock changed the count");
    cr_assert(ttl > 0 && ttl <= 20000, "a refused partial write unlock changed the TTL (%lld)",
              ttl);
    free(body);
    acl_user_free(u, user);
    free(latch);
    free(ch);
    free(t1);
    free(writer);
    free(owner);
    free(name);
}

/* ---- FINDING 6 ---------------------------------------------------------- */

/* FINDING 6: the write half's re-entry ADDS its lease to the TTL left
 * (write_acquire.lua, as Redisson's), but the registry counts it as the
 * reentrant lock's re-entry, which SETS the TTL to the lease
 * (sync/acquire.c:127-133 rlock__hold_ttl_may, and rlock__hold_acquired's
 * thread_told(sent, lease)). After lock(5000) and lock(300) Redis holds the
 * write lock for 5.3 s, but 300 ms later the registry takes the hold for
 * expired: the thread's next lock call answers RLOCK_ELOST without asking
 * Redis, while Redis (and rlock_is_held_by_current_thread()) still says it
 * holds the lock for 4.7 s more. A holder told "lost" stops caring while
 * its hold still blocks everyone. The read half has the same mismatch
 * (each read hold lives by its own timeout key: a short re-entry does not
 * shorten the earlier holds), with the same false RLOCK_ELOST.
 * Expected: the third lock re-enters (count 3). */
Test(rev16, write_reentry_with_a_shorter_lease_is_not_reported_lost_while_redis_holds_it)
{
    char *name = th_name("f6");
    rlock *l;
    th_ok(rlock_new_write(c, name, &l));
    th_ok(rlock_lock(l, th_ms(5000)));
    th_ok(rlock_lock(l, th_ms(300)));
    long long ttl = th_pttl(r, name);
    cr_assert(ttl > th_ms(5000), "write re-entry adds its lease (PTTL %lld)", ttl);
    th_sleep_ms(th_ms(600)); /* past the re-entry's own lease, well within the TTL */
    bool held = false;
    th_ok(rlock_is_held_by_current_thread(l, &held));
    cr_assert(held);
    rlock_status st = rlock_lock(l, th_ms(5000));
    long long left = th_pttl(r, name);
    for (int i = 0; i < 3; i++) {
        rlock_unlock(l);
    }
    cr_assert_eq(st, RLOCK_OK, "re-entry of a write hold Redis keeps %lld ms more: %s", left,
                 rlock_status_name(st));
    rlock_free(l);
    free(name);
}

/* FINDING 6, the read half: each read hold lives by its own timeout key,
 * so a short re-entry does not shorten the holds below it; the thread's
 * read hold lives as long as its longest key. After lock(5000) and
 * lock(300), 600 ms later the first key still has 4.4 s: the next lock
 * must re-enter (count 3), not answer RLOCK_ELOST from the registry's
 * guess. */
Test(rev16, read_reentry_with_a_shorter_lease_is_not_reported_lost_while_its_first_hold_lives)
{
    char *name = th_name("f6r");
    rlock *l;
    th_ok(rlock_new_read(c, name, &l));
    th_ok(rlock_lock(l, th_ms(5000)));
    th_ok(rlock_lock(l, th_ms(300)));
    th_sleep_ms(th_ms(600));
    rlock_status st = rlock_lock(l, th_ms(5000));
    long long ttl = th_pttl(r, name);
    int64_t count = 0;
    redisReply *rep = th_cmd(r, "HGETALL %s", name);
    for (size_t i = 0; i + 1 < rep->elements; i += 2) {
        if (strcmp(rep->element[i]->str, "mode") != 0) {
            count = strtoll(rep->element[i + 1]->str, NULL, 10);
        }
    }
    freeReplyObject(rep);
    for (int i = 0; i < 3; i++) {
        rlock_unlock(l);
    }
    cr_assert_eq(st, RLOCK_OK, "re-entry of a read hold whose first key lives on (name PTTL %lld): %s",
                 ttl, rlock_status_name(st));
    cr_assert_eq(count, 3, "read count after three locks: %lld", (long long)count);
    cr_assert_eq(th_exists(r, name), 0);
    rlock_free(l);
    free(name);
}

/* How long Redis keeps thread-owner's hold of name, in ms: the write half,
 * the name's PTTL while its ":write" field stands; the read half, the
 * longest of its own timeout keys, no longer than the name's PTTL. <= 0:
 * gone. */
static long long hold_life(const char *name, bool write)
{
    redisReply *rep = th_cmd(r, "HGETALL %s", name);
    char owner[200] = "";
    long long count = 0;
    for (size_t i = 0; i + 1 < rep->elements; i += 2) {
        const char *f = rep->element[i]->str;
        size_t n = strlen(f);
        bool wf = n > 6 && strcmp(f + n - 6, ":write") == 0;
        if (strcmp(f, "mode") != 0 && wf == write) {
            snprintf(owner, sizeof owner, "%s", f);
            count = strtoll(rep->element[i + 1]->str, NULL, 10);
        }
    }
    freeReplyObject(rep);
    if (!owner[0]) {
        return 0;
    }
    long long name_ttl = th_pttl(r, name);
    if (write) {
        return name_ttl;
    }
    long long best = 0;
    for (long long k = 1; k <= count; k++) {
        char *key = tkey(name, owner, (int)k);
        long long t = th_pttl(r, key);
        free(key);
        best = t > best ? t : best;
    }
    return best < name_ttl ? best : name_ttl;
}

/* FINDING 6, both directions: after two locks of one thread with leases
 * a then b, the registry (RLOCK_STAT_HELD) keeps counting the hold until
 * at most a moment before Redis lets it go, and never after: the write
 * half's re-entry adds its lease to the TTL left (a + b), the read half's
 * holds each live by their own key (max(a, b)). A registry that believed
 * the hold lived longer than Redis keeps it would let another owner in
 * before its holder is told (engine.md I6, I7); one that believes it
 * shorter answers RLOCK_ELOST for a hold Redis still has. */
Test(rev16, reentry_deadline_is_redis_own_in_both_directions)
{
    static const struct {
        bool write;
        int64_t a, b;
    } cases[] = {{true, 900, 300}, {true, 300, 900}, {false, 900, 300}, {false, 300, 900}};
    char bad[1024] = "";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *name = th_name("f6b");
        rlock *l;
        th_ok((cases[i].write ? rlock_new_write : rlock_new_read)(c, name, &l));
        th_ok(rlock_lock(l, th_ms(cases[i].a)));
        th_ok(rlock_lock(l, th_ms(cases[i].b)));
        int64_t reg_gone = -1, redis_gone = -1, end = th_now_ms() + th_ms(3000);
        bool late = false;
        while (th_now_ms() < end && (reg_gone < 0 || redis_gone < 0)) {
            /* Redis first: a hold it has let go must be gone from the
             * registry by the time it is asked right after. */
            long long life = hold_life(name, cases[i].write);
            int64_t at = th_now_ms();
            uint64_t held = 0;
            th_ok(rlock_client_stat(c, RLOCK_STAT_HELD, &held));
            if (held == 0 && reg_gone < 0) {
                reg_gone = at;
            }
            if (life <= 0 && redis_gone < 0) {
                redis_gone = at;
            }
            /* Two clocks read in whole ms (ours, Redis's): a few ms of
             * grain, never a lease. */
            if (life <= 0 && held != 0 && at - redis_gone > 5) {
                late = true;
            }
            th_sleep_ms(2);
        }
        size_t n = strlen(bad);
        if (late || reg_gone < 0 || redis_gone < 0 || redis_gone - reg_gone > th_ms(100)) {
            snprintf(bad + n, sizeof bad - n,
                     " %s %lld then %lld: registry let go %lld ms before Redis%s;",
                     cases[i].write ? "write" : "read", (long long)cases[i].a,
                     (long long)cases[i].b, (long long)(redis_gone - reg_gone),
                     late ? " (AFTER Redis did)" : "");
        }
        rlock_unlock(l);
        rlock_unlock(l);
        rlock_free(l);
        th_run(r, "DEL %s", name);
        free(name);
    }
    cr_assert(bad[0] == '\0', "the registry's deadline after a re-entry:%s", bad);
}

/* FINDING 6 with the watchdog: a write hold whose levels mix watchdog
 * mode and an explicit lease, in either order, is renewed and re-entered
 * past the explicit lease, and nothing is reported lost. */
Test(rev16, write_reentry_mixing_watchdog_and_explicit_lease_stays_held)
{
    th_lost_count lost = {PTHREAD_MUTEX_INITIALIZER, 0};
    rlock_client *cl = client_with(NULL, th_ms(900), 0, 0, &lost);
    for (int order = 0; order < 2; order++) {
        char *name = th_name("f6w");
        rlock *l;
        th_ok(rlock_new_write(cl, name, &l));
        th_ok(rlock_lock(l, order == 0 ? RLOCK_WATCHDOG : th_ms(300)));
        th_ok(rlock_lock(l, order == 0 ? th_ms(300) : RLOCK_WATCHDOG));
        th_sleep_ms(th_ms(1500)); /* past the explicit lease and the watchdog's */
        rlock_status st = rlock_lock(l, th_ms(300));
        long long ttl = th_pttl(r, name);
        rlock_status u[3];
        for (int i = 0; i < 3; i++) {
            u[i] = rlock_unlock(l);
        }
        cr_assert_eq(st, RLOCK_OK, "order %d: re-entry after %lld ms: %s (PTTL %lld)", order,
                     (long long)th_ms(1500), rlock_status_name(st), ttl);
        for (int i = 0; i < 3; i++) {
            cr_assert_eq(u[i], RLOCK_OK, "order %d: unlock %d: %s", order, i,
                         rlock_status_name(u[i]));
        }
        cr_assert_eq(th_exists(r, name), 0);
        rlock_free(l);
        free(name);
    }
    cr_assert_eq(th_lost_calls(&lost), 0);
    rlock_client_free(cl);
}

/* ---- FINDING 7 ---------------------------------------------------------- */

/* FINDING 7: rlock_force_unlock() through a reentrant, fair, fenced, spin
 * or non-reentrant handle deletes a read/write lock held at the name and
 * answers RLOCK_OK with *was_locked true (lua/force_unlock.lua: EXISTS then
 * DEL; fair_force_unlock.lua alike; the spin lock's plain DEL), publishing
 * "0" on a channel the read/write lock's waiters do not listen to (they
 * listen on redisson_rwlock:{name}), so its holders lose it silently and
 * its waiters sleep to their lease bound. The read/write halves refuse the
 * reverse (rw_force_unlock.lua looks at 'mode': was_locked false, nothing
 * changed). api.md, "Never mix kinds on one name": a call that finds
 * another kind's state at the name (a read/write lock's hash with its
 * 'mode' field) returns RLOCK_EKIND and changes nothing. Expected:
 * RLOCK_EKIND from each, the read lock untouched. */
Test(rev16, force_unlock_of_another_kind_leaves_a_read_write_lock_alone)
{
    static const struct {
        const char *kind;
        ctor_fn ctor;
    } kinds[] = {{"reentrant", rlock_new},
                 {"fair", rlock_new_fair},
                 {"fenced", rlock_new_fenced},
                 {"spin", rlock_new_spin},
                 {"nonreentrant", rlock_new_nonreentrant}};
    rlock_client *holder = th_client(NULL, 0);
    char bad[512] = "";
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        char *name = th_name("f7");
        rlock *rd, *other;
        th_ok(rlock_new_read(holder, name, &rd));
        th_ok(kinds[i].ctor(c, name, &other));
        th_ok(rlock_lock(rd, 30000));
        bool was = false;
        rlock_status st = rlock_force_unlock(other, &was);
        bool still = th_exists(r, name) == 1;
        if (st != RLOCK_EKIND || !still) {
            size_t n = strlen(bad);
            snprintf(bad + n, sizeof bad - n, " %s: %s, was_locked %d, read lock %s;",
                     kinds[i].kind, rlock_status_name(st), was, still ? "kept" : "DELETED");
        }
        rlock_unlock(rd);
        rlock_free(rd);
        rlock_free(other);
        free(name);
    }
    rlock_client_free(holder);
    cr_assert(bad[0] == '\0', "force unlock of another kind on a held read lock:%s", bad);
}
