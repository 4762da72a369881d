/* rlock_url_redact(): the public check of a server URL, by the parser
 * rlock_client_new() uses (core/url.c), and its text with every password
 * hidden, for logs and messages. It sits at the top with the other public
 * entry points; core/url.c stays the one parser.
 *
 * The redaction works on the text, not on the parse, so that a malformed
 * URL (the one a message most needs to show) never shows its password
 * either: whatever the scheme, the authority is read as
 * user:password@host:port, the password running from its first ':' to its
 * last '@' wherever a '/' or '?' falls (a password may hold both); with no
 * '@', a port that is not a number is hidden too (it may be a password
 * whose '@' was forgotten); and every password= query value. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

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

/* out holds the URL and has room for 2 * its length + 8 bytes: each ***
 * may replace a one-byte password or port. */
static void redact(char *out)
{
    if (strncmp(out, "unix://", 7) == 0) {
        redact_query(out);
        return;
    }
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
}

RLOCK_API rlock_status rlock_url_redact(const char *url, char *buf, size_t size)
{
    rlock__error_clear();
    if (buf != NULL && size > 0) {
        buf[0] = '\0';
    }
    if (url == NULL) {
        return rlock__fail(RLOCK_EINVAL, "the URL is NULL");
    }
    if (buf == NULL && size > 0) {
        return rlock__fail(RLOCK_EINVAL, "buf is NULL");
    }
    if (size > 0) {
        size_t n = strlen(url);
        char *out = malloc(2 * n + 8);
        if (out == NULL) {
            return rlock__fail(RLOCK_ENOMEM, "out of memory");
        }
        memcpy(out, url, n + 1);
        redact(out);
        /* Cut after the redaction, so a short buffer shows less, never
         * more, of a password. */
        size_t m = strlen(out);
        if (m >= size) {
            m = size - 1;
        }
        memcpy(buf, out, m);
        buf[m] = '\0';
        explicit_bzero(out, 2 * n + 8);
        free(out);
    }
    rlock__endpoint ep;
    rlock_status st = rlock__parse_url(url, &ep);
    if (st == RLOCK_OK) {
        rlock__endpoint_free(&ep);
    }
    return st;
}
