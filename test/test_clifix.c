/* Follow-ups to the review of issue 15 §1 (test_revcli.c) found while
 * fixing it: rlock run started in unusual process states. */
#include "cli_helpers.h"

TestSuite(clifix, .init = cli_setup, .fini = cli_teardown, .timeout = 60);

/* rlock run started with SIGCHLD ignored (a parent that set SIG_IGN, which
 * exec keeps): the kernel reaps ignored children itself, so rlock saw
 * neither COMMAND's exit nor a guard's death and waited forever. rlock now
 * handles SIGCHLD whatever it inherited; COMMAND still inherits the
 * SIG_IGN. Failed before: rlock still ran 10 s after COMMAND exited. */
Test(clifix, run_with_sigchld_ignored_sees_the_command_exit)
{
    char *name = th_name("clifix-chld");
    redisContext *r = th_redis(0);
    fflush(NULL);
    pid_t p = fork();
    cr_assert(p >= 0);
    if (p == 0) {
        signal(SIGCHLD, SIG_IGN);
        for (int fd = 3; fd < 1024; fd++) {
            close(fd);
        }
        execl(g_bin, g_bin, "run", name, "--", "sh", "-c", "sleep 0.2; exit 3", (char *)NULL);
        _exit(99);
    }
    bool ended = TH_POLL(has_exited(p), 10000);
    if (!ended) {
        kill(p, SIGKILL);
        th_run(r, "DEL %s", name);
    }
    int code = wait_exit(p, 10000);
    cr_assert(ended, "rlock run with SIGCHLD ignored did not see COMMAND exit");
    cr_assert_eq(code, 3, "COMMAND's own status");
    cr_assert_eq(th_exists(r, name), 0, "released");
    redisFree(r);
    free(name);
}

/* hold waiting for a busy lock: the exit of the process it follows ends
 * the wait (exit 0, nothing taken), as a signal does; once hold followed
 * its parent with a pidfd instead of PR_SET_PDEATHSIG, only its own poll
 * loop saw it, after the lock was taken. Failed before for --pid: the
 * holder waited on after PID had exited. */
Test(clifix, hold_waiting_ends_when_the_followed_process_exits)
{
    char *name = th_name("clifix-waitpid");
    char *out = tpath("hold.out");
    redisContext *r = th_redis(0);
    th_run(r, "HSET %s someone:1 1", name);
    th_run(r, "PEXPIRE %s 60000", name);
    pid_t target = SPAWN("/bin/sleep", "60");
    char pidarg[16];
    snprintf(pidarg, sizeof pidarg, "%d", (int)target);
    pid_t p = START(out, "hold", "--pid", pidarg, name);
    th_sleep_ms(300); /* waiting for the lock */
    cr_assert(still_running(p), "hold waits while the lock is busy");
    kill(target, SIGKILL);
    waitpid(target, NULL, 0);
    int code = wait_exit(p, 5000);
    char *text = slurp(out);
    cr_assert_eq(code, 0, "the followed process exited during the wait: exit %d", code);
    cr_assert_str_eq(text, "", "nothing taken, no holder line");
    cr_assert_eq(th_hget_int(r, name, "someone:1"), 1, "the other holder's lock is untouched");
    th_run(r, "DEL %s", name);
    free(text);
    redisFree(r);
    free(out);
    free(name);
}
