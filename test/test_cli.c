/* The rlock command, driven as a user drives it: the real binary in child
 * processes against the test server. Every exit code of the table in
 * docs/rlock.1 is produced here, and every test asserts what Redis holds
 * (keys, fields, TTLs, channel messages), not only exit codes. */
#include "harness.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char *g_bin;
static char g_dir[64];

static void setup(void)
{
    g_bin = th_build_path("rlock");
    setenv("RLOCK_URL", th_url(), 1);
    unsetenv("REDIS_URL");
    unsetenv("RLOCK_WATCHDOG_MS");
    snprintf(g_dir, sizeof g_dir, "/tmp/rlock-cli.XXXXXX");
    cr_assert(mkdtemp(g_dir) != NULL);
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0) {
        /* best effort */
    }
    free(g_bin);
}

TestSuite(cli, .init = setup, .fini = teardown, .timeout = 90);

/* A path inside this test's directory; the caller frees it. */
static char *tpath(const char *file)
{
    char *p = NULL;
    cr_assert(asprintf(&p, "%s/%s", g_dir, file) > 0);
    return p;
}

/* Writes text to a new file of this test's directory with the given
 * mode; returns its path, which the caller frees. */
static char *tfile(const char *file, const char *text, mode_t mode)
{
    char *p = tpath(file);
    FILE *f = fopen(p, "w");
    cr_assert(f != NULL);
    fputs(text, f);
    fclose(f);
    chmod(p, mode);
    return p;
}

/* Starts rlock with args (NULL-terminated); stdout goes to out (a path) when
 * given, stderr stays the test's so failures explain themselves. */
static pid_t start(const char *out, const char *const *args)
{
    const char *argv[40] = {g_bin};
    int n = 1;
    while (args[n - 1] != NULL) {
        cr_assert(n < 39);
        argv[n] = args[n - 1];
        n++;
    }
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        if (out != NULL) {
            int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            dup2(fd, 1);
        }
        execv(g_bin, (char **)argv);
        _exit(99);
    }
    return pid;
}

/* Waits for pid for at most th_ms(timeout_ms) (a generous bound, never a
 * speed assertion); returns its exit code or 128+signal. */
static int wait_exit(pid_t pid, int64_t timeout_ms)
{
    timeout_ms = th_ms(timeout_ms);
    int64_t end = th_now_ms() + timeout_ms;
    int st;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (th_now_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            cr_assert_fail("rlock did not exit within %lld ms", (long long)timeout_ms);
        }
        th_sleep_ms(20);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static bool still_running(pid_t pid)
{
    return waitpid(pid, NULL, WNOHANG) == 0;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return strdup("");
    }
    char *buf = calloc(1, 65536);
    size_t n = fread(buf, 1, 65535, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Runs rlock to completion; *out (may be NULL) receives its stdout. */
static int run(char **out, const char *const *args)
{
    char *path = tpath("stdout");
    int code = wait_exit(start(path, args), 60000);
    if (out != NULL) {
        *out = slurp(path);
    }
    unlink(path);
    free(path);
    return code;
}

#define RUN(out, ...) run((out), (const char *const[]){__VA_ARGS__, NULL})
#define START(out, ...) start((out), (const char *const[]){__VA_ARGS__, NULL})

static void wait_for_file(const char *path, int64_t timeout_ms)
{
    cr_assert(TH_POLL(access(path, F_OK) == 0, timeout_ms), "%s did not appear", path);
}

static void wait_for_key(redisContext *r, const char *key, long long exists, int64_t timeout_ms)
{
    th_wait_exists(r, key, exists, timeout_ms);
}

/* A hold written by hand the way a Java Redisson client writes it. */
static void java_hold(redisContext *r, const char *name, long long ttl_ms)
{
    freeReplyObject(th_cmd(r, "HSET %s %s 1", name, "1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed:57"));
    freeReplyObject(th_cmd(r, "PEXPIRE %s %lld", name, ttl_ms));
}

static char *channel_of(const char *name)
{
    char *ch = NULL;
    cr_assert(
        asprintf(&ch,
                 strchr(name, '{') ? "redisson_lock__channel:%s" : "redisson_lock__channel:{%s}",
                 name) > 0);
    return ch;
}

Test(cli, help_and_version_exit_0)
{
    char *out = NULL;
    cr_assert_eq(RUN(&out, "--help"), 0);
    cr_assert(strstr(out, "exit status") && strstr(out, "79"), "help: %s", out);
    free(out);
    cr_assert_eq(RUN(&out, "--version"), 0);
    char want[64];
    snprintf(want, sizeof want, "rlock %s\n", rlock_version());
    cr_assert_str_eq(out, want);
    free(out);
    cr_assert_eq(RUN(NULL, "run", "--help"), 0);
}

Test(cli, bad_usage_exits_2)
{
    char *name = th_name("cli-usage");
    cr_assert_eq(RUN(NULL, "frobnicate"), 2);
    cr_assert_eq(RUN(NULL, "run", name), 2); /* no COMMAND */
    cr_assert_eq(RUN(NULL, "run", "-w", "soon", name, "--", "true"), 2);
    cr_assert_eq(RUN(NULL, "run", "-l", "0", name, "--", "true"), 2);
    cr_assert_eq(RUN(NULL, "run", "-s", "NOPE", name, "--", "true"), 2);
    cr_assert_eq(RUN(NULL, "status"), 2); /* no NAME */
    cr_assert_eq(RUN(NULL, "status", name, "extra"), 2);
    cr_assert_eq(RUN(NULL, "unlock", name), 2); /* --force missing */
    cr_assert_eq(RUN(NULL, "--url", "bogus://x", "run", name, "--", "true"), 2);
    /* None of them touched the lock. */
    redisContext *r = th_redis(0);
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    free(name);
}

Test(cli, child_status_propagates_and_child_holds_the_lock)
{
    char *name = th_name("cli-status");
    /* The child asks `rlock status` about its own lock: 0 means locked. */
    cr_assert_eq(
        RUN(NULL, "run", name, "--", "sh", "-c", "\"$0\" status \"$1\" >/dev/null", g_bin, name),
        0);
    cr_assert_eq(RUN(NULL, "run", name, "--", "sh", "-c", "exit 7"), 7);
    /* Killed by a signal: 128 + N, as a shell reports it. */
    cr_assert_eq(RUN(NULL, "run", name, "--", "sh", "-c", "kill -KILL $$"), 128 + SIGKILL);
    redisContext *r = th_redis(0);
    cr_assert_eq(th_exists(r, name), 0, "released after every run");
    redisFree(r);
    free(name);
}

Test(cli, exec_failures_exit_126_and_127_and_release)
{
    char *name = th_name("cli-exec");
    cr_assert_eq(RUN(NULL, "run", name, "--", "/nonexistent/rlock-no-such-cmd"), 127);
    char *plain = tfile("not-executable", "echo should not run\n", 0644);
    cr_assert_eq(RUN(NULL, "run", name, "--", plain), 126);
    redisContext *r = th_redis(0);
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    free(plain);
    free(name);
}

/* An executable script without a "#!" line runs under /bin/sh, as with
 * flock(1) (execvp()), found by path or on PATH, with its arguments. */
Test(cli, script_without_interpreter_line_runs_under_sh)
{
    char *name = th_name("cli-noshebang");
    char *out = tpath("out");
    char *script = tfile("noshebang", "echo \"ran $1 $2\" > \"$1\"\nexit 5\n", 0755);
    cr_assert_eq(RUN(NULL, "run", name, "--", script, out, "x"), 5);
    char *got = slurp(out), *want = NULL;
    cr_assert(asprintf(&want, "ran %s x\n", out) > 0);
    cr_assert_str_eq(got, want);
    free(got);
    free(want);
    unlink(out);

    /* By name on PATH. */
    char *dir = strdup(script);
    *strrchr(dir, '/') = '\0';
    char *old = getenv("PATH") ? strdup(getenv("PATH")) : NULL;
    char *path = NULL;
    cr_assert(asprintf(&path, "%s:%s", dir, old ? old : "/usr/bin:/bin") > 0);
    setenv("PATH", path, 1);
    int code = RUN(NULL, "run", name, "--", "noshebang", out, "y");
    if (old) {
        setenv("PATH", old, 1);
    } else {
        unsetenv("PATH");
    }
    cr_assert_eq(code, 5);
    cr_assert_eq(access(out, F_OK), 0, "the script ran");
    redisContext *r = th_redis(0);
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    free(path);
    free(old);
    free(dir);
    free(script);
    free(out);
    free(name);
}

Test(cli, parallel_runs_serialize)
{
    char *name = th_name("cli-serial");
    char *log = tpath("log");
    const char *script = "echo start >> \"$0\"; sleep 0.2; echo end >> \"$0\"";
    pid_t p[4];
    for (int i = 0; i < 4; i++) {
        p[i] = START(NULL, "run", "-w", "30000", name, "--", "sh", "-c", script, log);
    }
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(wait_exit(p[i], 60000), 0);
    }
    /* No overlap: the critical sections never interleave. */
    char *text = slurp(log);
    cr_assert_str_eq(text, "start\nend\nstart\nend\nstart\nend\nstart\nend\n");
    redisContext *r = th_redis(0);
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    free(text);
    free(log);
    free(name);
}

Test(cli, killed_run_frees_the_lock_only_after_its_lease)
{
    char *name = th_name("cli-kill");
    char *pidfile = tpath("child.pid");
    pid_t p = START(NULL, "run", "-l", "3000", name, "--", "sh", "-c",
                    "echo $$ > \"$0\"; exec sleep 30", pidfile);
    wait_for_file(pidfile, 10000);
    redisContext *r = th_redis(0);
    cr_assert_eq(th_exists(r, name), 1);
    kill(p, SIGKILL);
    cr_assert_eq(wait_exit(p, 10000), 128 + SIGKILL);
    char *cpid = slurp(pidfile);
    kill(atoi(cpid), SIGKILL); /* the orphaned child; not the point here */
    /* Nobody released it: still held, with what is left of the lease. */
    cr_assert_eq(th_exists(r, name), 1);
    long long ttl = th_pttl(r, name);
    cr_assert(ttl > 0 && ttl <= 3000, "PTTL %lld", ttl);
    /* A waiter gets it once the lease runs out, with no unlock message. */
    cr_assert_eq(RUN(NULL, "run", "-w", "20000", name, "--", "true"), 0);
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    free(cpid);
    free(pidfile);
    free(name);
}

Test(cli, java_holder_blocks_until_released)
{
    char *name = th_name("cli-java");
    redisContext *r = th_redis(0);
    java_hold(r, name, 30000);
    /* Not acquired within the wait: 75, and the holder is untouched. */
    cr_assert_eq(RUN(NULL, "run", "-w", "300", name, "--", "true"), 75);
    cr_assert_eq(th_hget_int(r, name, "1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed:57"), 1);

    char *mark = tpath("ran");
    pid_t p = START(NULL, "run", "-w", "60000", name, "--", "touch", mark);
    th_wait_waiters(0, name, 1, 10000); /* rlock is waiting: subscribed */
    cr_assert(still_running(p));
    cr_assert_neq(access(mark, F_OK), 0, "COMMAND ran while Java held the lock");
    /* Release as Redisson does: DEL, then "0" on the channel. The TTL is
     * still ~29 s, so only the message can wake the waiter in time. */
    char *ch = channel_of(name);
    freeReplyObject(th_cmd(r, "DEL %s", name));
    int64_t released = th_now_ms();
    freeReplyObject(th_cmd(r, "PUBLISH %s 0", ch));
    cr_assert_eq(wait_exit(p, 15000), 0);
    cr_assert(th_now_ms() - released < 20000, "woken by the message, not the 30 s TTL");
    cr_assert_eq(access(mark, F_OK), 0);
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    free(ch);
    free(mark);
    free(name);
}

Test(cli, status_reports_holders_ttl_and_type)
{
    char *name = th_name("cli-st\"q\\x");
    rlock_client *c = th_client(NULL, 0);
    rlock *l = NULL;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    char *owner = th_owner(c, rlock_thread_id());

    char *out = NULL;
    cr_assert_eq(RUN(&out, "status", name, "--json"), 0, "0 = locked");
    char want[512];
    snprintf(want, sizeof want, "{\"owner\":\"%s\",\"count\":2}", owner);
    cr_assert(strstr(out, want) != NULL, "%s", out);
    cr_assert(strstr(out, "\"locked\":true,\"type\":\"hash\",\"ttl_ms\":") != NULL, "%s", out);
    cr_assert(strstr(out, "cli-st\\\"q\\\\x") != NULL, "name escaped: %s", out);
    long long ttl = atoll(strstr(out, "\"ttl_ms\":") + 9);
    cr_assert(ttl > 0 && ttl <= 30000, "ttl %lld", ttl);
    free(out);
    cr_assert_eq(RUN(&out, "status", name), 0);
    cr_assert(strstr(out, "locked: yes\n") && strstr(out, owner), "%s", out);
    free(out);

    th_ok(rlock_unlock(l));
    th_ok(rlock_unlock(l));
    cr_assert_eq(RUN(&out, "status", "--json", name), 1, "1 = free");
    cr_assert(strstr(out, "\"locked\":false,\"type\":\"none\",\"ttl_ms\":-2,\"holders\":[]}"), "%s",
              out);
    free(out);

    /* A key of another type counts as locked (as isLocked() says) and has
     * no holders; run reports the Redis error with 70. */
    redisContext *r = th_redis(0);
    freeReplyObject(th_cmd(r, "SET %s text", name));
    cr_assert_eq(RUN(&out, "status", "--json", name), 0);
    cr_assert(strstr(out, "\"type\":\"string\",\"ttl_ms\":-1,\"holders\":[]"), "%s", out);
    free(out);
    cr_assert_eq(RUN(NULL, "run", name, "--", "true"), 70);
    freeReplyObject(th_cmd(r, "DEL %s", name));
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    free(owner);
    free(name);
}

static void check_force_unlock(const char *name)
{
    redisContext *r = th_redis(0);
    char *ch = channel_of(name);
    redisContext *sub = th_subscribe(0, ch);
    java_hold(r, name, 30000);
    char *out = NULL;
    cr_assert_eq(RUN(&out, "unlock", "--force", name), 0);
    cr_assert(strstr(out, "unlocked") != NULL, "%s", out);
    free(out);
    cr_assert_eq(th_exists(r, name), 0);
    char *msg = th_next_message(sub, 5000);
    cr_assert(msg != NULL && strcmp(msg, "0") == 0, "message on %s: %s", ch, msg ? msg : "(none)");
    free(msg);
    /* Nothing to delete: says so, exits 0, publishes nothing. */
    cr_assert_eq(RUN(&out, "unlock", name, "--force"), 0);
    cr_assert(strstr(out, "was not locked") != NULL, "%s", out);
    free(out);
    msg = th_next_message(sub, 300);
    cr_assert_null(msg, "unexpected message %s", msg);
    redisFree(sub);
    redisFree(r);
    free(ch);
}

Test(cli, unlock_force_deletes_and_publishes)
{
    char *name = th_name("cli-force");
    check_force_unlock(name);
    free(name);
    /* A name with a hash tag keeps it: the channel has no added braces. */
    name = th_name("{cli-tag}force");
    check_force_unlock(name);
    free(name);
}

Test(cli, wait_returns_when_the_holder_unlocks)
{
    char *name = th_name("cli-wait");
    cr_assert_eq(RUN(NULL, "wait", name), 0, "free: returns at once");
    rlock_client *c = th_client(NULL, 0);
    rlock *l = NULL;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    cr_assert_eq(RUN(NULL, "wait", name, "-w", "300"), 75);
    pid_t p = START(NULL, "wait", name);
    th_wait_waiters(0, name, 1, 10000); /* rlock is waiting: subscribed */
    cr_assert(still_running(p));
    /* The lease is 30 s: returning well within it means the message woke it. */
    int64_t released = th_now_ms();
    th_ok(rlock_unlock(l));
    cr_assert_eq(wait_exit(p, 15000), 0);
    cr_assert(th_now_ms() - released < 20000, "woken by the message, not the 30 s lease");
    redisContext *r = th_redis(0);
    cr_assert_eq(th_exists(r, name), 0, "wait only watches, it takes nothing");
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    free(name);
}

/* The child script: records the signal it gets in $0, then exits 42. */
static const char trap_script[] = "trap 'echo $1 > \"$0\"; exit 42' $1; touch \"$0.ready\"; "
                                  "while :; do sleep 0.05; done";

/* Starts `rlock run NAME -- sh -c trap_script` trapping sig (after the
 * options in opts, NULL-terminated) and waits until the child is ready. */
static pid_t start_trapping(const char *name, const char *sig, const char *mark,
                            const char *const *opts)
{
    const char *args[20];
    int n = 0;
    args[n++] = "run";
    while (opts != NULL && *opts != NULL) {
        args[n++] = *opts++;
    }
    const char *tail[] = {name, "--", "sh", "-c", trap_script, mark, sig, NULL};
    for (int i = 0; tail[i] != NULL; i++) {
        args[n++] = tail[i];
    }
    args[n] = NULL;
    char *ready = NULL;
    cr_assert(asprintf(&ready, "%s.ready", mark) > 0);
    pid_t p = start(NULL, args);
    wait_for_file(ready, 10000);
    free(ready);
    return p;
}

Test(cli, signals_are_forwarded_and_the_lock_released)
{
    char *name = th_name("cli-sig");
    char *mark = tpath("sig");
    redisContext *r = th_redis(0);
    pid_t p = start_trapping(name, "TERM", mark, NULL);
    cr_assert_eq(th_exists(r, name), 1);
    kill(p, SIGTERM);
    cr_assert_eq(wait_exit(p, 15000), 42, "the child's own status");
    char *got = slurp(mark);
    cr_assert_str_eq(got, "TERM\n");
    free(got);
    cr_assert_eq(th_exists(r, name), 0, "released");

    /* A child that dies of the forwarded signal: 128 + N. */
    char *pidfile = tpath("pid");
    p = START(NULL, "run", name, "--", "sh", "-c", "echo $$ > \"$0\"; exec sleep 30", pidfile);
    wait_for_file(pidfile, 10000);
    wait_for_key(r, name, 1, 10000);
    kill(p, SIGINT);
    cr_assert_eq(wait_exit(p, 15000), 128 + SIGINT);
    cr_assert_eq(th_exists(r, name), 0);
    free(pidfile);

    /* Interrupted while still waiting: dies of the signal, takes nothing. */
    java_hold(r, name, 30000);
    p = START(NULL, "run", name, "--", "true");
    th_wait_waiters(0, name, 1, 10000); /* waiting: subscribed */
    kill(p, SIGHUP);
    cr_assert_eq(wait_exit(p, 15000), 128 + SIGHUP);
    cr_assert_eq(th_hlen(r, name), 1, "only the Java holder");
    freeReplyObject(th_cmd(r, "DEL %s", name));
    redisFree(r);
    free(mark);
    free(name);
}

Test(cli, watchdog_loss_signals_the_child_and_exits_79)
{
    char *name = th_name("cli-lost");
    char *mark = tpath("lost");
    setenv("RLOCK_WATCHDOG_MS", "1500", 1);
    redisContext *r = th_redis(0);
    pid_t p = start_trapping(name, "TERM", mark, NULL);
    long long ttl = th_pttl(r, name);
    cr_assert(ttl > 0 && ttl <= 1500, "watchdog lease from RLOCK_WATCHDOG_MS: %lld", ttl);
    /* Deleted behind its back: the next renewal (every 500 ms) finds out. */
    freeReplyObject(th_cmd(r, "DEL %s", name));
    cr_assert_eq(wait_exit(p, 15000), 79);
    char *got = slurp(mark);
    cr_assert_str_eq(got, "TERM\n");
    free(got);
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    free(mark);
    free(name);
}

Test(cli, lease_expiry_signals_the_child_and_exits_79)
{
    char *name = th_name("cli-lease");
    char *mark = tpath("lease");
    redisContext *r = th_redis(0);
    /* No renewal with -l: the loop wakes at the lease deadline itself. */
    pid_t p =
        start_trapping(name, "HUP", mark, (const char *const[]){"-l", "1000", "-s", "HUP", NULL});
    cr_assert_eq(wait_exit(p, 15000), 79);
    char *got = slurp(mark);
    cr_assert_str_eq(got, "HUP\n");
    free(got);
    cr_assert_eq(th_exists(r, name), 0);

    /* A child that ignores the signal gets SIGKILL -k ms later. */
    p = START(NULL, "run", "-l", "800", "-k", "300", name, "--", "sh", "-c",
              "trap '' TERM; while :; do sleep 0.05; done");
    cr_assert_eq(wait_exit(p, 15000), 79);
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    free(mark);
    free(name);
}

Test(cli, force_unlocked_under_a_lease_is_reported_at_exit)
{
    char *name = th_name("cli-stolen");
    char *pidfile = tpath("pid");
    redisContext *r = th_redis(0);
    pid_t p = START(NULL, "run", "-l", "60000", name, "--", "sh", "-c", "echo $$ > \"$0\"; sleep 1",
                    pidfile);
    wait_for_file(pidfile, 10000);
    cr_assert_eq(RUN(NULL, "unlock", "--force", name), 0);
    cr_assert_eq(wait_exit(p, 15000), 79);
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    free(pidfile);
    free(name);
}

Test(cli, unreachable_redis_exits_69)
{
    char *name = th_name("cli-down");
    const char *url = "redis://127.0.0.1:1";
    cr_assert_eq(RUN(NULL, "--url", url, "run", name, "--", "true"), 69);
    cr_assert_eq(RUN(NULL, "--url", url, "status", name), 69);
    cr_assert_eq(RUN(NULL, "wait", "--url", url, name), 69);
    setenv("RLOCK_URL", url, 1);
    cr_assert_eq(RUN(NULL, "unlock", "--force", name), 69);
    free(name);
}

Test(cli, url_sources_and_forms_agree)
{
    char *name = th_name("cli-url");
    char *db5 = NULL;
    cr_assert(asprintf(&db5, "%s/5", th_url()) > 0);
    /* The library (run) and the direct reads (status) pick the same db. */
    cr_assert_eq(RUN(NULL, "run", "--url", db5, name, "--", "sh", "-c",
                     "\"$0\" status --url \"$1\" \"$2\" >/dev/null && "
                     "! \"$0\" status \"$2\" >/dev/null",
                     g_bin, db5, name),
                 0);
    /* REDIS_URL is used when RLOCK_URL is not set; RLOCK_URL wins. */
    unsetenv("RLOCK_URL");
    setenv("REDIS_URL", db5, 1);
    cr_assert_eq(RUN(NULL, "run", name, "--", "sh", "-c",
                     "\"$0\" status --url \"$1\" \"$2\" >/dev/null", g_bin, db5, name),
                 0);
    setenv("RLOCK_URL", th_url(), 1);
    cr_assert_eq(RUN(NULL, "run", name, "--", "sh", "-c",
                     "\"$0\" status --url \"$1\" \"$2\" >/dev/null", g_bin, db5, name),
                 1);
    /* A user without a password is rejected by both the same way. */
    char *bad = NULL;
    cr_assert(asprintf(&bad, "redis://someone@127.0.0.1:%d", th_port()) > 0);
    cr_assert_eq(RUN(NULL, "--url", bad, "run", name, "--", "true"), 2);
    cr_assert_eq(RUN(NULL, "--url", bad, "status", name), 2);
    free(bad);
    free(db5);
    free(name);
}
