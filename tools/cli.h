/* Declarations shared by the files of the rlock command (the tools directory).
 *
 * The files, top down; each calls only files below it, so that no two are
 * tied in a cycle (checked with nm and tsort, see the report of issue 15):
 *   rlock.c   main: the command line, the server URL and its password, the
 *             small sub-commands (unlock, wait)
 *   run.c     runs a command under a lock, or holds one until a signal
 *   hold.c    what ends rlock hold, and its loop
 *   proc.c    the command's process group and its guard (proc.h)
 *   status.c  prints a lock's state
 *   client.c  the library client, and the diagnosis of one not made
 *   diag.c    turns failures into messages and exit codes
 *   secret.c  passwords from outside the URL, put into it; argv masking
 *   cli.c     messages, times, freeing secrets
 *
 * The command talks to Redis only through the library, so that it speaks
 * whatever the library does (TLS included): the public API of
 * include/rlock.h, and for status.c the client's pool through src/tool.h
 * (internal, resolved by linking librlock.a). Every wait (run, hold,
 * wait) is the library's, cancelled on a signal. */
#ifndef RLOCK_CLI_H
#define RLOCK_CLI_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rlock.h"

/* Exit codes, one per cause whatever the sub-command. They are part of the
 * command's interface: docs/rlock.1 and --help list them, and
 * test/test_cli.c produces each one. */
enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_FREE = 1,         /* status (text): the lock is not held */
    CLI_EXIT_USAGE = 2,        /* bad command line, URL or password source */
    CLI_EXIT_UNAVAILABLE = 69, /* cannot reach Redis, or no answer in time */
    CLI_EXIT_SOFTWARE = 70,    /* Redis error reply, unexpected reply, ... */
    CLI_EXIT_CONFLICT = 75,    /* not acquired / still held when -w ran out */
    CLI_EXIT_NOPERM = 77,      /* password missing or refused, ACL denial */
    CLI_EXIT_CONFIG = 78,      /* the server refused the URL's database */
    CLI_EXIT_LOST = 79,        /* lock lost while COMMAND ran or while held */
    CLI_EXIT_NOEXEC = 126,     /* COMMAND found but not executable */
    CLI_EXIT_NOTFOUND = 127,   /* COMMAND not found */
};

/* Options every sub-command shares. */
typedef struct cli_opts {
    const char *url_arg; /* as given: --url, RLOCK_URL, REDIS_URL or the default */
    char *url_copy;      /* url_arg's copy when --url was masked in argv */
    const char *url_src; /* where it came from, for messages */
    char *shown;         /* url_arg with its password replaced by *** */
    char *url;           /* the URL for the library, password included */
    const char *password_file;
    bool askpass;
    bool verbose;
    int64_t watchdog_ms; /* 0: library default */
    /* --redis-timeout: connect_timeout_ms and command_timeout_ms of the
     * client; 0: the library's defaults */
    int64_t connect_timeout_ms;
    int64_t command_timeout_ms;
    /* TLS (rediss://): --cacert, --cacertdir, --cert, --key,
     * --tls-server-name, --tls-insecure; NULL/false: the defaults. */
    const char *tls_ca_file, *tls_ca_dir, *tls_cert, *tls_key, *tls_server_name;
    bool tls_insecure;
    char *env_auth;      /* RLOCK_AUTH, taken out of the environment */
} cli_opts;

/* A sub-command's arguments, parsed by rlock.c. */
typedef struct cli_args {
    const char *cmd_name;  /* "run", "hold", "status", "unlock", "wait" */
    const char *name;      /* the lock NAME */
    char **cmd;            /* run: COMMAND and its arguments (NULL-terminated) */
    const char *shell_cmd; /* run -c: a command line for the shell */
    int64_t wait_ms;       /* RLOCK_WAIT_FOREVER, or >= 0 */
    int64_t lease_ms;      /* RLOCK_WATCHDOG, or > 0 */
    int64_t kill_after_ms; /* -1: never */
    int sig;               /* run: for COMMAND when the lock is lost */
    int conflict_code;     /* exit code when not acquired / still held */
    bool json;
    bool force;
    int follow_pid; /* hold --pid: the process to follow (0: the parent) */
    bool quiet;     /* -q: no message when the lock is busy (the exit code says it) */
    /* --fair, --read (-s), --write, --fenced, --spin: the lock's kind, as
     * rlock_kind() names it; NULL: the reentrant lock */
    const char *kind;
    bool kind_set; /* a kind option was given (two different ones: refused) */
} cli_args;

/* What a failed call was doing, as far as the diagnosis cares. */
typedef enum cli_cause {
    CLI_CAUSE_NONE = 0,
    CLI_CAUSE_UNREACHABLE, /* connect failed, link broken */
    CLI_CAUSE_TIMEOUT,     /* no answer within the command timeout */
    CLI_CAUSE_AUTH,        /* AUTH refused */
    CLI_CAUSE_NOAUTH,      /* the server wants a password, none was sent */
    CLI_CAUSE_NOPERM,      /* ACL: the user may not run a command */
    CLI_CAUSE_DB,          /* SELECT refused */
    CLI_CAUSE_REDIS,       /* any other error reply */
    CLI_CAUSE_TLS,         /* TLS failed: certificate, or one side without TLS */
} cli_cause;

/* ---- cli.c --------------------------------------------------------- */

/* A handle on a->name of a->kind (rlock_new_fair(), ...). */
rlock_status cli_new_lock(rlock_client *c, const cli_args *a, rlock **l);

/* Prints "rlock: <message>" on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* With --verbose, prints "rlock: <message>" on stderr. */
void cli_verbose(const cli_opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parses a duration: seconds with an optional fraction ("1.5"), or a number
 * with a unit ms, s, m or h ("500ms", "2m"); false on junk or overflow. */
bool cli_parse_duration(const char *s, int64_t *ms);
/* Monotonic milliseconds. */
int64_t cli_now_ms(void);
/* Zeroes n bytes of p, then frees it; NULL is a no-op. */
void cli_secure_free(void *p, size_t n);

/* ---- diag.c --------------------------------------------------------- */

/* Records what the failing call was doing and the server's text (or the
 * OS error); cli_fail() reports it. */
void cli_detail_set(cli_cause cause, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cli_detail_clear(void);
/* The recorded detail ("" if none). */
const char *cli_detail_text(void);
/* Whether the recorded detail (or its text) names a cause. */
bool cli_detail_names_cause(void);
/* Replaces the detail with the library's account of its last failure on
 * this thread (rlock_last_error()). */
void cli_detail_from_library(void);
/* Prints "rlock: <what>: <cause>[: <server's text>]" and returns the exit
 * code of that cause: the one mapping of failures to exit codes. */
int cli_fail(rlock_status s, const char *what);
/* cli_fail() for a failed library call: takes the library's detail. */
int cli_fail_lib(rlock_status s, const char *what);

/* ---- secret.c ------------------------------------------------------- */

/* Takes RLOCK_AUTH out of the environment (and wipes it from the initial
 * environment block that ps e and /proc/PID/environ show); returns its
 * value, malloc'd, or NULL. Call before any thread exists. */
char *cli_take_env_auth(void);
/* Reads a password: a line from standard input (echo off and a prompt on
 * stderr when it is a terminal), or the first line of a file. Returns a
 * malloc'd string or NULL after printing why. */
char *cli_askpass(void);
char *cli_password_file(const char *path);
/* url with password pw put in, percent-encoded: in place of the URL's own
 * when replace, else only where the URL has none (an empty one without a
 * user counts as none). Only the text is edited: the library's check
 * (rlock_url_redact) judges the result. malloc'd, or NULL. */
char *cli_url_with_password(const char *url, const char *pw, bool replace);
/* Masks with '*' in place, keeping the length, what rlock_url_redact()
 * hides: for the --url argument, so that ps(1) shows no password. */
void cli_url_scrub(char *url);

/* ---- client.c ------------------------------------------------------- */

/* A client on o->url with the timeouts of o; the caller frees it. On
 * failure prints the diagnosis and returns the exit code (else -1). */
int cli_client(const cli_opts *o, void (*on_lost)(const char *, uint64_t, void *), void *arg,
               rlock_client **out);
/* cli_fail() for a failed rlock_client_new(), with the library's reason;
 * a configuration the library refused (URL, TLS files) is a usage error. */
int cli_fail_client(const cli_opts *o, rlock_status s);

/* ---- hold.c --------------------------------------------------------- */

/* The byte the lock-lost callback writes to run.c's signal pipe (signal
 * numbers are below 65). */
#define CLI_WAKE_LOST 0x7f

/* What rlock hold follows besides signals: the process it serves (its
 * parent, or --pid), and its standard input and output when they are
 * pipes or sockets (EOF, or no reader left). */
typedef struct cli_hold_watch {
    pid_t parent;  /* the parent at start-up, or 0 with --pid */
    pid_t pid;     /* --pid, or 0 */
    int pidfd;     /* pidfd of pid or parent, or -1: look every 100 ms */
    bool in, out;  /* stdin, stdout watched */
} cli_hold_watch;

/* Sets up what hold follows, before the lock is taken; returns -1, or an
 * exit code when there is nothing to follow. */
int cli_hold_watch_init(const cli_args *a, cli_hold_watch *hw);
/* Holds the lock until a terminating signal arrives on sig_fd (run.c's
 * signal pipe), the followed process ends, stdin reaches EOF or stdout
 * loses its reader (0), or the lock is lost (*lost_flag, or -l's lease
 * from acquired_at runs out): CLI_EXIT_LOST and *lost. */
int cli_hold_loop(const cli_opts *o, const cli_args *a, cli_hold_watch *hw, int64_t acquired_at,
                  int sig_fd, atomic_bool *lost_flag, bool *lost);

/* ---- run.c ---------------------------------------------------------- */

/* run (a->cmd or a->shell_cmd set) and hold (neither). */
int cli_run(const cli_opts *o, const cli_args *a);

/* ---- status.c ------------------------------------------------------- */

int cli_status(const cli_opts *o, const char *name, bool json);

#endif
