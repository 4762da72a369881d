/* issue 15 §1: a command never runs unprotected. The rlock command, driven
 * as a user drives it (the built binary against the test server), with
 * real processes: rlock run's COMMAND and everything it starts die with
 * rlock, whatever ends it, and before the lock is released; rlock hold
 * releases when whoever it serves goes away. Every test asserts by pid
 * which processes are gone and what Redis holds. */
#include "cli_helpers.h"

#include <sys/resource.h>

static void setup(void)
{
    cli_setup();
    /* Signals whose default action dumps core are sent below: no core
     * files, and no time spent writing them. */
    struct rlimit rl = {0, 0};
    setrlimit(RLIMIT_CORE, &rl);
}

TestSuite(cliproc, .init = setup, .fini = cli_teardown, .timeout = 150);

/* A shell that starts two background sleeps and waits, after writing its
 * own pid and theirs to $0 (atomically: the test polls for the file). */
static const char group_script[] = "sleep 30 & a=$!; sleep 30 & b=$!; "
                                   "echo \"$$ $a $b\" > \"$0.tmp\"; mv \"$0.tmp\" \"$0\"; wait";

/* Reads the three pids group_script wrote. */
static void read_pids(const char *path, pid_t pids[3])
{
    wait_for_file(path, 10000);
    char *text = slurp(path);
    int a = 0, b = 0, c = 0;
    cr_assert_eq(sscanf(text, "%d %d %d", &a, &b, &c), 3, "pid file: '%s'", text);
    pids[0] = a;
    pids[1] = b;
    pids[2] = c;
    free(text);
}

static bool any_alive(const pid_t pids[3])
{
    return pid_alive(pids[0]) || pid_alive(pids[1]) || pid_alive(pids[2]);
}

/* Leaves nothing behind if an assertion failed half-way. */
static void kill_pids(const pid_t pids[3])
{
    for (int i = 0; i < 3; i++) {
        if (pids[i] > 0 && pid_alive(pids[i])) {
            kill(pids[i], SIGKILL);
        }
    }
}

/* kill -9 of rlock run: PR_SET_PDEATHSIG reaches only its direct child;
 * the sentinel in COMMAND's process group kills the rest. Before the fix
 * the shell and both sleeps ran on, and once the 2 s lease ran out a
 * second rlock run took the lock beside them. */
Test(cliproc, sigkill_of_run_kills_the_command_and_its_grandchildren)
{
    char *name = th_name("cliproc-kill9");
    char *pidfile = tpath("pids");
    redisContext *r = th_redis(0);
    pid_t p = START(NULL, "run", "--watchdog", "2s", name, "--", "sh", "-c", group_script,
                    pidfile);
    pid_t pids[3] = {0, 0, 0};
    read_pids(pidfile, pids);
    cr_assert_eq(th_exists(r, name), 1, "held while COMMAND runs");
    cr_assert(pid_alive(pids[0]) && pid_alive(pids[1]) && pid_alive(pids[2]), "COMMAND and its children run");
    kill(p, SIGKILL);
    cr_assert_eq(wait_exit(p, 10000), 128 + SIGKILL);
    bool gone = TH_POLL(!any_alive(pids), 5000);
    if (!gone) {
        fprintf(stderr, "alive after kill -9 of rlock: sh %d: %d, sleep %d: %d, sleep %d: %d\n",
                (int)pids[0], pid_alive(pids[0]), (int)pids[1], pid_alive(pids[1]),
                (int)pids[2], pid_alive(pids[2]));
        kill_pids(pids);
    }
    cr_assert(gone, "COMMAND or a grandchild outlived a SIGKILLed rlock");
    /* Nobody released the lock: the next run gets it when the lease runs
     * out, and finds none of the first run's processes. */
    cr_assert_eq(th_exists(r, name), 1, "not released: the lease ends it");
    char *check = NULL;
    cr_assert(asprintf(&check,
                       "for p in %d %d %d; do grep -qs '^State:.*[RSDT]' /proc/$p/status "
                       "&& exit 3; done; exit 0",
                       (int)pids[0], (int)pids[1], (int)pids[2]) > 0);
    cr_assert_eq(RUN(NULL, "run", "-w", "20", name, "--", "sh", "-c", check), 0,
                 "the second holder found a survivor of the first");
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    free(check);
    free(pidfile);
    free(name);
}

/* Every signal whose default action ends a process, sent to rlock run:
 * forwarded to COMMAND's whole group (the shell and both sleeps), and the
 * lock released only once all of them are gone. Before the fix SIGUSR1,
 * SIGUSR2, SIGALRM, ... killed rlock and left its child running with the
 * lock deleted, and the four forwarded ones reached the shell only. */
Test(cliproc, each_signal_ends_the_group_before_the_release)
{
    const int sigs[] = {SIGHUP,  SIGINT,    SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2,  SIGALRM,
                        SIGPIPE, SIGVTALRM, SIGPROF, SIGXCPU, SIGXFSZ, SIGIO,    SIGPWR,
                        SIGSYS,  SIGABRT,   SIGSEGV, SIGBUS,  SIGFPE,  SIGILL,   SIGTRAP,
                        SIGSTKFLT, SIGRTMIN, SIGRTMIN + 1, SIGRTMAX};
    redisContext *r = th_redis(0);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        int sig = sigs[i];
        if (sig == SIGRTMAX && th_under_valgrind()) {
            continue; /* valgrind keeps the last real-time signal for itself */
        }
        char *name = th_name("cliproc-sig");
        char *pidfile = NULL;
        cr_assert(asprintf(&pidfile, "%s/pids-%d", g_dir, sig) > 0);
        pid_t p = START(NULL, "run", name, "--", "sh", "-c", group_script, pidfile);
        pid_t pids[3] = {0, 0, 0};
        read_pids(pidfile, pids);
        cr_assert_eq(th_exists(r, name), 1);
        kill(p, sig);
        /* Watch the key and the pids together until rlock exits: the key
         * must never be seen gone while one of them runs. */
        int64_t end = th_now_ms() + th_ms(15000);
        int st = 0;
        bool early = false, exited = false;
        while (!exited && th_now_ms() < end) {
            exited = waitpid(p, &st, WNOHANG) == p;
            if (th_exists(r, name) == 0 && any_alive(pids)) {
                early = true;
                break;
            }
            th_sleep_ms(2);
        }
        if (!exited) {
            kill(p, SIGKILL);
            waitpid(p, &st, 0);
        }
        bool left = any_alive(pids);
        kill_pids(pids);
        cr_assert(!early, "signal %d (%s): the lock was released while the group ran", sig,
                  strsignal(sig));
        cr_assert(exited, "signal %d (%s): rlock still ran after 15 s", sig, strsignal(sig));
        cr_assert(!left, "signal %d (%s): a process of COMMAND's group outlived rlock", sig,
                  strsignal(sig));
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        cr_assert_eq(code, 128 + sig, "signal %d (%s): COMMAND died of it", sig,
                     strsignal(sig));
        cr_assert_eq(th_exists(r, name), 0, "signal %d: released", sig);
        free(pidfile);
        free(name);
    }
    redisFree(r);
}

/* Signals that do not end a process by default reach COMMAND too (before
 * the fix rlock ignored SIGWINCH and SIGURG itself, and SIGUSR1 killed it),
 * and rlock keeps running, holding the lock, until COMMAND exits. */
Test(cliproc, other_signals_reach_the_command)
{
    char *name = th_name("cliproc-winch");
    char *log = tpath("log");
    char *ready = tpath("ready");
    redisContext *r = th_redis(0);
    pid_t p = START(NULL, "run", name, "--", "sh", "-c",
                    "for s in WINCH URG USR1 CONT; do trap \"echo $s >> $0\" $s; done; "
                    "trap 'exit 7' TERM; : > \"$1\"; while :; do sleep 0.02; done",
                    log, ready);
    wait_for_file(ready, 10000);
    const int sigs[] = {SIGWINCH, SIGURG, SIGUSR1, SIGCONT};
    const char *const names[] = {"WINCH", "URG", "USR1", "CONT"};
    for (size_t i = 0; i < 4; i++) {
        kill(p, sigs[i]);
        char *text = NULL;
        bool got = TH_POLL((free(text), text = slurp(log), strstr(text, names[i]) != NULL), 5000);
        cr_assert(got, "SIG%s did not reach COMMAND (its log: '%s')", names[i], text);
        free(text);
        cr_assert(still_running(p), "rlock ended on SIG%s", names[i]);
        cr_assert_eq(th_exists(r, name), 1);
    }
    kill(p, SIGTERM);
    cr_assert_eq(wait_exit(p, 15000), 7, "COMMAND's own status");
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    free(ready);
    free(log);
    free(name);
}

/* The coproc recipe's failure: the script that started rlock hold is
 * killed. Before the fix the holder renewed the lock forever. */
Test(cliproc, hold_releases_when_its_parent_is_killed)
{
    char *name = th_name("cliproc-hold-parent");
    char *out = tpath("hold.out");
    char *pidfile = tpath("hold.pid");
    char *script = NULL;
    cr_assert(asprintf(&script, "\"%s\" hold \"%s\" > \"%s\" & echo $! > \"%s\"; wait", g_bin,
                       name, out, pidfile) > 0);
    redisContext *r = th_redis(0);
    pid_t sh = SPAWN("/bin/sh", "-c", script);
    char *owner = first_line(out);
    wait_for_file(pidfile, 10000);
    char *text = slurp(pidfile);
    pid_t hold = atoi(text);
    free(text);
    cr_assert_eq(th_hget_int(r, name, owner), 1, "held as %s", owner);
    kill(sh, SIGKILL);
    waitpid(sh, NULL, 0);
    bool released = TH_POLL(th_exists(r, name) == 0, 10000);
    bool exited = TH_POLL(!pid_alive(hold), 10000);
    if (!exited) {
        kill(hold, SIGKILL);
    }
    cr_assert(released, "the holder kept the lock after its parent died");
    cr_assert(exited, "the holder ran on after its parent died");
    redisFree(r);
    free(owner);
    free(script);
    free(pidfile);
    free(out);
    free(name);
}

/* hold on pipes: its stdin at EOF (the writer closed it, or died), or its
 * stdout without a reader, ends it: released, exit 0. */
Test(cliproc, hold_releases_when_its_stdin_or_stdout_goes_away)
{
    char *name = th_name("cliproc-hold-io");
    char *out = tpath("hold.out");
    redisContext *r = th_redis(0);

    /* stdin: a pipe whose write end only the test holds. */
    int in[2];
    cr_assert(pipe(in) == 0);
    int out_fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t p = start_fds(in[0], out_fd, -1, (const char *const[]){"hold", name, NULL});
    close(in[0]);
    close(out_fd);
    char *owner = first_line(out);
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    /* Bytes written to it are read and ignored. */
    cr_assert(write(in[1], "x\n", 2) == 2);
    th_sleep_ms(200); /* time for a wrong implementation to act on them */
    cr_assert(still_running(p), "a byte on stdin is not EOF");
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    close(in[1]);
    cr_assert_eq(wait_exit(p, 10000), 0, "released at stdin's EOF: exit 0");
    cr_assert_eq(th_exists(r, name), 0);
    free(owner);

    /* stdout: a pipe whose reader goes away after the holder line. */
    int po[2];
    cr_assert(pipe(po) == 0);
    p = start_fds(-1, po[1], -1, (const char *const[]){"hold", name, NULL});
    close(po[1]);
    char line[256];
    size_t n = 0;
    while (n < sizeof line - 1 && (n == 0 || line[n - 1] != '\n')) {
        struct pollfd pf = {po[0], POLLIN, 0};
        cr_assert(poll(&pf, 1, (int)th_ms(10000)) == 1, "no holder line");
        ssize_t k = read(po[0], line + n, sizeof line - 1 - n);
        cr_assert(k > 0);
        n += (size_t)k;
    }
    line[n - 1] = '\0';
    cr_assert_eq(th_hget_int(r, name, line), 1, "held as %s", line);
    close(po[0]);
    cr_assert_eq(wait_exit(p, 10000), 0, "released when stdout lost its reader: exit 0");
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    free(out);
    free(name);
}

/* hold --pid PID: follows a process of the caller's choosing instead of
 * its parent. Before the fix --pid was refused (exit 2). */
Test(cliproc, hold_pid_follows_a_process)
{
    char *name = th_name("cliproc-hold-pid");
    char *out = tpath("hold.out");
    redisContext *r = th_redis(0);
    pid_t target = SPAWN("/bin/sleep", "60");
    char pidarg[16];
    snprintf(pidarg, sizeof pidarg, "%d", (int)target);
    pid_t p = START(out, "hold", "--pid", pidarg, name);
    char *owner = first_line(out);
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    th_sleep_ms(300); /* while PID runs, the lock stays */
    cr_assert(still_running(p));
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    kill(target, SIGKILL);
    waitpid(target, NULL, 0);
    cr_assert_eq(wait_exit(p, 10000), 0, "released when PID ended: exit 0");
    cr_assert_eq(th_exists(r, name), 0);
    free(owner);

    /* A PID that does not exist: refused before taking anything. */
    cr_assert_eq(RUN(NULL, "hold", "--pid", pidarg, name), 2);
    cr_assert_eq(RUN(NULL, "hold", "--pid", "0", name), 2);
    cr_assert_eq(RUN(NULL, "hold", "--pid", "x", name), 2);
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    free(out);
    free(name);
}
