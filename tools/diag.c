/* Diagnosis: the one place where a failure becomes a message and an exit
 * code. Each cause has one exit code whatever the sub-command (the table is
 * in cli.h, docs/rlock.1 and --help), and each message says what went
 * wrong in words, followed by the server's own error text when there is
 * one ("WRONGPASS invalid username-password pair ...").
 *
 * Where the detail comes from: for the library's calls, rlock_last_error(),
 * which names the step that failed (connect, TLS handshake, AUTH, SELECT)
 * and the server's or OpenSSL's words; status.c records an error reply of
 * its own reads with cli_detail_set(). */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Failures are reported by the main thread only. */
static cli_cause g_cause;
static char g_detail[512];

void cli_detail_set(cli_cause cause, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_detail, sizeof g_detail, fmt, ap);
    va_end(ap);
    g_cause = cause;
}

void cli_detail_clear(void)
{
    g_cause = CLI_CAUSE_NONE;
    g_detail[0] = '\0';
}

const char *cli_detail_text(void)
{
    return g_detail;
}

static bool starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The cause an error text names: Redis's error codes (the first word) are
 * stable; the texts of AUTH and SELECT refusals have changed across Redis
 * versions, hence the several forms. */
static cli_cause cause_of_text(const char *t)
{
    if (starts(t, "NOAUTH")) {
        return CLI_CAUSE_NOAUTH;
    }
    if (starts(t, "WRONGPASS") || starts(t, "ERR invalid password") || starts(t, "ERR AUTH") ||
        starts(t, "ERR Client sent AUTH")) {
        return CLI_CAUSE_AUTH;
    }
    if (starts(t, "NOPERM")) {
        return CLI_CAUSE_NOPERM;
    }
    if (strstr(t, "DB index") != NULL || strstr(t, "invalid DB") != NULL) {
        return CLI_CAUSE_DB;
    }
    return CLI_CAUSE_NONE;
}

bool cli_detail_names_cause(void)
{
    return g_cause != CLI_CAUSE_NONE || cause_of_text(g_detail) != CLI_CAUSE_NONE;
}

typedef struct diag {
    int code;
    const char *words;
} diag;

/* The mapping. A cause recorded with the detail wins; then the cause the
 * detail's text names; then the status alone. */
static diag diagnose(rlock_status s, cli_cause cause, const char *detail)
{
    if (cause == CLI_CAUSE_NONE && detail != NULL) {
        cause = cause_of_text(detail);
    }
    if (cause == CLI_CAUSE_NONE) {
        switch ((int)s) {
        case RLOCK_EIO:
            cause = CLI_CAUSE_UNREACHABLE;
            break;
        case RLOCK_ETIMEDOUT:
            cause = CLI_CAUSE_TIMEOUT;
            break;
        case RLOCK_EAUTH:
            cause = CLI_CAUSE_AUTH;
            break;
        case RLOCK_EREDIS:
            cause = CLI_CAUSE_REDIS;
            break;
        case RLOCK_EPERM: /* an ACL refusal in any words */
            cause = CLI_CAUSE_NOPERM;
            break;
        case RLOCK_ETLS: /* the detail says what TLS refused */
            cause = CLI_CAUSE_TLS;
            break;
        default:
            break;
        }
    }
    switch (cause) {
    case CLI_CAUSE_UNREACHABLE:
        return (diag){CLI_EXIT_UNAVAILABLE, "cannot reach the Redis server"};
    case CLI_CAUSE_TIMEOUT:
        return (diag){CLI_EXIT_UNAVAILABLE, "the Redis server did not answer in time"};
    case CLI_CAUSE_AUTH:
        return (diag){CLI_EXIT_NOPERM, "the server refused the user or password"};
    case CLI_CAUSE_NOAUTH:
        return (diag){CLI_EXIT_NOPERM,
                      "the server wants a password and none was given (URL, RLOCK_AUTH, "
                      "--askpass or --password-file)"};
    case CLI_CAUSE_NOPERM:
        return (diag){CLI_EXIT_NOPERM, "the server's ACL does not allow this user the command"};
    case CLI_CAUSE_DB:
        return (diag){CLI_EXIT_CONFIG, "the server refused the URL's database"};
    case CLI_CAUSE_REDIS:
        return (diag){CLI_EXIT_SOFTWARE, "Redis answered with an error"};
    case CLI_CAUSE_TLS:
        /* 69 as for any server that cannot be reached: no connection is
         * made, and the words say it is TLS (OpenSSL's reason follows). */
        return (diag){CLI_EXIT_UNAVAILABLE, "no secure connection to the Redis server (TLS)"};
    case CLI_CAUSE_NONE:
        break;
    }
    switch ((int)s) {
    case RLOCK_OK:
        return (diag){CLI_EXIT_OK, "success"};
    case RLOCK_EINVAL:
        return (diag){CLI_EXIT_USAGE, rlock_strerror(s)};
    case RLOCK_EBUSY:
        return (diag){CLI_EXIT_CONFLICT, rlock_strerror(s)};
    case RLOCK_ELOST:
        return (diag){CLI_EXIT_LOST, rlock_strerror(s)};
    default:
        return (diag){CLI_EXIT_SOFTWARE, rlock_strerror(s)};
    }
}

int cli_fail(rlock_status s, const char *what)
{
    diag d = diagnose(s, g_cause, g_detail[0] ? g_detail : NULL);
    if (g_detail[0] != '\0') {
        cli_error("%s: %s: %s", what, d.words, g_detail);
    } else {
        cli_error("%s: %s", what, d.words);
    }
    cli_detail_clear();
    return d.code;
}

/* The library's own account of its last failure on this thread. */
void cli_detail_from_library(void)
{
    cli_detail_clear();
    const char *t = rlock_last_error();
    if (t != NULL && *t != '\0') {
        snprintf(g_detail, sizeof g_detail, "%s", t);
    }
}

int cli_fail_lib(rlock_status s, const char *what)
{
    cli_detail_from_library();
    return cli_fail(s, what);
}
