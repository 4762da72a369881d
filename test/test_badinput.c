/* Bad input, table-driven: NULL pointers and empty names for every public
 * function, out-of-range times and configuration, malformed URLs,
 * unreachable endpoints, wrong credentials, keys of the wrong type, and
 * names that look odd but are valid (spaces, braces, control bytes, UTF-8,
 * RLOCK_NAME_MAX bytes) and must work at exactly the key and channel of the spec (0.1).
 * Each case gets its documented status; nothing crashes or hangs. */
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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

TestSuite(badinput, .init = setup, .fini = teardown, .timeout = 60);

/* ---- NULL and empty arguments ----------------------------------------- */

Test(badinput, null_arguments_every_function)
{
    char *name = th_name("null");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    bool b = false;
    int64_t n = 0;
    uint64_t u = 0;
    rlock *x = NULL;
    rlock_client *cx = NULL;
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = th_url();
    struct {
        const char *what;
        rlock_status got;
    } cases[] = {
        {"client_new(cfg, NULL)", rlock_client_new(&cfg, NULL)},
        {"client_new(NULL, NULL)", rlock_client_new(NULL, NULL)},
        {"new(NULL, name, &l)", rlock_new(NULL, name, &x)},
        {"new(c, NULL, &l)", rlock_new(c, NULL, &x)},
        {"new(c, \"\", &l)", rlock_new(c, "", &x)},
        {"new(c, name, NULL)", rlock_new(c, name, NULL)},
        {"lock(NULL)", rlock_lock(NULL, RLOCK_WATCHDOG)},
        {"try_lock(NULL)", rlock_try_lock(NULL, 0, RLOCK_WATCHDOG)},
        {"unlock(NULL)", rlock_unlock(NULL)},
        {"force_unlock(NULL, &b)", rlock_force_unlock(NULL, &b)},
        {"is_locked(NULL, &b)", rlock_is_locked(NULL, &b)},
        {"is_locked(l, NULL)", rlock_is_locked(l, NULL)},
        {"is_held_by_current_thread(NULL, &b)", rlock_is_held_by_current_thread(NULL, &b)},
        {"is_held_by_current_thread(l, NULL)", rlock_is_held_by_current_thread(l, NULL)},
        {"is_held_by_thread(NULL, 1, &b)", rlock_is_held_by_thread(NULL, 1, &b)},
        {"is_held_by_thread(l, 1, NULL)", rlock_is_held_by_thread(l, 1, NULL)},
        {"hold_count(NULL, &n)", rlock_hold_count(NULL, &n)},
        {"hold_count(l, NULL)", rlock_hold_count(l, NULL)},
        {"remain_ttl(NULL, &n)", rlock_remain_ttl(NULL, &n)},
        {"remain_ttl(l, NULL)", rlock_remain_ttl(l, NULL)},
        {"client_stat(NULL, ..)", rlock_client_stat(NULL, RLOCK_STAT_COMMANDS, &u)},
        {"client_stat(c, .., NULL)", rlock_client_stat(c, RLOCK_STAT_COMMANDS, NULL)},
        {"client_stat(c, 99, &u)", rlock_client_stat(c, (rlock_stat)99, &u)},
        {"client_stat(c, -1, &u)", rlock_client_stat(c, (rlock_stat)-1, &u)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_expect_eq(cases[i].got, RLOCK_EINVAL, "%s: expected RLOCK_EINVAL, got %s", cases[i].what,
                     rlock_status_name(cases[i].got));
    }
    cr_assert_null(x, "no handle written on failure");
    cr_assert_null(cx);
    /* force_unlock's out-parameter is optional. */
    th_ok(rlock_force_unlock(l, NULL));
    /* No-ops and NULL-safe accessors. */
    rlock_config_init(NULL);
    rlock_free(NULL);
    rlock_client_free(NULL);
    cr_assert_null(rlock_client_id(NULL));
    cr_assert_null(rlock_name(NULL));
    cr_assert_str_eq(rlock_name(l), name);
    cr_assert_str_eq(rlock_version(), RLOCK_VERSION_STRING);
    cr_assert_eq(th_exists(r, name), 0, "failed calls left state in Redis");
    rlock_free(l);
    free(name);
}

/* ---- times ------------------------------------------------------------ */

Test(badinput, negative_zero_and_enormous_times)
{
    char *name = th_name("times");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    const int64_t bad_lease[] = {0, -2, -1000, INT64_MIN, RLOCK_MAX_TIME_MS + 1, INT64_MAX};
    const int64_t bad_wait[] = {-2, -1000, INT64_MIN, RLOCK_MAX_TIME_MS + 1, INT64_MAX};
    for (size_t i = 0; i < sizeof bad_lease / sizeof bad_lease[0]; i++) {
        cr_expect_eq(rlock_lock(l, bad_lease[i]), RLOCK_EINVAL, "lock lease %lld",
                     (long long)bad_lease[i]);
        cr_expect_eq(rlock_try_lock(l, 0, bad_lease[i]), RLOCK_EINVAL, "try_lock lease %lld",
                     (long long)bad_lease[i]);
    }
    for (size_t i = 0; i < sizeof bad_wait / sizeof bad_wait[0]; i++) {
        cr_expect_eq(rlock_try_lock(l, bad_wait[i], RLOCK_WATCHDOG), RLOCK_EINVAL,
                     "try_lock wait %lld", (long long)bad_wait[i]);
    }
    cr_assert_eq(th_exists(r, name), 0);
    /* The extremes that are valid work. */
    th_ok(rlock_try_lock(l, RLOCK_MAX_TIME_MS, RLOCK_MAX_TIME_MS));
    long long ttl = th_pttl(r, name);
    cr_assert(ttl > RLOCK_MAX_TIME_MS - 60000, "PTTL %lld for a 100-year lease", ttl);
    th_ok(rlock_unlock(l));
    /* The shortest lease: gone after 1 ms, and the unlock says so. (A
     * re-entry here would race the expiry.) */
    th_ok(rlock_try_lock(l, RLOCK_WAIT_FOREVER, 1));
    th_wait_exists(r, name, 0, 1000);
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_ok(rlock_try_lock(l, RLOCK_WAIT_FOREVER, RLOCK_WATCHDOG));
    th_ok(rlock_try_lock(l, 0, RLOCK_WATCHDOG)); /* re-entry */
    th_ok(rlock_unlock(l));
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0);
    rlock_free(l);
    free(name);
}

enum cfg_field { POOL, CONNECT, COMMAND, WATCHDOG, BATCH, SUBSCRIBE, RETRY };

Test(badinput, config_fields_out_of_range)
{
    static const struct {
        enum cfg_field f;
        const char *what;
        int64_t v;
    } cases[] = {
        {POOL, "pool_size", -1},
        {POOL, "pool_size", 1025},
        {POOL, "pool_size", INT_MIN},
        {CONNECT, "connect_timeout_ms", -1},
        {CONNECT, "connect_timeout_ms", RLOCK_MAX_TIME_MS + 1},
        {COMMAND, "command_timeout_ms", -1},
        {COMMAND, "command_timeout_ms", INT64_MAX},
        {WATCHDOG, "watchdog_timeout_ms", -1},
        {WATCHDOG, "watchdog_timeout_ms", 1},
        {WATCHDOG, "watchdog_timeout_ms", 2},
        {WATCHDOG, "watchdog_timeout_ms", INT64_MIN},
        {BATCH, "watchdog_batch_size", -1},
        {BATCH, "watchdog_batch_size", 10001},
        {SUBSCRIBE, "subscribe_timeout_ms", -5},
        {RETRY, "retry_timeout_ms", -5},
        {RETRY, "retry_timeout_ms", RLOCK_MAX_TIME_MS + 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rlock_config cfg;
        rlock_config_init(&cfg);
        cfg.url = th_url();
        int64_t v = cases[i].v;
        switch (cases[i].f) {
        case POOL:
            cfg.pool_size = (int)v;
            break;
        case CONNECT:
            cfg.connect_timeout_ms = v;
            break;
        case COMMAND:
            cfg.command_timeout_ms = v;
            break;
        case WATCHDOG:
            cfg.watchdog_timeout_ms = v;
            break;
        case BATCH:
            cfg.watchdog_batch_size = (int)v;
            break;
        case SUBSCRIBE:
            cfg.subscribe_timeout_ms = v;
            break;
        case RETRY:
            cfg.retry_timeout_ms = v;
            break;
        }
        rlock_client *x = NULL;
        rlock_status st = rlock_client_new(&cfg, &x);
        cr_expect_eq(st, RLOCK_EINVAL, "%s = %lld: expected RLOCK_EINVAL, got %s", cases[i].what,
                     (long long)v, rlock_status_name(st));
        cr_expect_null(x);
        if (x) {
            rlock_client_free(x);
        }
    }
}

/* ---- URLs and endpoints ----------------------------------------------- */

static rlock_status try_url(const char *url, int64_t *took_ms)
{
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.connect_timeout_ms = 1000;
    cfg.command_timeout_ms = 1000;
    rlock_client *x = NULL;
    int64_t t0 = th_now_ms();
    rlock_status st = rlock_client_new(&cfg, &x);
    if (took_ms) {
        *took_ms = th_now_ms() - t0;
    }
    if (st == RLOCK_OK) {
        rlock_client_free(x);
    } else {
        cr_expect_null(x, "%s: *out written on failure", url);
    }
    return st;
}

Test(badinput, malformed_urls)
{
    static const char *urls[] = {
        "",
        "127.0.0.1:6379",
        "redis:/127.0.0.1:6379",
        "redis:127.0.0.1",
        "http://127.0.0.1:6379",
        "tcp://127.0.0.1:6379",
        "rediss://",
        "rediss://127.0.0.1:abc",
        "redis://",
        "redis://:6379",
        "redis:///0",
        "redis://127.0.0.1:0",
        "redis://127.0.0.1:65536",
        "redis://127.0.0.1:99999999999",
        "redis://127.0.0.1:abc",
        "redis://127.0.0.1:",
        "redis://127.0.0.1:-1",
        "redis://127.0.0.1:+80",
        "redis://127.0.0.1:6379:6380",
        "redis://127.0.0.1:6379/abc",
        "redis://127.0.0.1:6379/-1",
        "redis://127.0.0.1:6379/1x",
        "redis://127.0.0.1:6379/99999999999",
        "redis://alice@127.0.0.1:6379",
        "redis://:pa%zzss@127.0.0.1:6379",
        "redis://:pa%4@127.0.0.1:6379",
        "redis://:pass%@127.0.0.1:6379",
        "redis://:pa%00ss@127.0.0.1:6379",
        "redis://al%g1ce:pw@127.0.0.1:6379",
        "redis://[::1",
        "redis://[::1]x",
        "redis://[::1]:",
        "redis://[]:6379",
        "redis://host name:6379",
        "redis://host?x=1",
        "redis://host#frag",
        "unix://",
        "unix://relative/path.sock",
        "unix:///tmp/x.sock?db=abc",
        "unix:///tmp/x.sock?db=",
        "unix:///tmp/x.sock?db=-1",
        "unix:///tmp/x.sock?db",
        "unix:///tmp/x.sock?foo=1",
        "unix:///tmp/x.sock?user=u",
        "unix:///tmp/x.sock?password=%zz",
        "unix:///tmp/x.sock?",
    };
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
        int64_t took;
        rlock_status st = try_url(urls[i], &took);
        cr_expect_eq(st, RLOCK_EINVAL, "url \"%s\": expected RLOCK_EINVAL, got %s", urls[i],
                     rlock_status_name(st));
        cr_expect(took < th_ms(500), "url \"%s\" took %lld ms (should fail before connecting)",
                  urls[i], (long long)took);
    }
}

/* A 127.0.0.1 port with nothing listening. */
static int closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
              getsockname(fd, (struct sockaddr *)&a, &al) == 0);
    close(fd);
    return ntohs(a.sin_port);
}

Test(badinput, unreachable_endpoints_give_eio)
{
    char u1[64], u2[] = "unix:///nonexistent/rlock-test/redis.sock";
    snprintf(u1, sizeof u1, "redis://127.0.0.1:%d", closed_port());
    /* A syntactically fine but unused db number on a live server: SELECT
     * refuses it, which is a configuration error (RLOCK_EINVAL) with the
     * server's own words in the error detail. */
    char u3[80];
    snprintf(u3, sizeof u3, "%s/100000", th_url());
    const char *urls[] = {u1, u2, u3};
    const rlock_status want[] = {RLOCK_EIO, RLOCK_EIO, RLOCK_EINVAL};
    const char *detail[] = {"connect to 127.0.0.1:", "connect to /nonexistent/", "SELECT 100000: ERR"};
    for (size_t i = 0; i < 3; i++) {
        int64_t took;
        rlock_status st = try_url(urls[i], &took);
        cr_expect_eq(st, want[i], "%s: expected %s, got %s", urls[i], rlock_status_name(want[i]),
                     rlock_status_name(st));
        cr_expect(strstr(rlock_last_error(), detail[i]) != NULL, "%s: detail \"%s\"", urls[i],
                  rlock_last_error());
        cr_expect(took < th_ms(3000), "%s took %lld ms", urls[i], (long long)took);
    }
    /* Valid forms of the same server do work. */
    char ok1[80], ok2[80];
    snprintf(ok1, sizeof ok1, "%s/", th_url());
    snprintf(ok2, sizeof ok2, "%s/15", th_url());
    th_ok(try_url(ok1, NULL));
    th_ok(try_url(ok2, NULL));
}

static rlock_client *client_for(const char *url, rlock_status *st)
{
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.connect_timeout_ms = 1000;
    cfg.command_timeout_ms = 1000;
    rlock_client *x = NULL;
    *st = rlock_client_new(&cfg, &x);
    return x;
}

/* Locks and unlocks one lock through x, checking Redis via rr. */
static void lock_roundtrip(rlock_client *x, redisContext *rr)
{
    char *name = th_name("auth");
    rlock *l;
    th_ok(rlock_new(x, name, &l));
    th_ok(rlock_lock(l, 5000));
    char *owner = th_owner(x, rlock_thread_id());
    cr_assert_eq(th_hget_int(rr, name, owner), 1);
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(rr, name), 0);
    rlock_free(l);
    free(owner);
    free(name);
}

static th_server auth_srv;

static void auth_setup(void)
{
    th_server_start(&auth_srv);
}

static void auth_teardown(void)
{
    th_server_stop(&auth_srv);
}

/* Its own suite: a private server whose password the test changes. */
TestSuite(badauth, .init = auth_setup, .fini = auth_teardown, .timeout = 60);

Test(badauth, passwords_and_acl_users)
{
    th_server srv = auth_srv;
    redisContext *rr = th_redis(srv.port);
    char u[256];
    rlock_status st;
    rlock_client *x;
    /* An empty password without a user sends no AUTH: Redis would refuse
     * "AUTH ''" on a server without a password. */
    snprintf(u, sizeof u, "redis://:@127.0.0.1:%d", srv.port);
    x = client_for(u, &st);
    th_assert_status(st, RLOCK_OK);
    lock_roundtrip(x, rr);
    rlock_client_free(x);

    /* A password with characters that need escaping in a URL. */
    freeReplyObject(th_cmd(rr, "CONFIG SET requirepass %s", "p@ss w:rd"));
    freeReplyObject(th_cmd(rr, "AUTH %s", "p@ss w:rd"));
    freeReplyObject(th_cmd(rr, "ACL SETUSER alice on >s3cret ~* &* +@all"));
    freeReplyObject(th_cmd(rr, "ACL SETUSER bob on >pw ~* &* +@all -evalsha -eval"));

    struct {
        const char *fmt;
        rlock_status want;
    } bad[] = {
        {"redis://:wrong@127.0.0.1:%d", RLOCK_EAUTH},
        {"redis://alice:wrong@127.0.0.1:%d", RLOCK_EAUTH},
        {"redis://nobody:s3cret@127.0.0.1:%d", RLOCK_EAUTH},
        /* No password for a server that requires one: the header promises
         * that rlock_client_new() reports a refused login itself. */
        {"redis://127.0.0.1:%d", RLOCK_EAUTH},
        {"redis://:@127.0.0.1:%d", RLOCK_EAUTH},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(u, sizeof u, bad[i].fmt, srv.port);
        x = client_for(u, &st);
        if (x) {
            rlock_client_free(x);
        }
        cr_expect_eq(st, bad[i].want, "%s: expected %s, got %s", u, rlock_status_name(bad[i].want),
                     rlock_status_name(st));
        /* The server's own words, never the password. */
        cr_expect(strstr(rlock_last_error(), "WRONGPASS") || strstr(rlock_last_error(), "NOAUTH"),
                  "%s: detail \"%s\"", u, rlock_last_error());
        cr_expect(!strstr(rlock_last_error(), "wrong") && !strstr(rlock_last_error(), "s3cret"),
                  "%s: detail \"%s\" shows the password", u, rlock_last_error());
    }

    snprintf(u, sizeof u, "redis://:p%%40ss%%20w%%3Ard@127.0.0.1:%d", srv.port);
    x = client_for(u, &st);
    th_assert_status(st, RLOCK_OK);
    lock_roundtrip(x, rr);
    rlock_client_free(x);
    /* The parser splits at the last '@' before the path, so the same
     * password also works unescaped. */
    snprintf(u, sizeof u, "redis://:p@ss w:rd@127.0.0.1:%d", srv.port);
    x = client_for(u, &st);
    th_assert_status(st, RLOCK_OK);
    rlock_client_free(x);

    snprintf(u, sizeof u, "redis://alice:s3cret@127.0.0.1:%d/3", srv.port);
    x = client_for(u, &st);
    th_assert_status(st, RLOCK_OK);
    freeReplyObject(th_cmd(rr, "SELECT 3"));
    lock_roundtrip(x, rr);
    freeReplyObject(th_cmd(rr, "SELECT 0"));
    rlock_client_free(x);

    /* A user that may not run scripts: the login works, locking is refused
     * by the ACL (NOPERM: RLOCK_EPERM since 0.3). */
    snprintf(u, sizeof u, "redis://bob:pw@127.0.0.1:%d", srv.port);
    x = client_for(u, &st);
    th_assert_status(st, RLOCK_OK);
    rlock *l;
    th_ok(rlock_new(x, "bob-lock", &l));
    th_assert_status(rlock_lock(l, 1000), RLOCK_EPERM);
    th_assert_status(rlock_try_lock(l, 0, 1000), RLOCK_EPERM);
    th_assert_status(rlock_unlock(l), RLOCK_EPERM);
    rlock_free(l);
    rlock_client_free(x);

    redisFree(rr);
}

/* ---- names: odd but valid -------------------------------------------- */

static char *expected_channel(const char *name)
{
    char *s = NULL;
    if (strchr(name, '{')) {
        cr_assert(asprintf(&s, "redisson_lock__channel:%s", name) > 0);
    } else {
        cr_assert(asprintf(&s, "redisson_lock__channel:{%s}", name) > 0);
    }
    return s;
}

static void check_name_works(const char *name, const char *label)
{
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    cr_assert_str_eq(rlock_name(l), name, "%s: rlock_name", label);
    char *chan = expected_channel(name);
    redisContext *sub = th_subscribe(0, chan);

    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_ok(rlock_lock(l, 20000));
    char *owner = th_owner(c, rlock_thread_id());
    redisReply *rep = th_cmd(r, "HGET %b %s", name, strlen(name), owner);
    cr_assert_eq(rep->type, REDIS_REPLY_STRING, "%s: no owner field at the exact key", label);
    cr_assert_str_eq(rep->str, "2", "%s", label);
    freeReplyObject(rep);
    rep = th_cmd(r, "HLEN %b", name, strlen(name));
    cr_assert_eq(rep->integer, 1, "%s", label);
    freeReplyObject(rep);
    bool b = false;
    int64_t n = 0;
    th_ok(rlock_is_locked(l, &b));
    cr_assert(b, "%s", label);
    th_ok(rlock_is_held_by_current_thread(l, &b));
    cr_assert(b, "%s", label);
    th_ok(rlock_hold_count(l, &n));
    cr_assert_eq(n, 2, "%s", label);
    th_ok(rlock_remain_ttl(l, &n));
    cr_assert(n > 0 && n <= 20000, "%s: ttl %lld", label, (long long)n);

    th_ok(rlock_unlock(l));
    th_ok(rlock_unlock(l));
    char *msg = th_next_message(sub, 2000);
    cr_assert_not_null(msg, "%s: no release message on %.60s", label, chan);
    cr_assert_str_eq(msg, "0");
    free(msg);
    rep = th_cmd(r, "EXISTS %b", name, strlen(name));
    cr_assert_eq(rep->integer, 0, "%s: key left after the last unlock", label);
    freeReplyObject(rep);
    th_ok(rlock_is_locked(l, &b));
    cr_assert(!b);
    redisFree(sub);
    rlock_free(l);
    free(owner);
    free(chan);
}

Test(badinput, odd_names_work_at_the_exact_key_and_channel)
{
    char *base = th_name("odd");
    char bin[64];
    snprintf(bin, sizeof bin, "%s\x01\x02\x7f\x80\xfe\xff\t\r\n", base);
    struct {
        const char *label;
        const char *fmt;
    } names[] = {
        {"spaces", "%s with  spaces "}, {"leading space", " %s"},
        {"braces (tag)", "{%s}"},       {"tag in the middle", "pre{%s}post"},
        {"open brace only", "%s{"},     {"close brace only", "%s}"},
        {"empty tag", "{}%s"},          {"nested braces", "{{%s}}"},
        {"utf-8", "%s-замок-锁-🔒-é"},   {"colons and stars", "%s:*:?[a]"},
        {"percent", "%s%%s%%d%%n"},     {"quotes", "%s'\"\\"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *name = NULL;
        cr_assert(asprintf(&name, names[i].fmt, base) > 0);
        check_name_works(name, names[i].label);
        free(name);
    }
    check_name_works(bin, "control and high bytes");
    check_name_works("x", "one character");
    free(base);
}

Test(badinput, longest_name)
{
    size_t len = RLOCK_NAME_MAX; /* one more is RLOCK_EINVAL (test_review.c) */
    char *name = malloc(len + 1);
    char *base = th_name("big");
    size_t bl = strlen(base);
    for (size_t i = 0; i < len; i++) {
        name[i] = i < bl ? base[i] : (char)('a' + i % 26);
    }
    name[len] = '\0';
    check_name_works(name, "RLOCK_NAME_MAX name");
    /* With the watchdog: renewed like any other. */
    rlock_client *x = th_client(NULL, 1500);
    rlock *l;
    th_ok(rlock_new(x, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_wait_renewal(r, name, 3000);
    int64_t ttl = 0;
    th_ok(rlock_remain_ttl(l, &ttl));
    cr_assert(ttl > 0 && ttl <= 1500, "ttl %lld", (long long)ttl);
    th_ok(rlock_unlock(l));
    bool b = true;
    th_ok(rlock_is_locked(l, &b));
    cr_assert(!b);
    rlock_free(l);
    rlock_client_free(x);
    free(base);
    free(name);
}

/* ---- keys of the wrong type ------------------------------------------ */

Test(badinput, key_of_another_type)
{
    char *name = th_name("wrongtype");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    freeReplyObject(th_cmd(r, "SET %s %s", name, "not-a-hash"));
    bool b = false;
    int64_t n = 0;
    th_assert_status(rlock_lock(l, RLOCK_WATCHDOG), RLOCK_EKIND);
    th_assert_status(rlock_lock(l, 1000), RLOCK_EKIND);
    th_assert_status(rlock_try_lock(l, 0, 1000), RLOCK_EKIND);
    th_assert_status(rlock_try_lock(l, 500, 1000), RLOCK_EKIND);
    th_assert_status(rlock_unlock(l), RLOCK_EKIND);
    th_assert_status(rlock_hold_count(l, &n), RLOCK_EKIND);
    th_assert_status(rlock_is_held_by_current_thread(l, &b), RLOCK_EKIND);
    th_assert_status(rlock_is_held_by_thread(l, 1, &b), RLOCK_EKIND);
    /* Type-agnostic commands answer normally. */
    th_ok(rlock_is_locked(l, &b));
    cr_assert(b);
    th_ok(rlock_remain_ttl(l, &n));
    cr_assert_eq(n, -1, "no expiry on a hand-written key");
    redisReply *rep = th_cmd(r, "GET %s", name);
    cr_assert_str_eq(rep->str, "not-a-hash", "failed calls must not touch the key");
    freeReplyObject(rep);
    uint64_t held = 1;
    th_ok(rlock_client_stat(c, RLOCK_STAT_HELD, &held));
    cr_assert_eq(held, 0);
    /* force_unlock deletes whatever is there. */
    th_ok(rlock_force_unlock(l, &b));
    cr_assert(b);
    th_ok(rlock_lock(l, 1000));
    th_ok(rlock_unlock(l));
    rlock_free(l);
    free(name);
}

Test(badinput, hash_field_that_is_not_a_count)
{
    char *name = th_name("notcount");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    char *owner = th_owner(c, rlock_thread_id());
    freeReplyObject(th_cmd(r, "HSET %s %s %s", name, owner, "abc"));
    int64_t n = 0;
    th_assert_status(rlock_hold_count(l, &n), RLOCK_EPROTO);
    th_assert_status(rlock_lock(l, 1000), RLOCK_EREDIS); /* HINCRBY on "abc" */
    bool b = false;
    th_ok(rlock_is_held_by_current_thread(l, &b));
    cr_assert(b);
    th_ok(rlock_force_unlock(l, &b));
    rlock_free(l);
    free(owner);
    free(name);
}

static atomic_int lost_calls;

static void count_lost(const char *name, uint64_t tid, void *arg)
{
    (void)name;
    (void)tid;
    (void)arg;
    atomic_fetch_add(&lost_calls, 1);
}

/* One held lock replaced by a key of another type must not stop the
 * renewal of the other locks renewed in the same batch. */
Test(badinput, clobbered_lock_does_not_stop_other_renewals)
{
    enum { N = 30 };
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = th_url();
    cfg.watchdog_timeout_ms = 1500;
    cfg.on_lock_lost = count_lost;
    rlock_client *x = th_client_cfg(&cfg);
    char *base = th_name("clobber");
    char *names[N];
    rlock *ls[N];
    for (int i = 0; i < N; i++) {
        cr_assert(asprintf(&names[i], "%s:%d", base, i) > 0);
        th_ok(rlock_new(x, names[i], &ls[i]));
        th_ok(rlock_lock(ls[i], RLOCK_WATCHDOG));
    }
    /* Someone overwrites lock 0 with a string (a bug elsewhere, a reused
     * key name): that hold is gone, the other 29 are not. */
    freeReplyObject(th_cmd(r, "SET %s %s", names[0], "clobbered"));
    th_sleep_ms(2 * 1500 + 500); /* two leases pass: only renewal keeps the others */
    char *owner = th_owner(x, rlock_thread_id());
    int lapsed = 0;
    for (int i = 1; i < N; i++) {
        if (th_hget_int(r, names[i], owner) != 1) {
            lapsed++;
        }
    }
    cr_log_info("on_lock_lost calls: %d", atomic_load(&lost_calls));
    cr_expect_eq(lapsed, 0,
                 "%d of %d untouched locks lapsed: their renewal batch failed with WRONGTYPE "
                 "every round and they were neither renewed nor reported lost",
                 lapsed, N - 1);
    cr_expect_eq(atomic_load(&lost_calls), 1, "on_lock_lost should fire for the clobbered lock");
    for (int i = 0; i < N; i++) {
        rlock_unlock(ls[i]);
        rlock_free(ls[i]);
        free(names[i]);
    }
    freeReplyObject(th_cmd(r, "DEL %s", base));
    rlock_client_free(x);
    free(owner);
    free(base);
}

/* ---- status strings --------------------------------------------------- */

Test(badinput, status_strings_for_every_value)
{
    static const char *names[] = {
        "RLOCK_OK",        "RLOCK_EINVAL", "RLOCK_ENOMEM",  "RLOCK_EBUSY",
        "RLOCK_ENOTOWNER", "RLOCK_ELOST",  "RLOCK_EIO",     "RLOCK_ETIMEDOUT",
        "RLOCK_EREDIS",    "RLOCK_EPROTO", "RLOCK_ECLOSED", "RLOCK_EAUTH",
        "RLOCK_ECANCELED", "RLOCK_EPOOL",  "RLOCK_EPERM",   "RLOCK_ETLS",
        "RLOCK_EDEADLK",   "RLOCK_EKIND",  "RLOCK_ESTALE",
    };
    for (int s = 0; s <= RLOCK_ESTALE; s++) {
        cr_assert_str_eq(rlock_status_name((rlock_status)s), names[s]);
        const char *e = rlock_strerror((rlock_status)s);
        cr_assert(e != NULL && e[0] != '\0');
        for (int t = 0; t < s; t++) {
            cr_assert_str_neq(e, rlock_strerror((rlock_status)t), "%s and %s share a sentence",
                              names[s], names[t]);
        }
    }
    const int unknown[] = {19, 20, 100, -1, -100, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        rlock_status s = (rlock_status)unknown[i];
        cr_assert_str_eq(rlock_status_name(s), "RLOCK_UNKNOWN", "value %d", unknown[i]);
        const char *e = rlock_strerror(s);
        cr_assert(e != NULL && e[0] != '\0', "value %d", unknown[i]);
        cr_assert(rlock_strerror(s) == e, "constant string");
    }
}
