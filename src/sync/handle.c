/* Handles and the names the engine derives for a lock: the kind's table
 * lives behind the handle, the engine (sync/) only calls through it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* A kind sharing the name and the thread with another (the write half)
 * keeps its holds under name NUL tag. */
size_t rlock__registry_key_len(const rlock__kind *kind, size_t len)
{
    return kind->key_tag ? len + 1 + strlen(kind->key_tag) : len;
}

void rlock__registry_key(const rlock__kind *kind, const char *name, size_t len, char *buf)
{
    memcpy(buf, name, len);
    if (kind->key_tag) {
        buf[len] = '\0';
        memcpy(buf + len + 1, kind->key_tag, strlen(kind->key_tag));
    }
    buf[rlock__registry_key_len(kind, len)] = '\0';
}

rlock_status rlock__handle_init(rlock *l, rlock_client *c, const rlock__kind *kind,
                                const char *name, size_t len)
{
    memset(l, 0, sizeof *l);
    l->c = c;
    l->kind = kind;
    l->namelen = len;
    l->name = malloc(len + 1);
    if (l->name) {
        memcpy(l->name, name, len);
        l->name[len] = '\0';
    }
    l->keylen = rlock__registry_key_len(kind, len);
    l->key = malloc(l->keylen + 1);
    if (l->key) {
        rlock__registry_key(kind, name, len, l->key);
    }
    /* A kind without a channel (the spin lock) publishes nothing. */
    bool chan_ok = true;
    if (kind->chan_prefix) {
        l->channel = rlock__prefixed(kind->chan_prefix, name, len, "", &l->chanlen);
        chan_ok = l->channel != NULL;
    }
    l->latch_prefix =
        rlock__prefixed("redisson_unlock_latch", name, len, ":", &l->latch_prefix_len);
    l->acq_latch_prefix =
        rlock__prefixed("rlock_acquire_latch", name, len, ":", &l->acq_latch_prefix_len);
    if (!l->name || !l->key || !chan_ok || !l->latch_prefix || !l->acq_latch_prefix) {
        rlock__handle_fini(l);
        return rlock__fail(RLOCK_ENOMEM, "out of memory for a handle");
    }
    return RLOCK_OK;
}

void rlock__handle_fini(rlock *l)
{
    free(l->name);
    free(l->key);
    free(l->channel);
    free(l->latch_prefix);
    free(l->acq_latch_prefix);
    l->name = l->key = l->channel = l->latch_prefix = l->acq_latch_prefix = NULL;
}

void rlock__owner(const rlock_client *c, uint64_t tid, char *buf)
{
    /* The id is a 36-character uuid: with ':' and 20 digits it fits. */
    size_t n = strlen(c->id);
    memcpy(buf, c->id, n);
    buf[n] = ':';
    rlock__fmt_u64(buf + n + 1, tid);
}

void rlock__owner_field(const rlock *l, uint64_t tid, char *buf)
{
    rlock__owner(l->c, tid, buf);
    if (l->kind->key_tag) {
        size_t n = strlen(buf);
        buf[n] = ':';
        memcpy(buf + n + 1, l->kind->key_tag, strlen(l->kind->key_tag) + 1);
    }
}

rlock_status rlock__handle_new(rlock_client *c, const char *name, const rlock__kind *kind,
                               rlock **out)
{
    if (!c || !name || !out || name[0] == '\0') {
        rlock__error_clear();
        return rlock__fail(RLOCK_EINVAL, "NULL argument or empty name");
    }
    /* Measured only up to one byte past the maximum: a name is refused
     * without reading all of a huge one. */
    size_t len = strnlen(name, (size_t)RLOCK_NAME_MAX + 1);
    if (len > RLOCK_NAME_MAX) {
        rlock__error_clear();
        return rlock__fail(RLOCK_EINVAL, "name longer than RLOCK_NAME_MAX (%d bytes)",
                           RLOCK_NAME_MAX);
    }
    rlock_status st = rlock__enter(c);
    if (st != RLOCK_OK) {
        return st;
    }
    rlock *l = malloc(sizeof *l);
    if (!l) {
        st = rlock__fail(RLOCK_ENOMEM, "out of memory for a handle");
    } else if ((st = rlock__handle_init(l, c, kind, name, len)) != RLOCK_OK) {
        free(l);
    } else {
        *out = l;
    }
    rlock__leave(c);
    return st;
}

char *rlock__latch_key(const char *prefix, size_t prefix_len, const char *rid, size_t *len)
{
    char *k = malloc(prefix_len + 33);
    if (k) {
        memcpy(k, prefix, prefix_len);
        memcpy(k + prefix_len, rid, 33);
        *len = prefix_len + 32;
    }
    return k;
}
