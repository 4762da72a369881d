/* The rlock command's own handling of server URLs: parsing with a
 * diagnosis that names the wrong part, redaction of the password for every
 * message, and the URL handed to the library once a password given by
 * other means (RLOCK_AUTH, --askpass, --password-file) is put in.
 *
 * The accepted forms are the library's (docs/rlock.1, rlock_config.url):
 *   redis://[[user]:password@]host[:port][/db]
 *   rediss://... the same over TLS
 *   unix:///path[?db=N][&password=P][&user=U]
 * with %XX escapes in the user, password and path. The parser is the
 * command's so that it can say which part is wrong (the library only
 * answers RLOCK_EINVAL); test_cli checks that both accept the same URLs. */
#include "cli.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9') {
        return ch - '0';
    }
    if (ch >= 'a' && ch <= 'f') {
        return ch - 'a' + 10;
    }
    if (ch >= 'A' && ch <= 'F') {
        return ch - 'A' + 10;
    }
    return -1;
}

/* Copies [s, s+n) decoding %XX escapes; NULL on a bad escape or %00 (the
 * library rejects both). */
static char *dup_decoded(const char *s, size_t n)
{
    char *out = malloc(n + 1);
    if (out == NULL) {
        return NULL;
    }
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            int hi = i + 1 < n ? hexval(s[i + 1]) : -1;
            int lo = i + 2 < n ? hexval(s[i + 2]) : -1;
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
                cli_secure_free(out, n + 1);
                return NULL;
            }
            out[j++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            out[j++] = s[i];
        }
    }
    out[j] = '\0';
    return out;
}

/* A decimal integer in [lo, hi] spanning exactly [s, s+n). */
static bool parse_int(const char *s, size_t n, long lo, long hi, int *out)
{
    if (n == 0 || n > 9) {
        return false;
    }
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return false;
        }
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi) {
        return false;
    }
    *out = (int)v;
    return true;
}

void cli_secure_free(void *p, size_t n)
{
    if (p != NULL) {
        explicit_bzero(p, n);
        free(p);
    }
}

static void free_str(char **s)
{
    if (*s != NULL) {
        cli_secure_free(*s, strlen(*s));
        *s = NULL;
    }
}

void cli_url_free(cli_url *u)
{
    free_str(&u->host);
    free_str(&u->path);
    free_str(&u->user);
    free_str(&u->password);
    memset(u, 0, sizeof *u);
}

/* Sets the diagnosis and returns false. Messages name the part of the URL,
 * never its text: a mistyped URL may hold the password where a host or a
 * port was expected. */
static bool bad(char *why, size_t n, const char *msg)
{
    snprintf(why, n, "%s", msg);
    return false;
}

static bool parse_unix(const char *rest, cli_url *u, char *why, size_t wn)
{
    const char *q = strchr(rest, '?');
    size_t plen = q ? (size_t)(q - rest) : strlen(rest);
    if (plen == 0 || rest[0] != '/') {
        return bad(why, wn, "the socket path must be absolute (unix:///path/to/redis.sock)");
    }
    if ((u->path = dup_decoded(rest, plen)) == NULL) {
        return bad(why, wn, "bad %-escape in the socket path");
    }
    while (q != NULL && *q != '\0') {
        const char *p = q + 1;
        const char *amp = strchr(p, '&');
        size_t n = amp ? (size_t)(amp - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        if (eq == NULL) {
            return bad(why, wn, "a query parameter has no '=' (want db=N, user=U, password=P)");
        }
        size_t klen = (size_t)(eq - p);
        const char *v = eq + 1;
        size_t vlen = n - klen - 1;
        if (klen == 2 && memcmp(p, "db", 2) == 0) {
            if (!parse_int(v, vlen, 0, INT_MAX, &u->db)) {
                return bad(why, wn, "the database (db=) must be a number from 0");
            }
        } else if (klen == 8 && memcmp(p, "password", 8) == 0 && u->password == NULL) {
            if ((u->password = dup_decoded(v, vlen)) == NULL) {
                return bad(why, wn, "bad %-escape in the password");
            }
        } else if (klen == 4 && memcmp(p, "user", 4) == 0 && u->user == NULL) {
            if ((u->user = dup_decoded(v, vlen)) == NULL) {
                return bad(why, wn, "bad %-escape in the user name");
            }
        } else {
            return bad(why, wn,
                       "unknown or repeated query parameter (want db=N, user=U, password=P)");
        }
        q = amp;
    }
    return true;
}

static bool parse_tcp(const char *rest, cli_url *u, char *why, size_t wn)
{
    const char *end = rest + strlen(rest);
    const char *slash = strchr(rest, '/');
    const char *auth_end = NULL;
    /* The last '@' before the path separates credentials from the host, so
     * a password may contain '@' unescaped (as in the library). */
    for (const char *p = rest; p < (slash ? slash : end); p++) {
        if (*p == '@') {
            auth_end = p;
        }
    }
    const char *host = rest;
    if (auth_end != NULL) {
        const char *colon = memchr(rest, ':', (size_t)(auth_end - rest));
        const char *uend = colon ? colon : auth_end;
        if (colon == NULL && uend == rest) {
            return bad(why, wn,
                       "nothing before the '@' (want user@, :password@ or user:password@)");
        }
        if (uend > rest && (u->user = dup_decoded(rest, (size_t)(uend - rest))) == NULL) {
            return bad(why, wn, "bad %-escape in the user name");
        }
        if (colon != NULL &&
            (u->password = dup_decoded(colon + 1, (size_t)(auth_end - colon - 1))) == NULL) {
            return bad(why, wn, "bad %-escape in the password");
        }
        host = auth_end + 1;
    }
    const char *host_end = slash ? slash : end;
    const char *port_at = NULL;
    const char *h = host, *he;
    if (*host == '[') {
        const char *rb = memchr(host, ']', (size_t)(host_end - host));
        if (rb == NULL) {
            return bad(why, wn, "the IPv6 host has no closing ']'");
        }
        h = host + 1;
        he = rb;
        if (rb + 1 < host_end) {
            if (rb[1] != ':') {
                return bad(why, wn, "junk after the IPv6 host (want [addr]:port)");
            }
            port_at = rb + 2;
        }
    } else {
        const char *colon = memchr(host, ':', (size_t)(host_end - host));
        he = colon ? colon : host_end;
        port_at = colon ? colon + 1 : NULL;
    }
    if (he == h) {
        return bad(why, wn, "the host is empty");
    }
    for (const char *p = h; p < he; p++) {
        if (*p == '?' || *p == '#' || *p == ' ' || *p == '@') {
            return bad(why, wn, "the host contains '?', '#', '@' or a space");
        }
    }
    if ((u->host = strndup(h, (size_t)(he - h))) == NULL) {
        return bad(why, wn, "out of memory");
    }
    u->port = 6379;
    if (port_at != NULL && !parse_int(port_at, (size_t)(host_end - port_at), 1, 65535, &u->port)) {
        return bad(why, wn, "the port must be a number from 1 to 65535");
    }
    if (slash != NULL && slash + 1 < end &&
        !parse_int(slash + 1, (size_t)(end - slash - 1), 0, INT_MAX, &u->db)) {
        return bad(why, wn, "the database (after the '/') must be a number from 0");
    }
    return true;
}

bool cli_url_parse(const char *url, cli_url *u, char *why, size_t wn)
{
    memset(u, 0, sizeof *u);
    bool ok;
    if (strncmp(url, "redis://", 8) == 0) {
        ok = parse_tcp(url + 8, u, why, wn);
    } else if (strncmp(url, "unix://", 7) == 0) {
        ok = parse_unix(url + 7, u, why, wn);
    } else if (strncmp(url, "rediss://", 9) == 0) {
        ok = parse_tcp(url + 9, u, why, wn);
        u->tls = true;
    } else {
        ok = bad(why, wn, "the scheme must be redis://, rediss:// or unix://");
    }
    if (!ok) {
        cli_url_free(u);
        return false;
    }
    /* redis://:@host is a URL without a password, as in the library. */
    if (u->password != NULL && u->password[0] == '\0' && u->user == NULL) {
        free_str(&u->password);
    }
    return true;
}

/* Appends s[0..n) to the buffer at *p, percent-encoding every byte but
 * unreserved ones (and '/' when keep_slash). */
static void put_enc(char **p, const char *s, size_t n, bool keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/');
        if (plain) {
            *(*p)++ = (char)c;
        } else {
            *(*p)++ = '%';
            *(*p)++ = hex[c >> 4];
            *(*p)++ = hex[c & 15];
        }
    }
}

static size_t len0(const char *s)
{
    return s ? strlen(s) : 0;
}

char *cli_url_compose(const cli_url *u)
{
    size_t cap = 3 * (len0(u->host) + len0(u->path) + len0(u->user) + len0(u->password)) + 96;
    char *buf = malloc(cap), *p = buf;
    if (buf == NULL) {
        return NULL;
    }
    if (u->path != NULL) {
        p += sprintf(p, "unix://");
        put_enc(&p, u->path, strlen(u->path), true);
        p += sprintf(p, "?db=%d", u->db);
        if (u->user != NULL) {
            p += sprintf(p, "&user=");
            put_enc(&p, u->user, strlen(u->user), false);
        }
        if (u->password != NULL) {
            p += sprintf(p, "&password=");
            put_enc(&p, u->password, strlen(u->password), false);
        }
    } else {
        p += sprintf(p, u->tls ? "rediss://" : "redis://");
        if (u->user != NULL) {
            put_enc(&p, u->user, strlen(u->user), false);
        }
        if (u->password != NULL) {
            *p++ = ':';
            put_enc(&p, u->password, strlen(u->password), false);
        }
        if (u->user != NULL || u->password != NULL) {
            *p++ = '@';
        }
        bool brackets = strchr(u->host, ':') != NULL || u->host[0] == '[';
        p += sprintf(p, brackets ? "[%s]:%d/%d" : "%s:%d/%d", u->host, u->port, u->db);
    }
    *p = '\0';
    return buf;
}

/* ---- redaction ---------------------------------------------------------- */

/* Replaces the value of every "password=" query parameter with ***. */
static void redact_query(char *s)
{
    for (char *q = s; (q = strpbrk(q, "?&")) != NULL;) {
        q++;
        if (strncmp(q, "password=", 9) == 0) {
            char *v = q + 9;
            size_t n = strcspn(v, "&#");
            if (n > 0) {
                memmove(v + 3, v + n, strlen(v + n) + 1);
                memcpy(v, "***", 3);
            }
        }
    }
}

char *cli_url_redact(const char *url)
{
    if (url == NULL) {
        return strdup("(none)");
    }
    /* Room for each *** that may replace a shorter password or port. */
    char *out = malloc(2 * strlen(url) + 8);
    if (out == NULL) {
        return NULL;
    }
    strcpy(out, url);
    if (strncmp(out, "unix://", 7) == 0) {
        redact_query(out);
        return out;
    }
    /* Any other scheme, malformed ones included, is read as
     * scheme://user:password@host:port/...: the password runs from the
     * first ':' of the authority to its last '@', wherever a '/' or '?'
     * is (a password may hold both, and a malformed URL still must not
     * show it). Without an '@', a port that is not a number is hidden
     * too: it may be a password whose '@' was forgotten. */
    char *auth = strstr(out, "://");
    auth = auth ? auth + 3 : out;
    char *at = strrchr(auth, '@');
    if (at != NULL) {
        char *colon = memchr(auth, ':', (size_t)(at - auth));
        if (colon != NULL && at > colon + 1) {
            memmove(colon + 4, at, strlen(at) + 1);
            memcpy(colon + 1, "***", 3);
        }
    } else {
        size_t hlen = strcspn(auth, "/?#");
        char *colon = auth[0] == '[' ? memchr(auth, ']', hlen) : NULL;
        colon = colon ? (colon[1] == ':' ? colon + 1 : NULL) : memchr(auth, ':', hlen);
        if (colon != NULL) {
            size_t plen = hlen - (size_t)(colon + 1 - auth);
            if (plen > 0 && strspn(colon + 1, "0123456789") < plen) {
                memmove(colon + 4, colon + 1 + plen, strlen(colon + 1 + plen) + 1);
                memcpy(colon + 1, "***", 3);
            }
        }
    }
    redact_query(out);
    return out;
}

/* The spans cli_url_redact() hides, masked in place with '*' (same length):
 * for the --url argument, so that ps(1) shows no password once rlock has
 * started (as mysql(1) does with -p). */
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
