/* issue 15 §4 and §6: the rlock command over TLS. Every sub-command (run,
 * hold, status, wait, unlock --force) is the built binary driven with
 * --url rediss://127.0.0.1:PORT --cacert CA against a redis-server with a
 * TLS port and certificates made by the harness (th_tls_make); the test
 * reads what Redis holds over the same server's plain port. Waits (wait,
 * and run and hold waiting for the lock) go through the library, which
 * speaks TLS: a release wakes them at once, a signal ends them. */
#include "cli_helpers.h"
#include "kinds.h"

static th_tls g_certs;
static th_server g_srv;
static char *g_url; /* rediss://127.0.0.1:<tls port> */

static void start(const char *auth)
{
    cli_setup();
    g_url = th_tls_setup(&g_certs, &g_srv, auth, false);
    /* Nothing may fall back to the shared plain server. */
    unsetenv("RLOCK_URL");
}

static void setup(void)
{
    start("optional");
}

static void mutual_setup(void)
{
    start("yes");
}

static void teardown(void)
{
    th_tls_teardown(&g_certs, &g_srv, g_url);
    cli_teardown();
}

TestSuite(clitls, .init = setup, .fini = teardown, .timeout = 90);
TestSuite(clitls_mutual, .init = mutual_setup, .fini = teardown, .timeout = 90);

/* The arguments of a sub-command over TLS, trusting the harness's CA. */
#define TLS(...) "--url", g_url, "--cacert", g_certs.ca, __VA_ARGS__

/* Subscribers of the lock's channel: a waiter of the command counts once
 * it waits on the channel. */
static long long subscribers(redisContext *r, const char *name)
{
    char *ch = th_channel(name);
    redisReply *rep = th_cmd(r, "PUBSUB NUMSUB %s", ch);
    cr_assert(rep->type == REDIS_REPLY_ARRAY && rep->elements == 2);
    long long n = rep->element[1]->integer;
    freeReplyObject(rep);
    free(ch);
    return n;
}

static void wait_for_subscriber(redisContext *r, const char *name, pid_t waiter)
{
    cr_assert(TH_POLL(subscribers(r, name) >= 1 || !still_running(waiter), 10000),
              "%s: nobody subscribed", name);
    cr_assert(still_running(waiter), "the waiter exited instead of waiting");
}

/* rlock hold over TLS in the background; returns its pid once its holder
 * line is out (the lock is held), and the line in *owner. */
static pid_t hold(const char *name, const char *out, char **owner)
{
    pid_t p = START(out, TLS("hold", name));
    *owner = first_line(out);
    return p;
}

/* ---- every sub-command ---------------------------------------------------- */

Test(clitls, run_hold_status_wait_over_tls)
{
    char *name = th_name("clitls");
    redisContext *r = th_redis(g_srv.port);
    /* run: COMMAND runs with the lock held, and it is released after. */
    cr_assert_eq(RUN_IO(NULL, NULL, NULL,
                        TLS("run", name, "--", "sh", "-c", "test \"$RLOCK_HELD\" = 1 && exit 7")),
                 7);
    cr_assert_eq(th_exists(r, name), 0);

    /* hold: the field its line names is in Redis, with the watchdog's lease. */
    char *out = tpath("hold.out"), *owner = NULL;
    pid_t h = hold(name, out, &owner);
    cr_assert_eq(th_hget_int(r, name, owner), 1, "%s not held by %s", name, owner);
    long long ttl = th_pttl(r, name);
    cr_assert(ttl > 20000 && ttl <= 30000, "PTTL %lld", ttl);

    /* status: locked (0), the holder shown; --json too. */
    char *so = NULL;
    cr_assert_eq(RUN_IO(NULL, &so, NULL, TLS("status", name)), 0);
    cr_assert(strstr(so, owner) != NULL, "status lacks %s: %s", owner, so);
    free(so);
    cr_assert_eq(RUN_IO(NULL, &so, NULL, "status", "--json", TLS(name)), 0);
    cr_assert(strstr(so, "\"locked\":true") != NULL, "%s", so);
    free(so);

    /* Busy: one look of wait, run and hold each give the conflict code. */
    cr_assert_eq(RUN_IO(NULL, NULL, NULL, TLS("wait", "-n", name)), 75);
    cr_assert_eq(RUN_IO(NULL, NULL, NULL, TLS("wait", "-w", "200ms", name)), 75);
    cr_assert_eq(RUN_IO(NULL, NULL, NULL, TLS("run", "-n", name, "--", "true")), 75);
    cr_assert_eq(RUN_IO(NULL, NULL, NULL, TLS("hold", "-E", "3", "-w", "100ms", name)), 3);
    cr_assert_eq(th_hget_int(r, name, owner), 1);

    /* SIGTERM ends the hold: released, and then free for everyone. */
    kill(h, SIGTERM);
    cr_assert_eq(wait_exit(h, 15000), 0);
    cr_assert_eq(th_exists(r, name), 0);
    cr_assert_eq(RUN_IO(NULL, NULL, NULL, TLS("wait", "-n", name)), 0);
    cr_assert_eq(RUN_IO(NULL, NULL, NULL, TLS("status", name)), 1);
    free(owner);
    free(out);
    redisFree(r);
    free(name);
}

Test(clitls, unlock_force_deletes_and_publishes_over_tls)
{
    char *name = th_name("clitls-unlock");
    redisContext *r = th_redis(g_srv.port);
    char *ch = th_channel(name);
    redisContext *sub = th_subscribe(g_srv.port, ch);
    th_run(r, "HSET %s java-holder:1 1", name);
    th_run(r, "PEXPIRE %s 30000", name);
    char *out = NULL;
    cr_assert_eq(RUN_IO(NULL, &out, NULL, TLS("unlock", "--force", name)), 0);
    cr_assert(strstr(out, ": unlocked") != NULL, "%s", out);
    free(out);
    cr_assert_eq(th_exists(r, name), 0);
    char *msg = th_next_message(sub, 5000);
    cr_assert(msg != NULL && strcmp(msg, "0") == 0, "published: %s", msg ? msg : "(nothing)");
    free(msg);
    cr_assert_eq(RUN_IO(NULL, &out, NULL, TLS("unlock", "--force", name)), 0);
    cr_assert(strstr(out, ": was not locked") != NULL, "%s", out);
    free(out);
    redisFree(sub);
    redisFree(r);
    free(ch);
    free(name);
}

/* ---- waits ----------------------------------------------------------------- */

/* The holder's lease is 30 s: only the release message, received over
 * TLS, can end the wait within a second of the release. Before the wait
 * moved onto the library, rlock wait refused rediss:// (exit 2). */
Test(clitls, wait_is_woken_within_a_second_of_the_release)
{
    char *name = th_name("clitls-wake");
    redisContext *r = th_redis(g_srv.port);
    char *out = tpath("hold.out"), *owner = NULL;
    pid_t h = hold(name, out, &owner);
    pid_t w = START(NULL, TLS("wait", name));
    wait_for_subscriber(r, name, w);
    pid_t runner = START(NULL, TLS("run", name, "--", "true"));
    /* The run waits too: each waiter subscribes once it has seen the lock busy. */
    cr_assert(TH_POLL(subscribers(r, name) >= 2 || !still_running(runner), 10000));
    cr_assert(still_running(runner) && still_running(w));
    int64_t t0 = th_now_ms();
    kill(h, SIGTERM);
    cr_assert_eq(wait_exit(h, 15000), 0);
    cr_assert_eq(wait_exit(w, 15000), 0);
    int64_t took = th_now_ms() - t0;
    cr_assert(took < th_ms(1000), "wait returned %lld ms after the release", (long long)took);
    cr_assert_eq(wait_exit(runner, 15000), 0);
    cr_assert(th_now_ms() - t0 < th_ms(2000), "run took the lock late");
    cr_assert_eq(th_exists(r, name), 0);
    free(owner);
    free(out);
    redisFree(r);
    free(name);
}

/* A signal ends each kind of wait promptly, whatever the transport: the
 * waiting rlock dies of it (128+N), as the shell expects, and takes
 * nothing. */
Test(clitls, a_signal_ends_every_wait)
{
    char *name = th_name("clitls-sig");
    redisContext *r = th_redis(g_srv.port);
    char *out = tpath("hold.out"), *owner = NULL;
    pid_t h = hold(name, out, &owner);
    static const struct {
        const char *cmd;
        int sig;
    } cases[] = {{"wait", SIGTERM}, {"wait", SIGINT},  {"run", SIGTERM},
                 {"run", SIGINT},   {"hold", SIGTERM}, {"hold", SIGHUP}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pid_t p = strcmp(cases[i].cmd, "run") == 0 ? START(NULL, TLS("run", name, "--", "true"))
                                                   : START(NULL, TLS(cases[i].cmd, name));
        wait_for_subscriber(r, name, p);
        int64_t t0 = th_now_ms();
        kill(p, cases[i].sig);
        int code = wait_exit(p, 15000);
        int64_t took = th_now_ms() - t0;
        cr_assert_eq(code, 128 + cases[i].sig, "%s, %s: exit %d", cases[i].cmd,
                     strsignal(cases[i].sig), code);
        cr_assert(took < th_ms(1000), "%s ended %lld ms after %s", cases[i].cmd, (long long)took,
                  strsignal(cases[i].sig));
        cr_assert(TH_POLL(subscribers(r, name) == 0, 5000), "subscription left behind");
        cr_assert_eq(th_hget_int(r, name, owner), 1, "the hold is untouched");
        cr_assert_eq(th_hlen(r, name), 1);
    }
    kill(h, SIGTERM);
    cr_assert_eq(wait_exit(h, 15000), 0);
    free(owner);
    free(out);
    redisFree(r);
    free(name);
}

/* ---- the lock family (issue 16) ------------------------------------------ */

/* Each kind flag over TLS: run gives COMMAND the lock (and, --fenced, the
 * token Redis handed out in RLOCK_FENCE_TOKEN); hold takes it, Redis shows
 * the kind's hold; a one-look run of the rival kind is refused (75); a
 * waiting run of the rival kind (queued, subscribed, or polling for
 * --spin) is shown by status and takes the lock within a second of the
 * hold's release; nothing is left. */
Test(clitls, kind_flags_over_tls)
{
    static const struct {
        const char *flag, *rival; /* the rival waits for the holder */
        int kind;                 /* th_kinds[] entry of flag */
        const char *status;       /* status's kind: line while a rival waits */
    } cases[] = {
        {"--fair", "--fair", TK_FAIR, "kind: fair\n"},
        {"--read", "--write", TK_READ, "kind: read/write\nmode: read\n"},
        {"--write", "--read", TK_WRITE, "kind: read/write\nmode: write\n"},
        {"--fenced", "--fenced", TK_FENCED, "kind: fenced\n"},
        {"--spin", "--spin", TK_SPIN, "kind: lock\n"},
    };
    redisContext *r = th_redis(g_srv.port);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *f = cases[i].flag, *rf = cases[i].rival;
        const th_kind *k = &th_kinds[cases[i].kind];
        char prefix[64];
        snprintf(prefix, sizeof prefix, "clitls-%s", f + 2);
        char *name = th_name(prefix), *tk = th_prefixed("redisson_lock_token", name);

        /* run: COMMAND under the lock, the token only for --fenced. */
        char *out = NULL;
        cr_assert_eq(RUN_IO(NULL, &out, NULL,
                            TLS("run", f, name, "--", "sh", "-c",
                                "test \"$RLOCK_HELD\" = 1 && echo \"${RLOCK_FENCE_TOKEN-none}\" "
                                "&& exit 7")),
                     7, "run %s", f);
        if (k->fenced) {
            redisReply *rep = th_cmd(r, "GET %s", tk);
            cr_assert(rep->type == REDIS_REPLY_STRING && atoll(out) > 0 &&
                          atoll(out) == atoll(rep->str),
                      "RLOCK_FENCE_TOKEN %s, Redis handed out %s", out,
                      rep->type == REDIS_REPLY_STRING ? rep->str : "nothing");
            freeReplyObject(rep);
        } else {
            cr_assert_str_eq(out, "none\n", "run %s", f);
        }
        free(out);
        th_kind_assert_free(r, k, name);

        /* hold: the holder's field (and token) as its line says. */
        char *hout = tpath("kind-hold.out");
        pid_t h = START(hout, TLS("hold", f, name));
        char *line = first_line(hout), owner[160];
        long long token = -1;
        int got = sscanf(line, "%159s %lld", owner, &token);
        cr_assert_eq(got, k->fenced ? 2 : 1, "%s: holder line '%s'", f, line);
        cr_assert_eq(th_hget_int(r, name, owner), 1, "%s: %s not held by %s", f, name, owner);
        cr_assert_eq(th_hlen(r, name), (k->read || k->write) ? 2 : 1, "%s: one holder", f);
        cr_assert_eq(k->write, strstr(owner, ":write") != NULL, "%s: owner %s", f, owner);
        if (k->read || k->write) {
            char *m = th_rw_mode(r, name);
            cr_assert_str_eq(m, k->read ? "read" : "write");
            free(m);
        }
        if (k->fenced) {
            redisReply *rep = th_cmd(r, "GET %s", tk);
            cr_assert(rep->type == REDIS_REPLY_STRING && atoll(rep->str) == token,
                      "hold's token %lld", token);
            freeReplyObject(rep);
        }
        long long ttl = th_pttl(r, name);
        cr_assert(ttl > 20000 && ttl <= 30000, "%s: PTTL %lld", f, ttl);
        cr_assert_eq(RUN_IO(NULL, NULL, NULL, TLS("run", "-n", rf, name, "--", "true")), 75,
                     "%s held: run -n %s", f, rf);

        /* A waiting run of the rival kind, as Redis shows it. */
        pid_t w = START(NULL, TLS("run", rf, "-w", "30", name, "--", "true"));
        th_kind_wait_waiting(g_srv.port, th_kind_rival(k), name, 10000);
        cr_assert(still_running(w), "%s: the waiter exited instead of waiting", rf);
        char *so = NULL;
        cr_assert_eq(RUN_IO(NULL, &so, NULL, TLS("status", name)), 0, "status of %s", f);
        cr_assert(strstr(so, cases[i].status) != NULL && strstr(so, owner) != NULL,
                  "%s: status lacks '%s' or %s: %s", f, cases[i].status, owner, so);
        if (k->fair) {
            cr_assert(strstr(so, "queue: 1\n") != NULL, "%s", so);
        }
        free(so);

        /* The release wakes it (a --spin waiter polls: its back-off, at
         * most 128 ms by default, on top). */
        int64_t t0 = th_now_ms();
        kill(h, SIGTERM);
        cr_assert_eq(wait_exit(h, 15000), 0, "%s: hold exit", f);
        cr_assert_eq(wait_exit(w, 15000), 0, "%s: waiter exit", rf);
        int64_t took = th_now_ms() - t0, bound = th_ms(1000) + (k->spin ? 128 : 0);
        cr_assert(took < bound, "%s: the waiter ran %lld ms after the release", rf,
                  (long long)took);
        th_kind_assert_free(r, k, name);
        cr_assert_eq(RUN_IO(NULL, NULL, NULL, TLS("status", name)), 1, "%s: status after", f);
        free(line);
        free(hout);
        free(tk);
        free(name);
    }
    redisFree(r);
}

/* ---- certificates ------------------------------------------------------ */

/* A CA that did not sign the server's certificate: exit 69 (the server
 * cannot be reached safely), in words that say it is TLS (before: "cannot
 * reach the Redis server", as for a server that is down) and OpenSSL's reason,
 * from every sub-command; nothing is sent, nothing changes. */
Test(clitls, wrong_ca_exits_69_and_says_why)
{
    char *name = th_name("clitls-ca");
    static const char *const forms[][4] = {{"run", "NAME", "--", "true"},
                                           {"hold", "-n", "NAME", NULL},
                                           {"status", "NAME", NULL, NULL},
                                           {"wait", "NAME", NULL, NULL},
                                           {"unlock", "--force", "NAME", NULL}};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        const char *args[12] = {"--url", g_url, "--cacert", g_certs.other_ca};
        size_t n = 4;
        for (size_t j = 0; j < 4 && forms[i][j] != NULL; j++) {
            args[n++] = strcmp(forms[i][j], "NAME") == 0 ? name : forms[i][j];
        }
        args[n] = NULL;
        char *err = NULL;
        int code = run_io(NULL, NULL, &err, args);
        cr_assert_eq(code, 69, "%s: exit %d", forms[i][0], code);
        cr_assert(strstr(err, "no secure connection to the Redis server (TLS)") != NULL &&
                      strstr(err, "certificate verify failed") != NULL,
                  "%s: %s", forms[i][0], err);
        cr_assert(strstr(err, "rediss://127.0.0.1:") != NULL, "names the server: %s", err);
        free(err);
    }
    /* --tls-insecure accepts it (for tests only). */
    cr_assert_eq(RUN_IO(NULL, NULL, NULL, "--url", g_url, "--cacert", g_certs.other_ca,
                        "--tls-insecure", "run", name, "--", "true"),
                 0);
    free(name);
}

/* Mutual TLS: the server wants a client certificate. With --cert and
 * --key everything works; without, 69 and words naming the certificate. */
Test(clitls_mutual, client_certificate_with_cert_and_key)
{
    char *name = th_name("clitls-mtls");
    redisContext *r = th_redis(g_srv.port);
#define MTLS(...) TLS("--cert", g_certs.client_crt, "--key", g_certs.client_key, __VA_ARGS__)
    cr_assert_eq(RUN_IO(NULL, NULL, NULL, MTLS("run", name, "--", "true")), 0);
    char *out = tpath("hold.out");
    pid_t h = START(out, MTLS("hold", name));
    char *owner = first_line(out);
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    cr_assert_eq(RUN_IO(NULL, NULL, NULL, MTLS("status", name)), 0);
    cr_assert_eq(RUN_IO(NULL, NULL, NULL, MTLS("wait", "-n", name)), 75);
    pid_t w = START(NULL, MTLS("wait", name));
    wait_for_subscriber(r, name, w);
    cr_assert_eq(RUN_IO(NULL, NULL, NULL, MTLS("unlock", "--force", name)), 0);
    cr_assert_eq(wait_exit(w, 5000), 0);
    /* The hold was broken: its release finds it gone, and says so. */
    kill(h, SIGTERM);
    cr_assert_eq(wait_exit(h, 15000), 79);
#undef MTLS
    char *err = NULL;
    cr_assert_eq(RUN_IO(NULL, NULL, &err, TLS("wait", name)), 69);
    cr_assert(strstr(err, "(TLS)") != NULL && strstr(err, "certificate") != NULL, "%s", err);
    free(err);
    cr_assert_eq(RUN_IO(NULL, NULL, &err, TLS("run", name, "--", "true")), 69);
    cr_assert(strstr(err, "certificate") != NULL, "%s", err);
    free(err);
    free(owner);
    free(out);
    redisFree(r);
    free(name);
}
