/* Cancellation tokens: rlock_cancel_fire() wakes every wait registered with the
 * token (nng's aio cancel is the model). Lock order: the token's mutex,
 * then a client's ps_mu; a waiter registers and unregisters holding
 * neither. */
#include <stdlib.h>

#include "internal.h"

typedef struct watch {
    struct watch *next;
    rlock_client *c;
    rlock__chan *ch;
    rlock__waiter *w;
} watch;

struct rlock_cancel {
    pthread_mutex_t mu;
    atomic_bool set;
    watch *watches;
};

RLOCK_API rlock_status rlock_cancel_new(rlock_cancel **out)
{
    if (!out) {
        return RLOCK_EINVAL;
    }
    rlock_cancel *t = calloc(1, sizeof *t);
    if (!t) {
        return RLOCK_ENOMEM;
    }
    pthread_mutex_init(&t->mu, NULL);
    atomic_init(&t->set, false);
    *out = t;
    return RLOCK_OK;
}

RLOCK_API void rlock_cancel_free(rlock_cancel *t)
{
    if (!t) {
        return;
    }
    while (t->watches) { /* only if a caller broke the rule */
        watch *x = t->watches;
        t->watches = x->next;
        free(x);
    }
    pthread_mutex_destroy(&t->mu);
    free(t);
}

RLOCK_API void rlock_cancel_fire(rlock_cancel *t)
{
    if (!t) {
        return;
    }
    atomic_store(&t->set, true);
    pthread_mutex_lock(&t->mu);
    for (watch *x = t->watches; x; x = x->next) {
        rlock__chan_cancel(x->c, x->ch, x->w);
    }
    pthread_mutex_unlock(&t->mu);
}

RLOCK_API void rlock_cancel_reset(rlock_cancel *t)
{
    if (t) {
        atomic_store(&t->set, false);
    }
}

RLOCK_API bool rlock_cancel_is_set(const rlock_cancel *t)
{
    return t && atomic_load(&((rlock_cancel *)t)->set);
}

bool rlock__cancelled(const rlock_cancel *t)
{
    return rlock_cancel_is_set(t);
}

bool rlock__cancel_watch(rlock_cancel *t, rlock_client *c, rlock__chan *ch, rlock__waiter *w)
{
    watch *x = malloc(sizeof *x);
    pthread_mutex_lock(&t->mu);
    if (atomic_load(&t->set)) {
        pthread_mutex_unlock(&t->mu);
        free(x);
        return false;
    }
    if (x) { /* out of memory: the wait still ends at its deadline */
        *x = (watch){t->watches, c, ch, w};
        t->watches = x;
    }
    pthread_mutex_unlock(&t->mu);
    return true;
}

void rlock__cancel_unwatch(rlock_cancel *t, rlock__waiter *w)
{
    pthread_mutex_lock(&t->mu);
    for (watch **p = &t->watches; *p; p = &(*p)->next) {
        if ((*p)->w == w) {
            watch *x = *p;
            *p = x->next;
            free(x);
            break;
        }
    }
    pthread_mutex_unlock(&t->mu);
}
