/* TLS (rediss://): every test runs its own redis-server with a TLS port
 * and certificates made by the harness (th_tls_make: a CA, a server
 * certificate for 127.0.0.1, one for another host name, a client
 * certificate, an unrelated CA). The server also listens in plain text on
 * srv.port, where the test reads what Redis holds. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "proxy.h"

static th_tls certs;
static th_server srv;
static char *url; /* rediss://127.0.0.1:<tls port> */

static void start(const char *auth, bool other_host)
{
    url = th_tls_setup(&certs, &srv, auth, other_host);
}

static void setup(void)
{
    start("optional", false);
}

static void teardown(void)
{
    th_tls_teardown(&certs, &srv, url);
}

TestSuite(tls, .init = setup, .fini = teardown, .timeout = 60);

static void mtls_setup(void)
{
    start("yes", false);
}

TestSuite(tls_mutual, .init = mtls_setup, .fini = teardown, .timeout = 60);

static void other_host_setup(void)
{
    start("no", true);
}

TestSuite(tls_other_host, .init = other_host_setup, .fini = teardown, .timeout = 60);

static void config(rlock_config *cfg, const char *u)
{
    th_tls_config(cfg, u, certs.ca);
}

static rlock_client *tls_client(void)
{
    rlock_config cfg;
    config(&cfg, url);
    return th_client_cfg(&cfg);
}

/* rlock_client_new() must fail with want, and say why in words. */
static void expect_refused(const rlock_config *cfg, rlock_status want, const char *detail)
{
    rlock_client *c = NULL;
    rlock_status st = rlock_client_new(cfg, &c);
    const char *why = rlock_last_error();
    cr_log_info("%s: %s", rlock_status_name(st), why);
    th_assert_status(st, want);
    cr_assert_null(c);
    cr_assert(strstr(why, detail) != NULL, "detail \"%s\" lacks \"%s\"", why, detail);
}

static char *hash_field(rlock_client *c)
{
    return th_owner(c, rlock_thread_id());
}

/* ---- locks, waiters and the watchdog over TLS ------------------------- */

Test(tls, lock_reentry_unlock)
{
    rlock_client *c = tls_client();
    redisContext *r = th_redis(srv.port);
    char *name = th_name("tls"), *field = hash_field(c);
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, 10000));
    cr_assert_eq(th_hget_int(r, name, field), 1);
    th_ok(rlock_lock(l, 10000));
    cr_assert_eq(th_hget_int(r, name, field), 2);
    long long ttl = th_pttl(r, name);
    cr_assert(ttl > 8000 && ttl <= 10000, "PTTL %lld", ttl);
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_hget_int(r, name, field), 1);
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    /* The client's connections are TLS ones: CLIENT LIST shows them on
     * the server, none on the plain port but ours. */
    redisReply *list = th_cmd(r, "CLIENT LIST");
    cr_assert(strstr(list->str, "name=rlock:") != NULL);
    freeReplyObject(list);
    rlock_free(l);
    rlock_client_free(c);
    redisFree(r);
    free(name);
    free(field);
}

typedef struct waiter {
    rlock_client *c;
    const char *name;
    rlock_status st;
    int64_t t_acquired;
    pid_t tid;
    atomic_bool started;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    w->tid = th_gettid();
    atomic_store(&w->started, true);
    rlock *l;
    w->st = rlock_new(w->c, w->name, &l);
    if (w->st == RLOCK_OK) {
        w->st = rlock_try_lock(l, 20000, 5000);
        w->t_acquired = th_now_ms();
        if (w->st == RLOCK_OK) {
            rlock_unlock(l);
        }
        rlock_free(l);
    }
    return NULL;
}

Test(tls, waiter_woken_by_pubsub)
{
    rlock_client *a = tls_client(), *b = tls_client();
    char *name = th_name("tls-wait");
    rlock *l;
    th_ok(rlock_new(a, name, &l));
    th_ok(rlock_lock(l, 30000));
    waiter w = {.c = b, .name = name};
    pthread_t t;
    pthread_create(&t, NULL, waiter_main, &w);
    th_wait_waiters(srv.port, name, 1, 3000);
    while (!atomic_load(&w.started)) {
        th_sleep_ms(1);
    }
    th_wait_blocked(w.tid, 3000);
    int64_t t0 = th_now_ms();
    th_ok(rlock_unlock(l));
    pthread_join(t, NULL);
    th_ok(w.st);
    /* The lease is 30 s: only the unlock's message, over TLS, woke it. */
    cr_assert(w.t_acquired - t0 < th_ms(1000), "woken %lld ms after the unlock",
              (long long)(w.t_acquired - t0));
    rlock_free(l);
    rlock_client_free(a);
    rlock_client_free(b);
    free(name);
}

Test(tls, watchdog_renews)
{
    rlock_config cfg;
    config(&cfg, url);
    cfg.watchdog_timeout_ms = 900;
    rlock_client *c = th_client_cfg(&cfg);
    redisContext *r = th_redis(srv.port);
    char *name = th_name("tls-wd");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_wait_renewal(r, name, 2000);
    th_wait_renewal(r, name, 2000);
    /* Redis shows the PTTL rise as soon as the script ran; the watchdog
     * counts the renewal only once it has read the reply: poll. */
    uint64_t renewed = 0;
    cr_assert(TH_POLL(rlock_client_stat(c, RLOCK_STAT_RENEWED, &renewed) == RLOCK_OK &&
                          renewed >= 2,
                      2000),
              "renewed %llu", (unsigned long long)renewed);
    th_ok(rlock_unlock(l));
    rlock_free(l);
    rlock_client_free(c);
    redisFree(r);
    free(name);
}

/* ---- certificates ------------------------------------------------------ */

Test(tls_mutual, client_certificate_accepted)
{
    rlock_config cfg;
    config(&cfg, url);
    cfg.tls_cert_file = certs.client_crt;
    cfg.tls_key_file = certs.client_key;
    rlock_client *c = th_client_cfg(&cfg);
    char *name = th_name("mtls");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, 5000));
    th_ok(rlock_unlock(l));
    rlock_free(l);
    rlock_client_free(c);
    free(name);
}

Test(tls_mutual, no_client_certificate_is_etls)
{
    rlock_config cfg;
    config(&cfg, url);
    int64_t t0 = th_now_ms();
    expect_refused(&cfg, RLOCK_ETLS, "certificate");
    cr_assert(th_now_ms() - t0 < th_ms(2000));
}

Test(tls, wrong_ca_is_etls)
{
    rlock_config cfg;
    config(&cfg, url);
    cfg.tls_ca_file = certs.other_ca;
    expect_refused(&cfg, RLOCK_ETLS, "certificate verify failed");
}

Test(tls, insecure_accepts_an_untrusted_certificate)
{
    rlock_config cfg;
    config(&cfg, url);
    cfg.tls_ca_file = certs.other_ca;
    cfg.tls_insecure = true;
    rlock_client *c = th_client_cfg(&cfg);
    rlock_client_free(c);
}

Test(tls_other_host, wrong_host_name_is_etls)
{
    rlock_config cfg;
    config(&cfg, url);
    expect_refused(&cfg, RLOCK_ETLS, "mismatch");
    /* Named as its certificate says, the same server is accepted (SNI and
     * the name check use tls_server_name). */
    cfg.tls_server_name = "other.example";
    rlock_client *c = th_client_cfg(&cfg);
    rlock_client_free(c);
    cfg.tls_server_name = "wrong.example";
    expect_refused(&cfg, RLOCK_ETLS, "mismatch");
}

Test(tls, default_store_honours_ssl_cert_file)
{
    rlock_config cfg;
    config(&cfg, url);
    cfg.tls_ca_file = NULL;
    /* Not in the system's store: refused. */
    unsetenv("SSL_CERT_FILE");
    expect_refused(&cfg, RLOCK_ETLS, "certificate verify failed");
    /* OpenSSL's default store reads SSL_CERT_FILE when the client is made. */
    setenv("SSL_CERT_FILE", certs.ca, 1);
    rlock_client *c = th_client_cfg(&cfg);
    rlock_client_free(c);
    unsetenv("SSL_CERT_FILE");
}

Test(tls, bad_files_are_einval_at_creation)
{
    rlock_config cfg;
    config(&cfg, url);
    cfg.tls_ca_file = "/nonexistent/ca.pem";
    expect_refused(&cfg, RLOCK_EINVAL, "/nonexistent/ca.pem: No such file");
    config(&cfg, url);
    cfg.tls_cert_file = certs.client_crt;
    cfg.tls_key_file = certs.server_key; /* not the certificate's */
    expect_refused(&cfg, RLOCK_EINVAL, "mismatch");
    config(&cfg, url);
    cfg.tls_key_file = certs.client_key;
    expect_refused(&cfg, RLOCK_EINVAL, "tls_cert_file");
    /* TLS settings with a plain URL: refused, never silently clear text. */
    char *plain = th_server_url(&srv);
    config(&cfg, plain);
    expect_refused(&cfg, RLOCK_EINVAL, "rediss://");
    free(plain);
}

/* ---- the wrong protocol on either side --------------------------------- */

/* A plain server answers the ClientHello (read as an inline command) when
 * it holds a newline, "wrong version number"; without one it waits for the
 * rest of the line until the connect timeout ends the handshake. Either
 * way RLOCK_ETLS (no handshake with that server ever succeeded), within
 * the timeouts, with a detail that names the likely cause. */
Test(tls, rediss_to_a_plain_port_is_clear_and_bounded)
{
    char *plain = NULL;
    cr_assert(asprintf(&plain, "rediss://127.0.0.1:%d", srv.port) > 0);
    rlock_config cfg;
    config(&cfg, plain);
    for (int i = 0; i < 3; i++) {
        rlock_client *c = NULL;
        int64_t t0 = th_now_ms();
        rlock_status st = rlock_client_new(&cfg, &c);
        int64_t took = th_now_ms() - t0;
        const char *why = rlock_last_error();
        cr_log_info("%s after %lld ms: %s", rlock_status_name(st), (long long)took, why);
        th_assert_status(st, RLOCK_ETLS);
        cr_assert(strstr(why, "speak TLS") != NULL, "detail: %s", why);
        cr_assert(took < th_ms(cfg.connect_timeout_ms + cfg.command_timeout_ms + 500),
                  "took %lld ms", (long long)took);
    }
    free(plain);
}

/* A TLS port read as plain text: Redis closes the connection at the first
 * bytes, before any answer. */
Test(tls, redis_to_a_tls_port_is_clear_and_bounded)
{
    char *u = NULL;
    cr_assert(asprintf(&u, "redis://127.0.0.1:%d", srv.tls_port) > 0);
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = u;
    cfg.connect_timeout_ms = 1000;
    cfg.command_timeout_ms = 1000;
    int64_t t0 = th_now_ms();
    expect_refused(&cfg, RLOCK_EIO, "use rediss://");
    int64_t took = th_now_ms() - t0;
    cr_assert(took < th_ms(cfg.connect_timeout_ms + cfg.command_timeout_ms + 500), "took %lld ms",
              (long long)took);
    free(u);
}

/* ---- faults -------------------------------------------------------------- */

/* A hold survives a dropped TLS connection: the watchdog reconnects (a new
 * handshake) and renews, and the unlock goes through. */
Test(tls, dropped_connection_reconnects_and_the_hold_survives)
{
    tp_proxy *p = tp_new(srv.tls_port);
    cr_assert(p != NULL && tp_start(p) == 0, "cannot start the proxy");
    char *u = NULL;
    cr_assert(asprintf(&u, "rediss://127.0.0.1:%d", tp_port(p)) > 0);
    rlock_config cfg;
    config(&cfg, u);
    cfg.watchdog_timeout_ms = 1500;
    cfg.retry_timeout_ms = 5000;
    rlock_client *c = th_client_cfg(&cfg);
    redisContext *r = th_redis(srv.port);
    char *name = th_name("tls-drop"), *field = hash_field(c);
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    uint64_t before = tp_accepted(p);
    tp_drop(p);
    th_wait_renewal(r, name, 3000);
    cr_assert(tp_accepted(p) > before, "no new connection after the drop");
    cr_assert_eq(th_hget_int(r, name, field), 1);
    tp_drop(p);
    th_ok(rlock_lock(l, RLOCK_WATCHDOG)); /* re-entry after a second drop */
    cr_assert_eq(th_hget_int(r, name, field), 2);
    th_ok(rlock_unlock(l));
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0);
    rlock_free(l);
    rlock_client_free(c);
    tp_free(p);
    redisFree(r);
    free(u);
    free(name);
    free(field);
}

/* A peer that closes with a reset: the next bytes the client sends on that
 * link (a request, or the close_notify of its close) meet EPIPE, which
 * must never be SIGPIPE, whose default action kills the process. */
Test(tls, no_sigpipe_when_the_server_closes)
{
    signal(SIGPIPE, SIG_DFL);
    tp_proxy *p = tp_new(srv.tls_port);
    cr_assert(p != NULL && tp_start(p) == 0, "cannot start the proxy");
    char *u = NULL;
    cr_assert(asprintf(&u, "rediss://127.0.0.1:%d", tp_port(p)) > 0);
    rlock_config cfg;
    config(&cfg, u);
    cfg.retry_timeout_ms = 5000;
    rlock_client *c = th_client_cfg(&cfg);
    char *name = th_name("tls-pipe");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    for (int i = 0; i < 5; i++) {
        th_ok(rlock_lock(l, 5000));
        tp_reset(p);
        rlock_status st = rlock_unlock(l);
        if (st != RLOCK_OK) {
            /* The unlock's reply was lost with the link: sent again by the
             * next unlock, with the same request id. */
            cr_log_info("unlock after reset: %s (%s)", rlock_status_name(st), rlock_last_error());
            th_ok(rlock_unlock(l));
        }
    }
    rlock_free(l);
    rlock_client_free(c);
    tp_free(p);
    free(u);
    free(name);
}

/* A fork()ed child that frees its copy of the client must send nothing on
 * the parent's TLS sessions (a close_notify would end them): the parent's
 * next calls run on the same connections, without a reconnect. */
static rlock_client *fork_client;

static int child_frees(void *arg)
{
    (void)arg;
    rlock_client_free(fork_client);
    return 0;
}

Test(tls, forked_child_free_leaves_the_parent_connected)
{
    rlock_config cfg;
    config(&cfg, url);
    cfg.pool_size = 1;
    fork_client = th_client_cfg(&cfg);
    char *name = th_name("tls-fork");
    rlock *l;
    th_ok(rlock_new(fork_client, name, &l));
    th_ok(rlock_lock(l, 10000));
    uint64_t rc0 = 0, rc1 = 0;
    th_ok(rlock_client_stat(fork_client, RLOCK_STAT_RECONNECTS, &rc0));
    if (TH_FORKED_CHILD_CAN_MAKE_CLIENTS) {
        cr_assert_eq(th_wait_bounded(th_fork(child_frees, NULL), 10000), 0);
    }
    /* The pooled link and the pub/sub link are the parent's still. */
    bool held = false;
    th_ok(rlock_is_held_by_current_thread(l, &held));
    cr_assert(held);
    th_ok(rlock_unlock(l));
    th_ok(rlock_client_stat(fork_client, RLOCK_STAT_RECONNECTS, &rc1));
    cr_assert_eq(rc1, rc0, "the parent reconnected %llu times after the child's free",
                 (unsigned long long)(rc1 - rc0));
    /* And a waiter is still woken over the parent's pub/sub link. */
    rlock_client *b = tls_client();
    rlock *lb;
    th_ok(rlock_new(b, name, &lb));
    th_ok(rlock_lock(lb, 30000));
    waiter w = {.c = fork_client, .name = name};
    pthread_t t;
    pthread_create(&t, NULL, waiter_main, &w);
    th_wait_waiters(srv.port, name, 1, 3000);
    int64_t t0 = th_now_ms();
    th_ok(rlock_unlock(lb));
    pthread_join(t, NULL);
    th_ok(w.st);
    cr_assert(w.t_acquired - t0 < th_ms(1000));
    th_ok(rlock_client_stat(fork_client, RLOCK_STAT_RECONNECTS, &rc1));
    cr_assert_eq(rc1, rc0);
    rlock_free(lb);
    rlock_client_free(b);
    rlock_free(l);
    rlock_client_free(fork_client);
    free(name);
}

/* ---- the command --------------------------------------------------------- */

static int run_cli(const char *const *argv)
{
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return th_wait_bounded(pid, 20000);
}

Test(tls, command_line_options)
{
    char *bin = th_build_path("rlock");
    char *name = th_name("tls-cli");
    const char *ok[] = {bin,    "--url", url, "--cacert", certs.ca, "run", name, "--", "true",
                        NULL};
    cr_assert_eq(run_cli(ok), 0);
    const char *insecure[] = {bin, "--url", url, "--tls-insecure", "run", name, "--", "true", NULL};
    cr_assert_eq(run_cli(insecure), 0);
    const char *untrusted[] = {bin, "--url", url, "--cacert", certs.other_ca, "run", name, "--",
                               "true", NULL};
    int rc = run_cli(untrusted);
    cr_assert(rc != 0 && rc != 127, "exit %d", rc);
    free(bin);
    free(name);
}
