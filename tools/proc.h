/* The processes of rlock run: COMMAND in a process group of its own, with
 * guards that kill the whole group if rlock dies or stops renewing, and
 * the signals the command handles. Used by run.c (and cli_proc_init() by
 * main); Linux-specific (prctl, /proc). */
#ifndef RLOCK_CLI_PROC_H
#define RLOCK_CLI_PROC_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Records where rlock's argv strings are, which a guard overwrites with
 * its own name ("rlock-guard"), so that a pattern matching rlock's command
 * line (pkill -f) does not match its guards. Call first in main(). */
void cli_proc_init(int argc, char **argv);

/* Why a guard fired (cli_group_fired()). */
enum { CLI_GUARD_EOF = 1, CLI_GUARD_DEADLINE = 2 };

/* The page rlock and its guards share (proc.c). */
struct cli_guard_page;

/* COMMAND's process group. It holds two guards, forked copies of rlock
 * named rlock-guard that ignore every signal and poll a pipe whose write
 * end only rlock holds. A guard fires, SIGKILL to COMMAND's pid and to the
 * group (itself included), when its pipe reaches EOF (rlock died, SIGKILL
 * included: the kernel closes that end) or when the deadline rlock last
 * stored in the page they share passes (rlock stopped or hung while the
 * lease runs out).
 * rlock treats a guard's death as fatal for COMMAND. COMMAND joins the
 * group, and so does everything it starts unless it leaves on purpose
 * (setsid, setpgid: a daemon). */
typedef struct cli_group {
    pid_t pgid;      /* the first guard's pid, which is the group's id */
    pid_t guards[2]; /* the guards' pids; 0 once reaped */
    int guard_fd[2]; /* the pipes' write ends; -1 once closed */
    pid_t child;     /* COMMAND; 0 once reaped */
    int tty;         /* the terminal handed to the group, or -1 */
    bool stopped;    /* COMMAND was last seen stopped */
    int64_t fire_at; /* the guards' deadline (cli_now_ms() clock), -1: none */
    int guard_status[2]; /* wait status of a reaped guard, -1: not reaped */
    struct cli_guard_page *page; /* shared with the guards: deadline, pid, why fired */
} cli_group;

/* Whether rlock handles sig: every signal but SIGKILL, SIGSTOP and the
 * real-time signals glibc keeps for itself. */
bool cli_sig_catchable(int sig);
/* Whether sig's default action ends a process (the others: SIGCHLD,
 * SIGCONT, SIGURG, SIGWINCH and the stop signals). */
bool cli_sig_terminates(int sig);
/* Whether sig is raised by a fault of the process itself (SIGSEGV, ...). */
bool cli_sig_is_fault(int sig);
/* Records which catchable signals rlock inherited as ignored: it leaves
 * those ignored, and so does COMMAND (nohup, a shell's background job).
 * Call before installing handlers. */
void cli_sig_record_inherited(void);
bool cli_sig_inherited_ignored(int sig);

/* Starts the guards (with deadline fire_at, or -1 for none), hands the
 * group the terminal when rlock is the terminal's foreground job, then
 * starts cmd (looked up on PATH as execvp() does, an executable without
 * "#!" run by /bin/sh) in the group. Returns 0, or an errno value (exec
 * failures included) with nothing left running. */
int cli_group_start(cli_group *g, char **cmd, char **envp, int64_t fire_at);
/* Sets the guards' deadline (CLOCK_MONOTONIC ms, cli_now_ms()), -1 for
 * none: past it, they SIGKILL COMMAND and the group. */
void cli_group_arm(cli_group *g, int64_t fire_at);
/* COMMAND was reaped: its pid is no longer signalled. */
void cli_group_reaped(cli_group *g);
/* Whether a guard has fired, and why: 0, CLI_GUARD_EOF or
 * CLI_GUARD_DEADLINE. A guard records it before its first kill(), so a
 * COMMAND that died of a guard's SIGKILL is always seen as such. */
int cli_group_fired(const cli_group *g);
/* Reaps both guards, waiting for them: only once one has fired (they are
 * killing themselves). */
void cli_group_reap_guards(cli_group *g);
/* Reaps a guard that has exited and returns its pid, else 0. */
pid_t cli_group_guard_gone(cli_group *g);
/* Sends sig to the whole group (the guards ignore it), and to COMMAND's
 * pid if COMMAND left the group. */
void cli_group_kill(cli_group *g, int sig);
/* How many processes of the group still run (zombies do not), besides the
 * guards. */
int cli_group_live(const cli_group *g);
/* Fires the guards and SIGKILLs the group and COMMAND, then reaps the
 * guards. Members that are not rlock's to kill, or in uninterruptible
 * sleep, may still run: cli_group_live() says. */
void cli_group_end(cli_group *g);
/* Gives the terminal back and forgets the group. */
void cli_group_close(cli_group *g);
/* Job control on a terminal: COMMAND was stopped (^Z). SIGSTOPs the group
 * (guards included) and COMMAND, takes the terminal back and stops rlock
 * itself with SIGTSTP, so that the shell sees its job stopped; returns
 * once rlock is continued. */
void cli_group_stop_with(cli_group *g);
/* Then (after a fresh deadline): hands the terminal back if rlock is in
 * the foreground again, and continues the group and COMMAND. */
void cli_group_resume(cli_group *g);

#endif
