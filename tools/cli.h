/* Declarations shared by the files of the rlock command (the tools directory).
 *
 * rlock.c parses the command line and runs the small sub-commands (status,
 * unlock, wait); run.c runs a command under a lock; redis.c holds what the
 * library does not offer: a URL parser for direct hiredis connections, the
 * read-only inspection of a lock, and the pub/sub wait loop. */
#ifndef RLOCK_CLI_H
#define RLOCK_CLI_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdint.h>

#include "rlock.h"

/* Exit codes. They are part of the command's interface: docs/rlock.1 and
 * --help list them, and test/test_cli.c produces each one. */
enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_FREE = 1,        /* status: the lock is not held */
    CLI_EXIT_USAGE = 2,       /* bad command line */
    CLI_EXIT_UNAVAILABLE = 69, /* cannot reach Redis (sysexits EX_UNAVAILABLE) */
    CLI_EXIT_SOFTWARE = 70,   /* any other error (sysexits EX_SOFTWARE) */
    CLI_EXIT_TIMEOUT = 75,    /* not acquired / still held when -w ran out */
    CLI_EXIT_LOST = 79,       /* lock lost while COMMAND ran */
    CLI_EXIT_NOEXEC = 126,    /* COMMAND found but not executable */
    CLI_EXIT_NOTFOUND = 127,  /* COMMAND not found */
};

/* Options every sub-command shares. */
typedef struct cli_opts {
    const char *url;           /* never NULL after cli_resolve_url() */
    int64_t watchdog_ms;       /* 0: library default */
} cli_opts;

/* Result of cli_wait_free(). */
typedef enum cli_wait_result {
    CLI_WAIT_DONE,    /* the probe reported success */
    CLI_WAIT_TIMEOUT, /* the wait ran out first */
    CLI_WAIT_SIGNAL,  /* a byte arrived on the interrupt fd */
    CLI_WAIT_ERROR,   /* *err says why */
} cli_wait_result;

/* One attempt of a wait loop: sets *done, or leaves it false and sets *ttl_ms
 * to the holder's remaining lease (-1: no expiry, -2: gone meanwhile). */
typedef rlock_status (*cli_probe)(void *arg, bool *done, int64_t *ttl_ms);

/* ---- rlock.c -------------------------------------------------------- */

/* Prints "rlock: <message>" on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "rlock: <what>: <rlock_strerror(s)>" and returns the exit code that
 * goes with s. */
int cli_fail(rlock_status s, const char *what);
/* The exit code that reports status s. */
int cli_exit_code(rlock_status s);
/* Parses a non-negative count of milliseconds; false on junk or overflow. */
bool cli_parse_ms(const char *s, int64_t *out);
/* Monotonic milliseconds. */
int64_t cli_now_ms(void);
/* A client on o->url with the watchdog timeout of o; the caller frees it. */
rlock_status cli_client(const cli_opts *o,
                        void (*on_lost)(const char *, uint64_t, void *),
                        void *arg, rlock_client **out);

/* ---- run.c ---------------------------------------------------------- */

int cli_run(cli_opts *o, int argc, char **argv);

/* ---- redis.c -------------------------------------------------------- */

/* Connects, authenticates and selects the database of url. */
rlock_status cli_connect(const char *url, redisContext **out);
/* The pub/sub channel of lock name (spec 0.1); the caller frees it. */
char *cli_channel(const char *name);
/* Waits until probe reports success, wait_ms runs out (-1: never), or a byte
 * can be read from intr_fd (-1: none; the byte is left for the caller). The
 * waiting is driven by the lock's channel and the holder's TTL, never by
 * polling Redis: probe, subscribe, probe again, then sleep until a message
 * or the TTL, and repeat. */
cli_wait_result cli_wait_free(const char *url, const char *name,
                              int64_t wait_ms, int intr_fd, cli_probe probe,
                              void *arg, rlock_status *err);
/* Prints the state of lock name (TYPE, PTTL, HGETALL in one MULTI) as text
 * or JSON; sets *locked. */
rlock_status cli_print_status(const char *url, const char *name, bool json,
                              bool *locked);

#endif
