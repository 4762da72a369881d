/* Parsing the URLs of rlock_config.url:
 *   redis://[[user]:password@]host[:port][/db]
 *   rediss://... the same over TLS (Redisson's and Lettuce's scheme)
 *   unix:///path/to.sock[?db=N][&password=P][&user=U]
 * Percent-escapes are decoded in the user and password. A malformed URL is
 * RLOCK_EINVAL with an error detail (rlock_last_error()) that names the
 * wrong part and never quotes the URL, which may hold a password where a
 * host or port was expected. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "object.h"

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

/* Copies [s, s+n) decoding %XX escapes; NULL on a bad escape or NUL. */
static char *dup_decoded(const char *s, size_t n, rlock_status *st)
{
    char *out = malloc(n + 1);
    if (!out) {
        *st = RLOCK_ENOMEM;
        return NULL;
    }
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            int hi = i + 1 < n ? hexval(s[i + 1]) : -1;
            int lo = i + 2 < n ? hexval(s[i + 2]) : -1;
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
                free(out);
                *st = RLOCK_EINVAL;
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

/* A failed dup_decoded() of part: its status, with the error detail saying
 * which part (never its text: it may hold the password). */
static rlock_status bad_escape(rlock_status st, const char *part)
{
    if (st == RLOCK_EINVAL) {
        return rlock__fail(st, "bad %%-escape in %s", part);
    }
    return rlock__fail(st, "out of memory");
}

void rlock__endpoint_free(rlock__endpoint *ep)
{
    free(ep->host);
    free(ep->path);
    free(ep->user);
    free(ep->password);
    memset(ep, 0, sizeof *ep);
}

/* unix:///path[?db=N][&password=P][&user=U] */
static rlock_status parse_unix(const char *rest, rlock__endpoint *ep)
{
    rlock_status st = RLOCK_OK;
    const char *q = strchr(rest, '?');
    size_t plen = q ? (size_t)(q - rest) : strlen(rest);
    if (plen == 0 || rest[0] != '/') {
        return rlock__fail(RLOCK_EINVAL,
                           "the socket path must be absolute (unix:///path/to/redis.sock)");
    }
    if (!(ep->path = dup_decoded(rest, plen, &st))) {
        return bad_escape(st, "the socket path");
    }
    while (q && *q) {
        const char *p = q + 1;
        const char *amp = strchr(p, '&');
        size_t n = amp ? (size_t)(amp - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        if (!eq) {
            return rlock__fail(RLOCK_EINVAL, "a query parameter has no '=' (want db=N, "
                                             "user=U, password=P)");
        }
        size_t klen = (size_t)(eq - p);
        const char *v = eq + 1;
        size_t vlen = n - klen - 1;
        if (klen == 2 && memcmp(p, "db", 2) == 0) {
            if (!parse_int(v, vlen, 0, INT_MAX, &ep->db)) {
                return rlock__fail(RLOCK_EINVAL, "the database (db=) must be a number from 0");
            }
        } else if (klen == 8 && memcmp(p, "password", 8) == 0 && !ep->password) {
            if (!(ep->password = dup_decoded(v, vlen, &st))) {
                return bad_escape(st, "the password");
            }
        } else if (klen == 4 && memcmp(p, "user", 4) == 0 && !ep->user) {
            if (!(ep->user = dup_decoded(v, vlen, &st))) {
                return bad_escape(st, "the user name");
            }
        } else {
            return rlock__fail(RLOCK_EINVAL, "unknown or repeated query parameter (want "
                                             "db=N, user=U, password=P)");
        }
        q = amp;
    }
    if (ep->user && !ep->password) {
        return rlock__fail(RLOCK_EINVAL, "the user has no password");
    }
    return RLOCK_OK;
}

/* redis://[[user]:password@]host[:port][/db] */
static rlock_status parse_tcp(const char *rest, rlock__endpoint *ep)
{
    rlock_status st = RLOCK_OK;
    const char *end = rest + strlen(rest);
    const char *slash = strchr(rest, '/');
    const char *auth_end = NULL;
    /* The last '@' before the path separates credentials from the host, so
     * a password may contain '@' unescaped. */
    for (const char *p = rest; p < (slash ? slash : end); p++) {
        if (*p == '@') {
            auth_end = p;
        }
    }
    const char *host = rest;
    if (auth_end) {
        const char *colon = memchr(rest, ':', (size_t)(auth_end - rest));
        if (!colon) {
            return rlock__fail(RLOCK_EINVAL, auth_end == rest
                                                 ? "nothing before the '@' (want user:password@)"
                                                 : "the user has no password");
        }
        if (colon > rest && !(ep->user = dup_decoded(rest, (size_t)(colon - rest), &st))) {
            return bad_escape(st, "the user name");
        }
        if (!(ep->password = dup_decoded(colon + 1, (size_t)(auth_end - colon - 1), &st))) {
            return bad_escape(st, "the password");
        }
        host = auth_end + 1;
    }
    const char *host_end = slash ? slash : end;
    const char *port_at = NULL;
    const char *h = host, *he;
    if (*host == '[') { /* [ipv6]:port */
        const char *rb = memchr(host, ']', (size_t)(host_end - host));
        if (!rb) {
            return rlock__fail(RLOCK_EINVAL, "the IPv6 host has no closing ']'");
        }
        h = host + 1;
        he = rb;
        if (rb + 1 < host_end) {
            if (rb[1] != ':') {
                return rlock__fail(RLOCK_EINVAL, "junk after the IPv6 host (want [addr]:port)");
            }
            port_at = rb + 2;
        }
    } else {
        const char *colon = memchr(host, ':', (size_t)(host_end - host));
        he = colon ? colon : host_end;
        port_at = colon ? colon + 1 : NULL;
    }
    if (he == h) {
        return rlock__fail(RLOCK_EINVAL, "the host is empty");
    }
    for (const char *p = h; p < he; p++) {
        if (*p == '?' || *p == '#' || *p == ' ' || *p == '@') {
            return rlock__fail(RLOCK_EINVAL, "the host contains '?', '#', '@' or a space");
        }
    }
    if (!(ep->host = strndup(h, (size_t)(he - h)))) {
        return RLOCK_ENOMEM;
    }
    ep->port = 6379;
    if (port_at && !parse_int(port_at, (size_t)(host_end - port_at), 1, 65535, &ep->port)) {
        return rlock__fail(RLOCK_EINVAL, "the port must be a number from 1 to 65535");
    }
    if (slash && slash + 1 < end) {
        if (!parse_int(slash + 1, (size_t)(end - slash - 1), 0, INT_MAX, &ep->db)) {
            return rlock__fail(RLOCK_EINVAL,
                               "the database (after the '/') must be a number from 0");
        }
    }
    return RLOCK_OK;
}

rlock_status rlock__parse_url(const char *url, rlock__endpoint *ep)
{
    memset(ep, 0, sizeof *ep);
    rlock_status st;
    if (strncmp(url, "redis://", 8) == 0) {
        st = parse_tcp(url + 8, ep);
    } else if (strncmp(url, "rediss://", 9) == 0) {
        ep->tls = true;
        st = parse_tcp(url + 9, ep);
    } else if (strncmp(url, "unix://", 7) == 0) {
        st = parse_unix(url + 7, ep);
    } else {
        st = rlock__fail(RLOCK_EINVAL, "the scheme must be redis://, rediss:// (TLS) or unix://");
    }
    if (st != RLOCK_OK) {
        rlock__endpoint_free(ep);
        return st;
    }
    /* redis://:@host is a URL without a password, as in redis-py: AUTH
     * with an empty password would be refused. A user keeps its AUTH. */
    if (ep->password && !ep->password[0] && !ep->user) {
        free(ep->password);
        ep->password = NULL;
    }
    return RLOCK_OK;
}

void rlock__endpoint_label(const rlock__endpoint *ep, char *buf, size_t size)
{
    if (ep->path) {
        snprintf(buf, size, "%s", ep->path);
    } else if (strchr(ep->host, ':')) {
        snprintf(buf, size, "[%s]:%d", ep->host, ep->port);
    } else {
        snprintf(buf, size, "%s:%d", ep->host, ep->port);
    }
}
