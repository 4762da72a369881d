/* What an audit of issue 15 found said wrongly or not at all: the real
 * rlock binary in child processes against the test server. */
#include "cli_helpers.h"

TestSuite(audit15, .init = cli_setup, .fini = cli_teardown, .timeout = 90);

/* docs/rlock.1, HOLDER CONNECTIONS: every connection of rlock is the
 * library's, named rlock:client-id:host:pid, those of wait included (wait
 * listened on a connection of its own, rlock-cli:host:pid, until it used
 * rlock_wait_unlocked(); the page still said so). */
Test(audit15, wait_listens_on_a_connection_the_library_names)
{
    char *name = th_name("audit15-wait-conn");
    redisContext *r = th_redis(0);
    java_hold(r, name, th_ms(30000));
    pid_t p = START(NULL, "wait", "-w", "60", name);
    th_wait_waiters(0, name, 1, 10000); /* subscribed */
    char suffix[32];
    snprintf(suffix, sizeof suffix, ":%d", (int)p);
    redisReply *list = th_cmd(r, "CLIENT LIST");
    cr_assert_eq(list->type, REDIS_REPLY_STRING);
    int mine = 0, subscribed = 0;
    for (char *line = strtok(list->str, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        char *n = strstr(line, " name=");
        cr_assert(n != NULL, "%s", line);
        n += 6;
        size_t len = strcspn(n, " ");
        cr_assert(strncmp(n, "rlock-cli:", 10) != 0, "a connection of its own: %s", line);
        if (len > strlen(suffix) &&
            strncmp(n + len - strlen(suffix), suffix, strlen(suffix)) == 0) {
            cr_assert(strncmp(n, "rlock:", 6) == 0, "not the library's name: %s", line);
            mine++;
            subscribed += strstr(line, " cmd=subscribe") != NULL || strstr(line, " sub=1") != NULL;
        }
    }
    freeReplyObject(list);
    cr_assert(mine >= 1, "no connection of wait (pid %d) is named rlock:...%s", (int)p, suffix);
    cr_assert(subscribed >= 1, "wait's subscription is not on a connection named rlock:...");
    cr_assert(still_running(p));
    cr_assert_eq(RUN(NULL, "unlock", "--force", name), 0);
    cr_assert_eq(wait_exit(p, 10000), 0, "the release woke wait");
    redisFree(r);
    free(name);
}

/* ---- §4: TLS settings the TLS tests did not try ------------------------- */

static th_tls certs;
static th_server srv;
static char *tls_url; /* rediss://127.0.0.1:<tls port> */

static void tls_setup(void)
{
    cli_setup();
    tls_url = th_tls_setup(&certs, &srv, "optional", false);
}

static void tls_teardown(void)
{
    th_tls_teardown(&certs, &srv, tls_url);
    cli_teardown();
}

TestSuite(audit15_tls, .init = tls_setup, .fini = tls_teardown, .timeout = 60);

/* A directory in OpenSSL's hashed form (openssl rehash) holding ca. */
static char *ca_dir(const char *tag, const char *ca)
{
    char *dir = tpath(tag);
    char *out = NULL, *err = NULL;
    int rc = sh(&out, &err, "mkdir -p '%s' && cp '%s' '%s/ca.pem' && openssl rehash '%s'", dir, ca,
                dir, dir);
    cr_assert_eq(rc, 0, "openssl rehash: %s", err);
    free(out);
    free(err);
    return dir;
}

static rlock_status try_client(const rlock_config *cfg)
{
    rlock_client *c = NULL;
    rlock_status st = rlock_client_new(cfg, &c);
    cr_log_info("%s: %s", rlock_status_name(st), st == RLOCK_OK ? "" : rlock_last_error());
    rlock_client_free(c);
    return st;
}

/* The issue: "config fields for the CA file/dir", and with no CA configured
 * the system store "the way OpenSSL's default paths find it (so
 * SSL_CERT_FILE/SSL_CERT_DIR work)". tls::default_store_honours_ssl_cert_file
 * tries the file; here the directory, both ways. */
Test(audit15_tls, ca_dir_and_ssl_cert_dir_verify_the_server)
{
    char *good = ca_dir("ca-good", certs.ca);
    char *other = ca_dir("ca-other", certs.other_ca);
    unsetenv("SSL_CERT_FILE");
    unsetenv("SSL_CERT_DIR");
    rlock_config cfg;
    th_tls_config(&cfg, tls_url, certs.ca);
    cfg.tls_ca_file = NULL;
    cfg.tls_ca_dir = other;
    th_assert_status(try_client(&cfg), RLOCK_ETLS);
    cfg.tls_ca_dir = good;
    th_assert_status(try_client(&cfg), RLOCK_OK);
    /* No CA configured: OpenSSL's default directory, from SSL_CERT_DIR. */
    cfg.tls_ca_dir = NULL;
    th_assert_status(try_client(&cfg), RLOCK_ETLS);
    setenv("SSL_CERT_DIR", good, 1);
    th_assert_status(try_client(&cfg), RLOCK_OK);
    unsetenv("SSL_CERT_DIR");
    /* The command's --cacertdir. */
    char *name = th_name("audit15-cacertdir");
    cr_assert_eq(RUN(NULL, "--url", tls_url, "--cacertdir", good, "status", name), 1,
                 "answered: not locked");
    cr_assert_eq(RUN(NULL, "--url", tls_url, "--cacertdir", other, "status", name), 69,
                 "not verified: no secure connection");
    free(name);
    free(good);
    free(other);
}

/* rediss://[[user]:password@]host[:port][/db]: the user, the password and
 * the database reach the server over TLS. */
Test(audit15_tls, rediss_url_with_user_password_and_database)
{
    redisContext *r = th_redis(srv.port);
    freeReplyObject(th_cmd(r, "ACL SETUSER audit15 on >s3cr%%t ~* &* +@all"));
    freeReplyObject(th_cmd(r, "ACL SETUSER default off"));
    int tls_port = atoi(strrchr(tls_url, ':') + 1);
    char *u = NULL;
    cr_assert(asprintf(&u, "rediss://audit15:s3cr%%25t@127.0.0.1:%d/3", tls_port) > 0);
    rlock_config cfg;
    th_tls_config(&cfg, u, certs.ca);
    rlock_client *c = th_client_cfg(&cfg);
    char *name = th_name("audit15-tls-db");
    rlock *l = NULL;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    /* The hold is in database 3, not 0 (r authenticates as audit15 now). */
    freeReplyObject(th_cmd(r, "AUTH audit15 s3cr%%t"));
    cr_assert_eq(th_exists(r, name), 0, "the hold is in database 0");
    freeReplyObject(th_cmd(r, "SELECT 3"));
    cr_assert_eq(th_exists(r, name), 1, "no hold in database 3");
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0);
    rlock_free(l);
    rlock_client_free(c);
    /* A wrong password over TLS is RLOCK_EAUTH, not a TLS failure. */
    free(u);
    cr_assert(asprintf(&u, "rediss://audit15:wrong@127.0.0.1:%d/3", tls_port) > 0);
    th_tls_config(&cfg, u, certs.ca);
    th_assert_status(try_client(&cfg), RLOCK_EAUTH);
    free(u);
    free(name);
    redisFree(r);
}
