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
