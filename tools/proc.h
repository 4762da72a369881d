/* The processes of rlock run: COMMAND in a process group of its own, with
 * a sentinel that kills the whole group if rlock dies, and the signals the
 * command handles. Used by run.c only; Linux-specific (prctl, /proc). */
#ifndef RLOCK_CLI_PROC_H
#define RLOCK_CLI_PROC_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* COMMAND's process group. The group is led by the sentinel, a forked copy
 * of rlock that ignores every signal and blocks reading a pipe whose write
 * end only rlock holds: when rlock dies, for whatever reason (SIGKILL
 * included), the kernel closes that end, the read returns and the sentinel
 * kills its group with SIGKILL, itself included. COMMAND joins the group,
 * and so does everything it starts unless it leaves on purpose (setsid,
 * setpgid: a daemon). */
typedef struct cli_group {
    pid_t pgid;   /* the sentinel's pid, which is the group's id */
    pid_t child;  /* COMMAND */
    int guard;    /* the pipe's write end; -1 once closed */
    int tty;      /* the terminal handed to the group, or -1 */
    bool stopped; /* COMMAND was last seen stopped */
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

/* Starts the sentinel, hands it the terminal when rlock is the terminal's
 * foreground job, then starts cmd (looked up on PATH as execvp() does, an
 * executable without "#!" run by /bin/sh) in its group. Returns 0, or an
 * errno value (exec failures included) with nothing left running. */
int cli_group_start(cli_group *g, char **cmd, char **envp);
/* Sends sig to the whole group (the sentinel ignores it). */
void cli_group_kill(cli_group *g, int sig);
/* How many processes of the group still run (zombies do not), besides the
 * sentinel. */
int cli_group_live(const cli_group *g);
/* Ends the group once COMMAND has exited: SIGTERM to what is left of it,
 * SIGKILL after grace_ms, then waits (bounded) until nothing of it runs;
 * gives the terminal back. After it nothing of the group can run. */
void cli_group_finish(cli_group *g, int64_t grace_ms);
/* Job control on a terminal: COMMAND was stopped (^Z). Takes the terminal
 * back and stops rlock itself with SIGTSTP, so that the shell sees its job
 * stopped; returns once rlock is continued. */
void cli_group_stop_with(cli_group *g);
/* Then: hands the terminal back if rlock is in the foreground again, and
 * continues the group. */
void cli_group_resume(cli_group *g);

#endif
