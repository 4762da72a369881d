/* Adversarial review of the connection layer that owns its sockets and
 * runs OpenSSL on them (src/net/link.c, conn.c). Each test runs its own
 * redis-server with a TLS port (th_server_start_tls, tls-auth-clients
 * optional: the server asks for a client certificate and takes a
 * connection without one); srv.port stays plain for the test's own checks.
 * Some tests put a small forwarding proxy of this file between client and
 * server (mp_*): it can trickle the server's bytes to the client one at a
 * time, and cut a connection at the client's first encrypted record of
 * some size, which test/proxy.c cannot (it sees TLS only as bytes). */
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

static th_tls certs;
static th_server srv;
static char *url; /* rediss://127.0.0.1:<tls port> */

static void setup(void)
{
    url = th_tls_setup(&certs, &srv, "optional", false);
}

static void teardown(void)
{
    th_tls_teardown(&certs, &srv, url);
}

TestSuite(revtls, .init = setup, .fini = teardown, .timeout = 60);

/* ---- a tiny forwarding proxy ------------------------------------------ */

typedef struct mp {
    int lfd, port, target;
    atomic_int trickle_ms; /* > 0: server bytes go to the client one by one */
    atomic_int cut_over;   /* > 0: close a connection (once) at the first
                              encrypted TLS record (type 23) from the client
                              longer than this */
    atomic_int drop_gen;   /* bumped: every relayed connection closes */
    atomic_bool refuse;    /* new connections: accepted, then closed */
    atomic_int refused;
    atomic_int relayed;    /* relayed connections open */
    atomic_bool stop;
    atomic_int pairs;
    pthread_t th;
} mp;

typedef struct mp_pair {
    mp *p;
    int cfd, sfd, gen;
    unsigned char hdr[5];
    size_t hdr_len, body_left;
} mp_pair;

/* Walks the client's TLS record framing over buf; true when a record
 * longer than the cut limit starts in it (the limit is then disarmed). */
static bool mp_cut_now(mp_pair *q, const char *buf, size_t n)
{
    for (size_t i = 0; i < n;) {
        if (q->body_left > 0) {
            size_t k = n - i < q->body_left ? n - i : q->body_left;
            q->body_left -= k;
            i += k;
            continue;
        }
        q->hdr[q->hdr_len++] = (unsigned char)buf[i++];
        if (q->hdr_len == 5) {
            q->hdr_len = 0;
            q->body_left = (size_t)q->hdr[3] << 8 | q->hdr[4];
            int lim = atomic_load(&q->p->cut_over);
            if (lim > 0 && q->hdr[0] == 0x17 && q->body_left > (size_t)lim &&
                atomic_compare_exchange_strong(&q->p->cut_over, &lim, 0)) {
                return true;
            }
        }
    }
    return false;
}

static bool write_all(int fd, const char *b, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w <= 0) {
            return false;
        }
        b += w;
        n -= (size_t)w;
    }
    return true;
}

static void *mp_pair_main(void *arg)
{
    mp_pair *q = arg;
    char buf[65536];
    while (!atomic_load(&q->p->stop)) {
        struct pollfd f[2] = {{q->cfd, POLLIN, 0}, {q->sfd, POLLIN, 0}};
        if (atomic_load(&q->p->drop_gen) != q->gen) {
            break;
        }
        if (poll(f, 2, 20) <= 0) {
            continue;
        }
        if (f[0].revents) {
            ssize_t n = recv(q->cfd, buf, sizeof buf, 0);
            if (n <= 0 || mp_cut_now(q, buf, (size_t)n) || !write_all(q->sfd, buf, (size_t)n)) {
                break;
            }
        }
        if (f[1].revents) {
            int t = atomic_load(&q->p->trickle_ms);
            ssize_t n = recv(q->sfd, buf, t > 0 ? 1 : sizeof buf, 0);
            if (n <= 0 || !write_all(q->cfd, buf, (size_t)n)) {
                break;
            }
            if (t > 0) {
                usleep((useconds_t)t * 1000);
            }
        }
    }
    close(q->cfd);
    close(q->sfd);
    atomic_fetch_sub(&q->p->relayed, 1);
    atomic_fetch_sub(&q->p->pairs, 1);
    free(q);
    return NULL;
}

/* A refusal: the proxy's FIN at once, what the client sends read and
 * dropped (so that no reset overtakes the FIN), the close when the client
 * closes. */
static void *mp_refuse_main(void *arg)
{
    mp_pair *q = arg;
    char buf[4096];
    shutdown(q->cfd, SHUT_WR);
    while (!atomic_load(&q->p->stop)) {
        struct pollfd f = {q->cfd, POLLIN, 0};
        if (poll(&f, 1, 20) > 0 && recv(q->cfd, buf, sizeof buf, 0) <= 0) {
            break;
        }
    }
    close(q->cfd);
    atomic_fetch_sub(&q->p->pairs, 1);
    free(q);
    return NULL;
}

static void *mp_main(void *arg)
{
    mp *p = arg;
    while (!atomic_load(&p->stop)) {
        struct pollfd f = {p->lfd, POLLIN, 0};
        if (poll(&f, 1, 20) <= 0) {
            continue;
        }
        int cfd = accept(p->lfd, NULL, NULL);
        if (cfd < 0) {
            continue;
        }
        if (atomic_load(&p->refuse)) {
            mp_pair *q = calloc(1, sizeof *q);
            cr_assert(q != NULL);
            *q = (mp_pair){.p = p, .cfd = cfd, .sfd = -1};
            atomic_fetch_add(&p->pairs, 1);
            atomic_fetch_add(&p->refused, 1);
            pthread_t t;
            cr_assert(pthread_create(&t, NULL, mp_refuse_main, q) == 0);
            pthread_detach(t);
            continue;
        }
        int sfd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p->target)};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (sfd < 0 || connect(sfd, (struct sockaddr *)&sa, sizeof sa) != 0) {
            close(cfd);
            if (sfd >= 0) {
                close(sfd);
            }
            continue;
        }
        mp_pair *q = malloc(sizeof *q);
        cr_assert(q != NULL);
        *q = (mp_pair){.p = p, .cfd = cfd, .sfd = sfd, .gen = atomic_load(&p->drop_gen)};
        atomic_fetch_add(&p->pairs, 1);
        atomic_fetch_add(&p->relayed, 1);
        pthread_t t;
        cr_assert(pthread_create(&t, NULL, mp_pair_main, q) == 0);
        pthread_detach(t);
    }
    return NULL;
}

static mp *mp_new(int target)
{
    mp *p = calloc(1, sizeof *p);
    cr_assert(p != NULL);
    p->target = target;
    p->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    cr_assert(bind(p->lfd, (struct sockaddr *)&sa, sizeof sa) == 0);
    cr_assert(listen(p->lfd, 64) == 0);
    cr_assert(getsockname(p->lfd, (struct sockaddr *)&sa, &len) == 0);
    p->port = ntohs(sa.sin_port);
    cr_assert(pthread_create(&p->th, NULL, mp_main, p) == 0);
    return p;
}

static void mp_free(mp *p)
{
    atomic_store(&p->stop, true);
    pthread_join(p->th, NULL);
    while (atomic_load(&p->pairs) > 0) {
        th_sleep_ms(5);
    }
    close(p->lfd);
    free(p);
}

/* The rediss:// URL of proxy p, with password when not NULL; caller frees. */
static char *proxy_url(const mp *p, const char *password)
{
    char *u = NULL;
    cr_assert(asprintf(&u, "rediss://%s%s%s127.0.0.1:%d", password ? ":" : "",
                       password ? password : "", password ? "@" : "", p->port) > 0);
    return u;
}

/* ---- deadlines --------------------------------------------------------- */

/* A query runs one command, "at most command_timeout_ms" (rlock.h). The
 * server's reply reaches the client one byte every 95 ms: each byte comes
 * within the link's 100 ms receive slice, so a read that waits for a whole
 * TLS record (about 26 bytes here: 2.5 s) never returns to the caller's
 * deadline check. Over redis:// the same trickle ends at the deadline
 * (RLOCK_ETIMEDOUT), since every recv() returns what came. */
Test(revtls, trickled_reply_ends_within_the_command_timeout)
{
    mp *p = mp_new(srv.tls_port);
    char *u = proxy_url(p, NULL);
    rlock_config cfg;
    th_tls_config(&cfg, u, certs.ca);
    cfg.command_timeout_ms = 200;
    rlock_client *c = th_client_cfg(&cfg);
    char *name = th_name("revtls-trickle");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    bool locked = true;
    th_ok(rlock_is_locked(l, &locked)); /* the pooled link is up and idle */
    atomic_store(&p->trickle_ms, 95);
    int64_t t0 = th_now_ms();
    rlock_status st = rlock_is_locked(l, &locked);
    int64_t took = th_now_ms() - t0;
    atomic_store(&p->trickle_ms, 0);
    cr_log_info("%s after %lld ms: %s", rlock_status_name(st), (long long)took,
                rlock_last_error());
    cr_assert(took < cfg.command_timeout_ms + th_ms(400),
              "rlock_is_locked() took %lld ms with a command timeout of %lld ms (%s)",
              (long long)took, (long long)cfg.command_timeout_ms, rlock_status_name(st));
    th_assert_status(st, RLOCK_ETIMEDOUT);
    rlock_free(l);
    rlock_client_free(c);
    mp_free(p);
    free(u);
    free(name);
}

/* ---- transient losses around the handshake are not RLOCK_ETLS ---------- */

typedef struct locker {
    rlock *l;
    int64_t wait_ms;
    rlock_status st;
    char why[512];
    int64_t took;
    atomic_bool done;
} locker;

/* A thread that waits for the lock, and gives it back if it got it. */
static void *locker_main(void *arg)
{
    locker *k = arg;
    int64_t t0 = th_now_ms();
    k->st = rlock_try_lock(k->l, k->wait_ms, 10000);
    k->took = th_now_ms() - t0;
    snprintf(k->why, sizeof k->why, "%s", rlock_last_error());
    if (k->st == RLOCK_OK) {
        k->st = rlock_unlock(k->l);
    }
    atomic_store(&k->done, true);
    return NULL;
}

/* A server that accepts a TLS connection and closes it before the
 * handshake: a transient refusal. Redis itself does this at maxclients
 * ("for TLS connections, no handshake was done yet so nothing is written",
 * networking.c), as do a load balancer without a healthy backend and a
 * server shutting down. A waiter must ride it out as it does over redis://
 * (there such a close is RLOCK_EIO and retried), not return RLOCK_ETLS
 * ("does it speak TLS on this port?") at once, after the client has made
 * handshakes with this very server. The proxy stands for the full server:
 * against Redis itself the client sees the close as an EOF (RLOCK_ETLS)
 * or, when its ClientHello crossed it, as a reset (RLOCK_EIO, retried),
 * by timing. */
Test(revtls, handshake_refused_by_a_full_server_is_retried)
{
    mp *p = mp_new(srv.tls_port);
    char *u = proxy_url(p, NULL);
    rlock_config cfg;
    th_tls_config(&cfg, u, certs.ca);
    cfg.retry_timeout_ms = 10000;
    rlock_client *c = th_client_cfg(&cfg);
    redisContext *r = th_redis(srv.port);
    char *name = th_name("revtls-full");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    /* Both connections of the client go, and each new one is refused. */
    atomic_store(&p->refuse, true);
    atomic_fetch_add(&p->drop_gen, 1);
    cr_assert(TH_POLL(atomic_load(&p->relayed) == 0, 3000));
    locker k = {.l = l, .wait_ms = 10000};
    pthread_t t;
    pthread_create(&t, NULL, locker_main, &k);
    /* The outage lasts 1.5 s (the pub/sub thread's reconnects are refused
     * too, so the count of refusals does not tell when the lock call met
     * one); a waiter that gives up ends it early. */
    TH_POLL(atomic_load(&k.done), 1500);
    atomic_store(&p->refuse, false);
    pthread_join(t, NULL);
    cr_log_info("%s after %lld ms, %d refusals: %s", rlock_status_name(k.st), (long long)k.took,
                atomic_load(&p->refused), k.why);
    th_ok(k.st);
    cr_assert_eq(th_exists(r, name), 0);
    rlock_free(l);
    rlock_client_free(c);
    mp_free(p);
    redisFree(r);
    free(u);
    free(name);
}

/* The connection is lost after a handshake that succeeded, before the
 * first reply (the proxy cuts it at the client's first command: AUTH, in a
 * record longer than any of the handshake's). The server asked for a
 * client certificate (tls-auth-clients optional) and took the connection
 * without one, yet the loss is reported as RLOCK_ETLS "the server refused
 * the connection (it asked for a client certificate, none is configured)",
 * and a waiter with 5 s left returns at once instead of reconnecting. */
Test(revtls, connection_lost_before_the_first_reply_is_retried)
{
    redisContext *r = th_redis(srv.port);
    char pw[201];
    memset(pw, 'p', 200);
    pw[200] = '\0';
    th_run(r, "CONFIG SET requirepass %s", pw);
    mp *p = mp_new(srv.tls_port);
    char *u = proxy_url(p, pw);
    rlock_config cfg;
    th_tls_config(&cfg, u, certs.ca);
    cfg.retry_timeout_ms = 10000;
    rlock_client *c = th_client_cfg(&cfg);
    char *name = th_name("revtls-cut");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    uint64_t rc0 = 0, rc1 = 0;
    th_ok(rlock_client_stat(c, RLOCK_STAT_RECONNECTS, &rc0));
    atomic_fetch_add(&p->drop_gen, 1);
    /* The pub/sub connection comes back by itself; the pooled one is
     * re-made by the lock call, and that is the one cut. */
    cr_assert(TH_POLL((rlock_client_stat(c, RLOCK_STAT_RECONNECTS, &rc1), rc1 > rc0) &&
                          atomic_load(&p->relayed) == 1,
                      3000),
              "the pub/sub connection did not come back alone");
    atomic_store(&p->cut_over, 150);
    locker k = {.l = l, .wait_ms = 5000};
    pthread_t t;
    pthread_create(&t, NULL, locker_main, &k);
    pthread_join(t, NULL);
    cr_log_info("%s after %lld ms: %s", rlock_status_name(k.st), (long long)k.took, k.why);
    cr_assert_eq(atomic_load(&p->cut_over), 0, "the proxy cut nothing");
    th_ok(k.st);
    rlock_free(l);
    rlock_client_free(c);
    mp_free(p);
    redisFree(r);
    free(u);
    free(name);
}
