/* The rlock command, driven as a user drives it: the real binary in child
 * processes against the test server. Every exit code of the table in
 * docs/rlock.1 is produced here, and every test asserts what Redis holds
 * (keys, fields, TTLs, channel messages), not only exit codes. */
#include "cli_helpers.h"

#include <pty.h>

TestSuite(cli, .init = cli_setup, .fini = cli_teardown, .timeout = 90);

static void wait_for_key(redisContext *r, const char *key, long long exists, int64_t timeout_ms)
{
    th_wait_exists(r, key, exists, timeout_ms);
}

Test(cli, help_and_version_exit_0)
{
    char *out = NULL;
    cr_assert_eq(RUN(&out, "--help"), 0);
    cr_assert(strstr(out, "exit status") && strstr(out, "79"), "help: %s", out);
    free(out);
    /* The command's, the library's and hiredis's versions. */
    char want[128];
    snprintf(want, sizeof want, "rlock %s\nlibrlock %s\nhiredis %d.%d.%d\n", RLOCK_VERSION_STRING,
             rlock_version(), HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH);
    cr_assert_eq(RUN(&out, "--version"), 0);
    cr_assert_str_eq(out, want);
    free(out);
    cr_assert_eq(RUN(&out, "-V"), 0);
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
    cr_assert_eq(RUN(NULL, "run", "-S", "NOPE", name, "--", "true"), 2);
    cr_assert_eq(RUN(NULL, "run", "-E", "256", name, "--", "true"), 2);
    cr_assert_eq(RUN(NULL, "run", name, "-c"), 2);                  /* no LINE */
    cr_assert_eq(RUN(NULL, "run", name, "-c", "true", "extra"), 2); /* one LINE */
    cr_assert_eq(RUN(NULL, "run", "-c", "true", name, "--", "true"), 2);
    cr_assert_eq(RUN(NULL, "hold"), 2);
    cr_assert_eq(RUN(NULL, "hold", name, "extra"), 2);
    cr_assert_eq(RUN(NULL, "hold", "-S", "HUP", name), 2); /* run's option */
    cr_assert_eq(RUN(NULL, "status", "-w", "1", name), 2); /* run's option */
    cr_assert_eq(RUN(NULL, "status"), 2);                  /* no NAME */
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
        p[i] = START(NULL, "run", "-w", "30", name, "--", "sh", "-c", script, log);
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
    pid_t p = START(NULL, "run", "-l", "3s", name, "--", "sh", "-c",
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
    cr_assert_eq(RUN(NULL, "run", "-w", "20", name, "--", "true"), 0);
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
    cr_assert_eq(RUN(NULL, "run", "-w", "300ms", name, "--", "true"), 75);
    cr_assert_eq(th_hget_int(r, name, "1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed:57"), 1);

    char *mark = tpath("ran");
    pid_t p = START(NULL, "run", "-w", "1m", name, "--", "touch", mark);
    th_wait_waiters(0, name, 1, 10000); /* rlock is waiting: subscribed */
    cr_assert(still_running(p));
    cr_assert_neq(access(mark, F_OK), 0, "COMMAND ran while Java held the lock");
    /* Release as Redisson does: DEL, then "0" on the channel. The TTL is
     * still ~29 s, so only the message can wake the waiter in time. */
    char *ch = th_channel(name);
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
    snprintf(want, sizeof want, "{\"owner\":\"%s\",\"count\":2,\"connection\":", owner);
    cr_assert(strstr(out, want) != NULL, "%s", out);
    cr_assert(strstr(out, "\"locked\":true,\"type\":\"hash\",\"kind\":\"lock\",\"ttl_ms\":") != NULL,
              "%s", out);
    cr_assert(strstr(out, "cli-st\\\"q\\\\x") != NULL, "name escaped: %s", out);
    long long ttl = atoll(strstr(out, "\"ttl_ms\":") + 9);
    cr_assert(ttl > 0 && ttl <= 30000, "ttl %lld", ttl);
    free(out);
    cr_assert_eq(RUN(&out, "status", name), 0);
    cr_assert(strstr(out, "locked: yes\n") && strstr(out, owner), "%s", out);
    free(out);

    th_ok(rlock_unlock(l));
    th_ok(rlock_unlock(l));
    cr_assert_eq(RUN(&out, "status", name), 1, "1 = free");
    cr_assert(strstr(out, "locked: no\n"), "%s", out);
    free(out);
    cr_assert_eq(RUN(&out, "status", "--json", name), 0, "--json: 0 whenever answered");
    cr_assert(strstr(out, "\"locked\":false,\"type\":\"none\",\"kind\":\"none\",\"ttl_ms\":-2,\"holders\":[]}"), "%s",
              out);
    free(out);

    /* A key of another type counts as locked (as isLocked() says) and has
     * no holders; run reports the Redis error with 70. */
    redisContext *r = th_redis(0);
    freeReplyObject(th_cmd(r, "SET %s text", name));
    cr_assert_eq(RUN(&out, "status", "--json", name), 0);
    cr_assert(strstr(out, "\"type\":\"string\",\"kind\":\"string\",\"ttl_ms\":-1,\"holders\":[]"), "%s", out);
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
    char *ch = th_channel(name);
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
    cr_assert_eq(RUN(NULL, "wait", name, "-w", "300ms"), 75);
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
    pid_t p = start_io(NULL, NULL, NULL, args);
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
        start_trapping(name, "HUP", mark, (const char *const[]){"-l", "1", "-S", "HUP", NULL});
    cr_assert_eq(wait_exit(p, 15000), 79);
    char *got = slurp(mark);
    cr_assert_str_eq(got, "HUP\n");
    free(got);
    cr_assert_eq(th_exists(r, name), 0);

    /* A child that ignores the signal gets SIGKILL -k ms later. */
    p = START(NULL, "run", "-l", "800ms", "-k", "0.3", name, "--", "sh", "-c",
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
    pid_t p = START(NULL, "run", "-l", "60", name, "--", "sh", "-c", "echo $$ > \"$0\"; sleep 1",
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
    /* run and status (both through the library) pick the same db. */
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

/* ---- issue 9: passwords, diagnosis, flock(1) options, hold, status ---- */

/* An ACL user of the shared server with the given password; the caller
 * deletes it with del_user(). Other tests keep using the default user. */
static char *add_user(const char *password)
{
    static int n;
    char *user = NULL;
    cr_assert(asprintf(&user, "cli-user-%d-%d", (int)getpid(), n++) > 0);
    redisContext *r = th_redis(0);
    redisReply *rep = th_cmd(r, "ACL SETUSER %s on >%s ~* &* +@all", user, password);
    cr_assert(rep->type == REDIS_REPLY_STATUS, "ACL SETUSER: %s", rep->str);
    freeReplyObject(rep);
    redisFree(r);
    return user;
}

static void del_user(char *user)
{
    redisContext *r = th_redis(0);
    th_run(r, "ACL DELUSER %s", user);
    redisFree(r);
    free(user);
}

static char *url_of(const char *user, const char *password, int port, const char *tail)
{
    char *u = NULL;
    cr_assert(asprintf(&u, "redis://%s:%s@127.0.0.1:%d%s", user ? user : "", password, port, tail) >
              0);
    return u;
}

/* Asserts that neither output holds the secret. */
static void assert_hidden(const char *out, const char *err, const char *secret)
{
    cr_assert(strstr(out, secret) == NULL, "stdout shows the password: %s", out);
    cr_assert(strstr(err, secret) == NULL, "stderr shows the password: %s", err);
}

/* Runs rlock with args; asserts its exit code, that stderr contains want
 * (when not NULL), and that no output contains the secret. */
static void expect(const char *secret, int code, const char *want, const char *const *args)
{
    char *out = NULL, *err = NULL;
    int got = run_io(NULL, &out, &err, args);
    assert_hidden(out, err, secret);
    cr_assert_eq(got, code, "%s %s: exit %d, want %d; stderr: %s", args[0], args[1], got, code,
                 err);
    if (want != NULL) {
        cr_assert(strstr(err, want) != NULL, "stderr lacks '%s': %s", want, err);
    }
    free(out);
    free(err);
}

#define EXPECT(secret, code, want, ...) \
    expect((secret), (code), (want), (const char *const[]){__VA_ARGS__, NULL})

/* Every sub-command's failure for one URL: same exit code, same words. */
static void expect_everywhere(const char *secret, const char *url, int code, const char *want,
                              const char *name)
{
    EXPECT(secret, code, want, "--url", url, "run", name, "--", "true");
    EXPECT(secret, code, want, "--url", url, "run", "--verbose", name, "-c", "true");
    EXPECT(secret, code, want, "--url", url, "hold", "-n", name);
    EXPECT(secret, code, want, "status", "--url", url, name);
    EXPECT(secret, code, want, "status", "--json", "--url", url, name);
    EXPECT(secret, code, want, "--verbose", "--url", url, "wait", "-n", name);
    EXPECT(secret, code, want, "--url", url, "unlock", "--force", name);
    setenv("RLOCK_URL", url, 1); /* the same from the environment */
    EXPECT(secret, code, want, "status", name);
    EXPECT(secret, code, want, "run", name, "--", "true");
    setenv("RLOCK_URL", th_url(), 1);
}

Test(cli, no_output_shows_the_password_and_each_cause_has_its_code)
{
    const char *pw = "s3cret-Pw";
    char *user = add_user(pw);
    char *name = th_name("cli-secret");
    char *url = NULL;

    /* A wrong password: 77 and the server's own words. */
    url = url_of(user, "wrong-s3cret-Pw", th_port(), "");
    expect_everywhere("s3cret-Pw", url, 77, "WRONGPASS", name);
    free(url);
    /* A password for the default user, which has none. */
    url = url_of(NULL, pw, th_port(), "");
    expect_everywhere(pw, url, 77, "refused the user or password", name);
    free(url);
    /* A database the server refuses: 78, not "cannot reach". */
    url = url_of(user, pw, th_port(), "/99");
    expect_everywhere(pw, url, 78, "DB index is out of range", name);
    free(url);
    /* A user the server's ACL denies every command the lock needs (it may
     * still log in; naming the connection is refused too): 77. */
    char *noping = add_user(pw);
    redisContext *acl = th_redis(0);
    th_run(acl, "ACL SETUSER %s -@all +auth", noping);
    redisFree(acl);
    url = url_of(noping, pw, th_port(), "");
    expect_everywhere(pw, url, 77, "NOPERM", name);
    free(url);
    del_user(noping);
    /* Nothing listening: 69, with the OS's reason. */
    url = url_of(user, pw, 1, "");
    expect_everywhere(pw, url, 69, "Connection refused", name);
    free(url);
    /* URL syntax: 2, naming the part, never the lock. */
    url = url_of(user, pw, 99999, "");
    expect_everywhere(pw, url, 2, "the port must be a number", name);
    free(url);
    url = url_of(user, pw, th_port(), "/x");
    expect_everywhere(pw, url, 2, "the database", name);
    free(url);
    expect_everywhere(pw, "http://:s3cret-Pw@localhost", 2, "the scheme", name);
    expect_everywhere(pw, "redis://:s3cret-Pw", 2, "the host is empty", name);
    expect_everywhere(pw, "redis://host:s3cret-Pw", 2, "the port", name); /* '@' forgotten */
    expect_everywhere(pw, "redis://:s3cret-Pw@", 2, "the host is empty", name);
    expect_everywhere(pw, "redis://:s3cret-Pw%zz@localhost", 2, "%-escape in the password", name);
    expect_everywhere(pw, "unix://relative?password=s3cret-Pw", 2, "absolute", name);
    expect_everywhere(pw, "unix:///nonexistent/rlock.sock?password=s3cret-Pw", 69,
                      "cannot reach the Redis server", name);
    /* A password holding '/', '@' or '?', unescaped. */
    expect_everywhere(pw, "redis://u:s3cret-Pw/x@127.0.0.1:1", 2, "the port", name);
    expect_everywhere("s3c@ret-Pw", "redis://u:s3c@ret-Pw@127.0.0.1:1", 69, "Connection refused",
                      name);
    expect_everywhere("s3c?ret", "redis://u:s3c?ret@127.0.0.1:1/0", 69, "Connection refused", name);
    char *err = NULL;
    cr_assert_eq(RUN_IO(NULL, NULL, &err, "--url", "bogus://x", "status", name), 2);
    cr_assert(strstr(err, name) == NULL && strstr(err, "invalid argument") == NULL,
              "a bad URL blames the URL, not the lock: %s", err);
    cr_assert(strstr(err, "URL bogus://x") != NULL, "%s", err);
    free(err);

    /* Success, with --verbose and a holder: the password shows nowhere. */
    url = url_of(user, pw, th_port(), "/0");
    char *out = NULL;
    cr_assert_eq(RUN_IO(NULL, &out, &err, "--verbose", "--url", url, "run", name, "--", "sh", "-c",
                        "\"$0\" --verbose --url \"$1\" status \"$2\" && env", g_bin, url, name),
                 0);
    assert_hidden(out, err, pw);
    cr_assert(strstr(err, "redis://") != NULL && strstr(err, ":***@127.0.0.1") != NULL,
              "the URL, redacted, user kept: %s", err);
    cr_assert(strstr(err, user) != NULL, "user kept: %s", err);
    free(out);
    free(err);

    /* A password given on the command line is masked in rlock's argv, so
     * that ps(1) stops showing it once rlock runs. */
    char *holdout = tpath("hold.out");
    pid_t p =
        start_io(NULL, holdout, NULL, (const char *const[]){"--url", url, "hold", name, NULL});
    redisContext *r = th_redis(0);
    wait_for_key(r, name, 1, th_ms(10000));
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)p);
    FILE *f = fopen(path, "r");
    cr_assert(f != NULL);
    static char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    cr_assert(n > 0 && memmem(buf, n, pw, strlen(pw)) == NULL, "ps shows the password");
    cr_assert(memmem(buf, n, user, strlen(user)) != NULL, "the user stays");
    kill(p, SIGTERM);
    cr_assert_eq(wait_exit(p, th_ms(15000)), 0);
    free(holdout);
    free(url);
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    del_user(user);
    free(name);
}

/* A password with every awkward character: percent-encoded in the URL,
 * hidden in messages in both forms, and passed intact to the library
 * (run, status, wait: all through the library's connections). */
Test(cli, encoded_password_reaches_the_server_intact)
{
    const char *pw = "p@ss:w/rd%?#&=";
    char *user = add_user(pw);
    char *name = th_name("cli-encoded");
    char *url = url_of(user, "p%40ss%3Aw%2Frd%25%3F%23%26%3D", th_port(), "");
    char *out = NULL, *err = NULL;
    cr_assert_eq(RUN_IO(NULL, &out, &err, "--url", url, "run", name, "--", "sh", "-c",
                        "\"$0\" --url \"$1\" status \"$2\" >/dev/null && "
                        "\"$0\" --url \"$1\" wait -n \"$2\"; test $? -eq 75",
                        g_bin, url, name),
                 0, "%s", err);
    assert_hidden(out, err, "p%40ss");
    free(out);
    free(err);
    char *wrong = url_of(user, "p%40ss%3Aw%2Frd%25%3F%23%26", th_port(), "");
    EXPECT("p%40ss", 77, "WRONGPASS", "--url", wrong, "status", name);
    free(wrong);
    free(url);
    del_user(user);
    free(name);
}

/* A server that wants a password the URL lacks: 77 from every
 * sub-command (status said 70 and run 69 before), and the password can
 * come from RLOCK_AUTH, --password-file or --askpass instead. */
Test(cli, missing_password_and_its_other_sources)
{
    th_server s;
    th_server_start(&s);
    redisContext *r = th_redis(s.port);
    th_run(r, "CONFIG SET requirepass s3cret-Pw");
    redisFree(r);
    char *name = th_name("cli-noauth");
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", s.port);
    expect_everywhere("s3cret-Pw", url, 77, "NOAUTH", name);

    /* RLOCK_AUTH, for a URL without a password; COMMAND's environment and
     * rlock's own (as ps e shows it) lose it. */
    setenv("RLOCK_AUTH", "s3cret-Pw", 1);
    char *envfile = tpath("env");
    char *out = NULL, *err = NULL;
    cr_assert_eq(RUN_IO(NULL, &out, &err, "--url", url, "run", name, "--", "sh", "-c",
                        "env > \"$0\"; tr '\\0' '\\n' < /proc/$PPID/environ >> \"$0\"; "
                        "tr '\\0' ' ' < /proc/$PPID/cmdline >> \"$0\"",
                        envfile),
                 0, "%s", err);
    char *env = slurp(envfile);
    cr_assert(strstr(env, "s3cret") == NULL, "the password leaked: %s", env);
    cr_assert(strstr(env, "RLOCK_AUTH") == NULL, "%s", env);
    free(env);
    free(out);
    free(err);
    /* A password in the URL wins over RLOCK_AUTH (as with redis-cli). */
    char wrong[96];
    snprintf(wrong, sizeof wrong, "redis://:wrong@127.0.0.1:%d", s.port);
    EXPECT("s3cret-Pw", 77, "WRONGPASS", "--url", wrong, "status", name);
    unsetenv("RLOCK_AUTH");

    /* --password-file: its first line. */
    char *pwfile = tfile("pw", "s3cret-Pw\nnot this line\n", 0600);
    EXPECT("s3cret-Pw", 1, NULL, "--password-file", pwfile, "--url", url, "status", name);
    EXPECT("s3cret-Pw", 0, NULL, "--url", url, "run", "--password-file", pwfile, name, "--",
           "true");
    EXPECT("s3cret-Pw", 2, "--password-file", "--password-file", "/nonexistent/pw", "--url", url,
           "status", name);
    /* It overrides the URL's password, as --askpass does. */
    EXPECT("s3cret-Pw", 1, NULL, "--password-file", pwfile, "--url", wrong, "status", name);

    /* --askpass: one line of standard input; the rest is COMMAND's. */
    char *in = tfile("stdin", "s3cret-Pw\nfor the command\n", 0600);
    cr_assert_eq(
        RUN_IO(in, &out, &err, "--askpass", "--url", url, "run", name, "--", "sh", "-c", "cat"), 0,
        "%s", err);
    cr_assert_str_eq(out, "for the command\n");
    assert_hidden(out, err, "s3cret");
    free(out);
    free(err);
    char *empty = tfile("empty", "", 0600);
    cr_assert_eq(RUN_IO(empty, NULL, &err, "--askpass", "--url", url, "status", name), 2);
    cr_assert(strstr(err, "no password") != NULL, "%s", err);
    free(err);

    r = th_redis(s.port);
    th_run(r, "AUTH s3cret-Pw");
    cr_assert_eq(th_exists(r, name), 0, "released after every run");
    redisFree(r);
    th_server_stop(&s);
    free(empty);
    free(in);
    free(pwfile);
    free(envfile);
    free(name);
}

/* RLOCK_AUTH completes a URL that names only the user. */
Test(cli, rlock_auth_gives_the_users_password)
{
    char *user = add_user("s3cret-Pw");
    char *name = th_name("cli-envauth");
    char *url = NULL;
    cr_assert(asprintf(&url, "redis://%s@127.0.0.1:%d", user, th_port()) > 0);
    EXPECT("s3cret-Pw", 2, "has no password", "--url", url, "status", name);
    setenv("RLOCK_AUTH", "s3cret-Pw", 1);
    char *out = tpath("hold.out");
    pid_t p = start_io(NULL, out, NULL, (const char *const[]){"--url", url, "hold", name, NULL});
    redisContext *r = th_redis(0);
    wait_for_key(r, name, 1, th_ms(10000));
    /* Neither ps nor ps e shows it. */
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)p);
    FILE *f = fopen(path, "r");
    cr_assert(f != NULL);
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    cr_assert(n > 0 && memmem(buf, n, "s3cret", 6) == NULL, "ps e shows the password");
    kill(p, SIGTERM);
    cr_assert_eq(wait_exit(p, th_ms(15000)), 0);
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    free(out);
    free(url);
    del_user(user);
    free(name);
}

/* -w takes seconds with fractions, or a unit, as flock -w does; -n makes
 * one attempt; -E picks the conflict exit code; wait takes them too. The
 * lower bounds are what was asked for; the upper ones are generous. */
Test(cli, wait_times_nonblock_and_conflict_code)
{
    char *name = th_name("cli-times");
    redisContext *r = th_redis(0);
    java_hold(r, name, 60000);
    static const struct {
        const char *arg;
        int64_t ms;
    } times[] = {{"1.5", 1500}, {"300ms", 300}, {"0.4s", 400}, {".2", 200}, {"0.01m", 600}};
    for (size_t i = 0; i < sizeof times / sizeof times[0]; i++) {
        int64_t t0 = th_now_ms();
        cr_assert_eq(RUN(NULL, "run", "-w", times[i].arg, name, "--", "true"), 75);
        int64_t took = th_now_ms() - t0;
        cr_assert(took >= times[i].ms && took < th_ms(15000), "-w %s took %lld ms", times[i].arg,
                  (long long)took);
    }
    int64_t t0 = th_now_ms();
    cr_assert_eq(RUN(NULL, "run", "--timeout", "0.3", name, "--", "true"), 75);
    cr_assert(th_now_ms() - t0 >= 300);
    const char *bad[] = {"1x", "-1", "1.5.2", "ms", "", "1 s", "5e3", "99999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(RUN(NULL, "run", "-w", bad[i], name, "--", "true"), 2, "-w '%s'", bad[i]);
    }
    char *err = NULL;
    cr_assert_eq(RUN_IO(NULL, NULL, &err, "run", "-n", name, "--", "true"), 75);
    cr_assert(strstr(err, "held elsewhere") != NULL, "%s", err);
    free(err);
    cr_assert_eq(RUN(NULL, "run", "--nonblock", "-E", "9", name, "--", "true"), 9);
    cr_assert_eq(RUN(NULL, "run", "-E", "0", "-w", "100ms", name, "--", "false"), 0,
                 "not acquired: -E's code, not COMMAND's");
    cr_assert_eq(RUN(NULL, "hold", "-n", "--conflict-exit-code", "3", name), 3);
    cr_assert_eq(RUN(NULL, "wait", "-n", name), 75);
    cr_assert_eq(RUN(NULL, "wait", "-E", "4", "-w", "200ms", name), 4);
    cr_assert_eq(th_hlen(r, name), 1, "only the Java holder");
    th_run(r, "DEL %s", name);
    cr_assert_eq(RUN(NULL, "run", "-n", "-x", name, "--", "true"), 0, "-x: exclusive, the default");
    cr_assert_eq(RUN(NULL, "run", "-e", "-w", "1", name, "--", "true"), 0);
    cr_assert_eq(RUN(NULL, "wait", "-n", name), 0);
    redisFree(r);
    free(name);
}

/* flock's -c: one command line for the shell, after NAME (or before);
 * COMMAND sees RLOCK_NAME, RLOCK_HELD and RLOCK_OWNER. */
Test(cli, command_line_with_c_and_the_childs_environment)
{
    char *name = th_name("cli-dash-c");
    char *file = tpath("c.out");
    char *line = NULL;
    cr_assert(asprintf(&line,
                       "printf '%%s|%%s|%%s\\n' \"$RLOCK_NAME\" \"$RLOCK_HELD\" \"$RLOCK_OWNER\" "
                       "> %s; exit 3",
                       file) > 0);
    setenv("RLOCK_HELD", "stale", 1); /* replaced, not duplicated */
    cr_assert_eq(RUN(NULL, "run", name, "-c", line), 3);
    char *got = slurp(file);
    char *want = NULL;
    cr_assert(asprintf(&want, "%s|1|", name) > 0);
    cr_assert(strncmp(got, want, strlen(want)) == 0, "%s", got);
    /* The owner is the holder field, "<client id>:<thread>". */
    const char *owner = got + strlen(want);
    cr_assert(strlen(owner) > 38 && owner[36] == ':', "%s", owner);
    free(got);
    unlink(file);
    cr_assert_eq(RUN(NULL, "run", "-c", line, "-w", "5", name), 3, "-c before NAME");
    cr_assert_eq(access(file, F_OK), 0);
    cr_assert_eq(RUN(NULL, "run", name, "--command", "exit 0"), 0);
    char *err = NULL;
    /* -s is flock's shared lock: the read half of a read/write lock (since
     * 0.3), one kind per call. */
    cr_assert_eq(RUN_IO(NULL, NULL, &err, "run", "-s", name, "--", "true"), 0, "%s", err);
    free(err);
    cr_assert_eq(RUN_IO(NULL, NULL, &err, "hold", "--shared", "-x", name), 2);
    cr_assert(strstr(err, "choose one kind") != NULL, "%s", err);
    free(err);
    redisContext *r = th_redis(0);
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    unsetenv("RLOCK_HELD");
    free(want);
    free(line);
    free(file);
    free(name);
}

/* hold: the etcdctl lock NAME mode. Holds until a signal, renewing. */
Test(cli, hold_keeps_the_lock_until_a_signal)
{
    char *name = th_name("cli-hold");
    char *out = tpath("hold.out");
    setenv("RLOCK_WATCHDOG_MS", "1500", 1);
    pid_t p = START(out, "hold", name);
    char *owner = first_line(out);
    redisContext *r = th_redis(0);
    cr_assert_eq(th_hget_int(r, name, owner), 1, "holds it as %s", owner);
    th_sleep_ms(2000); /* longer than the lease: the watchdog renews it */
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    cr_assert_eq(RUN(NULL, "run", "-n", name, "--", "true"), 75);
    cr_assert(still_running(p));
    kill(p, SIGTERM);
    cr_assert_eq(wait_exit(p, th_ms(15000)), 0, "released on SIGTERM: exit 0");
    cr_assert_eq(th_exists(r, name), 0);
    free(owner);

    /* Lost while held: 79 at once. */
    unlink(out); /* first_line() must not read the last run's line */
    p = START(out, "hold", name);
    owner = first_line(out);
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    th_run(r, "DEL %s", name);
    cr_assert_eq(wait_exit(p, th_ms(15000)), 79);
    free(owner);
    /* With -l, the lease's end is the loss. */
    unlink(out);
    p = START(out, "hold", "-l", "500ms", name);
    owner = first_line(out);
    cr_assert_eq(wait_exit(p, th_ms(15000)), 79);
    cr_assert_eq(th_exists(r, name), 0);
    free(owner);
    redisFree(r);
    free(out);
    free(name);
}

Test(cli, verbose_says_what_happens)
{
    char *name = th_name("cli-verbose");
    char *err = NULL;
    cr_assert_eq(RUN_IO(NULL, NULL, &err, "--verbose", "run", name, "--", "true"), 0);
    cr_assert(strstr(err, "connecting to redis://127.0.0.1:") && strstr(err, "acquired in") &&
                  strstr(err, "running true") && strstr(err, "released"),
              "%s", err);
    free(err);
    redisContext *r = th_redis(0);
    java_hold(r, name, 60000);
    cr_assert_eq(RUN_IO(NULL, NULL, &err, "run", "-v", "-w", "200ms", name, "--", "true"), 75);
    cr_assert(strstr(err, "held elsewhere (TTL"), "%s", err);
    free(err);
    cr_assert_eq(RUN_IO(NULL, NULL, &err, "run", "-w", "200ms", name, "--", "true"), 75);
    cr_assert(strstr(err, "acquired in") == NULL && strstr(err, "connecting") == NULL,
              "quiet without --verbose: %s", err);
    free(err);
    th_run(r, "DEL %s", name);
    redisFree(r);
    free(name);
}

/* Checks the JSON in path with Python's parser: valid, "locked" as
 * expected, the name carrying prefix (ASCII) and the rest as want (the
 * decoded text, U+FFFD for each byte of invalid UTF-8). */
static void check_json(const char *path, const char *prefix, const char *want_hex, bool locked)
{
    char *cmd = NULL;
    cr_assert(asprintf(&cmd,
                       "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
                       "w=sys.argv[2]+bytes.fromhex(sys.argv[3]).decode(\"utf-8\"); "
                       "assert d[\"name\"]==w, (d[\"name\"],w); "
                       "assert d[\"locked\"] is (sys.argv[4]==\"1\"); "
                       "assert all(h[\"owner\"].startswith(w) for h in d[\"holders\"])' "
                       "%s '%s' '%s' %d",
                       path, prefix, want_hex, locked) > 0);
    cr_assert_eq(system(cmd), 0, "not the JSON expected: %s", cmd);
    free(cmd);
}

/* status --json: valid JSON whatever bytes the name (and a holder field)
 * hold, and exit 0 whether locked or not. */
Test(cli, status_json_is_valid_for_any_name)
{
    bool python = system("python3 -c 'import json' >/dev/null 2>&1") == 0;
    static const struct {
        const char *bytes;
        const char *want_hex; /* UTF-8 of the expected decoding */
    } odd[] = {
        {"\x01\x1f\x7f", "011f7f"},
        {"\"\\\n\t/", "225c0a092f"},
        {"caf\xc3\xa9 \xf0\x9f\x98\x80", "636166c3a920f09f9880"},
        {"\xff\xfe", "efbfbdefbfbd"},
        {"\xc3", "efbfbd"},                               /* cut short */
        {"\xc0\xaf", "efbfbdefbfbd"},                     /* overlong "/" */
        {"\xed\xa0\x80", "efbfbdefbfbdefbfbd"},           /* a surrogate */
        {"\xf4\x90\x80\x80", "efbfbdefbfbdefbfbdefbfbd"}, /* above U+10FFFF */
        {"\xe2\x82", "efbfbdefbfbd"},                     /* cut short */
        {"ok\xe2\x82\xac", "6f6be282ac"},                 /* the euro sign */
    };
    char *path = tpath("status.json");
    redisContext *r = th_redis(0);
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        char *prefix = th_name("cli-json");
        char *name = NULL, *owner = NULL;
        cr_assert(asprintf(&name, "%s%s", prefix, odd[i].bytes) > 0);
        cr_assert_eq(RUN(NULL, "status", "--json", name), 0, "free: still 0 with --json");
        /* A holder field made of the same bytes (no client writes that,
         * but a hash may hold anything). */
        cr_assert(asprintf(&owner, "%s:1", name) > 0);
        freeReplyObject(th_cmd(r, "HSET %b %b 1", name, strlen(name), owner, strlen(owner)));
        freeReplyObject(th_cmd(r, "PEXPIRE %b 60000", name, strlen(name)));
        int code = wait_exit(
            start_io(NULL, path, NULL, (const char *const[]){"status", "--json", name, NULL}),
            th_ms(15000));
        cr_assert_eq(code, 0);
        if (python) {
            check_json(path, prefix, odd[i].want_hex, true);
        }
        /* Text output escapes control bytes. */
        char *out = NULL;
        cr_assert_eq(RUN(&out, "status", name), 0);
        for (const char *p = out; *p; p++) {
            cr_assert((unsigned char)*p >= 0x20 || *p == '\n', "raw control byte in %s", out);
        }
        free(out);
        freeReplyObject(th_cmd(r, "DEL %b", name, strlen(name)));
        free(owner);
        free(name);
        free(prefix);
    }
    redisFree(r);
    free(path);
    if (!python) {
        cr_skip_test("python3 not found (scripts/deps.sh installs it): JSON validity not checked");
    }
}

/* status finds the holder's connection by its name,
 * "rlock:<client-id or its first 8+ characters>:<host>:<pid>", in CLIENT
 * LIST, and shows its host, pid and address. */
Test(cli, status_shows_the_holders_connection)
{
    char *name = th_name("cli-who");
    const char *id = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9";
    redisContext *r = th_redis(0);
    freeReplyObject(th_cmd(r, "HSET %s %s:7 2", name, id));
    th_run(r, "PEXPIRE %s 60000", name);
    /* Connections named as the library names its own, one with the whole
     * client id and one with its first 8 characters, plus a stranger. */
    redisContext *c1 = th_redis(0), *c2 = th_redis(0), *c3 = th_redis(0);
    th_run(c1, "CLIENT SETNAME rlock:%s:build-host-1:4242", id);
    th_run(c2, "CLIENT SETNAME rlock:0f1e2d3c:build-host-1:4242");
    th_run(c3, "CLIENT SETNAME rlock:99999999:elsewhere:1");
    char *out = NULL;
    cr_assert_eq(RUN(&out, "status", name), 0);
    cr_assert(strstr(out, "connection: rlock:") && strstr(out, "(host build-host-1, pid 4242, 2 "
                                                               "connections)"),
              "%s", out);
    cr_assert(strstr(out, "elsewhere") == NULL, "%s", out);
    free(out);
    cr_assert_eq(RUN(&out, "status", "--json", name), 0);
    cr_assert(strstr(out, "\"host\":\"build-host-1\",\"pid\":4242,\"connections\":2}"), "%s", out);
    cr_assert(strstr(out, "\"addr\":\"127.0.0.1:"), "%s", out);
    free(out);
    redisFree(c1);
    redisFree(c2);
    /* Gone (or never named, as Redisson's): null, and no error. */
    th_sleep_ms(100);
    cr_assert_eq(RUN(&out, "status", "--json", name), 0);
    cr_assert(strstr(out, "\"connection\":null"), "%s", out);
    free(out);
    cr_assert_eq(RUN(&out, "status", name), 0);
    cr_assert(strstr(out, "connection: none named for this holder"), "%s", out);
    free(out);
    redisFree(c3);

    /* An ACL user without CLIENT: the rest of the answer stands. */
    char *user = add_user("s3cret-Pw");
    th_run(r, "ACL SETUSER %s -client", user);
    char *url = url_of(user, "s3cret-Pw", th_port(), "");
    cr_assert_eq(RUN(&out, "--url", url, "status", "--json", name), 0);
    cr_assert(strstr(out, "\"connection\":null") && strstr(out, "\"client_list_error\":\"NOPERM"),
              "%s", out);
    free(out);
    free(url);
    del_user(user);
    th_run(r, "DEL %s", name);
    redisFree(r);
    free(name);
}

/* A server that accepts connections but answers nothing (CLIENT PAUSE):
 * 69 like an unreachable one, in words that say so, from status (the
 * client's pool) and run (the lock calls). */
Test(cli, silent_server_exits_69)
{
    th_server s;
    th_server_start(&s);
    char *name = th_name("cli-silent");
    char url[64];
    snprintf(url, sizeof url, "redis://:s3cret-Pw@127.0.0.1:%d", s.port);
    redisContext *r = th_redis(s.port);
    th_run(r, "CLIENT PAUSE 20000 ALL");
    EXPECT("s3cret-Pw", 69, "did not answer in time", "--url", url, "status", name);
    EXPECT("s3cret-Pw", 69, "did not answer in time", "--url", url, "run", name, "--", "true");
    redisFree(r);
    th_server_stop(&s); /* paused clients do not hold up a SIGTERM */
    free(name);
}

/* End to end, once the library names its connections
 * "rlock:<client-id>:<host>:<pid>" (issue 9, library part): the holder
 * shown by status is the rlock hold process itself. Skipped until then. */
Test(cli, status_finds_an_rlock_holder_by_its_connection)
{
    /* The library names its connections "rlock:<8 characters of the client
     * id>:<host>:<pid>" (rlock.h); status reads the holder's pid from that
     * name. A regression of either fails here. */
    char *name = th_name("cli-whoami");
    char *out = tpath("hold.out");
    pid_t p = START(out, "hold", name);
    char *owner = first_line(out);
    redisContext *r = th_redis(0);
    redisReply *list = th_cmd(r, "CLIENT LIST");
    char prefix[32];
    snprintf(prefix, sizeof prefix, "name=rlock:%.8s", owner);
    cr_assert(list->type == REDIS_REPLY_STRING && strstr(list->str, prefix) != NULL,
              "no connection of the holder is named %s...", prefix);
    freeReplyObject(list);
    char *json = NULL;
    cr_assert_eq(RUN(&json, "status", "--json", name), 0);
    char want[64];
    snprintf(want, sizeof want, "\"pid\":%d,", (int)p);
    cr_assert(strstr(json, want) != NULL, "the holder's pid %d: %s", (int)p, json);
    free(json);
    kill(p, SIGTERM);
    cr_assert_eq(wait_exit(p, th_ms(15000)), 0);
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    free(owner);
    free(out);
    free(name);
}

/* Reads from fd into buf (appending at *n) until want appears or the time
 * runs out; false on timeout or end of file. */
static bool read_until(int fd, char *buf, size_t size, size_t *n, const char *want)
{
    int64_t end = th_now_ms() + th_ms(10000);
    while (strstr(buf, want) == NULL) {
        struct pollfd p = {fd, POLLIN, 0};
        if (th_now_ms() > end || poll(&p, 1, 100) < 0) {
            return false;
        }
        if (p.revents != 0) {
            ssize_t r = read(fd, buf + *n, size - 1 - *n);
            if (r <= 0) {
                return false;
            }
            *n += (size_t)r;
            buf[*n] = '\0';
        }
    }
    return true;
}

/* --askpass on a terminal: a prompt on stderr, and the password typed is
 * not echoed. */
Test(cli, askpass_on_a_terminal_does_not_echo)
{
    char *user = add_user("s3cret-Pw");
    char *name = th_name("cli-tty");
    char *url = NULL;
    cr_assert(asprintf(&url, "redis://%s@127.0.0.1:%d", user, th_port()) > 0);
    int master = -1;
    fflush(NULL);
    pid_t p = forkpty(&master, NULL, NULL, NULL);
    cr_assert(p >= 0);
    if (p == 0) {
        execl(g_bin, g_bin, "--askpass", "--url", url, "status", name, (char *)NULL);
        _exit(99);
    }
    static char buf[8192];
    size_t n = 0;
    buf[0] = '\0';
    cr_assert(read_until(master, buf, sizeof buf, &n, "Redis password: "), "no prompt: %s", buf);
    cr_assert(write(master, "s3cret-Pw\n", 10) == 10);
    read_until(master, buf, sizeof buf, &n, "holders: 0"); /* or end of file */
    cr_assert_eq(wait_exit(p, th_ms(15000)), 1, "answered (free): %s", buf);
    cr_assert(strstr(buf, "locked: no") != NULL, "%s", buf);
    cr_assert(strstr(buf, "s3cret") == NULL, "the password was echoed: %s", buf);
    close(master);
    free(url);
    free(name);
    del_user(user);
}
