/* Names derived from a lock name (spec 0.1): the one place that knows how
 * keys and channels are spelled, used by the engine and, through the public
 * functions, by tools and tests. */
#include <stdlib.h>
#include <string.h>

#include "object.h"

/* Writes prefix(P, N) + tail into buf (which has room) and returns its
 * length; with buf NULL only measures. */
static size_t derive(const char *prefix, const char *name, size_t len, const char *tail, char *buf)
{
    bool tagged = memchr(name, '{', len) != NULL;
    size_t plen = strlen(prefix), tlen = strlen(tail);
    size_t n = plen + 1 + len + (tagged ? 0 : 2) + tlen;
    if (!buf) {
        return n;
    }
    char *p = buf;
    memcpy(p, prefix, plen);
    p += plen;
    *p++ = ':';
    if (!tagged) {
        *p++ = '{';
    }
    memcpy(p, name, len);
    p += len;
    if (!tagged) {
        *p++ = '}';
    }
    memcpy(p, tail, tlen);
    p[tlen] = '\0';
    return n;
}

char *rlock__prefixed(const char *prefix, const char *name, size_t len, const char *tail,
                      size_t *outlen)
{
    size_t n = derive(prefix, name, len, tail, NULL);
    char *s = malloc(n + 1);
    if (s) {
        derive(prefix, name, len, tail, s);
        *outlen = n;
    }
    return s;
}

RLOCK_API size_t rlock_prefixed_name(const char *prefix, const char *name, char *buf, size_t size)
{
    if (!prefix || !name || !name[0]) {
        return 0;
    }
    size_t len = strlen(name);
    size_t n = derive(prefix, name, len, "", NULL);
    if (buf && size > n) {
        derive(prefix, name, len, "", buf);
    } else if (buf && size > 0) {
        buf[0] = '\0';
    }
    return n;
}

RLOCK_API size_t rlock_channel_name(const char *name, char *buf, size_t size)
{
    return rlock_prefixed_name("redisson_lock__channel", name, buf, size);
}
