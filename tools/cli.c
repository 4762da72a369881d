/* The helpers every file of the rlock command shares: messages, times,
 * freeing secrets. They sit at the bottom of the command's files and call
 * none of the others (cli.h gives the order), so that rlock.c, main and
 * the command line, sits on top and no file calls back into it. */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("rlock: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void cli_verbose(const cli_opts *o, const char *fmt, ...)
{
    if (!o->verbose) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    fputs("rlock: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

bool cli_parse_duration(const char *s, int64_t *out)
{
    /* Integer arithmetic only: no locale, no rounding surprises. */
    size_t ni = strspn(s, "0123456789");
    const char *p = s + ni;
    const char *frac = "";
    size_t nf = 0;
    if (*p == '.') {
        frac = p + 1;
        nf = strspn(frac, "0123456789");
        p = frac + nf;
    }
    if (ni + nf == 0 || ni > 13) {
        return false;
    }
    int64_t unit;
    if (*p == '\0' || strcmp(p, "s") == 0) {
        unit = 1000;
    } else if (strcmp(p, "ms") == 0) {
        unit = 1;
    } else if (strcmp(p, "m") == 0) {
        unit = 60 * 1000;
    } else if (strcmp(p, "h") == 0) {
        unit = 3600 * 1000;
    } else {
        return false;
    }
    int64_t whole = ni ? strtoll(s, NULL, 10) : 0;
    if (whole > RLOCK_MAX_TIME_MS / unit) {
        return false;
    }
    /* The fraction, to 9 digits, rounded up to a whole ms so that a
     * non-zero time never becomes 0 (one attempt). */
    int64_t num = 0, den = 1;
    for (size_t i = 0; i < nf && i < 9; i++) {
        num = num * 10 + (frac[i] - '0');
        den *= 10;
    }
    int64_t ms = whole * unit + (num * unit + den - 1) / den;
    if (ms > RLOCK_MAX_TIME_MS) {
        return false;
    }
    *out = ms;
    return true;
}

int64_t cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void cli_secure_free(void *p, size_t n)
{
    if (p != NULL) {
        explicit_bzero(p, n);
        free(p);
    }
}

rlock_status cli_new_lock(rlock_client *c, const cli_args *a, rlock **l)
{
    static const struct {
        const char *kind;
        rlock_status (*make)(rlock_client *, const char *, rlock **);
    } kinds[] = {{"fair", rlock_new_fair},     {"read", rlock_new_read},
                 {"write", rlock_new_write},   {"fenced", rlock_new_fenced},
                 {"spin", rlock_new_spin}};
    for (size_t i = 0; a->kind != NULL && i < sizeof kinds / sizeof kinds[0]; i++) {
        if (strcmp(a->kind, kinds[i].kind) == 0) {
            return kinds[i].make(c, a->name, l);
        }
    }
    return rlock_new(c, a->name, l);
}
