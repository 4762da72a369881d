/* The callback thread: on_lock_lost runs here, one report at a time, in
 * the order the losses were found. Never on the watchdog thread: a callback
 * that blocks (it may call any rlock function, wait for a lock, sleep)
 * must not stop the renewal of every other held lock.
 *
 * A report can wait in the queue (behind a callback that blocks) while its
 * thread learns of the loss at its unlock (RLOCK_ELOST) and takes the lock
 * again, validly: delivered then, it would make the application abandon a
 * healthy hold. So each report carries the epoch of the hold it is about,
 * and is delivered only if that hold is still there, lost, when its turn
 * comes (checked in the registry). A report made because its thread
 * exited is final: that thread can never hold the name again. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

struct rlock__lost_note {
    struct rlock__lost_note *next;
    uint64_t tid;
    uint64_t epoch;
    bool final;
    size_t len;
    char name[];
};

void rlock__lost_queue(void *arg, const char *name, size_t len, uint64_t tid, uint64_t epoch,
                       bool final)
{
    rlock_client *c = arg;
    if (!c->cfg.on_lock_lost) {
        return;
    }
    rlock__lost_note *n = malloc(sizeof *n + len + 1);
    if (!n) {
        return; /* the owner still learns it: its unlock returns RLOCK_ELOST */
    }
    n->next = NULL;
    n->tid = tid;
    n->epoch = epoch;
    n->final = final;
    n->len = len;
    memcpy(n->name, name, len);
    n->name[len] = '\0';
    pthread_mutex_lock(&c->cb_mu);
    if (!c->cb_open) {
        pthread_mutex_unlock(&c->cb_mu);
        free(n);
        return;
    }
    if (c->cb_tail) {
        c->cb_tail->next = n;
    } else {
        c->cb_head = n;
    }
    c->cb_tail = n;
    pthread_cond_signal(&c->cb_cv);
    pthread_mutex_unlock(&c->cb_mu);
}

void rlock__report_lost(rlock_client *c, const char *name, size_t len, uint64_t tid)
{
    rlock__lost_queue(c, name, len, tid, rlock__hold_epoch_locked(c, name, len, tid), false);
}

static void *callbacks_main(void *arg)
{
    rlock_client *c = arg;
    pthread_mutex_lock(&c->cb_mu);
    for (;;) {
        rlock__lost_note *n = c->cb_head;
        if (!n) {
            if (c->cb_stop) {
                break;
            }
            pthread_cond_wait(&c->cb_cv, &c->cb_mu);
            continue;
        }
        c->cb_head = n->next;
        if (!c->cb_head) {
            c->cb_tail = NULL;
        }
        pthread_mutex_unlock(&c->cb_mu);
        if (n->final || rlock__hold_still_lost(c, n->name, n->len, n->tid, n->epoch)) {
            c->cfg.on_lock_lost(n->name, n->tid, c->cfg.on_lock_lost_arg);
        }
        free(n);
        pthread_mutex_lock(&c->cb_mu);
    }
    pthread_mutex_unlock(&c->cb_mu);
    return NULL;
}

rlock_status rlock__callbacks_start(rlock_client *c)
{
    pthread_mutex_init(&c->cb_mu, NULL);
    pthread_cond_init(&c->cb_cv, NULL);
    if (!c->cfg.on_lock_lost) {
        return RLOCK_OK;
    }
    /* Open before the thread exists: nothing reports yet (the watchdog
     * starts after this), and the flag is then only changed under cb_mu. */
    c->cb_open = true;
    if (rlock__thread_start(&c->cb_thread, callbacks_main, c) != 0) {
        c->cb_open = false;
        pthread_mutex_destroy(&c->cb_mu);
        pthread_cond_destroy(&c->cb_cv);
        return rlock__fail(RLOCK_ENOMEM, "cannot start the callback thread");
    }
    c->cb_running = true;
    return RLOCK_OK;
}

/* Called once nothing can report any more (src/client.c stops the watchdog
 * first, and no call or thread-exit hook is left inside the client); the
 * closed flag makes a stray report a no-op rather than a late one. */
void rlock__callbacks_stop(rlock_client *c)
{
    if (c->cb_running) {
        pthread_mutex_lock(&c->cb_mu);
        c->cb_open = false;
        c->cb_stop = true;
        pthread_cond_signal(&c->cb_cv);
        pthread_mutex_unlock(&c->cb_mu);
        pthread_join(c->cb_thread, NULL);
        c->cb_running = false;
    }
    while (c->cb_head) { /* a fork()ed child's copy */
        rlock__lost_note *n = c->cb_head;
        c->cb_head = n->next;
        free(n);
    }
    c->cb_tail = NULL;
    if (c->pid == getpid()) {
        pthread_mutex_destroy(&c->cb_mu);
        pthread_cond_destroy(&c->cb_cv);
    }
}
