/* A fair waiter's give-up in doubt, settled in the background while its
 * thread lives (docs/engine.md, I4: one settler at a time).
 *
 * When a fair waiter's give-up gets no answer (the link is down), the
 * client's watchdog sends it again once Redis answers, whether the thread
 * has exited or not. The thread may call on the name again at that very
 * moment: its call settles the same give-up and then queues it afresh. A
 * copy of the watchdog's that ran in Redis after that fresh place was
 * taken would remove it, and move the deadlines behind it: the thread
 * would sleep out of the queue while the waiters behind it go first. The
 * record's claim makes the thread's call wait for the watchdog's give-up
 * to be answered. The test forces the interleaving that breaks without
 * the claim: the watchdog's give-up is held back by the proxy (the
 * thread's own requests are not), and the thread calls rlock_lock() while
 * it is on its way; the thread's place must stay in Redis's queue while
 * it waits, and the lock goes W (ahead), T, X (behind), in that order. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h" /* the give-up script's SHA: the proxy holds back that request */
#include "kinds.h"
#include "proxy.h"

TestSuite(giveup, .timeout = 180);

/* How long the proxy holds back the watchdog's give-up: well within the
 * client's command timeout (it is answered), long enough for the thread's
 * call to settle and queue meanwhile if nothing made it wait. */
#define HOLD_MS 300
#define CMD_MS 1500
#define ROUNDS 6

static atomic_int served; /* the order in which the lock was taken */

/* The thread whose give-up goes unanswered: a wait cancelled while its
 * link is mute, then, on go, rlock_lock() again (cancelled by the test
 * if its place is found gone, so that a broken run ends). */
typedef struct tw {
    rlock_client *c;
    const char *name;
    rlock_cancel *first, *second;
    atomic_ullong tid;
    rlock_status st1, st2;
    atomic_bool waited, go, got, release, done;
    atomic_int order;
    pthread_t th;
} tw;

static void *tw_main(void *arg)
{
    tw *t = arg;
    rlock *l;
    th_ok(rlock_new_fair(t->c, t->name, &l));
    atomic_store(&t->tid, rlock_thread_id());
    t->st1 = rlock_lock_ex(l, RLOCK_WAIT_FOREVER, RLOCK_WATCHDOG, t->first, NULL);
    atomic_store(&t->waited, true);
    while (!atomic_load(&t->go)) {
        th_sleep_ms(1);
    }
    t->st2 = rlock_lock_ex(l, RLOCK_WAIT_FOREVER, RLOCK_WATCHDOG, t->second, NULL);
    if (t->st2 == RLOCK_OK) {
        atomic_store(&t->order, atomic_fetch_add(&served, 1) + 1);
        atomic_store(&t->got, true);
        while (!atomic_load(&t->release)) {
            th_sleep_ms(2);
        }
        th_ok(rlock_unlock(l));
    }
    rlock_free(l);
    atomic_store(&t->done, true);
    return NULL;
}

/* A plain waiter (W ahead of T, X behind). */
typedef struct pw {
    rlock_client *c;
    const char *name;
    atomic_ullong tid;
    atomic_bool got, release, done;
    atomic_int order;
    rlock_status st;
    pthread_t th;
} pw;

static void *pw_main(void *arg)
{
    pw *w = arg;
    rlock *l;
    th_ok(rlock_new_fair(w->c, w->name, &l));
    atomic_store(&w->tid, rlock_thread_id());
    w->st = rlock_lock(l, RLOCK_WATCHDOG);
    if (w->st == RLOCK_OK) {
        atomic_store(&w->order, atomic_fetch_add(&served, 1) + 1);
        atomic_store(&w->got, true);
        while (!atomic_load(&w->release)) {
            th_sleep_ms(2);
        }
        th_ok(rlock_unlock(l));
    }
    rlock_free(l);
    atomic_store(&w->done, true);
    return NULL;
}

static char *owner_of(rlock_client *c, atomic_ullong *tid)
{
    cr_assert(TH_POLL(atomic_load(tid) != 0, 3000));
    return th_owner(c, atomic_load(tid));
}

/* owner's index in the queue, -1 if it is not there. */
static long queued_at(redisContext *r, const char *q, const char *owner)
{
    redisReply *rep = th_cmd(r, "LRANGE %s 0 -1", q);
    long at = -1;
    for (size_t i = 0; i < rep->elements; i++) {
        if (strcmp(rep->element[i]->str, owner) == 0) {
            at = (long)i;
        }
    }
    freeReplyObject(rep);
    return at;
}

static bool has_deadline(redisContext *r, const char *z, const char *owner)
{
    redisReply *rep = th_cmd(r, "ZSCORE %s %s", z, owner);
    bool yes = rep->type == REDIS_REPLY_STRING;
    freeReplyObject(rep);
    return yes;
}

/* One round; returns whether the thread's fresh place was removed while
 * it waited (the defect this guards against). */
static bool round_once(int n, tp_proxy *px, rlock_client *b, rlock_client *a, redisContext *r)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "giveup-race-%d", n);
    char *name = th_name(prefix);
    char *q = th_prefixed("redisson_lock_queue", name);
    char *z = th_prefixed("redisson_lock_timeout", name);
    atomic_store(&served, 0);
    rlock *h;
    th_ok(rlock_new_fair(a, name, &h));
    th_ok(rlock_lock(h, RLOCK_WATCHDOG));

    tw t = {.c = b, .name = name};
    th_ok(rlock_cancel_new(&t.first));
    th_ok(rlock_cancel_new(&t.second));
    cr_assert_eq(pthread_create(&t.th, NULL, tw_main, &t), 0);
    char *to = owner_of(b, &t.tid);
    cr_assert(TH_POLL(queued_at(r, q, to) == 0, 3000), "T did not queue");
    pw w = {.c = a, .name = name};
    cr_assert_eq(pthread_create(&w.th, NULL, pw_main, &w), 0);
    char *wo = owner_of(a, &w.tid);
    cr_assert(TH_POLL(queued_at(r, q, wo) == 1, 3000), "W did not queue behind T");

    /* T's link goes mute and its wait is cancelled: its give-up is sent,
     * gets no answer, and is kept in doubt. */
    tp_mute(px, true);
    rlock_cancel_fire(t.first);
    cr_assert(TH_POLL(atomic_load(&t.waited), 3 * CMD_MS), "T's cancelled wait did not return");
    th_assert_status(t.st1, RLOCK_ECANCELED);
    cr_assert_eq(queued_at(r, q, to), 0, "T's give-up got through the mute link");

    /* The link comes back; the watchdog's give-up is held back on its
     * way to Redis. */
    uint64_t held = tp_delayed(px);
    tp_delay_matching(px, rlock__script_fair_give_up.sha, th_ms(HOLD_MS));
    tp_mute(px, false);
    tp_drop(px);
    cr_assert(TH_POLL(tp_delayed(px) > held, 3 * CMD_MS), "the watchdog sent no give-up");
    /* Only that one is held: T's own requests go straight through. */
    tp_delay_matching(px, rlock__script_fair_give_up.sha, 0);
    atomic_store(&t.go, true);

    /* T queues again (behind W, its old place given up)... */
    bool requeued = TH_POLL(queued_at(r, q, to) == 1 || atomic_load(&t.done), 3000);
    cr_assert(requeued && !atomic_load(&t.done), "T did not queue again behind W (%s)",
              rlock_status_name(t.st2));
    cr_assert_eq(queued_at(r, q, wo), 0, "W is not at the head");
    /* ...and keeps its place while it waits: the watchdog's give-up ran
     * before T's call sent anything. */
    bool removed = false;
    int64_t until = th_now_ms() + th_ms(HOLD_MS) + th_ms(500);
    while (th_now_ms() < until) {
        if (queued_at(r, q, to) < 0 || !has_deadline(r, z, to)) {
            removed = !atomic_load(&t.got) && !atomic_load(&t.done);
            break;
        }
        th_sleep_ms(5);
    }
    if (removed) {
        cr_log_info("round %d: T's fresh place was removed while it waited", n);
        rlock_cancel_fire(t.second); /* it would sleep out of the queue */
        cr_assert(TH_POLL(atomic_load(&t.done), 3 * CMD_MS));
    } else {
        /* X queues behind T; the lock goes W, T, X. */
        pw x = {.c = a, .name = name};
        cr_assert_eq(pthread_create(&x.th, NULL, pw_main, &x), 0);
        char *xo = owner_of(a, &x.tid);
        cr_assert(TH_POLL(queued_at(r, q, xo) == 2, 3000), "X did not queue behind T");
        th_ok(rlock_unlock(h));
        cr_assert(TH_POLL(atomic_load(&w.got), 3000), "W did not get the lock");
        cr_assert_eq(atomic_load(&w.order), 1);
        atomic_store(&w.release, true);
        cr_assert(TH_POLL(atomic_load(&t.got), 3000), "T did not get the lock after W");
        cr_assert_eq(atomic_load(&t.order), 2, "T was served %d", atomic_load(&t.order));
        cr_assert(!atomic_load(&x.got), "X went before T");
        atomic_store(&t.release, true);
        cr_assert(TH_POLL(atomic_load(&x.got), 3000), "X did not get the lock after T");
        cr_assert_eq(atomic_load(&x.order), 3);
        atomic_store(&x.release, true);
        pthread_join(x.th, NULL);
        free(xo);
    }
    if (removed) {
        th_ok(rlock_unlock(h));
        cr_assert(TH_POLL(atomic_load(&w.got), 3000));
        atomic_store(&w.release, true);
    }
    pthread_join(w.th, NULL);
    pthread_join(t.th, NULL);
    if (!removed) {
        th_ok(t.st2);
    }
    cr_assert(TH_POLL(th_fair_queued(r, name) == 0 && th_exists(r, name) == 0, 3000),
              "the lock or its queue was left behind");
    rlock_cancel_free(t.first);
    rlock_cancel_free(t.second);
    rlock_free(h);
    free(to);
    free(wo);
    free(q);
    free(z);
    free(name);
    return removed;
}

Test(giveup, watchdogs_give_up_never_takes_the_threads_fresh_place)
{
    tp_proxy *px = tp_new(th_port());
    cr_assert(px != NULL && tp_start(px) == 0);
    char u[64];
    snprintf(u, sizeof u, "redis://127.0.0.1:%d", tp_port(px));
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = u;
    cfg.command_timeout_ms = th_ms(CMD_MS);
    cfg.connect_timeout_ms = th_ms(500);
    cfg.retry_timeout_ms = th_ms(3000);
    rlock_client *b = th_client_cfg(&cfg);
    rlock_client *a = th_client(NULL, 0);
    redisContext *r = th_redis(0);
    /* Loaded beforehand, so that the held-back give-up is one EVALSHA. */
    freeReplyObject(th_cmd(r, "SCRIPT LOAD %s", rlock__script_fair_give_up.body));
    int removed = 0;
    for (int n = 0; n < ROUNDS; n++) {
        removed += round_once(n, px, b, a, r) ? 1 : 0;
    }
    cr_log_info("the thread's fresh place was removed in %d of %d rounds", removed, ROUNDS);
    cr_assert_eq(removed, 0,
                 "the watchdog's give-up removed the thread's fresh place in %d of %d "
                 "rounds",
                 removed, ROUNDS);
    redisFree(r);
    rlock_client_free(a);
    rlock_client_free(b);
    tp_free(px);
}
