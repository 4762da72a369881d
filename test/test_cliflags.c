/* The rlock command's flock(1) parity (issue 15 §2) and the library's URL
 * check (§6): the real binary in child processes against the test server,
 * through sh -c so that each case reads as the command line a user types
 * ("$RLOCK" is the binary under test). */
#include "cli_helpers.h"

#include <arpa/inet.h>
#include <libgen.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <sys/socket.h>

static void setup(void)
{
    cli_setup();
    setenv("RLOCK", g_bin, 1);
    unsetenv("RLOCK_AUTH");
}

TestSuite(cliflags, .init = setup, .fini = cli_teardown, .timeout = 90);

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++) {
        n += *s == '\n';
    }
    return n;
}

/* ---- §6: the library checks and redacts a URL ---------------------------- */

static void expect_redact(const char *url, rlock_status want, const char *shown, const char *why)
{
    char buf[256];
    memset(buf, 'x', sizeof buf);
    rlock_status s = rlock_url_redact(url, buf, sizeof buf);
    cr_assert_eq(s, want, "%s: %s, want %s (%s)", url, rlock_status_name(s),
                 rlock_status_name(want), rlock_last_error());
    cr_assert_str_eq(buf, shown, "%s", url);
    if (why != NULL) {
        cr_assert(strstr(rlock_last_error(), why) != NULL, "%s: detail '%s' lacks '%s'", url,
                  rlock_last_error(), why);
    }
    cr_assert(strstr(rlock_last_error(), "s3cret") == NULL, "the detail shows the password");
}

Test(cliflags, url_redact_checks_like_the_client_and_hides_the_password)
{
    expect_redact("redis://u:s3cret@h:7/2", RLOCK_OK, "redis://u:***@h:7/2", NULL);
    expect_redact("redis://:s3cret@h", RLOCK_OK, "redis://:***@h", NULL);
    expect_redact("redis://h:6379", RLOCK_OK, "redis://h:6379", NULL);
    expect_redact("redis://u:p@ss/s3cret@[::1]:7", RLOCK_EINVAL, "redis://u:***@[::1]:7",
                  "the database"); /* a '/' before the '@': the password never shows */
    expect_redact("unix:///run/r.sock?db=1&password=s3cret&user=u", RLOCK_OK,
                  "unix:///run/r.sock?db=1&password=***&user=u", NULL);
    /* Malformed: which part, never its text; the password hidden anyway. */
    expect_redact("redis://host:s3cret", RLOCK_EINVAL, "redis://host:***", "the port");
    expect_redact("redis://u:s3cret@h/x", RLOCK_EINVAL, "redis://u:***@h/x", "the database");
    expect_redact("http://:s3cret@h", RLOCK_EINVAL, "http://:***@h",
                  "the scheme must be redis://, rediss:// (TLS) or unix://");
    expect_redact("redis://:s3cret@", RLOCK_EINVAL, "redis://:***@", "the host is empty");
    expect_redact("redis://:s3cret%zz@h", RLOCK_EINVAL, "redis://:***@h", "%-escape");
    expect_redact("unix://rel?password=s3cret", RLOCK_EINVAL, "unix://rel?password=***",
                  "absolute");
    expect_redact("redis://someone@h", RLOCK_EINVAL, "redis://someone@h", "has no password");
    expect_redact("unix:///s?user=u", RLOCK_EINVAL, "unix:///s?user=u", "has no password");
    /* The client refuses what the check refuses, with the same words. */
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = "redis://u:s3cret@h:99999";
    rlock_client *c = NULL;
    th_assert_status(rlock_client_new(&cfg, &c), RLOCK_EINVAL);
    cr_assert(strstr(rlock_last_error(), "the port") != NULL, "%s", rlock_last_error());
    /* Sizes: cut like snprintf, never past the buffer; NULL url. */
    char small[12];
    th_ok(rlock_url_redact("redis://u:s3cret@h:7", small, sizeof small));
    cr_assert_str_eq(small, "redis://u:*");
    th_ok(rlock_url_redact("redis://h", NULL, 0));
    th_assert_status(rlock_url_redact(NULL, small, sizeof small), RLOCK_EINVAL);
    cr_assert_str_eq(small, "");
    th_assert_status(rlock_url_redact("redis://h", NULL, 5), RLOCK_EINVAL);
}

/* ---- §2: flock parity ------------------------------------------------------ */

/* -q/--quiet: contention is said by the exit code alone; real failures
 * still speak. -E/--conflict-exit-code picks that code, as flock's. */
Test(cliflags, quiet_silences_contention_only)
{
    char *name = th_name("cliflags-quiet");
    redisContext *r = th_redis(0);
    java_hold(r, name, 60000);
    char *err = NULL;
    static const char *const forms[] = {
        "run -n -q %s -- true",          "run --quiet -w 0.2 %s -- true", "hold -q -n %s",
        "wait --quiet -n %s",            "wait -q -w 200ms %s",
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char *f = NULL;
        cr_assert(asprintf(&f, "\"$RLOCK\" %s", forms[i]) > 0);
        cr_assert_eq(sh(NULL, &err, f, name), 75, "%s", forms[i]);
        cr_assert_str_eq(err, "", "%s: quiet, yet: %s", forms[i], err);
        free(err);
        free(f);
    }
    /* Without -q the same contention is said. */
    cr_assert_eq(sh(NULL, &err, "\"$RLOCK\" run -n %s -- true", name), 75);
    cr_assert(strstr(err, "not acquired") != NULL, "%s", err);
    free(err);
    /* flock's -E, long form and =, with -q. */
    cr_assert_eq(sh(NULL, &err, "\"$RLOCK\" run -q --conflict-exit-code=1 -n %s -- true", name),
                 1);
    cr_assert_str_eq(err, "");
    free(err);
    cr_assert_eq(sh(NULL, NULL, "\"$RLOCK\" hold -E 3 -q -n %s", name), 3);
    /* -q hides no error: a dead server still says why. */
    cr_assert_eq(
        sh(NULL, &err, "\"$RLOCK\" --url redis://127.0.0.1:1 run -q -n %s -- true", name), 69);
    cr_assert(strstr(err, "cannot reach") != NULL, "%s", err);
    free(err);
    /* The holder is untouched. */
    cr_assert_eq(th_hget_int(r, name, "1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed:57"), 1);
    redisFree(r);
    free(name);
}

/* An option after NAME is an error that says where options go, for every
 * sub-command that stops at NAME; COMMAND is not run, the lock not taken. */
Test(cliflags, option_after_the_name_says_options_go_before_it)
{
    char *name = th_name("cliflags-order");
    char *mark = NULL;
    cr_assert(asprintf(&mark, "%s/ran", g_dir) > 0);
    char *err = NULL;
    static const char *const forms[] = {
        "run %s -n -- touch %s", "run %s -w 1 touch %s", "run %s --wait=1 -- touch %s",
        "run %s -q -c 'touch %s'", "hold %s -n #%s",
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char *f = NULL;
        cr_assert(asprintf(&f, "\"$RLOCK\" %s", forms[i]) > 0);
        cr_assert_eq(sh(NULL, &err, f, name, mark), 2, "%s", forms[i]);
        cr_assert(strstr(err, "options go before the name") != NULL, "%s: %s", forms[i], err);
        cr_assert_eq(lines(err), 1, "%s: one line: %s", forms[i], err);
        free(err);
        free(f);
    }
    cr_assert(access(mark, F_OK) != 0, "COMMAND ran");
    /* What follows -- or -c is COMMAND's, dashes included. */
    cr_assert_eq(sh(NULL, NULL, "\"$RLOCK\" run %s -- sh -c 'test \"$1\" = -n' sh -n", name), 0);
    cr_assert_eq(sh(NULL, NULL, "\"$RLOCK\" run %s -c 'exit 4'", name), 4);
    redisContext *r = th_redis(0);
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    free(mark);
    free(name);
}

/* Usage errors: one line naming the problem and pointing at --help, never
 * the whole help on stderr. */
Test(cliflags, usage_errors_are_one_line)
{
    static const struct {
        const char *args;
        const char *want;
    } cases[] = {
        {"--foo", "rlock: unknown option --foo; see rlock --help\n"},
        {"-Z run x -- true", "rlock: unknown option -Z; see rlock --help\n"},
        {"", "rlock: missing command; see rlock --help\n"},
        {"frobnicate x", "rlock: unknown command 'frobnicate'; see rlock --help\n"},
        {"run --foo x -- true", "rlock: run: unknown option --foo; see rlock --help\n"},
        {"run -w", "rlock: run: option -w wants a value; see rlock --help\n"},
        {"status --json=1 x", NULL},
        {"status -w 1 x", "rlock: status: option -w is not for status; see rlock --help\n"},
        {"run -w soon x -- true", NULL},
        {"wait", "rlock: wait: expected a lock NAME; see rlock --help\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *err = NULL, *out = NULL;
        cr_assert_eq(sh(&out, &err, "\"$RLOCK\" %s", cases[i].args), 2, "%s", cases[i].args);
        if (cases[i].want != NULL) {
            cr_assert_str_eq(err, cases[i].want, "rlock %s", cases[i].args);
        }
        cr_assert_eq(lines(err), 1, "rlock %s: one line: %s", cases[i].args, err);
        cr_assert(strstr(err, "; see rlock --help") != NULL, "%s", err);
        cr_assert_str_eq(out, "");
        free(err);
        free(out);
    }
}

/* A listening socket that never answers: connect succeeds, no reply. */
static int mute_listener(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
    cr_assert(listen(fd, 16) == 0);
    socklen_t n = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &n);
    *port = ntohs(a.sin_port);
    return fd;
}

/* --redis-timeout TIME bounds each connect and each reply (the library's
 * connect_timeout_ms and command_timeout_ms); the defaults (2 s, 3 s) would
 * keep every sub-command here for 3 s at least. */
Test(cliflags, redis_timeout_bounds_connect_and_commands)
{
    int port = 0;
    int fd = mute_listener(&port);
    char *name = th_name("cliflags-timeout");
    /* Well under the 3 s default, however slow the machine. */
    int64_t bound = th_ms(1500) < 2900 ? th_ms(1500) : 2900;
    static const char *const forms[] = {"status %s", "status --json %s", "run -n %s -- true",
                                        "wait -n %s", "unlock --force %s", "hold -n %s"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char *f = NULL, *err = NULL;
        cr_assert(asprintf(&f, "\"$RLOCK\" --url redis://127.0.0.1:%d --redis-timeout 200ms %s",
                           port, forms[i]) > 0);
        int64_t t0 = th_now_ms();
        cr_assert_eq(sh(NULL, &err, f, name), 69, "%s", forms[i]);
        int64_t took = th_now_ms() - t0;
        cr_assert(took >= 200 && took < bound, "%s took %lld ms", forms[i], (long long)took);
        cr_assert(strstr(err, "did not answer in time") != NULL, "%s: %s", forms[i], err);
        free(err);
        free(f);
    }
    /* A bad value is bad usage. */
    cr_assert_eq(sh(NULL, NULL, "\"$RLOCK\" --redis-timeout 0 status %s", name), 2);
    cr_assert_eq(sh(NULL, NULL, "\"$RLOCK\" status --redis-timeout soon %s", name), 2);
    /* And a working server with it works. */
    cr_assert_eq(sh(NULL, NULL, "\"$RLOCK\" run --redis-timeout 2s %s -- true", name), 0);
    close(fd);
    free(name);
}

/* status answers 0 (locked) or 1 (not locked) only when Redis answered;
 * a server that is down or silent is 69, so `if rlock status` and
 * `case $?` never read an outage as "free". */
Test(cliflags, status_error_is_neither_locked_nor_free)
{
    char *name = th_name("cliflags-status");
    redisContext *r = th_redis(0);
    char *out = NULL;
    cr_assert_eq(sh(&out, NULL, "\"$RLOCK\" status %s", name), 1);
    cr_assert(strstr(out, "locked: no") != NULL, "%s", out);
    free(out);
    java_hold(r, name, 60000);
    cr_assert_eq(sh(NULL, NULL, "\"$RLOCK\" status %s", name), 0);
    cr_assert_eq(sh(&out, NULL, "\"$RLOCK\" status --json %s", name), 0);
    cr_assert(strstr(out, "\"locked\":true") != NULL, "%s", out);
    free(out);
    int port = 0;
    int fd = mute_listener(&port);
    char dead[64], silent[64];
    snprintf(dead, sizeof dead, "redis://127.0.0.1:1");
    snprintf(silent, sizeof silent, "redis://127.0.0.1:%d", port);
    const char *urls[] = {dead, silent};
    for (int i = 0; i < 2; i++) {
        char *err = NULL;
        cr_assert_eq(
            sh(&out, &err, "\"$RLOCK\" --url %s --redis-timeout 300ms status %s", urls[i], name),
            69);
        cr_assert_str_eq(out, "", "no answer printed on an error");
        free(out);
        free(err);
        cr_assert_eq(sh(&out, NULL, "\"$RLOCK\" --url %s --redis-timeout 300ms status --json %s",
                        urls[i], name),
                     69);
        cr_assert_str_eq(out, "", "no JSON on an error");
        free(out);
        /* The man page's script idiom tells the three apart. */
        cr_assert_eq(sh(&out, NULL,
                        "\"$RLOCK\" --url %s --redis-timeout 300ms status %s >/dev/null; "
                        "case $? in 0) echo locked;; 1) echo free;; *) echo unknown;; esac",
                        urls[i], name),
                     0);
        cr_assert_str_eq(out, "unknown\n");
        free(out);
    }
    close(fd);
    redisFree(r);
    free(name);
}

/* The self-locking script of docs/rlock.1 (flock(1)'s FLOCKER idiom, keyed
 * on the RLOCK_NAME that rlock run sets): the line is taken from the man
 * page itself and run with rlock in PATH. */
static char *idiom_from_man_page(void)
{
    char *path = th_build_path("../docs/rlock.1");
    char *page = slurp(path);
    free(path);
    char *at = strstr(page, "[ \"${RLOCK_NAME}\"");
    cr_assert(at != NULL, "docs/rlock.1 has no RLOCK_NAME idiom");
    size_t n = strcspn(at, "\n");
    char *line = calloc(1, n + 1);
    size_t j = 0;
    /* roff: \- is a minus, \e a backslash. */
    for (size_t i = 0; i < n; i++) {
        if (at[i] == '\\' && i + 1 < n && at[i + 1] == '-') {
            line[j++] = '-';
            i++;
        } else if (at[i] == '\\' && i + 1 < n && at[i + 1] == 'e') {
            line[j++] = '\\';
            i++;
        } else {
            line[j++] = at[i];
        }
    }
    free(page);
    return line;
}

Test(cliflags, self_locking_script_idiom_of_the_man_page_works)
{
    char *idiom = idiom_from_man_page();
    char *script = NULL, *text = NULL, *go = NULL, *started = NULL;
    cr_assert(asprintf(&script, "%s/job.sh", g_dir) > 0);
    cr_assert(asprintf(&go, "%s/go", g_dir) > 0);
    cr_assert(asprintf(&started, "%s/started", g_dir) > 0);
    /* The body checks that its lock is held, records the lock's name and
     * its arguments, then waits for the test's go. */
    cr_assert(asprintf(&text,
                       "#!/bin/sh\n%s\n"
                       "rlock status \"$RLOCK_NAME\" >/dev/null || exit 9\n"
                       "echo \"$RLOCK_NAME|$*\" > %s.tmp && mv %s.tmp %s\n"
                       "while [ ! -e %s ]; do sleep 0.02; done\n"
                       "exit 3\n",
                       idiom, started, started, started, go) > 0);
    FILE *f = fopen(script, "w");
    cr_assert(f != NULL);
    fputs(text, f);
    fclose(f);
    chmod(script, 0755);
    /* rlock from PATH, as the man page writes it. */
    char *bin = strdup(g_bin);
    char *path = NULL;
    cr_assert(asprintf(&path, "%s:%s", dirname(bin), getenv("PATH")) > 0);
    setenv("PATH", path, 1);

    char *argline = NULL;
    cr_assert(asprintf(&argline, "%s 'a b' c", script) > 0);
    pid_t first = start_sh("first", argline);
    cr_assert(TH_POLL(access(started, F_OK) == 0, 15000), "the first run did not start");
    char *rec = slurp(started);
    char *bar = strchr(rec, '|');
    cr_assert(bar != NULL && bar > rec, "RLOCK_NAME reaches the body: %s", rec);
    cr_assert_str_eq(bar, "|a b c\n", "the arguments reach the body");
    *bar = '\0';
    char *name = strdup(rec);
    free(rec);
    redisContext *r = th_redis(0);
    cr_assert_eq(th_exists(r, name), 1, "the script holds %s", name);
    /* A second run while the first holds: not acquired, body not run,
     * nothing said (-q). */
    unlink(started);
    char *err = NULL;
    cr_assert_eq(sh(NULL, &err, "%s x", script), 75);
    cr_assert(access(started, F_OK) != 0, "the second body ran");
    cr_assert_str_eq(err, "");
    free(err);
    f = fopen(go, "w");
    fclose(f);
    cr_assert_eq(wait_exit(first, 15000), 3, "the body's exit status");
    cr_assert_eq(th_exists(r, name), 0, "released");
    redisFree(r);
    free(name);
    free(argline);
    free(path);
    free(bin);
    free(text);
    free(started);
    free(go);
    free(script);
    free(idiom);
}
