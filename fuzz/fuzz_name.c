/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: lock names. rlock_new() derives the channel and the
 * unlock-latch prefix from any name (spec 0.1: wrap in braces unless the
 * name has a '{'), and so does the public rlock_channel_name(). This file
 * sees the handle's fields through the internal header and drives
 * rlock_new() with a client that has no server: rlock_new() touches none.
 * Built by the fuzz target of the Makefile. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static rlock_client fake;

static void fake_init(void)
{
    static bool done;
    if (done) {
        return;
    }
    done = true;
    fake.pid = getpid();
    fake.fork_gen = rlock__fork_generation();
    pthread_mutex_init(&fake.life_mu, NULL);
    rlock__cond_init(&fake.life_cv);
}

/* prefix ":" ("{" name "}" | name) tail, as spec 0.1 says. */
static bool derived_ok(const char *got, size_t gotlen, const char *prefix, const char *name,
                       size_t len, const char *tail)
{
    bool tagged = memchr(name, '{', len) != NULL;
    size_t plen = strlen(prefix), tlen = strlen(tail);
    size_t want = plen + 1 + len + (tagged ? 0 : 2) + tlen;
    if (gotlen != want || strlen(got) != want) {
        return false;
    }
    const char *p = got;
    if (memcmp(p, prefix, plen) != 0 || p[plen] != ':') {
        return false;
    }
    p += plen + 1;
    if (!tagged && *p++ != '{') {
        return false;
    }
    if (memcmp(p, name, len) != 0) {
        return false;
    }
    p += len;
    if (!tagged && *p++ != '}') {
        return false;
    }
    return memcmp(p, tail, tlen) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fake_init();
    char *name = malloc(size + 1);
    if (!name) {
        return 0;
    }
    memcpy(name, data, size);
    name[size] = '\0';
    size_t len = strlen(name);
    rlock *l = NULL;
    rlock_status st = rlock_new(&fake, name, &l);
    if (len == 0) {
        if (st != RLOCK_EINVAL || l != NULL) {
            abort();
        }
    } else {
        if (st != RLOCK_OK || strcmp(rlock_name(l), name) != 0 || l->namelen != len) {
            abort();
        }
        if (!derived_ok(l->channel, l->chanlen, "redisson_lock__channel", name, len, "")) {
            abort();
        }
        if (!derived_ok(l->latch_prefix, l->latch_prefix_len, "redisson_unlock_latch", name, len,
                        ":")) {
            abort();
        }
        /* The public spelling is the engine's. */
        size_t need = rlock_channel_name(name, NULL, 0);
        char *pub = malloc(need + 1);
        if (!pub || rlock_channel_name(name, pub, need + 1) != l->chanlen ||
            memcmp(pub, l->channel, l->chanlen + 1) != 0) {
            abort();
        }
        free(pub);
        rlock_free(l);
    }
    if (atomic_load(&fake.active) != 0) {
        abort(); /* every call left the client */
    }
    free(name);
    return 0;
}
