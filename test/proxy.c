/* The fault-injecting TCP proxy of proxy.h. Each relayed connection has a
 * queue per direction; data is written on as soon as its release time has
 * come and nothing older waits before it. Commands from other threads are
 * atomics (and a mutex for the needle), and a pipe wakes the relay thread
 * so a drop or a new delay takes effect at once. */
#include "proxy.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TP_MAX 64    /* relayed connections per proxy */
#define TP_BUF 65536 /* one read */
#define TP_NEEDLE 256
#define TP_PREFIX 32
#define TP_REPLY 256

typedef struct chunk {
    struct chunk *next;
    int64_t at; /* release time, CLOCK_MONOTONIC ms */
    size_t len, off;
    char data[];
} chunk;

typedef struct queue {
    chunk *head, *tail;
} queue;

typedef struct conn {
    int fd[2]; /* [TP_REQUESTS]: client side, read for requests; [TP_REPLIES]: server side */
    queue q[2];
    bool cut_armed;    /* close when the server next answers */
    bool answer_armed; /* replace the server's next answer */
    bool delaying;     /* tp_delay_matching matched: hold all that follows */
    bool mute;         /* half-dead: everything read is swallowed */
    bool client_gone;  /* the client closed; held requests still go out */
} conn;

struct tp_proxy {
    int lfd, port, target;
    int wake[2];
    pthread_t th;
    bool started;
    atomic_bool stop;
    atomic_llong delay_until[2], delay_ms[2];
    atomic_uint drop_gen;
    atomic_bool cut_wanted;
    atomic_bool muted;
    atomic_uint mute_gen;
    pthread_mutex_t mu;
    char needle[TP_NEEDLE];
    char prefix[TP_PREFIX];
    /* tp_delay_matching and tp_answer_next, under mu. */
    atomic_llong match_delay_ms;
    char delay_needle[TP_NEEDLE];
    atomic_bool answer_wanted;
    char answer_needle[TP_NEEDLE];
    char answer[TP_REPLY];
    atomic_bool stall_requests;
    atomic_bool deliver_after_close;
    atomic_uint reset_gen;
    atomic_ullong accepted, cuts, delayed, answered, unread;
    conn c[TP_MAX];
    int n;
    char buf[TP_BUF];
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void wake(tp_proxy *p)
{
    char b = 1;
    ssize_t r = write(p->wake[1], &b, 1);
    (void)r; /* a full pipe already wakes the thread */
}

static int tcp_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Writes what is due from q to fd. false: the peer is gone. */
static bool flush_due(queue *q, int fd, int64_t now)
{
    while (q->head && q->head->at <= now) {
        chunk *k = q->head;
        while (k->off < k->len) {
            ssize_t w = send(fd, k->data + k->off, k->len - k->off, MSG_NOSIGNAL);
            if (w < 0 && errno == EINTR) {
                continue;
            }
            if (w <= 0) {
                return false;
            }
            k->off += (size_t)w;
        }
        q->head = k->next;
        if (!q->head) {
            q->tail = NULL;
        }
        free(k);
    }
    return true;
}

static bool enqueue(queue *q, const char *b, size_t n, int64_t at)
{
    chunk *k = malloc(sizeof *k + n);
    if (!k) {
        return false;
    }
    if (q->tail && q->tail->at > at) {
        at = q->tail->at; /* keep the byte order */
    }
    k->next = NULL;
    k->at = at;
    k->len = n;
    k->off = 0;
    memcpy(k->data, b, n);
    if (q->tail) {
        q->tail->next = k;
    } else {
        q->head = k;
    }
    q->tail = k;
    return true;
}

static void queue_clear(queue *q)
{
    while (q->head) {
        chunk *k = q->head;
        q->head = k->next;
        free(k);
    }
    q->tail = NULL;
}

static void conn_close(tp_proxy *p, int i)
{
    close(p->c[i].fd[0]);
    close(p->c[i].fd[1]);
    queue_clear(&p->c[i].q[0]);
    queue_clear(&p->c[i].q[1]);
    p->n--;
    p->c[i] = p->c[p->n];
    memset(&p->c[p->n], 0, sizeof p->c[p->n]);
}

/* Reads from side d of connection i and queues it for the other side.
 * false: close the pair. */
static bool relay(tp_proxy *p, int i, int d, int64_t now)
{
    conn *c = &p->c[i];
    ssize_t k = read(c->fd[d], p->buf, sizeof p->buf);
    if (k == 0 && d == TP_REQUESTS && c->q[TP_REQUESTS].head &&
        atomic_load(&p->deliver_after_close)) {
        /* As TCP does with what was sent before a FIN: the requests held
         * back still reach the server; the answers go nowhere. */
        c->client_gone = true;
        queue_clear(&c->q[TP_REPLIES]);
        return true;
    }
    if (k <= 0) {
        return k < 0 && errno == EINTR;
    }
    if (c->client_gone) {
        return true; /* an answer for a client that has gone */
    }
    if (c->mute) {
        return true; /* the link is up; nothing gets through, ever */
    }
    if (d == TP_REPLIES && c->cut_armed) {
        atomic_fetch_add(&p->cuts, 1);
        return false; /* the request ran; its answer is lost with the link */
    }
    if (d == TP_REPLIES && c->answer_armed) {
        c->answer_armed = false;
        atomic_fetch_add(&p->answered, 1);
        pthread_mutex_lock(&p->mu);
        bool ok = enqueue(&c->q[d], p->answer, strlen(p->answer), now);
        pthread_mutex_unlock(&p->mu);
        return ok;
    }
    int64_t at = now;
    if (d == TP_REQUESTS) {
        pthread_mutex_lock(&p->mu);
        size_t plen = strlen(p->prefix);
        if (atomic_load(&p->cut_wanted) && (size_t)k >= plen &&
            memcmp(p->buf, p->prefix, plen) == 0 &&
            memmem(p->buf, (size_t)k, p->needle, strlen(p->needle)) != NULL) {
            atomic_store(&p->cut_wanted, false);
            c->cut_armed = true;
        }
        if (atomic_load(&p->answer_wanted) &&
            memmem(p->buf, (size_t)k, p->answer_needle, strlen(p->answer_needle)) != NULL) {
            atomic_store(&p->answer_wanted, false);
            c->answer_armed = true;
        }
        int64_t md = atomic_load(&p->match_delay_ms);
        if (md > 0 && (c->delaying || memmem(p->buf, (size_t)k, p->delay_needle,
                                             strlen(p->delay_needle)) != NULL)) {
            c->delaying = true;
            atomic_fetch_add(&p->delayed, 1);
            at = now + md;
        }
        pthread_mutex_unlock(&p->mu);
    }
    if (now < atomic_load(&p->delay_until[d])) {
        int64_t t = now + atomic_load(&p->delay_ms[d]);
        at = t > at ? t : at;
    }
    return enqueue(&c->q[d], p->buf, (size_t)k, at);
}

/* Closes connection i with a FIN, then a reset: the client's socket goes to
 * CLOSE_WAIT, and the reset there sets its error to EPIPE (in ESTABLISHED
 * it would be ECONNRESET), so its next send fails with EPIPE, the error
 * that raises SIGPIPE. */
static void conn_reset(tp_proxy *p, int i)
{
    struct linger lg = {1, 0};
    shutdown(p->c[i].fd[TP_REQUESTS], SHUT_WR);
    setsockopt(p->c[i].fd[TP_REQUESTS], SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    conn_close(p, i);
}

static void *relay_main(void *arg)
{
    tp_proxy *p = arg;
    unsigned seen_gen = atomic_load(&p->drop_gen), seen_mute = atomic_load(&p->mute_gen);
    unsigned seen_reset = atomic_load(&p->reset_gen);
    struct pollfd pf[2 + 2 * TP_MAX];
    while (!atomic_load(&p->stop)) {
        int64_t now = mono_ms();
        unsigned gen = atomic_load(&p->drop_gen);
        if (gen != seen_gen) {
            seen_gen = gen;
            while (p->n > 0) {
                atomic_fetch_add(&p->cuts, 1);
                conn_close(p, p->n - 1);
            }
        }
        gen = atomic_load(&p->reset_gen);
        if (gen != seen_reset) {
            seen_reset = gen;
            while (p->n > 0) {
                atomic_fetch_add(&p->cuts, 1);
                conn_reset(p, p->n - 1);
            }
        }
        uint64_t unread = 0;
        for (int i = 0; i < p->n; i++) {
            int q = 0;
            if (ioctl(p->c[i].fd[TP_REQUESTS], FIONREAD, &q) == 0 && q > 0) {
                unread += (uint64_t)q;
            }
        }
        atomic_store(&p->unread, unread);
        gen = atomic_load(&p->mute_gen);
        if (gen != seen_mute) {
            seen_mute = gen;
            for (int i = 0; i < p->n && atomic_load(&p->muted); i++) {
                p->c[i].mute = true;
                queue_clear(&p->c[i].q[0]); /* what waits is swallowed too */
                queue_clear(&p->c[i].q[1]);
            }
        }
        int timeout = 200;
        for (int i = p->n - 1; i >= 0; i--) {
            bool ok = true;
            if (p->c[i].client_gone && !p->c[i].q[TP_REQUESTS].head) {
                conn_close(p, i); /* all it had sent has gone out */
                continue;
            }
            for (int d = 0; d < 2 && ok; d++) {
                ok = flush_due(&p->c[i].q[d], p->c[i].fd[1 - d], now);
                if (ok && p->c[i].q[d].head) {
                    int64_t left = p->c[i].q[d].head->at - now;
                    if (left < timeout) {
                        timeout = left > 0 ? (int)left : 0;
                    }
                }
            }
            if (!ok) {
                conn_close(p, i);
            }
        }
        pf[0] = (struct pollfd){p->lfd, POLLIN, 0};
        pf[1] = (struct pollfd){p->wake[0], POLLIN, 0};
        bool stalled = atomic_load(&p->stall_requests);
        for (int i = 0; i < p->n; i++) {
            /* fd -1: poll() skips it, and its requests stay unread. */
            pf[2 + 2 * i] =
                (struct pollfd){stalled || p->c[i].client_gone ? -1 : p->c[i].fd[0], POLLIN, 0};
            pf[3 + 2 * i] = (struct pollfd){p->c[i].fd[1], POLLIN, 0};
        }
        int nfds = 2 + 2 * p->n;
        if (poll(pf, (nfds_t)nfds, timeout) <= 0) {
            continue;
        }
        if (pf[1].revents & POLLIN) {
            char b[64];
            ssize_t r = read(p->wake[0], b, sizeof b);
            (void)r;
        }
        now = mono_ms();
        int polled = p->n;
        for (int i = polled - 1; i >= 0; i--) {
            bool ok = true;
            for (int d = 0; d < 2 && ok; d++) {
                if (pf[2 + 2 * i + d].revents) {
                    ok = relay(p, i, d, now);
                }
            }
            if (!ok) {
                conn_close(p, i);
            }
        }
        if (pf[0].revents & POLLIN) {
            int cfd = accept4(p->lfd, NULL, NULL, SOCK_CLOEXEC);
            if (cfd >= 0) {
                atomic_fetch_add(&p->accepted, 1);
                int sfd = p->n < TP_MAX ? tcp_connect(p->target) : -1;
                if (sfd < 0) {
                    close(cfd); /* server down: the client sees a refused link */
                } else {
                    memset(&p->c[p->n], 0, sizeof p->c[p->n]);
                    p->c[p->n].fd[TP_REQUESTS] = cfd;
                    p->c[p->n].fd[TP_REPLIES] = sfd;
                    p->c[p->n].mute = atomic_load(&p->muted);
                    p->n++;
                }
            }
        }
    }
    while (p->n > 0) {
        conn_close(p, p->n - 1);
    }
    return NULL;
}

static tp_proxy *tp_listen(int target_port, bool narrow)
{
    tp_proxy *p = calloc(1, sizeof *p);
    if (!p) {
        return NULL;
    }
    p->target = target_port;
    p->wake[0] = p->wake[1] = -1;
    pthread_mutex_init(&p->mu, NULL);
    p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    /* Narrow: set before listen(), since the window and the segment size
     * are settled in the handshake and accepted sockets inherit both. The
     * smallest receive buffer (the kernel raises 1 to its floor, about
     * 2 KiB) and the smallest segment: the client's kernel sizes its send
     * buffer by the segment size (to about 80 KiB for 88 bytes, against
     * 4 MiB for loopback's 64 KiB segments), so together they hold about
     * 40 KiB that the proxy has not read. */
    int one = 1, min_mss = 88; /* TCP_MIN_MSS */
    if (p->lfd >= 0 && narrow &&
        (setsockopt(p->lfd, SOL_SOCKET, SO_RCVBUF, &one, sizeof one) != 0 ||
         setsockopt(p->lfd, IPPROTO_TCP, TCP_MAXSEG, &min_mss, sizeof min_mss) != 0)) {
        tp_free(p);
        return NULL;
    }
    if (p->lfd < 0 || bind(p->lfd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(p->lfd, 128) != 0 || getsockname(p->lfd, (struct sockaddr *)&a, &al) != 0 ||
        pipe2(p->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        tp_free(p);
        return NULL;
    }
    p->port = ntohs(a.sin_port);
    return p;
}

tp_proxy *tp_new(int target_port)
{
    return tp_listen(target_port, false);
}

tp_proxy *tp_new_narrow(int target_port)
{
    return tp_listen(target_port, true);
}

int tp_start(tp_proxy *p)
{
    if (pthread_create(&p->th, NULL, relay_main, p) != 0) {
        return -1;
    }
    p->started = true;
    return 0;
}

int tp_port(const tp_proxy *p)
{
    return p->port;
}

int tp_listen_fd(const tp_proxy *p)
{
    return p->lfd;
}

void tp_delay(tp_proxy *p, tp_dir dir, int64_t window_ms, int64_t delay_ms)
{
    atomic_store(&p->delay_ms[dir], delay_ms);
    atomic_store(&p->delay_until[dir], mono_ms() + window_ms);
    wake(p);
}

void tp_drop(tp_proxy *p)
{
    atomic_fetch_add(&p->drop_gen, 1);
    wake(p);
}

static void copy(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    if (n >= size) {
        n = size - 1;
    }
    memcpy(dst, src, n);
    dst[n] = '\0';
}

void tp_cut_next_request(tp_proxy *p, const char *prefix, const char *needle)
{
    pthread_mutex_lock(&p->mu);
    copy(p->prefix, sizeof p->prefix, prefix);
    copy(p->needle, sizeof p->needle, needle);
    atomic_store(&p->cut_wanted, true);
    pthread_mutex_unlock(&p->mu);
}

void tp_cut_next(tp_proxy *p, const char *needle)
{
    tp_cut_next_request(p, "", needle);
}

void tp_delay_matching(tp_proxy *p, const char *needle, int64_t delay_ms)
{
    pthread_mutex_lock(&p->mu);
    copy(p->delay_needle, sizeof p->delay_needle, needle);
    atomic_store(&p->match_delay_ms, delay_ms);
    pthread_mutex_unlock(&p->mu);
}

void tp_answer_next(tp_proxy *p, const char *needle, const char *reply)
{
    pthread_mutex_lock(&p->mu);
    copy(p->answer_needle, sizeof p->answer_needle, needle);
    copy(p->answer, sizeof p->answer, reply);
    atomic_store(&p->answer_wanted, true);
    pthread_mutex_unlock(&p->mu);
}

void tp_stall_requests(tp_proxy *p, bool on)
{
    atomic_store(&p->stall_requests, on);
    wake(p);
}

void tp_reset(tp_proxy *p)
{
    atomic_fetch_add(&p->reset_gen, 1);
    wake(p);
}

uint64_t tp_delayed(const tp_proxy *p)
{
    return atomic_load(&((tp_proxy *)p)->delayed);
}

uint64_t tp_answered(const tp_proxy *p)
{
    return atomic_load(&((tp_proxy *)p)->answered);
}

uint64_t tp_unread(const tp_proxy *p)
{
    return atomic_load(&((tp_proxy *)p)->unread);
}

void tp_mute(tp_proxy *p, bool on)
{
    atomic_store(&p->muted, on);
    atomic_fetch_add(&p->mute_gen, 1);
    wake(p);
}

uint64_t tp_accepted(const tp_proxy *p)
{
    return atomic_load(&((tp_proxy *)p)->accepted);
}

uint64_t tp_cuts(const tp_proxy *p)
{
    return atomic_load(&((tp_proxy *)p)->cuts);
}

void tp_free(tp_proxy *p)
{
    if (!p) {
        return;
    }
    if (p->started) {
        atomic_store(&p->stop, true);
        wake(p);
        pthread_join(p->th, NULL);
    }
    if (p->lfd >= 0) {
        close(p->lfd);
    }
    if (p->wake[0] >= 0) {
        close(p->wake[0]);
        close(p->wake[1]);
    }
    pthread_mutex_destroy(&p->mu);
    free(p);
}

void tp_deliver_after_close(tp_proxy *p, bool on)
{
    atomic_store(&p->deliver_after_close, on);
    wake(p);
}
