/* The pub/sub thread and the waiter entries.
 *
 * One connection per client carries every SUBSCRIBE. Only this thread reads
 * or writes it; other threads ask for (un)subscriptions by marking an entry
 * dirty and writing a byte to a pipe that the thread polls with the socket.
 *
 * One entry per channel is shared by all local waiters of that lock name.
 * Waiters queue in arrival order; a "0" message wakes the oldest waiter that
 * is not already awake (RLOCK__WAKE_ONE kinds), "1" wakes them all, and a
 * message that finds no one to wake is kept as a permit for the next waiter
 * to go to sleep (so a release that lands between a failed attempt and the
 * sleep is not lost). A waiter that got a wake-up and leaves without using
 * it (its wait ran out, it was cancelled, its attempt failed for another
 * reason than "held elsewhere") passes it on, or the next one would sleep
 * through a free lock.
 *
 * The mutex is never held across a system call on the connection: the
 * thread formats (un)subscribes under it and sends them after (through the
 * link, which never raises SIGPIPE). Over TLS, poll() does not see bytes
 * OpenSSL has already decrypted and buffered, so every read drains the
 * link until it has nothing more.
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
#include <sys/socket.h>
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
    bool woken; /* a wake-up arrived since it last slept */
    bool owes;  /* it holds a release's wake-up that no attempt used yet */
    uint64_t owed_at; /* the channel's wake sequence when it was given */
    rlock_cancel *cancel;
} rlock__waiter;

/* One (un)subscribe sent and not yet answered. Its entry stays while the
 * answer is due (outstanding > 0), and a reset empties the ring first. */
struct rlock__sent {
    rlock__chan *ch;
    bool sub;
};

struct rlock__chan {
    rlock__map_node node; /* key = channel */
    char *name;
    size_t len;
    int refs;
    int64_t permits;
    int64_t idle_since;
    int64_t hint_until; /* holder's lease end as the latest failed attempt saw it */
    /* Counts release messages; a waiter notes it before an attempt, so a
     * wake-up that came after the note is not taken as used by an attempt
     * that Redis ran before the release (see rlock__chan_used_wake). */
    uint64_t wake_seq;
    uint64_t permit_seq; /* wake_seq of the latest message kept as a permit */
    /* Unique within the client, renewed each time the entry stops being
     * confirmed (an (un)subscribe sent, a reset, a refusal): an entry
     * confirmed with the same epoch at two instants stayed subscribed on
     * one connection in between (rlock__chan_peek). */
    uint64_t epoch;
    rlock__wake wake;
    rlock__waiter *head, *tail;
    pthread_cond_t sub_cv; /* subscription confirmed or state reset */
    int outstanding;       /* (un)subscribe replies still due */
    bool sent_sub;         /* the last command sent was SUBSCRIBE */
    bool confirmed;
    bool was_reset; /* subscription lost: wake everyone once it is back */
    /* The server refused the last SUBSCRIBE (an ACL without the channel):
     * waiters return this status instead of sleeping on leases. */
    rlock_status refused;
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

/* A release's wake-up for the oldest waiter not already awake (one in the
 * middle of an attempt is not: it slept and was woken before), or a permit
 * for the next to sleep. */
static void wake_one(rlock__chan *ch)
{
    for (rlock__waiter *w = ch->head; w; w = w->next) {
        if (!w->woken) {
            w->woken = true;
            w->owes = true;
            w->owed_at = ch->wake_seq;
            pthread_cond_signal(&w->cv);
            return;
        }
    }
    if (ch->permits < MAX_PERMITS) {
        ch->permits++;
        ch->permit_seq = ch->wake_seq;
    }
}

/* Wakes everyone: for a release (owes: each must retry), or for a reset
 * or close (they retry anyway, owing nothing). */
static void wake_all_as(rlock__chan *ch, bool release)
{
    for (rlock__waiter *w = ch->head; w; w = w->next) {
        w->woken = true;
        if (release) {
            w->owes = true;
            w->owed_at = ch->wake_seq;
        }
        pthread_cond_signal(&w->cv);
    }
    pthread_cond_broadcast(&ch->sub_cv);
}

static void wake_all(rlock__chan *ch)
{
    wake_all_as(ch, false);
}

/* The subscription is no longer known to be live: messages may be missed
 * from here until it is confirmed again. ps_mu held. */
static void unconfirm(rlock_client *c, rlock__chan *ch)
{
    ch->confirmed = false;
    ch->epoch = ++c->ps_epoch;
}

static bool sent_push(rlock_client *c, rlock__chan *ch, bool sub)
{
    if (c->ps_sent_n == c->ps_sent_cap) {
        size_t cap = c->ps_sent_cap ? c->ps_sent_cap * 2 : 16;
        rlock__sent *v = malloc(cap * sizeof *v);
        if (!v) {
            return false;
        }
        for (size_t i = 0; i < c->ps_sent_n; i++) {
            v[i] = c->ps_sent[(c->ps_sent_head + i) % c->ps_sent_cap];
        }
        free(c->ps_sent);
        c->ps_sent = v;
        c->ps_sent_cap = cap;
        c->ps_sent_head = 0;
    }
    c->ps_sent[(c->ps_sent_head + c->ps_sent_n) % c->ps_sent_cap] = (rlock__sent){ch, sub};
    c->ps_sent_n++;
    return true;
}

/* The oldest unanswered command; false when none is due. */
static bool sent_pop(rlock_client *c, rlock__sent *out)
{
    if (c->ps_sent_n == 0) {
        return false;
    }
    *out = c->ps_sent[c->ps_sent_head];
    c->ps_sent_head = (c->ps_sent_head + 1) % c->ps_sent_cap;
    c->ps_sent_n--;
    return true;
}

static void free_chan(rlock_client *c, rlock__chan *ch)
{
    if (c->pid == getpid()) {
        pthread_cond_destroy(&ch->sub_cv);
    }
    free(ch);
}

/* ---- API for waiting threads ----------------------------------------- */

/* Takes a reference on channel's entry, subscribing if it is the first.
 * Called with ps_mu held. */
static rlock_status chan_ref(rlock_client *c, const char *channel, size_t len, rlock__chan **out)
{
    if (c->ps_stop) {
        return rlock__fail(RLOCK_ECLOSED, "the client is closing");
    }
    rlock__chan *ch = (rlock__chan *)rlock__map_get(&c->chans, channel, len);
    if (!ch) {
        ch = calloc(1, sizeof *ch + len + 1);
        if (!ch) {
            return rlock__fail(RLOCK_ENOMEM, "out of memory for a subscription");
        }
        ch->name = (char *)(ch + 1);
        memcpy(ch->name, channel, len);
        ch->len = len;
        ch->node.key = ch->name;
        ch->node.keylen = len;
        if (rlock__map_put(&c->chans, &ch->node) != RLOCK_OK) {
            free(ch);
            return rlock__fail(RLOCK_ENOMEM, "out of memory for a subscription");
        }
        rlock__cond_init(&ch->sub_cv);
        ch->epoch = ++c->ps_epoch;
    }
    if (ch->refs++ == 0) {
        /* Messages kept while nobody waited are stale: the first waiter
         * retries after subscribing anyway. A refusal too: the
         * subscription is asked for again (the ACL may have changed). */
        ch->permits = 0;
        ch->hint_until = -1;
        ch->refused = RLOCK_OK;
        if (!ch->sent_sub) {
            mark_dirty(c, ch);
        }
    }
    *out = ch;
    return RLOCK_OK;
}

static rlock_status waiter_status(rlock_client *c, rlock__chan *ch, rlock__waiter *w)
{
    if (c->ps_stop) {
        return rlock__fail(RLOCK_ECLOSED, "the client is closing");
    }
    if (rlock__cancelled(w->cancel)) {
        return rlock__fail(RLOCK_ECANCELED, "the wait was cancelled");
    }
    if (ch->refused != RLOCK_OK) {
        return rlock__fail(ch->refused, "the server refused SUBSCRIBE %.100s%s", ch->name,
                           ch->refused == RLOCK_EPERM ? " (its ACL denies the channel)" : "");
    }
    return RLOCK_OK;
}

rlock_status rlock__chan_wait_subscribed(rlock_client *c, rlock__chan *ch, rlock__waiter *w,
                                         int64_t deadline_ms)
{
    rlock_status st = RLOCK_OK;
    pthread_mutex_lock(&c->ps_mu);
    while (!ch->confirmed && (st = waiter_status(c, ch, w)) == RLOCK_OK) {
        if (!rlock__cond_wait_until(&ch->sub_cv, &c->ps_mu, deadline_ms)) {
            st = RLOCK_ETIMEDOUT;
            break;
        }
    }
    if (st == RLOCK_OK || st == RLOCK_ETIMEDOUT) {
        rlock_status ws = waiter_status(c, ch, w);
        st = ws != RLOCK_OK ? ws : st;
    }
    pthread_mutex_unlock(&c->ps_mu);
    return st;
}

void rlock__chan_cancel(rlock_client *c, rlock__chan *ch, rlock__waiter *w)
{
    pthread_mutex_lock(&c->ps_mu);
    pthread_cond_signal(&w->cv);
    pthread_cond_broadcast(&ch->sub_cv);
    pthread_mutex_unlock(&c->ps_mu);
}

void rlock__waiter_set_cancel(rlock__waiter *w, rlock_cancel *t)
{
    w->cancel = t; /* before the waiter sleeps; read under ps_mu after */
}

void rlock__chan_saw_lease(rlock_client *c, rlock__chan *ch, rlock__waiter *w, int64_t until_ms)
{
    (void)w;
    pthread_mutex_lock(&c->ps_mu);
    /* Replaced, never stretched: a hint is only as good as the latest
     * attempt. (Keeping the longest lease ever seen made newcomers sleep
     * through a short one.) */
    ch->hint_until = until_ms;
    pthread_mutex_unlock(&c->ps_mu);
}

uint64_t rlock__chan_mark(rlock_client *c, rlock__chan *ch)
{
    pthread_mutex_lock(&c->ps_mu);
    uint64_t mark = ch->wake_seq;
    pthread_mutex_unlock(&c->ps_mu);
    return mark;
}

void rlock__chan_used_wake(rlock_client *c, rlock__chan *ch, rlock__waiter *w, uint64_t mark)
{
    (void)ch;
    pthread_mutex_lock(&c->ps_mu);
    /* A wake-up given after the mark may be for a release that Redis ran
     * after this attempt: the attempt did not use it. It stays owed (the
     * waiter is still woken, so it retries at once, and passes it on if
     * it leaves now). At worst one more attempt that answers "held". */
    if (w->owed_at <= mark) {
        w->owes = false;
    }
    pthread_mutex_unlock(&c->ps_mu);
}

bool rlock__chan_queued(rlock_client *c, const char *channel, size_t len)
{
    pthread_mutex_lock(&c->ps_mu);
    rlock__chan *ch = (rlock__chan *)rlock__map_get(&c->chans, channel, len);
    bool queued = ch && ch->head;
    pthread_mutex_unlock(&c->ps_mu);
    return queued;
}

void rlock__chan_peek(rlock_client *c, const char *channel, size_t len, rlock__chan_seen *out)
{
    pthread_mutex_lock(&c->ps_mu);
    rlock__chan *ch = (rlock__chan *)rlock__map_get(&c->chans, channel, len);
    out->epoch = ch && ch->confirmed ? ch->epoch : 0;
    out->seq = ch ? ch->wake_seq : 0;
    pthread_mutex_unlock(&c->ps_mu);
}

rlock_status rlock__chan_join(rlock_client *c, const char *channel, size_t len, rlock__wake wake,
                              rlock__chan **out_ch, rlock__waiter **out_w, bool *queued_behind,
                              int64_t *hint_until, const rlock__chan_seen *seen, bool *live)
{
    rlock__waiter *w = calloc(1, sizeof *w);
    if (!w) {
        return rlock__fail(RLOCK_ENOMEM, "out of memory for a waiter");
    }
    rlock__cond_init(&w->cv);
    pthread_mutex_lock(&c->ps_mu);
    rlock__chan *ch = NULL;
    rlock_status st = chan_ref(c, channel, len, &ch);
    if (st != RLOCK_OK) {
        pthread_mutex_unlock(&c->ps_mu);
        pthread_cond_destroy(&w->cv);
        free(w);
        return st;
    }
    ch->wake = wake;
    /* Subscribed since before the caller's attempt went out, on the same
     * connection, and no message since: a release that ran after the
     * attempt publishes to a live subscription, and its message, read
     * from now on, finds this waiter queued (a message that came before
     * would have moved wake_seq). */
    *live = seen && seen->epoch != 0 && ch->epoch == seen->epoch && ch->confirmed &&
            ch->wake_seq == seen->seq;
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
    *out_ch = ch;
    *out_w = w;
    return RLOCK_OK;
}

void rlock__chan_leave(rlock_client *c, rlock__chan *ch, rlock__waiter *w, bool acquired,
                       int64_t lease_end_ms)
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
    /* A waiter that holds an unused wake-up and leaves without the lock
     * passes it on, or the next waiter could sleep through a free lock. */
    if (!acquired && w->owes) {
        wake_one(ch);
    }
    if (acquired) {
        /* The lock changed hands here: the waiters behind now wait for this
         * lease, not for the one they last saw (which may be far longer). */
        ch->hint_until = lease_end_ms;
        for (rlock__waiter *x = ch->head; x; x = x->next) {
            pthread_cond_signal(&x->cv);
        }
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
    if (!w->woken && ch->permits > 0) {
        ch->permits--;
        w->woken = true;
        w->owes = true;
        w->owed_at = ch->permit_seq;
    }
    rlock_status st;
    while (!w->woken && (st = waiter_status(c, ch, w)) == RLOCK_OK) {
        /* At the latest when the holder's lease ends as this process last
         * saw it: the hint may shorten while this waiter sleeps. */
        int64_t until = rlock__min_deadline(deadline_ms, ch->hint_until);
        if (!rlock__cond_wait_until(&w->cv, &c->ps_mu, until)) {
            break;
        }
    }
    w->woken = false;
    st = waiter_status(c, ch, w);
    pthread_mutex_unlock(&c->ps_mu);
    return st;
}

/* ---- the thread ------------------------------------------------------ */

static void reset_all(rlock__map_node *n, void *arg)
{
    rlock__chan *ch = (rlock__chan *)n;
    rlock_client *c = arg;
    ch->outstanding = 0;
    ch->sent_sub = false;
    unconfirm(c, ch);
    ch->was_reset = true;
    wake_all(ch);
}

/* Called with ps_mu held after the connection was lost or re-made. */
static void connection_reset(rlock_client *c)
{
    c->ps_sent_n = 0; /* nothing is due on a new connection */
    c->ps_sent_head = 0;
    rlock__map_each(&c->chans, reset_all, c);
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

/* Frees the entries whose SUBSCRIBE was refused once their last waiter
 * has left (nothing is subscribed, nothing due). ps_mu held. */
static void drop_refused(rlock_client *c)
{
    for (size_t i = 0; i < c->chans.nslots; i++) {
        rlock__map_node **p = &c->chans.slots[i];
        while (*p) {
            rlock__chan *ch = (rlock__chan *)*p;
            if (ch->refused != RLOCK_OK && ch->refs == 0 && !ch->sent_sub &&
                ch->outstanding == 0 && !ch->in_dirty) {
                *p = (*p)->next;
                c->chans.count--;
                free_chan(c, ch);
                continue;
            }
            p = &(*p)->next;
        }
    }
}

/* Bytes formatted under ps_mu and sent by the thread without it. */
typedef struct outbuf {
    char *buf;
    size_t len, cap;
} outbuf;

static bool out_append(outbuf *o, const char *p, size_t n)
{
    if (o->len + n > o->cap) {
        size_t cap = (o->len + n) * 2;
        char *b = realloc(o->buf, cap);
        if (!b) {
            return false;
        }
        o->buf = b;
        o->cap = cap;
    }
    memcpy(o->buf + o->len, p, n);
    o->len += n;
    return true;
}

/* Sends what it can without blocking; false when the link is broken. What
 * is not taken stays at the front of the buffer, to be offered again first
 * (over TLS it may already be in a record). */
static bool out_send(outbuf *o, rlock__link *link)
{
    while (o->len > 0) {
        rlock_status st;
        int n = rlock__link_send_some(link, o->buf, o->len, &st);
        if (n < 0) {
            return false;
        }
        if (n == 0) {
            return true;
        }
        memmove(o->buf, o->buf + n, o->len - (size_t)n);
        o->len -= (size_t)n;
    }
    return true;
}

/* Reads everything that has arrived, TLS buffers included; false when the
 * link is broken. */
static bool drain(rlock__link *link)
{
    rlock_status st;
    int n;
    while ((n = rlock__link_read(link, false, 0, &st)) > 0) {
    }
    return n == 0;
}

/* Formats the (un)subscribes the dirty entries need. ps_mu held. */
static void flush_dirty(rlock_client *c, outbuf *o)
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
        char *cmd = NULL;
        long long n = redisFormatCommandArgv(&cmd, 2, argv, lens);
        bool ok = n > 0 && cmd && sent_push(c, ch, want);
        if (ok && !out_append(o, cmd, (size_t)n)) {
            c->ps_sent_n--; /* not sent after all */
            ok = false;
        }
        if (cmd) {
            redisFreeCommand(cmd);
        }
        if (!ok) {
            mark_dirty(c, ch); /* out of memory: try again next turn */
            return;
        }
        ch->sent_sub = want;
        unconfirm(c, ch);
        ch->outstanding++;
    }
}

/* The server refused the oldest command due: for a SUBSCRIBE (an ACL
 * without the channel, NOPERM), its waiters are told instead of sleeping
 * on leases for a message that cannot come. */
static void on_refusal(rlock_client *c, const redisReply *r)
{
    rlock__sent s;
    if (!sent_pop(c, &s)) {
        return;
    }
    rlock__chan *ch = s.ch;
    if (ch->outstanding > 0) {
        ch->outstanding--;
    }
    if (s.sub) {
        rlock_status st = rlock__error_reply(r); /* EPERM, or EREDIS */
        if (ch->sent_sub && ch->outstanding == 0) {
            ch->sent_sub = false;
            unconfirm(c, ch);
            ch->refused = st;
            wake_all(ch);
        }
    }
    if (ch->outstanding == 0 && !ch->sent_sub && ch->refs == 0 && !ch->in_dirty) {
        rlock__map_del(&c->chans, &ch->node);
        free_chan(c, ch);
    }
}

void rlock__pubsub_on_reply(rlock_client *c, const redisReply *r)
{
    if (r->type == REDIS_REPLY_ERROR) {
        on_refusal(c, r);
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING) {
        return;
    }
    const char *kind = r->element[0]->str;
    bool confirm = strcmp(kind, "subscribe") == 0 || strcmp(kind, "unsubscribe") == 0;
    if (confirm) {
        rlock__sent s;
        sent_pop(c, &s); /* answered: no longer due */
    }
    rlock__chan *ch =
        (rlock__chan *)rlock__map_get(&c->chans, r->element[1]->str, (size_t)r->element[1]->len);
    if (!ch) {
        return;
    }
    if (strcmp(kind, "message") == 0) {
        rlock__stat_add(c, RLOCK_STAT_WAKEUPS, 1);
        ch->wake_seq++;
        const redisReply *m = r->element[2];
        if ((m->type == REDIS_REPLY_STRING && m->len == 1 && m->str[0] == '1') ||
            ch->wake == RLOCK__WAKE_ALL) {
            wake_all_as(ch, true);
        } else {
            wake_one(ch);
        }
    } else if (confirm) {
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
    rlock__link *ctx = c->ps_link; /* opened by rlock__pubsub_start() */
    int64_t backoff = 0, retry_at = 0, next_sweep = rlock__now_ms() + SWEEP_MS;
    outbuf out = {NULL, 0, 0};

    pthread_mutex_lock(&c->ps_mu);
    while (!c->ps_stop) {
        int64_t now = rlock__now_ms();
        if (!ctx && now >= retry_at) {
            pthread_mutex_unlock(&c->ps_mu);
            rlock__link *nc = NULL;
            rlock_status st = rlock__connect(c, &nc, -1);
            pthread_mutex_lock(&c->ps_mu);
            if (st == RLOCK_OK) {
                ctx = nc;
                c->ps_link = ctx;
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
            drop_refused(c);
            next_sweep = now + SWEEP_MS;
        }
        bool broken = false;
        if (ctx) {
            flush_dirty(c, &out);
        }
        pthread_mutex_unlock(&c->ps_mu);

        if (ctx) {
            broken = !out_send(&out, ctx);
        }
        if (!broken) {
            /* A TLS write may wait for the peer's bytes (wants_read), and
             * a TLS read for room to write (wants_write). */
            bool want_out = ctx && ((out.len > 0 && !ctx->wants_read) || ctx->wants_write);
            short events = POLLIN | (want_out ? POLLOUT : 0);
            struct pollfd pfd[2] = {{c->wake_pipe[0], POLLIN, 0}, {ctx ? ctx->fd : -1, events, 0}};
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
            if (rc > 0 && ctx &&
                (pfd[1].revents & (POLLIN | POLLHUP | POLLERR) ||
                 (ctx->wants_write && (pfd[1].revents & POLLOUT)))) {
                broken = !drain(ctx);
            }
        }

        pthread_mutex_lock(&c->ps_mu);
        if (ctx && !broken) {
            void *rep = NULL;
            int rc;
            while ((rc = redisReaderGetReply(ctx->reader, &rep)) == REDIS_OK && rep) {
                rlock__pubsub_on_reply(c, rep);
                freeReplyObject(rep);
                rep = NULL;
            }
            broken = rc != REDIS_OK;
        }
        if (broken) {
            c->ps_link = NULL; /* before the free: a fork() in between leaks, never frees twice */
            rlock__link_close(ctx);
            ctx = NULL;
            out.len = 0;
            retry_at = 0;
            /* Wake every waiter: they retry now and then sleep on the TTL
             * until the subscription is back. */
            connection_reset(c);
        }
    }
    c->ps_link = NULL;
    pthread_mutex_unlock(&c->ps_mu);
    rlock__link_close(ctx);
    free(out.buf);
    return NULL;
}

/* A lock channel nobody publishes to: SUBSCRIBE and UNSUBSCRIBE of it
 * change nothing for anyone, and tell whether the server's ACL lets this
 * user wait on lock channels (Redis 7 gives new users no channel at all,
 * acl-pubsub-default resetchannels). */
#define PROBE_CHANNEL "redisson_lock__channel:{rlock:acl-probe}"

static rlock_status probe_channels(rlock_client *c)
{
    const char *sv[2] = {"SUBSCRIBE", PROBE_CHANNEL}, *uv[2] = {"UNSUBSCRIBE", PROBE_CHANNEL};
    size_t sl[2] = {9, sizeof PROBE_CHANNEL - 1}, ul[2] = {11, sizeof PROBE_CHANNEL - 1};
    char *cmds[2] = {NULL, NULL};
    long long lens[2] = {redisFormatCommandArgv(&cmds[0], 2, sv, sl),
                         redisFormatCommandArgv(&cmds[1], 2, uv, ul)};
    redisReply *rep[2] = {NULL, NULL};
    rlock_status st = RLOCK_ENOMEM;
    if (lens[0] > 0 && lens[1] > 0 && cmds[0] && cmds[1]) {
        rlock__conn conn = {c->ps_link, true, false};
        st = rlock__conn_exchange(&conn, 2, cmds, lens, rep,
                                  rlock__now_ms() + c->cfg.command_timeout_ms, -1);
    } else {
        rlock__fail(st, "out of memory for a command");
    }
    if (st == RLOCK_OK && rep[0]->type == REDIS_REPLY_ERROR &&
        rlock__error_reply(rep[0]) == RLOCK_EPERM) {
        /* Any other refusal (a proxy without pub/sub) leaves waiters to
         * sleep on leases, as before. */
        st = rlock__fail(RLOCK_EPERM, "SUBSCRIBE %s: %.200s", PROBE_CHANNEL, rep[0]->str);
    }
    for (int i = 0; i < 2; i++) {
        if (rep[i]) {
            freeReplyObject(rep[i]);
        }
        if (cmds[i]) {
            redisFreeCommand(cmds[i]);
        }
    }
    return st;
}

rlock_status rlock__pubsub_start(rlock_client *c)
{
    /* The first connection is made here, by the caller of
     * rlock_client_new(): a client that cannot open it is not created, the
     * first waiter does not pay for it, and a fork() right after
     * rlock_client_new() cannot catch the thread half-way through a
     * connect (whose memory the child could not free). */
    rlock_status st = rlock__connect(c, &c->ps_link, -1);
    if (st == RLOCK_OK) {
        st = probe_channels(c);
    }
    if (st != RLOCK_OK) {
        rlock__link_close(c->ps_link);
        c->ps_link = NULL;
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
    if (rlock__thread_start(&c->ps_thread, pubsub_main, c) != 0) {
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
    rlock__link_close(c->ps_link);
    c->ps_link = NULL;
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
    if (c->ps_link) {
        /* Only in a fork()ed child: the parent's thread did not free it.
         * Closing our copy of the socket sends nothing to Redis (no TLS
         * close_notify either: the link knows it is not its opener's). */
        rlock__link_close(c->ps_link);
        c->ps_link = NULL;
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
    free(c->ps_sent);
    c->ps_sent = NULL;
    close(c->wake_pipe[0]);
    close(c->wake_pipe[1]);
    if (c->pid == getpid()) {
        pthread_mutex_destroy(&c->ps_mu);
    }
}
