/* Status names and sentences: constant strings for every value, unknown
 * values included, so a caller can always print what it got. And the error
 * detail: per thread, since a client is shared by threads and one thread's
 * failure must not overwrite what another is about to print. */
#include <stdarg.h>
#include <stdio.h>

#include "object.h"

static const struct {
    const char *name;
    const char *text;
} table[] = {
    [RLOCK_OK] = {"RLOCK_OK", "success"},
    [RLOCK_EINVAL] = {"RLOCK_EINVAL", "invalid argument or configuration"},
    [RLOCK_ENOMEM] = {"RLOCK_ENOMEM", "out of memory"},
    [RLOCK_EBUSY] = {"RLOCK_EBUSY", "lock is held by another owner and the wait ran out"},
    [RLOCK_ENOTOWNER] = {"RLOCK_ENOTOWNER", "lock is not held by the calling thread"},
    [RLOCK_ELOST] = {"RLOCK_ELOST", "lock was held by the calling thread but its lease was lost"},
    [RLOCK_EIO] = {"RLOCK_EIO", "cannot reach the Redis server, or it cannot run commands yet"},
    [RLOCK_ETIMEDOUT] = {"RLOCK_ETIMEDOUT", "Redis did not answer within the command timeout"},
    [RLOCK_EREDIS] = {"RLOCK_EREDIS", "Redis answered with an error"},
    [RLOCK_EPROTO] = {"RLOCK_EPROTO", "unexpected reply from Redis"},
    [RLOCK_ECLOSED] = {"RLOCK_ECLOSED", "client is closing or was inherited across fork()"},
    [RLOCK_EAUTH] = {"RLOCK_EAUTH", "the Redis server refused the password or user"},
    [RLOCK_ECANCELED] = {"RLOCK_ECANCELED", "the wait was cancelled"},
    [RLOCK_EPOOL] = {"RLOCK_EPOOL", "no connection of the pool became free in time"},
    [RLOCK_EPERM] = {"RLOCK_EPERM",
                     "the server's ACL denies a command, key or channel the lock needs"},
    [RLOCK_ETLS] = {"RLOCK_ETLS",
                    "TLS failed: certificate not trusted or refused, or TLS not spoken"},
    [RLOCK_EDEADLK] = {"RLOCK_EDEADLK", "the calling thread holds the lock it would wait for"},
    [RLOCK_EKIND] = {"RLOCK_EKIND", "the name holds another kind of lock or another type"},
    [RLOCK_ESTALE] = {"RLOCK_ESTALE", "a newer fence token has already written the key"},
};

#define NSTATUS (sizeof table / sizeof table[0])

RLOCK_API const char *rlock_strerror(rlock_status s)
{
    if ((unsigned)s < NSTATUS) {
        return table[s].text;
    }
    return "unknown rlock status";
}

RLOCK_API const char *rlock_status_name(rlock_status s)
{
    if ((unsigned)s < NSTATUS) {
        return table[s].name;
    }
    return "RLOCK_UNKNOWN";
}

RLOCK_API const char *rlock_version(void)
{
    return RLOCK_VERSION_STRING;
}

static __thread char last_error[256];

rlock_status rlock__fail(rlock_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return st;
}

void rlock__error_clear(void)
{
    last_error[0] = '\0';
}

RLOCK_API const char *rlock_last_error(void)
{
    return last_error;
}
