/* A small chained hash table keyed by byte strings, intrusive so that the
 * hold registry and the channel table allocate one object per entry (the
 * watchdog keeps 100 000 locks in well under 256 bytes each). */
#include <stdlib.h>
#include <string.h>

#include "object.h"

/* FNV-1a: short keys, no adversary that needs a keyed hash here (names come
 * from the application, not from the network). */
uint64_t rlock__hash(const char *key, size_t len)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)key[i];
        h *= 1099511628211ULL;
    }
    return h;
}

rlock_status rlock__map_init(rlock__map *m)
{
    m->nslots = 16;
    m->count = 0;
    m->slots = calloc(m->nslots, sizeof *m->slots);
    return m->slots ? RLOCK_OK : RLOCK_ENOMEM;
}

void rlock__map_destroy(rlock__map *m)
{
    free(m->slots);
    m->slots = NULL;
    m->nslots = 0;
    m->count = 0;
}

rlock__map_node *rlock__map_get(rlock__map *m, const char *key, size_t len)
{
    uint64_t h = rlock__hash(key, len);
    for (rlock__map_node *n = m->slots[h & (m->nslots - 1)]; n; n = n->next) {
        if (n->hash == h && n->keylen == len && memcmp(n->key, key, len) == 0) {
            return n;
        }
    }
    return NULL;
}

static rlock_status grow(rlock__map *m)
{
    size_t nslots = m->nslots * 2;
    rlock__map_node **slots = calloc(nslots, sizeof *slots);
    if (!slots) {
        return RLOCK_ENOMEM;
    }
    for (size_t i = 0; i < m->nslots; i++) {
        rlock__map_node *n = m->slots[i];
        while (n) {
            rlock__map_node *next = n->next;
            size_t j = n->hash & (nslots - 1);
            n->next = slots[j];
            slots[j] = n;
            n = next;
        }
    }
    free(m->slots);
    m->slots = slots;
    m->nslots = nslots;
    return RLOCK_OK;
}

rlock_status rlock__map_put(rlock__map *m, rlock__map_node *n)
{
    if (m->count + 1 > m->nslots) {
        /* A failed grow only makes chains longer; the insert still works. */
        (void)grow(m);
    }
    n->hash = rlock__hash(n->key, n->keylen);
    size_t i = n->hash & (m->nslots - 1);
    n->next = m->slots[i];
    m->slots[i] = n;
    m->count++;
    return RLOCK_OK;
}

void rlock__map_del(rlock__map *m, rlock__map_node *n)
{
    rlock__map_node **p = &m->slots[n->hash & (m->nslots - 1)];
    while (*p && *p != n) {
        p = &(*p)->next;
    }
    if (*p) {
        *p = n->next;
        m->count--;
    }
}

void rlock__map_each(rlock__map *m, void (*fn)(rlock__map_node *, void *), void *arg)
{
    for (size_t i = 0; i < m->nslots; i++) {
        for (rlock__map_node *n = m->slots[i]; n; n = n->next) {
            fn(n, arg);
        }
    }
}
