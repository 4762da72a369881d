/* Passwords from outside the URL, so that none needs to appear in ps(1)
 * (the command line) or in the environment COMMAND inherits: RLOCK_AUTH
 * (as redis-cli's REDISCLI_AUTH), --askpass (as redis-cli's), and
 * --password-file; and the password put into the URL the library gets,
 * with the --url argument masked in argv. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

char *cli_take_env_auth(void)
{
    char *v = getenv("RLOCK_AUTH");
    if (v == NULL) {
        return NULL;
    }
    char *copy = strdup(v);
    /* unsetenv() only drops the pointer: the text stays in the initial
     * environment block, which ps e and /proc/PID/environ read. Wipe the
     * whole "RLOCK_AUTH=..." entry there (getenv() points into it). */
    char *entry = v - strlen("RLOCK_AUTH=");
    size_t n = strlen(entry);
    unsetenv("RLOCK_AUTH");
    explicit_bzero(entry, n);
    return copy;
}

/* Reads one line from fd a byte at a time, so that nothing past the line
 * is consumed (the rest of standard input belongs to COMMAND). */
static char *read_line(int fd, bool *eof)
{
    size_t cap = 128, n = 0;
    char *buf = malloc(cap);
    *eof = false;
    while (buf != NULL) {
        char c;
        ssize_t r = read(fd, &c, 1);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            *eof = n == 0;
            break;
        }
        if (c == '\n') {
            break;
        }
        if (n + 1 == cap) {
            char *bigger = malloc(cap * 2);
            if (bigger != NULL) {
                memcpy(bigger, buf, n);
            }
            cli_secure_free(buf, cap);
            buf = bigger;
            cap *= 2;
            if (buf == NULL) {
                break;
            }
        }
        buf[n++] = c;
    }
    if (buf != NULL) {
        if (n > 0 && buf[n - 1] == '\r') {
            n--;
        }
        buf[n] = '\0';
    }
    return buf;
}

char *cli_askpass(void)
{
    struct termios saved, quiet;
    bool tty = tcgetattr(0, &saved) == 0;
    if (tty) {
        /* Echo off before the prompt, as getpass(3) does: what is typed
         * once the prompt shows is neither echoed nor flushed away. */
        quiet = saved;
        quiet.c_lflag &= ~(tcflag_t)(ECHO | ECHONL);
        tcsetattr(0, TCSAFLUSH, &quiet);
        fputs("Redis password: ", stderr);
        fflush(stderr);
    }
    bool eof = false;
    char *pw = read_line(0, &eof);
    if (tty) {
        tcsetattr(0, TCSAFLUSH, &saved);
        fputc('\n', stderr);
    }
    if (pw != NULL && eof) {
        cli_secure_free(pw, 1);
        cli_error("--askpass: no password on standard input");
        return NULL;
    }
    if (pw == NULL) {
        cli_error("--askpass: out of memory");
    }
    return pw;
}

char *cli_password_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        cli_error("--password-file %s: %s", path, strerror(errno));
        return NULL;
    }
    bool eof = false;
    char *pw = read_line(fd, &eof);
    close(fd);
    if (pw == NULL) {
        cli_error("--password-file %s: out of memory", path);
    }
    /* An empty file is an empty password, which sends no AUTH. */
    return pw;
}

/* ---- the password in the URL ---------------------------------------------- */

/* Appends s percent-encoded, every byte but unreserved ones, at *p. */
static void put_enc(char **p, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            *(*p)++ = (char)c;
        } else {
            *(*p)++ = '%';
            *(*p)++ = hex[c >> 4];
            *(*p)++ = hex[c & 15];
        }
    }
}

/* Appends n bytes of s at *p. */
static void put(char **p, const char *s, size_t n)
{
    memcpy(*p, s, n);
    *p += n;
}

/* unix:///path?db=N&user=U&password=P: password= parameters dropped (when
 * replacing, or when all are empty) and one appended. */
static char *unix_with_password(const char *url, const char *pw, bool replace, char *out)
{
    const char *q = strchr(url, '?');
    if (!replace && q != NULL) {
        for (const char *p = q; p != NULL && *p; p = strchr(p + 1, '&')) {
            if (strncmp(p + 1, "password=", 9) == 0 && p[10] != '\0' && p[10] != '&') {
                return strcpy(out, url); /* the URL's own wins */
            }
        }
    }
    char *o = out;
    put(&o, url, q ? (size_t)(q - url) : strlen(url));
    char sep = '?';
    for (const char *p = q; p != NULL && *p;) {
        const char *amp = strchr(p + 1, '&');
        size_t n = amp ? (size_t)(amp - p - 1) : strlen(p + 1);
        if (strncmp(p + 1, "password=", 9) != 0) {
            *o++ = sep;
            put(&o, p + 1, n);
            sep = '&';
        }
        p = amp;
    }
    *o++ = sep;
    put(&o, "password=", 9);
    put_enc(&o, pw);
    *o = '\0';
    return out;
}

char *cli_url_with_password(const char *url, const char *pw, bool replace)
{
    size_t cap = strlen(url) + 3 * strlen(pw) + 16;
    char *out = malloc(cap);
    if (out == NULL) {
        return NULL;
    }
    if (strncmp(url, "unix://", 7) == 0) {
        return unix_with_password(url, pw, replace, out);
    }
    /* scheme://[user[:password]@]host...: the credentials end at the last
     * '@' before the first '/', as the library reads them. */
    const char *auth = strstr(url, "://");
    if (auth == NULL) {
        return strcpy(out, url); /* no scheme: the library's check says so */
    }
    auth += 3;
    size_t alen = strcspn(auth, "/");
    const char *at = NULL;
    for (const char *p = auth; p < auth + alen; p++) {
        if (*p == '@') {
            at = p;
        }
    }
    const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
    if (colon != NULL && (colon + 1 < at || colon > auth) && !replace) {
        return strcpy(out, url); /* a password, or a user's empty one: kept */
    }
    char *o = out;
    const char *from = auth;
    put(&o, url, (size_t)(auth - url));
    if (colon != NULL) {
        put(&o, auth, (size_t)(colon - auth)); /* the user */
        from = at;
    } else if (at != NULL) {
        put(&o, auth, (size_t)(at - auth));
        from = at;
    }
    *o++ = ':';
    put_enc(&o, pw);
    if (at == NULL) {
        *o++ = '@';
    }
    strcpy(o, from);
    return out;
}

/* The spans rlock_url_redact() hides, masked in place with '*' (same
 * length): for the --url argument, so that ps(1) shows no password once
 * rlock has started (as mysql(1) does with -p). */
void cli_url_scrub(char *url)
{
    for (char *q = url; (q = strpbrk(q, "?&")) != NULL;) {
        q++;
        if (strncmp(q, "password=", 9) == 0) {
            memset(q + 9, '*', strcspn(q + 9, "&#"));
        }
    }
    if (strncmp(url, "unix://", 7) == 0) {
        return;
    }
    char *auth = strstr(url, "://");
    auth = auth ? auth + 3 : url;
    char *at = strrchr(auth, '@');
    if (at != NULL) {
        char *colon = memchr(auth, ':', (size_t)(at - auth));
        if (colon != NULL) {
            memset(colon + 1, '*', (size_t)(at - colon - 1));
        }
        return;
    }
    size_t hlen = strcspn(auth, "/?#");
    char *colon = auth[0] == '[' ? memchr(auth, ']', hlen) : NULL;
    colon = colon ? (colon[1] == ':' ? colon + 1 : NULL) : memchr(auth, ':', hlen);
    if (colon != NULL) {
        size_t plen = hlen - (size_t)(colon + 1 - auth);
        if (strspn(colon + 1, "0123456789") < plen) {
            memset(colon + 1, '*', plen);
        }
    }
}
