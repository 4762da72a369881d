/* The pub/sub thread and the waiter entries.
 *
 * One connection per client carries every SUBSCRIBE. Only this thread reads
 * or writes it; other threads ask for (un)subscriptions by marking an entry
 * dirty and writing a byte to a pipe that the thread polls with the socket.
 *
 * One entry per channel is shared by all local waiters of that lock name.
 * Waiters queue in arrival order; a "0" message wakes the oldest waiter that
 * is not already awake, "1" wakes them all, and a message that finds no one
 * to wake is kept as a permit for the next waiter to go to sleep (so a
 * release that lands between a failed attempt and the sleep is not lost).
 * After a reconnect every channel is subscribed again and every waiter is
 * woken to retry, since messages may have been missed while down.
 *
 * Subscription state is tracked per channel as the last command sent and
 * the number of replies still due, so a SUBSCRIBE that follows a pending
 * UNSUBSCRIBE is only "confirmed" once its own reply arrives.
 *
 * An entry nobody references lingers subscribed for LINGER_MS, so a lock
 * contended in bursts does not pay SUBSCRIBE/UNSUBSCRIBE every time. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define LINGER_MS 2000
#define SWEEP_MS 500
#define MAX_PERMITS 64
#define BACKOFF_MIN_MS 20
#define BACKOFF_MAX_MS 1000

typedef struct rlock__waiter {
    struct rlock__waiter *next, *prev;
    pthread_cond_t cv;
    bool woken;
} rlock__waiter;

struct rlock__chan {
    rlock__map_node node; /* key = channel */
    char *name;
    size_t len;
    int refs;
    int64_t permits;
    int64_t idle_since;
    int64_t hint_until; /* latest lease end a local waiter slept towards */
    rlock__waiter *head, *tail;
    pthread_cond_t sub_cv; /* subscription confirmed or state reset */
    uint64_t gen;          /* bumped on reconnect and close */
    int outstanding;       /* (un)subscribe replies still due */
    bool sent_sub;         /* the last command sent was SUBSCRIBE */
    bool confirmed;
    bool was_reset; /* subscription lost: wake everyone once it is back */
    bool in_dirty;
    rlock__chan *dirty_next;
};

static void poke(rlock_client *c)
{
    char b = 1;
    ssize_t rc = write(c->wake_pipe[1], &b, 1);
    (void)rc; /* a full pipe already guarantees a wake-up */
}

static void mark_dirty(rlock_client *c, rlock__chan *ch)
{
    if (!ch->in_dirty) {
        ch->in_dirty = true;
        ch->dirty_next = c->dirty;
        c->dirty = ch;
        poke(c);
    }
}

static void wake_one(rlock__chan *ch)
{
    for (rlock__waiter *w = ch->head; w; w = w->next) {
        if (!w->woken) {
            w->woken = true;
            pthread_cond_signal(&w->cv);
            return;
        }
    }
    if (ch->permits < MAX_PERMITS) {
        ch->permits++;
    }
}

static void wake_all(rlock__chan *ch)
{
    for (rlock__waiter *w = ch->head; w; w = w->next) {
        w->woken = true;
        pthread_cond_signal(&w->cv);
    }
    ch->gen++;
    pthread_cond_broadcast(&ch->sub_cv);
}

static void free_chan(rlock_client *c, rlock__chan *ch)
{
    if (c->pid == getpid()) {
        pthread_cond_destroy(&ch->sub_cv);
    }
    free(ch);
}

/* ---- API for waiting threads ----------------------------------------- */

rlock_status rlock__chan_ref(rlock_client *c, const char *channel, size_t len, rlock__chan **out)
{
    pthread_mutex_lock(&c->ps_mu);
    if (c->ps_stop) {
        pthread_mutex_unlock(&c->ps_mu);
        return RLOCK_ECLOSED;
    }
    rlock__chan *ch = (rlock__chan *)rlock__map_get(&c->chans, channel, len);
    if (!ch) {
        ch = calloc(1, sizeof *ch + len + 1);
        if (!ch) {
            pthread_mutex_unlock(&c->ps_mu);
            return RLOCK_ENOMEM;
        }
        ch->name = (char *)(ch + 1);
        memcpy(ch->name, channel, len);
        ch->len = len;
        ch->node.key = ch->name;
        ch->node.keylen = len;
        rlock__cond_init(&ch->sub_cv);
        rlock__map_put(&c->chans, &ch->node);
    }
    if (ch->refs++ == 0) {
        /* Messages kept while nobody waited are stale: the first waiter
         * retries after subscribing anyway. */
        ch->permits = 0;
        if (!ch->sent_sub) {
            mark_dirty(c, ch);
        }
    }
    *out = ch;
    pthread_mutex_unlock(&c->ps_mu);
    return RLOCK_OK;
}

void rlock__chan_unref(rlock_client *c, rlock__chan *ch)
{
    pthread_mutex_lock(&c->ps_mu);
    if (--ch->refs == 0) {
        ch->idle_since = rlock__now_ms();
    }
    pthread_mutex_unlock(&c->ps_mu);
}

rlock_status rlock__chan_wait_subscribed(rlock_client *c, rlock__chan *ch, int64_t deadline_ms)
{
    rlock_status st = RLOCK_OK;
    pthread_mutex_lock(&c->ps_mu);
    while (!ch->confirmed && !c->ps_stop) {
        if (!rlock__cond_wait_until(&ch->sub_cv, &c->ps_mu, deadline_ms)) {
            st = RLOCK_ETIMEDOUT;
            break;
        }
    }
    if (c->ps_stop) {
        st = RLOCK_ECLOSED;
    }
    pthread_mutex_unlock(&c->ps_mu);
    return st;
}

bool rlock__chan_queued(rlock_client *c, const char *channel, size_t len)
{
    pthread_mutex_lock(&c->ps_mu);
    rlock__chan *ch = (rlock__chan *)rlock__map_get(&c->chans, channel, len);
    bool queued = ch && ch->head;
    pthread_mutex_unlock(&c->ps_mu);
    return queued;
}

rlock_status rlock__chan_join(rlock_client *c, rlock__chan *ch, rlock__waiter **out,
                              bool *queued_behind, int64_t *hint_until)
{
    rlock__waiter *w = calloc(1, sizeof *w);
    if (!w) {
        return RLOCK_ENOMEM;
    }
    rlock__cond_init(&w->cv);
    pthread_mutex_lock(&c->ps_mu);
    *queued_behind = ch->head != NULL;
    *hint_until = ch->head ? ch->hint_until : -1;
    w->prev = ch->tail;
    if (ch->tail) {
        ch->tail->next = w;
    } else {
        ch->head = w;
    }
    ch->tail = w;
    pthread_mutex_unlock(&c->ps_mu);
    *out = w;
    return RLOCK_OK;
}

void rlock__chan_leave(rlock_client *c, rlock__chan *ch, rlock__waiter *w, bool acquired)
{
    pthread_mutex_lock(&c->ps_mu);
    if (w->prev) {
        w->prev->next = w->next;
    } else {
        ch->head = w->next;
    }
    if (w->next) {
        w->next->prev = w->prev;
    } else {
        ch->tail = w->prev;
    }
    /* A waiter that was woken and leaves without the lock passes the
     * wake-up on, or the next waiter could sleep through a free lock. */
    if (!acquired && w->woken) {
        wake_one(ch);
    }
    if (--ch->refs == 0) {
        ch->idle_since = rlock__now_ms();
    }
    pthread_mutex_unlock(&c->ps_mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}

rlock_status rlock__chan_sleep(rlock_client *c, rlock__chan *ch, rlock__waiter *w,
                               int64_t deadline_ms)
{
    pthread_mutex_lock(&c->ps_mu);
    if (deadline_ms > ch->hint_until) {
        ch->hint_until = deadline_ms;
    }
    if (!w->woken && ch->permits > 0) {
        ch->permits--;
        w->woken = true;
    }
    while (!w->woken && !c->ps_stop) {
        if (!rlock__cond_wait_until(&w->cv, &c->ps_mu, deadline_ms)) {
            break;
        }
    }
    w->woken = false;
    rlock_status st = c->ps_stop ? RLOCK_ECLOSED : RLOCK_OK;
    pthread_mutex_unlock(&c->ps_mu);
    return st;
}

/* ---- the thread ------------------------------------------------------ */

static void reset_all(rlock__map_node *n, void *arg)
{
    (void)arg;
    rlock__chan *ch = (rlock__chan *)n;
    ch->outstanding = 0;
    ch->sent_sub = false;
    ch->confirmed = false;
    ch->was_reset = true;
    wake_all(ch);
}

/* Called with ps_mu held after the connection was lost or re-made. */
static void connection_reset(rlock_client *c)
{
    rlock__map_each(&c->chans, reset_all, NULL);
    /* Rebuild the dirty list from scratch: every referenced channel must
     * be subscribed again; unreferenced ones are dropped. */
    c->dirty = NULL;
    for (size_t i = 0; i < c->chans.nslots; i++) {
        rlock__map_node **p = &c->chans.slots[i];
        while (*p) {
            rlock__chan *ch = (rlock__chan *)*p;
            ch->in_dirty = false;
            if (ch->refs == 0) {
                *p = (*p)->next;
                c->chans.count--;
                free_chan(c, ch);
                continue;
            }
            ch->in_dirty = true;
            ch->dirty_next = c->dirty;
            c->dirty = ch;
            p = &(*p)->next;
        }
    }
}

typedef struct sweep_ctx {
    rlock_client *c;
    int64_t now;
} sweep_ctx;

static void sweep_one(rlock__map_node *n, void *arg)
{
    sweep_ctx *s = arg;
    rlock__chan *ch = (rlock__chan *)n;
    if (ch->refs == 0 && ch->sent_sub && s->now - ch->idle_since >= LINGER_MS) {
        mark_dirty(s->c, ch);
    }
}

/* Appends the (un)subscribes the dirty entries need. ps_mu held. */
static void flush_dirty(rlock_client *c, redisContext *ctx)
{
    while (c->dirty) {
        rlock__chan *ch = c->dirty;
        c->dirty = ch->dirty_next;
        ch->in_dirty = false;
        bool want = ch->refs > 0 || (rlock__now_ms() - ch->idle_since < LINGER_MS);
        if (want == ch->sent_sub) {
            continue;
        }
        const char *argv[2] = {want ? "SUBSCRIBE" : "UNSUBSCRIBE", ch->name};
        size_t lens[2] = {want ? 9u : 11u, ch->len};
        if (redisAppendCommandArgv(ctx, 2, argv, lens) != REDIS_OK) {
            return;
        }
        ch->sent_sub = want;
        ch->confirmed = false;
        ch->outstanding++;
    }
}

static void on_reply(rlock_client *c, redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING) {
        return;
    }
    const char *kind = r->element[0]->str;
    rlock__chan *ch =
        (rlock__chan *)rlock__map_get(&c->chans, r->element[1]->str, (size_t)r->element[1]->len);
    if (!ch) {
        return;
    }
    if (strcmp(kind, "message") == 0) {
        rlock__stat_add(c, RLOCK_STAT_WAKEUPS, 1);
        const redisReply *m = r->element[2];
        if (m->type == REDIS_REPLY_STRING && m->len == 1 && m->str[0] == '1') {
            wake_all(ch);
        } else {
            wake_one(ch);
        }
    } else if (strcmp(kind, "subscribe") == 0 || strcmp(kind, "unsubscribe") == 0) {
        if (ch->outstanding > 0) {
            ch->outstanding--;
        }
        if (ch->outstanding == 0) {
            if (ch->sent_sub) {
                ch->confirmed = true;
                pthread_cond_broadcast(&ch->sub_cv);
                /* Waiters woken by the reset retried before this
                 * subscription was live: a release in that window was
                 * published to nobody. Wake them again now that it is. */
                if (ch->was_reset) {
                    ch->was_reset = false;
                    wake_all(ch);
                }
            } else if (ch->refs == 0 && !ch->in_dirty) {
                rlock__map_del(&c->chans, &ch->node);
                free_chan(c, ch);
            }
        }
    }
}

static void *pubsub_main(void *arg)
{
    rlock_client *c = arg;
    redisContext *ctx = c->ps_ctx; /* opened by rlock__pubsub_start() */
    int64_t backoff = 0, retry_at = 0, next_sweep = rlock__now_ms() + SWEEP_MS;

    pthread_mutex_lock(&c->ps_mu);
    while (!c->ps_stop) {
        int64_t now = rlock__now_ms();
        if (!ctx && now >= retry_at) {
            pthread_mutex_unlock(&c->ps_mu);
            redisContext *nc = NULL;
            rlock_status st = rlock__connect(c, &nc);
            pthread_mutex_lock(&c->ps_mu);
            if (st == RLOCK_OK) {
                ctx = nc;
                c->ps_ctx = ctx;
                backoff = 0;
                rlock__stat_add(c, RLOCK_STAT_RECONNECTS, 1);
                connection_reset(c);
            } else {
                backoff = backoff ? backoff * 2 : BACKOFF_MIN_MS;
                if (backoff > BACKOFF_MAX_MS) {
                    backoff = BACKOFF_MAX_MS;
                }
                retry_at = rlock__now_ms() + backoff;
            }
            continue;
        }
        if (ctx && now >= next_sweep) {
            sweep_ctx s = {c, now};
            rlock__map_each(&c->chans, sweep_one, &s);
            next_sweep = now + SWEEP_MS;
        }
        bool broken = false;
        if (ctx) {
            flush_dirty(c, ctx);
            int done = 0;
            while (!done && !ctx->err) {
                if (redisBufferWrite(ctx, &done) != REDIS_OK) {
                    break;
                }
            }
            broken = ctx->err != 0;
        }
        pthread_mutex_unlock(&c->ps_mu);

        if (!broken) {
            struct pollfd pfd[2] = {{c->wake_pipe[0], POLLIN, 0}, {ctx ? ctx->fd : -1, POLLIN, 0}};
            int64_t until = ctx ? next_sweep : retry_at;
            int timeout = (int)(until - rlock__now_ms());
            if (timeout < 0) {
                timeout = 0;
            }
            int rc = poll(pfd, ctx ? 2 : 1, timeout);
            if (rc > 0 && (pfd[0].revents & POLLIN)) {
                char buf[64];
                while (read(c->wake_pipe[0], buf, sizeof buf) > 0) {
                }
            }
            if (rc > 0 && ctx && (pfd[1].revents & (POLLIN | POLLHUP | POLLERR))) {
                if (redisBufferRead(ctx) != REDIS_OK) {
                    broken = true;
                }
            }
        }

        pthread_mutex_lock(&c->ps_mu);
        if (ctx && !broken) {
            void *rep = NULL;
            while (redisGetReplyFromReader(ctx, &rep) == REDIS_OK && rep) {
                on_reply(c, rep);
                freeReplyObject(rep);
                rep = NULL;
            }
            broken = ctx->err != 0;
        }
        if (broken) {
            c->ps_ctx = NULL; /* before the free: a fork() in between leaks, never frees twice */
            redisFree(ctx);
            ctx = NULL;
            retry_at = 0;
            /* Wake every waiter: they retry now and then sleep on the TTL
             * until the subscription is back. */
            connection_reset(c);
        }
    }
    c->ps_ctx = NULL;
    pthread_mutex_unlock(&c->ps_mu);
    if (ctx) {
        redisFree(ctx);
    }
    return NULL;
}

rlock_status rlock__pubsub_start(rlock_client *c)
{
    /* The first connection is made here, by the caller of
     * rlock_client_new(): a client that cannot open it is not created, the
     * first waiter does not pay for it, and a fork() right after
     * rlock_client_new() cannot catch the thread half-way through a
     * connect (whose memory the child could not free). */
    rlock_status st = rlock__connect(c, &c->ps_ctx);
    if (st != RLOCK_OK) {
        return st;
    }
    pthread_mutex_init(&c->ps_mu, NULL);
    if (rlock__map_init(&c->chans) != RLOCK_OK) {
        st = RLOCK_ENOMEM;
        goto fail_map;
    }
    if (pipe2(c->wake_pipe, O_NONBLOCK | O_CLOEXEC) != 0) {
        st = RLOCK_ENOMEM;
        goto fail_pipe;
    }
    if (pthread_create(&c->ps_thread, NULL, pubsub_main, c) != 0) {
        st = RLOCK_ENOMEM;
        goto fail_thread;
    }
    c->ps_running = true;
    return RLOCK_OK;

fail_thread:
    close(c->wake_pipe[0]);
    close(c->wake_pipe[1]);
fail_pipe:
    rlock__map_destroy(&c->chans);
fail_map:
    pthread_mutex_destroy(&c->ps_mu);
    redisFree(c->ps_ctx);
    c->ps_ctx = NULL;
    return st;
}

static void wake_closing(rlock__map_node *n, void *arg)
{
    (void)arg;
    wake_all((rlock__chan *)n);
}

void rlock__pubsub_stop(rlock_client *c)
{
    if (c->ps_running) {
        pthread_mutex_lock(&c->ps_mu);
        c->ps_stop = true;
        rlock__map_each(&c->chans, wake_closing, NULL);
        poke(c);
        pthread_mutex_unlock(&c->ps_mu);
        pthread_join(c->ps_thread, NULL);
        c->ps_running = false;
        return; /* entries are freed by rlock__pubsub_free() */
    }
}

void rlock__pubsub_free(rlock_client *c)
{
    if (c->ps_ctx) {
        /* Only in a fork()ed child: the parent's thread did not free it.
         * Closing our copy of the socket sends nothing to Redis. */
        redisFree(c->ps_ctx);
        c->ps_ctx = NULL;
    }
    if (!c->chans.slots) {
        return;
    }
    for (size_t i = 0; i < c->chans.nslots; i++) {
        rlock__map_node *n = c->chans.slots[i];
        while (n) {
            rlock__map_node *next = n->next;
            free_chan(c, (rlock__chan *)n);
            n = next;
        }
    }
    rlock__map_destroy(&c->chans);
    close(c->wake_pipe[0]);
    close(c->wake_pipe[1]);
    if (c->pid == getpid()) {
        pthread_mutex_destroy(&c->ps_mu);
    }
}
