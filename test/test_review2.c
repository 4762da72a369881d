/* Defects of the engine's second review (the repro programs of
 * wt-review2/repro), each reproduced against a real server:
 *
 *   late_renewal     a renewal that got no answer lands later and must not
 *                    cut an explicit lease taken meanwhile (a new lock, or
 *                    the outer hold of a nested one) to watchdog_timeout_ms;
 *   acl_batch        one key of a renewal batch refused by the ACL must not
 *                    make the still-allowed holds of the batch go unrenewed;
 *   exit_pending     rlock_client_free() settles the doubts exited threads
 *                    left (an unanswered unlock, an unanswered acquire) even
 *                    while the pool is still backing off;
 *   acl_key_patterns a user with exactly the key and channel patterns
 *                    docs/operations.md lists can lock, wait and unlock. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "internal.h" /* rlock__script_renew: the renewal script's SHA1 */
#include "proxy.h"

/* ---- a relay that delivers late, even after the client closed ---------
 * Like a slow network path: the next request that contains an armed needle
 * reaches the server delay_ms late, and it still does when the client has
 * timed out and closed its socket meanwhile. test/proxy.c cannot do this:
 * it drops held data when the client side closes, a real network does not.
 * Two threads per connection; lr_free() stops and joins them all. */

#define LR_MAX_CONNS 64

typedef struct lr_relay lr_relay;

typedef struct lr_conn {
    lr_relay *r;
    int cfd, sfd; /* client side, server side */
    pthread_t up, down;
} lr_conn;

typedef struct lr_pump {
    lr_conn *c;
    bool requests; /* client -> server */
} lr_pump;

struct lr_relay {
    int lfd, port, target;
    pthread_t acceptor;
    pthread_mutex_t mu;
    lr_conn *conns[LR_MAX_CONNS];
    lr_pump pumps[LR_MAX_CONNS][2];
    int nconns;
    char needle[64];
    int64_t delay_ms;
    atomic_int stop;
    atomic_int armed;
    atomic_int seen;    /* requests that contained the needle */
    atomic_int matched; /* requests held back */
    atomic_int landed;  /* held requests written to the server */
};

static void *lr_pump_main(void *arg)
{
    lr_pump *p = arg;
    lr_relay *r = p->c->r;
    int from = p->requests ? p->c->cfd : p->c->sfd;
    int to = p->requests ? p->c->sfd : p->c->cfd;
    char buf[65536];
    for (;;) {
        ssize_t k = read(from, buf, sizeof buf);
        if (k <= 0) {
            break;
        }
        bool hold = false;
        if (p->requests && memmem(buf, (size_t)k, r->needle, strlen(r->needle))) {
            atomic_fetch_add(&r->seen, 1);
            if (atomic_exchange(&r->armed, 0)) {
                hold = true;
                atomic_fetch_add(&r->matched, 1);
            }
        }
        /* Held: the request waits here whatever the client does meanwhile
         * (time passing is the point: a slow path). */
        for (int64_t end = th_now_ms() + r->delay_ms; hold && th_now_ms() < end;) {
            if (atomic_load(&r->stop)) {
                goto out;
            }
            th_sleep_ms(5);
        }
        for (ssize_t off = 0; off < k;) {
            ssize_t w = send(to, buf + off, (size_t)(k - off), MSG_NOSIGNAL);
            if (w <= 0) {
                goto out;
            }
            off += w;
        }
        if (hold) {
            atomic_fetch_add(&r->landed, 1);
        }
    }
out:
    shutdown(to, SHUT_WR);
    return NULL;
}

static void *lr_accept_main(void *arg)
{
    lr_relay *r = arg;
    for (;;) {
        int cfd = accept(r->lfd, NULL, NULL);
        if (cfd < 0) {
            return NULL;
        }
        int sfd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)r->target)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        pthread_mutex_lock(&r->mu);
        bool room = r->nconns < LR_MAX_CONNS && !atomic_load(&r->stop);
        pthread_mutex_unlock(&r->mu);
        if (!room || sfd < 0 || connect(sfd, (struct sockaddr *)&a, sizeof a) != 0) {
            close(cfd);
            if (sfd >= 0) {
                close(sfd);
            }
            continue;
        }
        lr_conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(cfd);
            close(sfd);
            continue;
        }
        *c = (lr_conn){.r = r, .cfd = cfd, .sfd = sfd};
        pthread_mutex_lock(&r->mu);
        int i = r->nconns;
        r->pumps[i][0] = (lr_pump){c, true};
        r->pumps[i][1] = (lr_pump){c, false};
        pthread_create(&c->up, NULL, lr_pump_main, &r->pumps[i][0]);
        pthread_create(&c->down, NULL, lr_pump_main, &r->pumps[i][1]);
        r->conns[i] = c;
        r->nconns++;
        pthread_mutex_unlock(&r->mu);
    }
}

static lr_relay *lr_start(int target)
{
    lr_relay *r = calloc(1, sizeof *r);
    cr_assert_not_null(r);
    r->target = target;
    pthread_mutex_init(&r->mu, NULL);
    r->lfd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(r->lfd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(bind(r->lfd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(r->lfd, 64), 0);
    socklen_t l = sizeof a;
    cr_assert_eq(getsockname(r->lfd, (struct sockaddr *)&a, &l), 0);
    r->port = ntohs(a.sin_port);
    cr_assert_eq(pthread_create(&r->acceptor, NULL, lr_accept_main, r), 0);
    return r;
}

/* Counts requests that contain needle (seen); none is held yet. */
static void lr_watch(lr_relay *r, const char *needle, int64_t delay_ms)
{
    snprintf(r->needle, sizeof r->needle, "%s", needle);
    r->delay_ms = delay_ms;
}

/* The next request that contains the needle reaches the server late. */
static void lr_arm(lr_relay *r)
{
    atomic_store(&r->armed, 1);
}

static void lr_free(lr_relay *r)
{
    if (!r) {
        return;
    }
    atomic_store(&r->stop, 1);
    shutdown(r->lfd, SHUT_RDWR); /* ends the blocked accept() */
    pthread_join(r->acceptor, NULL);
    close(r->lfd);
    for (int i = 0; i < r->nconns; i++) {
        shutdown(r->conns[i]->cfd, SHUT_RDWR);
        shutdown(r->conns[i]->sfd, SHUT_RDWR);
    }
    for (int i = 0; i < r->nconns; i++) {
        pthread_join(r->conns[i]->up, NULL);
        pthread_join(r->conns[i]->down, NULL);
        close(r->conns[i]->cfd);
        close(r->conns[i]->sfd);
        free(r->conns[i]);
    }
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* ---- fixture ----------------------------------------------------------- */

static redisContext *r;
/* What a test set up outside its process's memory, undone by the teardown
 * too, so that a failed assertion leaves no ACL user or thread behind. */
static lr_relay *relay;
static tp_proxy *proxy;
static char *acl_user_name;

static void setup(void)
{
    r = th_redis(0);
}

static void teardown(void)
{
    if (acl_user_name) {
        th_run(r, "ACL DELUSER %s", acl_user_name);
        free(acl_user_name);
        acl_user_name = NULL;
    }
    redisFree(r);
    lr_free(relay);
    relay = NULL;
    tp_free(proxy);
    proxy = NULL;
}

TestSuite(review2, .init = setup, .fini = teardown, .timeout = 120);

static char *acl_user(const char *tag)
{
    char *u = NULL;
    cr_assert(asprintf(&u, "rv2_%s_%d_%ld", tag, (int)getpid(), (long)th_now_ms() % 100000) > 0);
    return u;
}

static char *acl_url(const char *user)
{
    char *url = NULL;
    cr_assert(asprintf(&url, "redis://%s:pw@127.0.0.1:%d", user, th_port()) > 0);
    return url;
}

/* ---- late renewal ------------------------------------------------------ */

static atomic_int late_lost;

static void late_lost_cb(const char *name, uint64_t tid, void *arg)
{
    (void)name;
    (void)tid;
    (void)arg;
    atomic_fetch_add(&late_lost, 1);
}

/* A holds name with a watchdog hold (nested: over an explicit lease); one
 * renewal round is held back 1500 ms by the relay, so with a command
 * timeout of 300 ms it gets no answer and A's connection is closed; A then
 * ends its watchdog hold and (not nested) takes the lock again with an
 * explicit lease, or (nested) keeps the outer explicit lease. The renewal
 * lands after that: it must not cut A's explicit lease, and B must not get
 * the lock while A's lease runs. */
static void late_renewal(bool nested)
{
    const int64_t lease = 6000, delay = 1500;
    relay = lr_start(th_port());
    lr_watch(relay, rlock__script_renew.sha, delay);
    char *name = th_name(nested ? "rv2-late-nested" : "rv2-late");
    char *url = NULL;
    cr_assert(asprintf(&url, "redis://127.0.0.1:%d", relay->port) > 0);
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.command_timeout_ms = 300;
    cfg.watchdog_timeout_ms = 1000; /* renewal rounds every ~333 ms */
    cfg.on_lock_lost = late_lost_cb;
    rlock_client *ca = th_client_cfg(&cfg);
    rlock_config_init(&cfg);
    cfg.url = th_url();
    cfg.command_timeout_ms = 500;
    rlock_client *cb = th_client_cfg(&cfg);
    rlock *la, *lb;
    th_ok(rlock_new(ca, name, &la));
    th_ok(rlock_new(cb, name, &lb));

    /* A's lease counts from before the call that took it at the latest. */
    int64_t told_at = th_now_ms();
    if (nested) {
        th_ok(rlock_lock(la, lease));
    }
    th_ok(rlock_lock(la, RLOCK_WATCHDOG));
    /* One renewal request first, so the script is loaded and the held one
     * is an EVALSHA that runs when it lands. */
    cr_assert(TH_POLL(atomic_load(&relay->seen) >= 1, 3000), "no renewal round was sent");
    lr_arm(relay);
    cr_assert(TH_POLL(atomic_load(&relay->matched) >= 1, 3000), "no renewal round was held");
    th_ok(rlock_unlock(la));
    if (!nested) {
        told_at = th_now_ms();
        th_ok(rlock_lock(la, lease));
    }
    cr_assert(TH_POLL(atomic_load(&relay->landed) >= 1, delay + 3000),
              "the held renewal never reached the server");
    int64_t landed_at = th_now_ms() - told_at;

    /* What Redis holds now must cover what A was told. */
    long long pttl = th_pttl(r, name);
    int64_t promised = told_at + lease - th_now_ms();
    cr_expect(pttl >= promised - 50,
              "the late renewal (landed %lld ms into A's %lld ms lease) cut the lease: "
              "PTTL %lld, A was told %lld ms remain",
              (long long)landed_at, (long long)lease, pttl, (long long)promised);

    /* B tries until well before A's lease ends. */
    rlock_status bst = RLOCK_EBUSY;
    int64_t b_at = -1;
    while (th_now_ms() < told_at + lease - 1500) {
        bst = rlock_try_lock(lb, 0, 30000);
        if (bst != RLOCK_EBUSY) {
            b_at = th_now_ms() - told_at;
            break;
        }
        th_sleep_ms(20);
    }
    bool held = false;
    rlock_status hst = rlock_is_held_by_current_thread(la, &held);
    cr_assert_eq(bst, RLOCK_EBUSY,
                 "B's try_lock at %lld ms of A's %lld ms lease: %s (expected RLOCK_EBUSY); "
                 "on_lock_lost for A: %d; A's is_held_by_current_thread: %s %d",
                 (long long)b_at, (long long)lease, rlock_status_name(bst),
                 atomic_load(&late_lost), rlock_status_name(hst), held);
    th_ok(hst);
    cr_assert(held);
    th_ok(rlock_unlock(la));
    cr_assert_eq(th_exists(r, name), 0);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_free(ca);
    rlock_client_free(cb);
    free(url);
    free(name);
}

Test(review2, late_renewal_does_not_cut_a_new_explicit_lease)
{
    late_renewal(false);
}

Test(review2, late_renewal_does_not_cut_the_outer_explicit_lease)
{
    late_renewal(true);
}

/* ---- one refused key in a renewal batch -------------------------------- */

static char *batch_a, *batch_b;
static atomic_int batch_lost_a, batch_lost_b;

static void batch_lost_cb(const char *name, uint64_t tid, void *arg)
{
    (void)tid;
    (void)arg;
    if (strcmp(name, batch_a) == 0) {
        atomic_store(&batch_lost_a, 1);
    }
    if (strcmp(name, batch_b) == 0) {
        atomic_store(&batch_lost_b, 1);
    }
}

Test(review2, one_refused_key_does_not_fail_the_whole_renewal_batch)
{
    acl_user_name = acl_user("batch");
    char *url = acl_url(acl_user_name);
    batch_a = th_name("rv2-batch-a");
    batch_b = th_name("rv2-batch-b");
    th_run(r, "ACL SETUSER %s on >pw resetkeys resetchannels +@all ~* &redisson_lock__channel:*",
           acl_user_name);
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.watchdog_timeout_ms = 1000; /* renewal rounds every ~333 ms, a and b in one call */
    cfg.on_lock_lost = batch_lost_cb;
    rlock_client *c = th_client_cfg(&cfg);
    rlock *la, *lb;
    th_ok(rlock_new(c, batch_a, &la));
    th_ok(rlock_new(c, batch_b, &lb));
    th_ok(rlock_lock(la, RLOCK_WATCHDOG));
    th_ok(rlock_lock(lb, RLOCK_WATCHDOG));
    /* The admin narrows the user's keys while it holds: b is no longer
     * allowed, a (and the keys its unlock needs) still is. */
    th_run(r,
           "ACL SETUSER %s resetkeys ~%s ~redisson_unlock_latch:* ~rlock_acquire_latch:* "
           "~redisson_lock__channel:*",
           acl_user_name, batch_a);
    bool b_reported = TH_POLL(atomic_load(&batch_lost_b), 5000);
    /* Past twice the watchdog timeout: a hold no renewal reached would
     * have expired (time passing is the point). */
    th_sleep_ms(2000);
    long long pttl_a = th_pttl(r, batch_a);
    cr_expect(!atomic_load(&batch_lost_a),
              "on_lock_lost for the still-allowed %s (PTTL now %lld)", batch_a, pttl_a);
    cr_assert(pttl_a > 0, "the still-allowed %s was not renewed: PTTL %lld", batch_a, pttl_a);
    th_wait_renewal(r, batch_a, 1000);
    bool held = false;
    th_ok(rlock_is_held_by_current_thread(la, &held));
    cr_assert(held);
    /* The refused one is reported lost and expires. */
    cr_assert(b_reported, "no on_lock_lost for %s, whose renewal the ACL refuses", batch_b);
    th_wait_exists(r, batch_b, 0, 3000);
    th_ok(rlock_unlock(la));
    cr_assert_eq(th_exists(r, batch_a), 0);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_free(c);
    free(url);
    free(batch_a);
    free(batch_b);
}

/* ---- doubts settled by rlock_client_free() ----------------------------- */

static rlock_client *ep_client;
static char *ep_u, *ep_s;
static rlock_status ep_st[5];

/* Thread 1: its unlock gets no answer (half-dead link), then it exits. */
static void *ep_unlock_main(void *arg)
{
    (void)arg;
    rlock *l;
    if (rlock_new(ep_client, ep_u, &l) != RLOCK_OK) {
        return NULL;
    }
    ep_st[0] = rlock_lock(l, 20000);
    tp_mute(proxy, true);
    ep_st[1] = rlock_unlock(l);
    rlock_free(l);
    return NULL;
}

static void *ep_muter_main(void *arg)
{
    uint64_t cuts = *(uint64_t *)arg;
    for (int64_t end = th_now_ms() + th_ms(10000); tp_cuts(proxy) == cuts && th_now_ms() < end;) {
        th_sleep_ms(1);
    }
    tp_mute(proxy, true);
    return NULL;
}

/* Thread 2: a first acquire whose copy ran and whose reply was cut, after
 * which the link goes half-dead; then it exits. */
static void *ep_reenter_main(void *arg)
{
    (void)arg;
    rlock *l;
    if (rlock_new(ep_client, ep_s, &l) != RLOCK_OK) {
        return NULL;
    }
    ep_st[2] = rlock_lock(l, 20000);
    ep_st[3] = rlock_unlock(l);
    tp_cut_next_request(proxy, "*", ep_s);
    tp_mute(proxy, false);
    uint64_t cuts = tp_cuts(proxy);
    pthread_t m;
    pthread_create(&m, NULL, ep_muter_main, &cuts);
    ep_st[4] = rlock_try_lock(l, 0, 20000);
    pthread_join(m, NULL);
    rlock_free(l);
    return NULL;
}

Test(review2, client_free_settles_doubts_while_the_pool_backs_off)
{
    ep_u = th_name("rv2-ep-u");
    ep_s = th_name("rv2-ep-s");
    proxy = tp_new(th_port());
    cr_assert_not_null(proxy);
    cr_assert_eq(tp_start(proxy), 0);
    char *url = NULL;
    cr_assert(asprintf(&url, "redis://127.0.0.1:%d", tp_port(proxy)) > 0);
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.command_timeout_ms = 300;
    ep_client = th_client_cfg(&cfg);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, ep_unlock_main, NULL), 0);
    pthread_join(t, NULL);
    th_ok(ep_st[0]);
    /* The link comes back: every pooled connection is dead. */
    tp_mute(proxy, false);
    tp_drop(proxy);
    cr_assert_eq(pthread_create(&t, NULL, ep_reenter_main, NULL), 0);
    pthread_join(t, NULL);
    th_ok(ep_st[2]);
    th_ok(ep_st[3]);
    cr_log_info("muted unlock: %s; acquire with its reply cut, then muted: %s; "
                "before rlock_client_free: EXISTS %lld %lld",
                rlock_status_name(ep_st[1]), rlock_status_name(ep_st[4]), th_exists(r, ep_u),
                th_exists(r, ep_s));
    tp_mute(proxy, false);
    tp_drop(proxy);
    /* Closed at once, while the pool backs off after the failed handshakes
     * of the mute. */
    rlock_client_free(ep_client);
    long long u = th_exists(r, ep_u), s = th_exists(r, ep_s);
    cr_expect_eq(u, 0, "%s (unanswered unlock) still held after rlock_client_free: PTTL %lld", ep_u,
                 th_pttl(r, ep_u));
    cr_expect_eq(s, 0, "%s (unanswered acquire) still held after rlock_client_free: PTTL %lld",
                 ep_s, th_pttl(r, ep_s));
    free(url);
    free(ep_u);
    free(ep_s);
}

/* ---- the documented ACL key patterns ---------------------------------- */

/* The commands docs/operations.md ("The ACL a user of rlock needs") lists. */
#define DOC_COMMANDS                                                                       \
    "-@all +evalsha +eval +hexists +hincrby +hget +exists +pexpire +pttl +get +set +del " \
    "+publish +subscribe +unsubscribe +client|setname +auth +select"
/* Its key and channel patterns, the lock names being rv2-ak:*. */
#define DOC_PATTERNS                                                                        \
    "resetkeys resetchannels ~rv2-ak:* ~redisson_unlock_latch:* ~rlock_acquire_latch:* " \
    "~redisson_lock__channel:* &redisson_lock__channel:*"

typedef struct ak_waiter {
    rlock *l;
    rlock_client *c;
    rlock_status st, unlock_st;
    long long count; /* its field in Redis while it held */
} ak_waiter;

static void *ak_waiter_main(void *arg)
{
    ak_waiter *w = arg;
    w->st = rlock_try_lock(w->l, 20000, 30000);
    if (w->st == RLOCK_OK) {
        char owner[160];
        snprintf(owner, sizeof owner, "%s:%llu", rlock_client_id(w->c),
                 (unsigned long long)rlock_thread_id());
        redisContext *rd = redisConnect("127.0.0.1", th_port());
        redisReply *x = rd && !rd->err ? redisCommand(rd, "HGET %s %s", rlock_name(w->l), owner)
                                       : NULL;
        w->count = x && x->type == REDIS_REPLY_STRING ? atoll(x->str) : -1;
        if (x) {
            freeReplyObject(x);
        }
        if (rd) {
            redisFree(rd);
        }
        w->unlock_st = rlock_unlock(w->l);
    }
    return NULL;
}

Test(review2, documented_acl_key_patterns_lock_and_unlock)
{
    acl_user_name = acl_user("doc");
    char *url = acl_url(acl_user_name);
    th_run(r, "ACL SETUSER %s on >pw " DOC_PATTERNS " " DOC_COMMANDS, acl_user_name);
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    rlock_client *c = th_client_cfg(&cfg);
    char *name = th_name("rv2-ak");
    char *owner = th_owner(c, rlock_thread_id());
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    rlock_status st = rlock_lock(l, 30000);
    cr_assert_eq(st, RLOCK_OK, "lock as the documented user: %s (%s)", rlock_status_name(st),
                 rlock_last_error());
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    long long pttl = th_pttl(r, name);
    cr_assert(pttl > 0 && pttl <= 30000, "PTTL %lld", pttl);
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    cr_assert_eq(th_hget_int(r, name, owner), 2);
    bool b = false;
    int64_t n = 0;
    th_ok(rlock_is_locked(l, &b));
    cr_assert(b);
    th_ok(rlock_hold_count(l, &n));
    cr_assert_eq(n, 2);
    th_ok(rlock_remain_ttl(l, &n));

    /* A waiter of the same client, woken by the release message. */
    rlock *wl;
    th_ok(rlock_new(c, name, &wl));
    ak_waiter w = {.l = wl, .c = c, .st = RLOCK_EIO, .count = -1};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, ak_waiter_main, &w), 0);
    th_wait_waiters(0, name, 1, 3000);
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    st = rlock_unlock(l);
    cr_assert_eq(st, RLOCK_OK, "unlock as the documented user: %s (%s)", rlock_status_name(st),
                 rlock_last_error());
    pthread_join(th, NULL);
    th_assert_status(w.st, RLOCK_OK);
    cr_assert_eq(w.count, 1, "the waiter's field while it held: %lld", w.count);
    th_assert_status(w.unlock_st, RLOCK_OK);
    cr_assert_eq(th_exists(r, name), 0);
    bool was = true;
    th_ok(rlock_force_unlock(l, &was));
    cr_assert(!was);
    rlock_free(wl);
    rlock_free(l);
    rlock_client_free(c);
    free(owner);
    free(name);
    free(url);
}
