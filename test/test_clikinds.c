/* The rlock command and the lock family (issue 16): --fair, --read/-s,
 * --write, --fenced, --spin on run, hold, wait and unlock, and what status
 * shows of each kind. The real binary in child processes against the test
 * server, through sh -c ("$RLOCK" is the binary under test); Redis state
 * is read with a plain connection. */
#include "cli_helpers.h"

static void setup(void)
{
    cli_setup();
    setenv("RLOCK", g_bin, 1);
    unsetenv("RLOCK_AUTH");
    unsetenv("RLOCK_FENCE_TOKEN");
}

TestSuite(clikinds, .init = setup, .fini = cli_teardown, .timeout = 120);

static long long token_of(redisContext *r, const char *name)
{
    redisReply *rep = th_cmd(r, "GET redisson_lock_token:{%s}", name);
    long long v = rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : -1;
    freeReplyObject(rep);
    return v;
}

static long long queue_len(redisContext *r, const char *name)
{
    redisReply *rep = th_cmd(r, "LLEN redisson_lock_queue:{%s}", name);
    long long v = rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
    freeReplyObject(rep);
    return v;
}

/* --fenced: COMMAND sees the acquisition's token, the one Redis handed
 * out, and the next run gets a larger one; an inherited RLOCK_FENCE_TOKEN
 * never reaches a COMMAND of another kind. */
Test(clikinds, fenced_run_gives_command_the_token)
{
    char *name = th_name("clikinds-fenced");
    redisContext *r = th_redis(0);
    char *out = NULL;
    cr_assert_eq(sh(&out, NULL, "\"$RLOCK\" run --fenced %s -- sh -c 'echo $RLOCK_FENCE_TOKEN'",
                    name),
                 0);
    long long t1 = atoll(out);
    cr_assert_gt(t1, 0, "token: '%s'", out);
    cr_assert_eq(token_of(r, name), t1, "the token Redis handed out");
    free(out);
    cr_assert_eq(sh(&out, NULL, "\"$RLOCK\" run --fenced %s -- sh -c 'echo $RLOCK_FENCE_TOKEN'",
                    name),
                 0);
    cr_assert_gt(atoll(out), t1, "tokens only grow: %s after %lld", out, t1);
    free(out);
    cr_assert_eq(sh(&out, NULL,
                    "RLOCK_FENCE_TOKEN=999 \"$RLOCK\" run %s -- sh -c "
                    "'echo \"[${RLOCK_FENCE_TOKEN-unset}]\"'",
                    name),
                 0);
    cr_assert_str_eq(out, "[unset]\n");
    free(out);
    /* hold --fenced: the holder line carries the token. */
    cr_assert_eq(sh(&out, NULL, "echo | \"$RLOCK\" hold --fenced %s", name), 0);
    char owner[128];
    long long t3 = -1;
    cr_assert_eq(sscanf(out, "%127s %lld", owner, &t3), 2, "holder line: '%s'", out);
    cr_assert_eq(t3, token_of(r, name));
    free(out);
    redisFree(r);
    free(name);
}

/* --read (and flock's -s) share, --write excludes them: two readers run at
 * once, a writer with -n is refused meanwhile (75), Redis holds the read
 * mode with both readers; afterwards the writer runs, and its owner field
 * ends in ":write". */
Test(clikinds, readers_share_and_the_writer_waits_for_them)
{
    char *name = th_name("clikinds-rw");
    redisContext *r = th_redis(0);
    char *m1 = tpath("r1"), *m2 = tpath("r2"), *go = tpath("go");
    char *line = NULL;
    cr_assert(asprintf(&line,
                       "\"$RLOCK\" run --read %s -- sh -c 'touch %s; while [ ! -e %s ]; do "
                       "sleep 0.05; done'",
                       name, m1, go) > 0);
    pid_t a = start_sh("r1", line);
    free(line);
    cr_assert(asprintf(&line,
                       "\"$RLOCK\" run -s %s -- sh -c 'touch %s; while [ ! -e %s ]; do sleep "
                       "0.05; done'",
                       name, m2, go) > 0);
    pid_t b = start_sh("r2", line);
    free(line);
    wait_for_file(m1, th_ms(10000));
    wait_for_file(m2, th_ms(10000));
    /* Both readers inside at once. */
    redisReply *mode = th_cmd(r, "HGET %s mode", name);
    cr_assert_eq(mode->type, REDIS_REPLY_STRING);
    cr_assert_str_eq(mode->str, "read");
    freeReplyObject(mode);
    cr_assert_eq(th_hlen(r, name), 3, "mode and two readers");
    char *err = NULL;
    cr_assert_eq(sh(NULL, &err, "\"$RLOCK\" run --write -n %s -- true", name), 75);
    free(err);
    /* status: the kind, the mode and the readers. */
    char *out = NULL;
    cr_assert_eq(sh(&out, NULL, "\"$RLOCK\" status %s", name), 0);
    cr_assert(strstr(out, "kind: read/write\n") && strstr(out, "mode: read\n") &&
                  strstr(out, "readers: 2\n") && strstr(out, "holders: 2\n"),
              "%s", out);
    free(out);
    cr_assert_eq(sh(&out, NULL, "\"$RLOCK\" status --json %s", name), 0);
    cr_assert(strstr(out, "\"kind\":\"read/write\"") && strstr(out, "\"mode\":\"read\"") &&
                  strstr(out, "\"readers\":2"),
              "%s", out);
    free(out);
    free(tfile("go", "", 0644));
    cr_assert_eq(wait_exit(a, th_ms(10000)), 0);
    cr_assert_eq(wait_exit(b, th_ms(10000)), 0);
    cr_assert_eq(th_exists(r, name), 0, "the last reader's release deletes the hash");
    cr_assert_eq(sh(&out, NULL, "\"$RLOCK\" run --write %s -- sh -c 'echo $RLOCK_OWNER'", name),
                 0);
    cr_assert(strstr(out, ":write\n") != NULL, "owner: %s", out);
    free(out);
    free(m1);
    free(m2);
    free(go);
    redisFree(r);
    free(name);
}

/* A waiting --read is woken by the --write holder's release. */
Test(clikinds, waiting_reader_runs_after_the_writer)
{
    char *name = th_name("clikinds-wr");
    redisContext *r = th_redis(0);
    char *in = tpath("writer-in"), *got = tpath("reader-ran");
    cr_assert_eq(mkfifo(in, 0600), 0);
    char *line = NULL;
    cr_assert(asprintf(&line, "\"$RLOCK\" hold --write %s < %s", name, in) > 0);
    pid_t w = start_sh("writer", line);
    free(line);
    int fd = open(in, O_WRONLY);
    cr_assert(fd >= 0);
    cr_assert(TH_POLL(th_exists(r, name) == 1, 10000), "%s", "th_exists(r, name) == 1");
    cr_assert(asprintf(&line, "\"$RLOCK\" run --read -w 30 %s -- touch %s", name, got) > 0);
    pid_t rd = start_sh("reader", line);
    free(line);
    th_sleep_ms(th_ms(300));
    cr_assert(access(got, F_OK) != 0, "the reader ran while the writer held the lock");
    int64_t t0 = th_now_ms();
    close(fd); /* the writer's stdin closes: it releases */
    cr_assert_eq(wait_exit(w, th_ms(10000)), 0);
    cr_assert_eq(wait_exit(rd, th_ms(10000)), 0);
    cr_assert(th_now_ms() - t0 < th_ms(1000) + 1000, "the reader woke within 1 s");
    cr_assert(access(got, F_OK) == 0);
    free(in);
    free(got);
    redisFree(r);
    free(name);
}

/* status of a fair lock: the holder and the queue, each waiter with its
 * deadline on the server's clock; a waiting --fair run proceeds after the
 * holder leaves. */
Test(clikinds, status_shows_the_fair_queue)
{
    char *name = th_name("clikinds-fair");
    redisContext *r = th_redis(0);
    char *in = tpath("fair-in"), *got = tpath("fair-ran");
    cr_assert_eq(mkfifo(in, 0600), 0);
    char *line = NULL;
    cr_assert(asprintf(&line, "\"$RLOCK\" hold --fair %s < %s", name, in) > 0);
    pid_t h = start_sh("fair-holder", line);
    free(line);
    int fd = open(in, O_WRONLY);
    cr_assert(fd >= 0);
    cr_assert(TH_POLL(th_exists(r, name) == 1, 10000), "%s", "th_exists(r, name) == 1");
    cr_assert(asprintf(&line, "\"$RLOCK\" run --fair -w 60 %s -- touch %s", name, got) > 0);
    pid_t w = start_sh("fair-waiter", line);
    free(line);
    cr_assert(TH_POLL(queue_len(r, name) == 1, 10000), "%s", "queue_len(r, name) == 1");
    char *out = NULL;
    cr_assert_eq(sh(&out, NULL, "\"$RLOCK\" status %s", name), 0);
    cr_assert(strstr(out, "kind: fair\n") && strstr(out, "queue: 1\n") &&
                  strstr(out, "waiter: ") && strstr(out, " deadline ") && strstr(out, " ms)\n"),
              "%s", out);
    free(out);
    cr_assert_eq(sh(&out, NULL, "\"$RLOCK\" status --json %s", name), 0);
    cr_assert(strstr(out, "\"kind\":\"fair\"") && strstr(out, "\"queue\":[{\"owner\":") &&
                  strstr(out, "\"deadline_ms\":") && strstr(out, "\"in_ms\":"),
              "%s", out);
    free(out);
    close(fd);
    cr_assert_eq(wait_exit(h, th_ms(10000)), 0);
    cr_assert_eq(wait_exit(w, th_ms(10000)), 0);
    cr_assert(access(got, F_OK) == 0);
    free(in);
    free(got);
    redisFree(r);
    free(name);
}

/* --spin runs COMMAND under the lock's usual hash; one kind per call; a
 * kind that does not match what the name holds is refused with a message
 * that says so, and the holder is untouched. */
Test(clikinds, one_kind_per_call_and_no_mixing)
{
    char *name = th_name("clikinds-mix");
    redisContext *r = th_redis(0);
    char *out = NULL, *err = NULL;
    cr_assert_eq(sh(&out, NULL, "\"$RLOCK\" run --spin %s -- sh -c 'echo $RLOCK_OWNER'", name),
                 0);
    cr_assert(strlen(out) > 37, "%s", out);
    free(out);
    cr_assert_eq(sh(NULL, &err, "\"$RLOCK\" run --fair --spin %s -- true", name), 2);
    cr_assert(strstr(err, "choose one kind") != NULL, "%s", err);
    cr_assert(strchr(err, '\n') == strrchr(err, '\n'), "one line: %s", err);
    free(err);
    cr_assert_eq(sh(NULL, &err, "\"$RLOCK\" status --read %s", name), 2);
    free(err);
    java_hold(r, name, 60000); /* a reentrant (Redisson RLock) hold */
    cr_assert_eq(sh(NULL, &err, "\"$RLOCK\" run --read -n %s -- true", name), 70);
    cr_assert(strstr(err, "another kind") != NULL, "%s", err);
    free(err);
    cr_assert_eq(th_hget_int(r, name, "1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed:57"), 1);
    cr_assert_eq(th_hlen(r, name), 1, "untouched");
    /* unlock --force of the write half deletes only a write-mode lock. */
    cr_assert_eq(sh(&out, NULL, "\"$RLOCK\" unlock --force --write %s", name), 0);
    cr_assert(strstr(out, "was not locked") != NULL, "%s", out);
    free(out);
    cr_assert_eq(th_hlen(r, name), 1, "a reentrant hold is not the write half's to delete");
    redisFree(r);
    free(name);
}

/* unlock --force of a lock kind (no --read/--write) leaves a read/write
 * lock alone: exit 70, one line that says another kind is there, the hash
 * untouched; its read half deletes it. */
Test(clikinds, unlock_force_of_a_read_write_lock_needs_its_half)
{
    char *name = th_name("clikinds-rwforce");
    redisContext *r = th_redis(0);
    char *out = NULL, *err = NULL;
    th_run(r, "HSET %s mode read 1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed:57 1", name);
    th_run(r, "PEXPIRE %s 60000", name);
    static const char *kinds[] = {"", "--fair ", "--fenced ", "--spin "};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        cr_assert_eq(sh(NULL, &err, "\"$RLOCK\" unlock --force %s%s", kinds[i], name), 70,
                     "unlock --force %s", kinds[i]);
        cr_assert(strstr(err, "another kind") != NULL, "%s", err);
        cr_assert(strstr(err, "read or write half") != NULL, "%s", err);
        cr_assert(strchr(err, '\n') == strrchr(err, '\n'), "one line: %s", err);
        free(err);
        cr_assert_eq(th_hlen(r, name), 2, "untouched by unlock --force %s", kinds[i]);
    }
    cr_assert_eq(sh(&out, NULL, "\"$RLOCK\" unlock --force --read %s", name), 0);
    cr_assert(strstr(out, "unlocked") != NULL, "%s", out);
    free(out);
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    free(name);
}
