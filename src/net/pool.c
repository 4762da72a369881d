/* A pool of connections to one node, shared by every thread of a client.
 *
 * A link is not thread-safe, so each caller borrows one for the
 * length of one exchange. A broken link (I/O error, timeout, EOF) is
 * never reused: a reply may still be in flight and would be read as the
 * answer to the next command. It is freed on return and re-made on a later
 * borrow, with a pool-wide backoff so that a dead server is not hammered by
 * every waiting thread. */
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include "internal.h"

#define BACKOFF_MIN_MS 20
#define BACKOFF_MAX_MS 1000

rlock_status rlock__pool_init(rlock__pool *p, int size)
{
    p->conns = calloc((size_t)size, sizeof *p->conns);
    if (!p->conns) {
        return RLOCK_ENOMEM;
    }
    p->size = size;
    p->free_count = size;
    pthread_mutex_init(&p->mu, NULL);
    rlock__cond_init(&p->cv);
    return RLOCK_OK;
}

void rlock__pool_destroy(rlock_client *c, rlock__pool *p)
{
    if (!p->conns) {
        return;
    }
    for (int i = 0; i < p->size; i++) {
        rlock__link_close(p->conns[i].link);
    }
    free(p->conns);
    p->conns = NULL;
    if (c->pid == getpid()) {
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
    }
}

void rlock__pool_close(rlock__pool *p)
{
    pthread_mutex_lock(&p->mu);
    p->closing = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

static void put_back(rlock__pool *p, rlock__conn *conn)
{
    conn->busy = false;
    p->free_count++;
    pthread_cond_signal(&p->cv);
}

rlock_status rlock__pool_borrow(rlock_client *c, rlock__pool *p, rlock__conn **out,
                                int64_t deadline_ms)
{
    int64_t deadline =
        rlock__min_deadline(rlock__now_ms() + c->cfg.command_timeout_ms, deadline_ms);
    pthread_mutex_lock(&p->mu);
    /* Closing refuses only those who would have to wait: the close itself
     * borrows a free connection to settle what calls left in doubt. */
    while (p->free_count == 0) {
        if (p->closing) {
            pthread_mutex_unlock(&p->mu);
            return rlock__fail(RLOCK_ECLOSED, "the client is closing");
        }
        if (!rlock__cond_wait_until(&p->cv, &p->mu, deadline)) {
            pthread_mutex_unlock(&p->mu);
            return rlock__fail(RLOCK_EPOOL, "all %d pooled connections stayed busy", p->size);
        }
    }
    /* Prefer a connected link; take an empty slot only if none is. */
    rlock__conn *conn = NULL;
    for (int i = 0; i < p->size; i++) {
        if (!p->conns[i].busy && (!conn || (!conn->link && p->conns[i].link))) {
            conn = &p->conns[i];
            if (conn->link) {
                break;
            }
        }
    }
    conn->busy = true;
    p->free_count--;
    /* An idle connection has nothing to say: if its socket is readable or
     * hung up, the server closed it (CLIENT KILL, restart, idle timeout)
     * while it sat in the pool. Checking costs one poll() and saves the
     * caller an RLOCK_EIO for a link that was dead before it was used. */
    rlock__link *stale = NULL;
    if (conn->link && !rlock__link_idle_ok(conn->link)) {
        stale = conn->link;
        conn->link = NULL;
    }
    if (conn->link) {
        pthread_mutex_unlock(&p->mu);
        *out = conn;
        return RLOCK_OK;
    }
    if (stale) {
        rlock__stat_add(c, RLOCK_STAT_RECONNECTS, 1);
        rlock__link_close(stale);
    }
    if (rlock__now_ms() < p->retry_at_ms) {
        rlock_status st = p->last_connect_error;
        put_back(p, conn);
        pthread_mutex_unlock(&p->mu);
        return rlock__fail(st, "reconnecting (backing off after a failed connect)");
    }
    pthread_mutex_unlock(&p->mu);

    rlock__link *link = NULL;
    rlock_status st = rlock__connect(c, &link, deadline_ms);

    pthread_mutex_lock(&p->mu);
    if (st == RLOCK_OK) {
        conn->link = link;
        conn->broken = false;
        p->backoff_ms = 0;
        p->retry_at_ms = 0;
        p->last_connect_error = RLOCK_OK;
        pthread_mutex_unlock(&p->mu);
        *out = conn;
        return RLOCK_OK;
    }
    p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : BACKOFF_MIN_MS;
    if (p->backoff_ms > BACKOFF_MAX_MS) {
        p->backoff_ms = BACKOFF_MAX_MS;
    }
    p->retry_at_ms = rlock__now_ms() + p->backoff_ms;
    p->last_connect_error = st;
    put_back(p, conn);
    pthread_mutex_unlock(&p->mu);
    return st;
}

void rlock__pool_return(rlock_client *c, rlock__pool *p, rlock__conn *conn)
{
    rlock__link *dead = NULL;
    if (conn->link && conn->broken) {
        dead = conn->link;
        conn->link = NULL;
        rlock__stat_add(c, RLOCK_STAT_RECONNECTS, 1);
    }
    conn->broken = false;
    pthread_mutex_lock(&p->mu);
    put_back(p, conn);
    pthread_mutex_unlock(&p->mu);
    rlock__link_close(dead);
}
