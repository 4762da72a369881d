/* Handles and the names the engine derives for a lock: the kind's table
 * lives behind the handle, the engine (sync/) only calls through it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

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
    l->channel = rlock__prefixed("redisson_lock__channel", name, len, "", &l->chanlen);
    l->latch_prefix =
        rlock__prefixed("redisson_unlock_latch", name, len, ":", &l->latch_prefix_len);
    l->acq_latch_prefix =
        rlock__prefixed("rlock_acquire_latch", name, len, ":", &l->acq_latch_prefix_len);
    if (!l->name || !l->channel || !l->latch_prefix || !l->acq_latch_prefix) {
        rlock__handle_fini(l);
        return rlock__fail(RLOCK_ENOMEM, "out of memory for a handle");
    }
    return RLOCK_OK;
}

void rlock__handle_fini(rlock *l)
{
    free(l->name);
    free(l->channel);
    free(l->latch_prefix);
    free(l->acq_latch_prefix);
    l->name = l->channel = l->latch_prefix = l->acq_latch_prefix = NULL;
}

void rlock__owner(const rlock_client *c, uint64_t tid, char *buf)
{
    /* The id is a 36-character uuid: with ':' and 20 digits it fits. */
    size_t n = strlen(c->id);
    memcpy(buf, c->id, n);
    buf[n] = ':';
    rlock__fmt_u64(buf + n + 1, tid);
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
