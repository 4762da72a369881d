/* Second outside review of issue 15 §1 ("a command never runs
 * unprotected"), against the guards of commit 632bde1 (merged as 5091553):
 * two rlock-guard processes that SIGKILL COMMAND's group when rlock's pipe
 * closes or when the deadline rlock last sent them passes. Each test is
 * one finding, written as what docs/rlock.1 promises; each failed on
 * 5091553 and says in its comment how. */
#include "cli_helpers.h"

#include <dirent.h>
#include <sys/ioctl.h>

TestSuite(revcli2, .init = cli_setup, .fini = cli_teardown, .timeout = 300);

/* Field n (1-based, after the comm) of /proc/PID/stat as an integer: 2 is
 * the ppid, 3 the process group. -1 if unreadable. */
/* The child of rlock_pid named rlock-guard that leads COMMAND's group (its
 * pid is the group's id), or 0. */
static pid_t leader_guard_of(pid_t rlock_pid)
{
    DIR *d = opendir("/proc");
    if (d == NULL) {
        return 0;
    }
    pid_t found = 0;
    struct dirent *e;
    while (found == 0 && (e = readdir(d)) != NULL) {
        pid_t pid = (pid_t)atoi(e->d_name);
        if (pid <= 0 || stat_field(pid, 2) != rlock_pid || stat_field(pid, 3) != pid) {
            continue;
        }
        char path[64], comm[64] = "";
        snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
        FILE *f = fopen(path, "r");
        if (f != NULL) {
            if (fgets(comm, sizeof comm, f) != NULL && strncmp(comm, "rlock-guard", 11) == 0) {
                found = pid;
            }
            fclose(f);
        }
    }
    closedir(d);
    return found;
}

/* Bytes waiting in the pipe fd, or -1. */
static int pipe_bytes(int fd)
{
    int n = -1;
    return ioctl(fd, FIONREAD, &n) == 0 ? n : -1;
}

/* Finding 1 (medium). COMMAND's group stopped from outside for a long
 * time (`kill -STOP -- -PGID`, an operator pausing a job; the guards stop
 * with it, as the page says they do on ^Z) while rlock keeps the lock
 * renewed: rlock writes the guards a new deadline at every TTL check, a
 * stopped guard reads none, and after 4096 of them (64 KiB) its pipe is
 * full and every newer deadline is dropped (guard_send(): "loses the
 * newest"). On SIGCONT the guard reads the backlog, takes the newest it
 * finds, which is 4096 checks old and long past, and SIGKILLs a COMMAND
 * whose lock is held and renewed; rlock exits 79. With a 1 s watchdog
 * that is a pause of about 11 minutes, with the default 30 s about 6
 * hours; a 60 ms watchdog gets there in about a minute. The page promises
 * the guards fire only when "no newer word has come". Fails on 5091553:
 * COMMAND is SIGKILLed at once after SIGCONT, rlock exits 79 ("its guard
 * process ... is gone"). */
Test(revcli2, long_stop_of_the_group_does_not_fire_the_guards_on_sigcont)
{
    char *name = th_name("revcli2-pipefull");
    char *pidfile = tpath("cmd.pid");
    redisContext *r = th_redis(0);
    /* A short lease (many deadline updates), scaled with the suite's
     * multiplier: 60 ms once lost the lock for real on a busy machine. */
    char wd[32];
    snprintf(wd, sizeof wd, "%lldms", (long long)th_ms(300));
    pid_t p = START(NULL, "run", "--watchdog", wd, name, "--", "sh", "-c",
                    "echo $$ > \"$0.tmp\"; mv \"$0.tmp\" \"$0\"; exec sleep 600", pidfile);
    pid_t cmd = read_pid(pidfile);
    pid_t guard = 0;
    cr_assert(TH_POLL((guard = leader_guard_of(p)) > 0, 10000), "no rlock-guard of %d", (int)p);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/3", (int)guard);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    cr_assert(fd >= 0, "%s: %s", path, strerror(errno));
    int cap = fcntl(fd, F_GETPIPE_SZ);
    cr_assert(cap > 0);
    kill(-guard, SIGSTOP);
    /* rlock keeps renewing and writing deadlines the guards cannot read.
     * Since the fix (the deadline lives in a page shared with the guards,
     * the pipe carries only wake-up bytes) the pipe need not fill: the
     * stop lasts until it is full or 30 s (about 3000 deadline updates)
     * have passed, time passing being the condition itself. */
    int64_t until = th_now_ms() + 30000;
    while (pipe_bytes(fd) <= cap - 16 && th_now_ms() < until) {
        th_sleep_ms(50);
    }
    int bytes = pipe_bytes(fd);
    bool full = bytes >= 0;
    /* The newest deadline the guard can read is now the one that filled
     * the pipe; the defect needs it past: a stop longer than the lease
     * after that (not a stand-in for a condition: time passing is it). */
    th_sleep_ms(1000);
    close(fd);
    char gstate = proc_state(guard);
    bool held = th_exists(r, name) == 1;
    bool rlock_up = pid_running(p);
    kill(-guard, SIGCONT);
    bool killed = TH_POLL(!pid_running(cmd), 2000);
    kill(p, SIGTERM);
    int code = wait_exit(p, 10000);
    cr_assert(full, "the guard's pipe never filled (%d of %d bytes)", bytes, cap);
    cr_assert(gstate == 'T' && held && rlock_up,
              "before SIGCONT: guard state %c, lock held %d, rlock running %d (rlock exit %d)",
              gstate ? gstate : '-', held, rlock_up, code);
    cr_assert(!killed,
              "COMMAND was killed on SIGCONT while its lock was held and renewed (rlock exit %d)",
              code);
    cr_assert_eq(code, 128 + SIGTERM, "rlock exit %d", code);
    redisFree(r);
    free(pidfile);
    free(name);
}

/* Finding 3 (medium). With -l, a stopped rlock (SIGSTOP, a debugger) leaves
 * COMMAND running for 1 s after its lease has run out: the guards fire at
 * the lease's end plus GUARD_GRACE_MS, because with -l rlock itself was to
 * signal COMMAND at the lease's end, and a stopped rlock signals nothing.
 * Meanwhile the key is gone and a second `rlock run` takes the lock beside
 * the first COMMAND (seen by hand: the second holder started 1.5 s after
 * the stop of a -l 2s run taken 0.5 s before, with the first COMMAND still
 * running; it died 1 s later). NOTES promises "after SIGSTOP of rlock
 * alone the guards kill COMMAND before the lease runs out", with no
 * exception for -l (the run section's "1 s later" contradicts it); issue 15
 * §1 asks that COMMAND never run without the lock. Fails on 5091553: the
 * key is gone while COMMAND runs. */
Test(revcli2, stopped_rlock_with_a_lease_kills_command_before_the_lease_runs_out)
{
    char *name = th_name("revcli2-lease-stop");
    char *pidfile = tpath("cmd.pid");
    redisContext *r = th_redis(0);
    /* 2 s, scaled with the suite's time multiplier (a guard's margin is a
     * tenth of the lease: the slack it has to be scheduled on a busy
     * machine). */
    char lease[32];
    snprintf(lease, sizeof lease, "%lldms", (long long)th_ms(2000));
    pid_t p = START(NULL, "run", "-l", lease, name, "--", "sh", "-c",
                    "echo $$ > \"$0.tmp\"; mv \"$0.tmp\" \"$0\"; exec sleep 30", pidfile);
    pid_t cmd = read_pid(pidfile);
    cr_assert_eq(th_exists(r, name), 1);
    kill(p, SIGSTOP);
    bool bad = false;
    int64_t end = th_now_ms() + th_ms(4000);
    while (th_now_ms() < end) {
        if (th_exists(r, name) == 0 && pid_running(cmd)) {
            bad = true;
            break;
        }
        th_sleep_ms(20);
    }
    kill(p, SIGCONT);
    int code = wait_exit(p, 10000);
    cr_assert(!bad, "rlock -l stopped: the lease ran out while COMMAND ran on (rlock exit %d)",
              code);
    redisFree(r);
    free(pidfile);
    free(name);
}
