/* One link to Redis: a socket we open ourselves, OpenSSL on top of it for
 * rediss:// URLs, and a hiredis reply reader. hiredis 0.14 (Debian 12) has
 * no TLS and no pluggable I/O, so the library owns the socket and keeps of
 * hiredis only what 0.14 and 1.x share: the reader and the formatter.
 *
 * The promises of the connection layer, and how each is kept here:
 *
 * - No SIGPIPE, ever, whichever thread writes: every byte goes out through
 *   send() with MSG_NOSIGNAL. TLS records too: OpenSSL's socket BIO writes
 *   with write(), which raises SIGPIPE on a connection the server closed,
 *   so the SSL object sits on a small BIO method of our own (bio_*)
 *   whose write is send(MSG_NOSIGNAL | MSG_DONTWAIT) and whose read is
 *   recv(MSG_DONTWAIT). No process-wide signal disposition is touched.
 * - Deadlines from our clock only: the connect is non-blocking and polled
 *   against the deadline, so is the TLS handshake. Over plain TCP a reply
 *   is read with blocking recv() calls of at most RECV_SLICE_MS
 *   (SO_RCVTIMEO): each returns what came, so the caller's loop checks its
 *   own deadline between them and the common case costs one system call
 *   per reply; with less than two slices left, poll() waits for exactly
 *   what is left, so no wait ends past its deadline. OpenSSL never blocks: a blocking SSL_read() would call
 *   recv() again and again until a whole record is in, so a server that
 *   trickles a record in bytes, each inside the slice, would hold the
 *   caller far past its deadline. Every TLS read is poll() on the socket
 *   with the time left, then SSL_read() on a BIO that does not wait.
 *   Error text is never parsed.
 * - Close-on-exec: the socket is made with SOCK_CLOEXEC, so a fork()+exec()
 *   of the application never inherits it, not even in a race with another
 *   thread's exec.
 * - fork(): a link belongs to the process that opened it (pid). Closed in
 *   any other process (a fork()ed child freeing its copy of a client) it
 *   only closes the child's descriptor: no SSL_shutdown, whose close_notify
 *   would end the parent's TLS session on the shared socket, and no
 *   SSL_free, which takes locks of the SSL_CTX a parent thread may have
 *   held at the instant of fork(); the SSL object is left allocated.
 *
 * getaddrinfo() is not bounded by the deadline (it cannot be, short of a
 * thread per lookup), as it was not with hiredis; a name in /etc/hosts or
 * an address literal costs no lookup. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "internal.h"

/* The socket's receive timeout: a blocking recv() returns within it, so a
 * reader waiting for a reply checks its deadline at least this often. */
#define RECV_SLICE_MS 100
/* TCP keepalive, as hiredis set it: probes after 15 s idle, every 5 s. */
#define KEEPALIVE_IDLE_S 15
#define KEEPALIVE_INTVL_S 5
#define KEEPALIVE_CNT 3

static int poll_ms(int64_t deadline_ms)
{
    int64_t left = deadline_ms - rlock__now_ms();
    if (left <= 0) {
        return 0;
    }
    return left > INT_MAX ? INT_MAX : (int)left;
}

/* Waits for events on fd until deadline_ms; false when the time ran out. */
static bool wait_fd(int fd, short events, int64_t deadline_ms)
{
    for (;;) {
        int ms = poll_ms(deadline_ms);
        if (ms == 0) {
            return false;
        }
        struct pollfd p = {fd, events, 0};
        int rc = poll(&p, 1, ms);
        if (rc > 0) {
            return true;
        }
        if (rc < 0 && errno != EINTR) {
            return true; /* let the next call report the error */
        }
    }
}

/* ---- the BIO: OpenSSL's bytes through send(MSG_NOSIGNAL) and recv() ---- */

static int bio_write(BIO *b, const char *buf, int len)
{
    rlock__link *l = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    ssize_t n;
    do {
        n = send(l->fd, buf, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        BIO_set_retry_write(b);
    } else if (n < 0) {
        l->sys_err = errno;
    }
    return (int)n;
}

static int bio_read(BIO *b, char *buf, int len)
{
    rlock__link *l = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    ssize_t n;
    do {
        n = recv(l->fd, buf, (size_t)len, MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    /* A failure's errno is kept here: by the time OpenSSL returns, errno
     * may be a stale EAGAIN, and a FIN and a reset both come back as
     * SSL_ERROR_SYSCALL. */
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        BIO_set_retry_read(b);
    } else if (n < 0) {
        l->sys_err = errno;
    }
    return (int)n;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)b;
    (void)num;
    (void)ptr;
    /* Nothing is buffered in this BIO: a flush has nothing to do. Every
     * other control (kTLS, pending counts, EOF) is "not supported". */
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static BIO_METHOD *bio_method;
static pthread_once_t bio_once = PTHREAD_ONCE_INIT;

static void bio_method_make(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "rlock socket");
    if (m && BIO_meth_set_write(m, bio_write) && BIO_meth_set_read(m, bio_read) &&
        BIO_meth_set_ctrl(m, bio_ctrl)) {
        bio_method = m; /* kept for the life of the process */
    } else if (m) {
        BIO_meth_free(m);
    }
}

/* ---- the TLS context of a client -------------------------------------- */

/* The reason of the thread's OpenSSL errors, or fallback, and clears
 * them. *alert (when not NULL): whether one of them is a fatal alert from
 * the peer, which OpenSSL files as SSL_AD_REASON_OFFSET + its number
 * ("tlsv13 alert certificate required", "sslv3 alert bad certificate"):
 * the server's TLS refusing us, which no retry changes, unlike a close or
 * a reset without one. The alert's text is the one given, when there is
 * one; else the latest error's. */
static const char *ssl_reason_of(char *buf, size_t size, const char *fallback, bool *alert)
{
    unsigned long e, pick = 0;
    bool found = false;
    while ((e = ERR_get_error()) != 0) {
        bool is_alert =
            ERR_GET_LIB(e) == ERR_LIB_SSL && ERR_GET_REASON(e) >= SSL_AD_REASON_OFFSET;
        if (is_alert || !found) {
            pick = e;
        }
        found = found || is_alert;
    }
    const char *r = pick ? ERR_reason_error_string(pick) : NULL;
    snprintf(buf, size, "%s", r ? r : fallback);
    if (alert) {
        *alert = found;
    }
    return buf;
}

static const char *ssl_reason(char *buf, size_t size, const char *fallback)
{
    return ssl_reason_of(buf, size, fallback, NULL);
}

/* The server asked for a client certificate and none is configured. TLS
 * 1.3 finishes the client's handshake before the server judges that, so a
 * refusal comes later, as an alert with the first reply; this lets the
 * connect name the likely cause. Only the alert makes it a refusal: a
 * server with optional client certificates asks too, and takes us. */
static int no_client_cert(SSL *ssl, X509 **x509, EVP_PKEY **pkey)
{
    (void)x509;
    (void)pkey;
    rlock__link *l = SSL_get_app_data(ssl);
    if (l) {
        l->cert_requested = true;
    }
    return 0;
}

rlock_status rlock__tls_init(rlock_client *c)
{
    const rlock_config *cfg = &c->cfg;
    bool any = cfg->tls_ca_file || cfg->tls_ca_dir || cfg->tls_cert_file || cfg->tls_key_file ||
               cfg->tls_server_name || cfg->tls_insecure;
    if (!c->ep.tls) {
        if (any) {
            /* TLS settings with a plain URL would send the password and
             * every lock in clear text while the caller believes otherwise. */
            return rlock__fail(RLOCK_EINVAL,
                               "TLS settings given for a URL without TLS: use rediss://");
        }
        return RLOCK_OK;
    }
    if (cfg->tls_key_file && !cfg->tls_cert_file) {
        return rlock__fail(RLOCK_EINVAL, "tls_key_file without tls_cert_file");
    }
    /* OpenSSL says "system lib" for a file it cannot open: say why. */
    const char *files[] = {cfg->tls_ca_file, cfg->tls_ca_dir, cfg->tls_cert_file,
                           cfg->tls_key_file};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        if (files[i] && access(files[i], R_OK) != 0) {
            return rlock__fail(RLOCK_EINVAL, "TLS file %.200s: %s", files[i], strerror(errno));
        }
    }
    pthread_once(&bio_once, bio_method_make);
    ERR_clear_error();
    SSL_CTX *ctx = bio_method ? SSL_CTX_new(TLS_client_method()) : NULL;
    if (!ctx) {
        return rlock__fail(RLOCK_ENOMEM, "cannot make a TLS context");
    }
    char why[200];
    rlock_status st = RLOCK_OK;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* Partial writes and a moving buffer: the pub/sub thread sends what the
     * socket takes and keeps the rest at the front of its buffer. An EOF
     * without close_notify is a closed connection, as on a plain socket: a
     * RESP reply is complete or it is not, so truncation cannot pass. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_verify(ctx, cfg->tls_insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    if (!cfg->tls_cert_file) {
        SSL_CTX_set_client_cert_cb(ctx, no_client_cert);
    }
    if (cfg->tls_ca_file || cfg->tls_ca_dir) {
        if (SSL_CTX_load_verify_locations(ctx, cfg->tls_ca_file, cfg->tls_ca_dir) != 1) {
            st = rlock__fail(RLOCK_EINVAL, "TLS CA %s: %s",
                             cfg->tls_ca_file ? cfg->tls_ca_file : cfg->tls_ca_dir,
                             ssl_reason(why, sizeof why, "cannot be loaded"));
        }
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
        /* The system's store (SSL_CERT_FILE, SSL_CERT_DIR honoured). */
        st = rlock__fail(RLOCK_EINVAL, "the default TLS CA store: %s",
                         ssl_reason(why, sizeof why, "cannot be loaded"));
    }
    if (st == RLOCK_OK && cfg->tls_cert_file) {
        const char *key = cfg->tls_key_file ? cfg->tls_key_file : cfg->tls_cert_file;
        if (SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_cert_file) != 1) {
            st = rlock__fail(RLOCK_EINVAL, "TLS certificate %s: %s", cfg->tls_cert_file,
                             ssl_reason(why, sizeof why, "cannot be loaded"));
        } else if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
            st = rlock__fail(RLOCK_EINVAL, "TLS key %s: %s", key,
                             ssl_reason(why, sizeof why, "cannot be loaded"));
        } else if (SSL_CTX_check_private_key(ctx) != 1) {
            st = rlock__fail(RLOCK_EINVAL, "TLS key %s does not match the certificate %s", key,
                             cfg->tls_cert_file);
        }
    }
    const char *name = cfg->tls_server_name ? cfg->tls_server_name : c->ep.host;
    if (st == RLOCK_OK && !(c->tls_name = strdup(name))) {
        st = rlock__fail(RLOCK_ENOMEM, "out of memory");
    }
    if (st != RLOCK_OK) {
        SSL_CTX_free(ctx);
        ERR_clear_error();
        return st;
    }
    c->tls_ctx = ctx;
    return RLOCK_OK;
}

/* What a fork()ed child must not free (an SSL, an SSL_CTX: freeing takes
 * locks a parent thread may have held at fork()) stays reachable from
 * here, so that the deliberate leak is one leak checkers see as still
 * reachable, not as lost. A lock-free push: any thread of the child. */
typedef struct kept {
    struct kept *next;
    void *p;
} kept;
static _Atomic(kept *) kept_after_fork;

static void keep_after_fork(void *p)
{
    kept *k = malloc(sizeof *k);
    if (!k) {
        return; /* lost for real then: it only ever held memory */
    }
    k->p = p;
    k->next = atomic_load(&kept_after_fork);
    while (!atomic_compare_exchange_weak(&kept_after_fork, &k->next, k)) {
    }
}

void rlock__tls_free(rlock_client *c)
{
    /* In a fork()ed child the context stays allocated: freeing it takes
     * its locks, which a parent thread may have held at fork(). */
    if (c->tls_ctx && c->pid == getpid()) {
        SSL_CTX_free(c->tls_ctx);
    } else if (c->tls_ctx) {
        keep_after_fork(c->tls_ctx);
    }
    c->tls_ctx = NULL;
    free(c->tls_name);
    c->tls_name = NULL;
}

/* ---- opening a link --------------------------------------------------- */

static void tune(int fd, bool tcp)
{
    /* Short replies, sent at once: no Nagle delay on a request. */
    int one = 1;
    if (tcp) {
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        int idle = KEEPALIVE_IDLE_S, intvl = KEEPALIVE_INTVL_S, cnt = KEEPALIVE_CNT;
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
    }
    struct timeval slice = {0, RECV_SLICE_MS * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &slice, sizeof slice);
}

/* A non-blocking connect to one address, finished by deadline_ms; the
 * socket is left blocking (plain reads wait in slices; TLS reads and every
 * send() say MSG_DONTWAIT). -1 with errno set on failure. */
static int connect_one(int family, const struct sockaddr *sa, socklen_t len, int64_t deadline_ms)
{
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        return -1;
    }
    int rc = connect(fd, sa, len);
    if (rc != 0 && errno == EINPROGRESS) {
        if (!wait_fd(fd, POLLOUT, deadline_ms)) {
            close(fd);
            errno = ETIMEDOUT;
            return -1;
        }
        int err = 0;
        socklen_t el = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) {
            err = errno;
        }
        rc = err ? -1 : 0;
        errno = err;
    }
    if (rc != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    tune(fd, family != AF_UNIX);
    return fd;
}

static rlock_status open_socket(rlock_client *c, int64_t deadline_ms, int *out)
{
    char label[300];
    rlock__endpoint_label(&c->ep, label, sizeof label);
    if (c->ep.path) {
        struct sockaddr_un sun = {.sun_family = AF_UNIX};
        if (strlen(c->ep.path) >= sizeof sun.sun_path) {
            return rlock__fail(RLOCK_EINVAL, "the socket path %.200s is too long", c->ep.path);
        }
        memcpy(sun.sun_path, c->ep.path, strlen(c->ep.path) + 1);
        int fd = connect_one(AF_UNIX, (struct sockaddr *)&sun, sizeof sun, deadline_ms);
        if (fd < 0) {
            return rlock__fail(RLOCK_EIO, "connect to %s: %s", label, strerror(errno));
        }
        *out = fd;
        return RLOCK_OK;
    }
    char port[16];
    snprintf(port, sizeof port, "%d", c->ep.port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(c->ep.host, port, &hints, &ai);
    if (gai != 0) {
        if (gai == EAI_MEMORY) {
            return rlock__fail(RLOCK_ENOMEM, "out of memory resolving %s", label);
        }
        return rlock__fail(RLOCK_EIO, "connect to %s: %s", label,
                           gai == EAI_SYSTEM ? strerror(errno) : gai_strerror(gai));
    }
    /* Each address in the resolver's order, while time is left. */
    int fd = -1, err = ECONNREFUSED;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = connect_one(a->ai_family, a->ai_addr, a->ai_addrlen, deadline_ms);
        if (fd < 0) {
            err = errno;
            if (err == ETIMEDOUT) {
                break;
            }
        }
    }
    freeaddrinfo(ai);
    if (fd < 0) {
        return rlock__fail(RLOCK_EIO, "connect to %s: %s", label, strerror(err));
    }
    *out = fd;
    return RLOCK_OK;
}

static bool is_ip(const char *s)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

/* The handshake, by deadline_ms. RLOCK_ETLS is for what TLS itself
 * decided, with OpenSSL's words for it: a certificate that does not
 * verify, an alert from the server (it wants a client certificate, it
 * speaks another protocol version), an answer that is not TLS. A
 * connection closed or reset without an alert is RLOCK_EIO, as for any
 * other connect, which waiters retry: Redis at maxclients closes a TLS
 * connection before its handshake without a word, as do a load balancer
 * without a backend and a server shutting down. Silence is the one case
 * judged by history (below). */
static rlock_status handshake(rlock_client *c, rlock__link *l, int64_t deadline_ms)
{
    char label[300];
    rlock__endpoint_label(&c->ep, label, sizeof label);
    ERR_clear_error();
    SSL *ssl = SSL_new(c->tls_ctx);
    BIO *bio = ssl ? BIO_new(bio_method) : NULL;
    if (!bio) {
        SSL_free(ssl);
        return rlock__fail(RLOCK_ENOMEM, "out of memory for a TLS connection");
    }
    BIO_set_data(bio, l);
    BIO_set_init(bio, 1);
    SSL_set_bio(ssl, bio, bio);
    SSL_set_app_data(ssl, l);
    l->ssl = ssl;
    const char *name = c->tls_name;
    bool ok = true;
    if (is_ip(name)) {
        /* An address is checked against the certificate's IP entries and
         * is never sent as SNI (RFC 6066 allows host names only). */
        ok = c->cfg.tls_insecure ||
             X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) == 1;
    } else {
        ok = SSL_set_tlsext_host_name(ssl, name) == 1 &&
             (c->cfg.tls_insecure || SSL_set1_host(ssl, name) == 1);
    }
    if (!ok) {
        return rlock__fail(RLOCK_EINVAL, "TLS server name %.200s cannot be used", name);
    }
    rlock_status st = RLOCK_OK;
    for (;;) {
        ERR_clear_error();
        int rc = SSL_connect(ssl);
        if (rc == 1) {
            atomic_store(&c->tls_seen, true);
            break;
        }
        int err = SSL_get_error(ssl, rc);
        if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
            if (!wait_fd(l->fd, err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline_ms)) {
                /* A plain Redis reads the ClientHello as the start of an
                 * inline command and waits for its end of line; a stalled
                 * TLS server is silent too. Until a handshake with this
                 * server has succeeded, silence is taken for the first
                 * (RLOCK_ETLS); after that, for a stall: RLOCK_ETIMEDOUT,
                 * what redis:// says when the server accepts and does not
                 * answer (its CLIENT SETNAME times out), which waiters
                 * retry. The wait may have ended at the caller's deadline,
                 * before the connect timeout. */
                if (atomic_load(&c->tls_seen)) {
                    st = rlock__fail(RLOCK_ETIMEDOUT,
                                     "TLS handshake with %s: no answer in time (a stalled server?)",
                                     label);
                } else {
                    st = rlock__fail(RLOCK_ETLS,
                                     "TLS handshake with %s: no answer within the connect timeout "
                                     "(does the server speak TLS on this port? or is it stalled?)",
                                     label);
                }
                break;
            }
            continue;
        }
        long v = SSL_get_verify_result(ssl);
        char why[200];
        unsigned long last = ERR_peek_last_error();
        bool eof_error = ERR_GET_LIB(last) == ERR_LIB_SSL &&
                         ERR_GET_REASON(last) == SSL_R_UNEXPECTED_EOF_WHILE_READING;
        if (v != X509_V_OK) {
            st = rlock__fail(RLOCK_ETLS, "TLS handshake with %s: certificate verify failed: %s",
                             label, X509_verify_cert_error_string(v));
        } else if (err == SSL_ERROR_SSL && !eof_error) {
            ssl_reason(why, sizeof why, "protocol error");
            st = rlock__fail(RLOCK_ETLS, "TLS handshake with %s: %s%s", label, why,
                             strstr(why, "wrong version") || strstr(why, "packet length")
                                 ? " (does the server speak TLS on this port?)"
                                 : "");
        } else {
            /* Closed or reset, no alert: an outage. A server that never
             * made a handshake with us may also be one that does not
             * speak TLS and hangs up on the ClientHello: say so. */
            bool seen = atomic_load(&c->tls_seen);
            st = rlock__fail(RLOCK_EIO, "TLS handshake with %s: %s%s", label,
                             l->sys_err ? strerror(l->sys_err)
                                        : "the server closed the connection",
                             seen ? " (full or shutting down?)"
                                  : " (full or shutting down? or does it not speak TLS on "
                                    "this port?)");
        }
        break;
    }
    ERR_clear_error();
    return st;
}

rlock_status rlock__link_open(rlock_client *c, rlock__link **out, int64_t deadline_ms)
{
    rlock__link *l = calloc(1, sizeof *l);
    if (!l) {
        return rlock__fail(RLOCK_ENOMEM, "out of memory for a connection");
    }
    l->fd = -1;
    l->pid = getpid();
    if (!(l->reader = redisReaderCreate())) {
        free(l);
        return rlock__fail(RLOCK_ENOMEM, "out of memory for a connection");
    }
    rlock_status st = open_socket(c, deadline_ms, &l->fd);
    if (st == RLOCK_OK && c->tls_ctx) {
        st = handshake(c, l, deadline_ms);
    }
    if (st != RLOCK_OK) {
        rlock__link_close(l);
        return st;
    }
    *out = l;
    return RLOCK_OK;
}

void rlock__link_close(rlock__link *l)
{
    if (!l) {
        return;
    }
    if (l->ssl && l->pid == getpid()) {
        /* One close_notify, without waiting for the server's. */
        ERR_clear_error();
        SSL_shutdown(l->ssl);
        ERR_clear_error();
        SSL_free(l->ssl);
    } else if (l->ssl) {
        keep_after_fork(l->ssl); /* a child: no close_notify, no free */
    }
    if (l->fd >= 0) {
        close(l->fd);
    }
    redisReaderFree(l->reader);
    free(l);
}

/* ---- bytes in and out ------------------------------------------------- */

static rlock_status lost(const char *how, int err)
{
    return rlock__fail(RLOCK_EIO, "connection lost%s: %s", how, strerror(err));
}

/* What an SSL call that failed with err means for the link; sets
 * the wants_* flags when it only has to wait. 0: wait and retry. */
static int ssl_failed(rlock__link *l, int rc, bool reading, rlock_status *st)
{
    int err = SSL_get_error(l->ssl, rc);
    if (err == SSL_ERROR_WANT_READ) {
        l->wants_read = !reading;
        return 0;
    }
    if (err == SSL_ERROR_WANT_WRITE) {
        l->wants_write = reading;
        return 0;
    }
    /* errno is not read here: the BIO kept what the socket said. */
    if (err == SSL_ERROR_SSL) {
        /* A fatal alert (l->alert) is the server's TLS refusing us; the
         * connect reports a refusal of its first exchange as RLOCK_ETLS.
         * Anything else TLS found (a bad record) broke this link only. */
        char why[200];
        bool alert = false;
        ssl_reason_of(why, sizeof why, "protocol error", &alert);
        l->alert = l->alert || alert;
        *st = rlock__fail(RLOCK_EIO, "connection lost: TLS: %s", why);
    } else if (l->sys_err != 0) {
        *st = lost(reading ? "" : " while sending", l->sys_err);
    } else {
        /* SSL_ERROR_ZERO_RETURN (close_notify), or a FIN without it */
        *st = rlock__fail(RLOCK_EIO, "the server closed the connection");
    }
    ERR_clear_error();
    return -1;
}

int rlock__link_send_some(rlock__link *l, const char *buf, size_t len, rlock_status *st)
{
    if (len == 0) {
        return 0;
    }
    if (l->ssl) {
        l->wants_read = false;
        ERR_clear_error();
        int rc = SSL_write(l->ssl, buf, len > INT_MAX ? INT_MAX : (int)len);
        return rc > 0 ? rc : ssl_failed(l, rc, false, st);
    }
    ssize_t n;
    do {
        n = send(l->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n >= 0) {
        return (int)(n > INT_MAX ? INT_MAX : n);
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return 0;
    }
    *st = lost(" while sending", errno);
    return -1;
}

rlock_status rlock__link_send(rlock__link *l, const char *buf, size_t len, int64_t deadline_ms)
{
    while (len > 0) {
        rlock_status st = RLOCK_OK;
        int n = rlock__link_send_some(l, buf, len, &st);
        if (n < 0) {
            return st;
        }
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
            continue;
        }
        if (!wait_fd(l->fd, l->wants_read ? POLLIN : POLLOUT, deadline_ms)) {
            return rlock__fail(RLOCK_ETIMEDOUT, "the server did not take the request in time");
        }
    }
    return RLOCK_OK;
}

int rlock__link_read(rlock__link *l, bool wait, int64_t deadline_ms, rlock_status *st)
{
    char buf[16384];
    int n;
    if (l->ssl) {
        /* Bytes OpenSSL holds already are not seen by poll(): with any
         * (SSL_has_pending), read first. Otherwise, or when they were only
         * part of a record, wait for the socket, what is left of the
         * caller's time at most, and read what came; a record still
         * incomplete then is a 0 for the caller's loop, which checks its
         * deadline. Never a busy loop, and the common case stays one
         * poll() and the reads of one record per reply. */
        bool polled = !wait || !SSL_has_pending(l->ssl);
        if (wait && polled && !wait_fd(l->fd, l->wants_write ? POLLOUT : POLLIN, deadline_ms)) {
            return 0;
        }
        for (;;) {
            l->wants_write = false;
            ERR_clear_error();
            n = SSL_read(l->ssl, buf, sizeof buf);
            if (n > 0) {
                break;
            }
            /* WANT_WRITE (a post-handshake message to answer, e.g. a key
             * update) sets wants_write: the wait is for room then. */
            if (ssl_failed(l, n, true, st) < 0) {
                return -1;
            }
            if (polled || !wait_fd(l->fd, l->wants_write ? POLLOUT : POLLIN, deadline_ms)) {
                return 0;
            }
            polled = true;
        }
    } else {
        /* A blocking recv() returns within the slice, which the kernel
         * rounds up to its tick (a few ms more); with less than two
         * slices left, poll() for what is left instead, so the wait ends
         * at the deadline itself and not up to a slice past it (the
         * watchdog's report margin is a tenth of a lease that may be
         * short). */
        bool block = wait;
        if (wait && deadline_ms - rlock__now_ms() < 2 * RECV_SLICE_MS) {
            if (!wait_fd(l->fd, POLLIN, deadline_ms)) {
                return 0;
            }
            block = false;
        }
        ssize_t r;
        do {
            r = recv(l->fd, buf, sizeof buf, block ? 0 : MSG_DONTWAIT);
        } while (r < 0 && errno == EINTR);
        if (r == 0) {
            /* A TLS port read as plain text closes without a word. */
            *st = rlock__fail(RLOCK_EIO, "the server closed the connection%s",
                              l->rx == 0 ? " before answering (a TLS port? use rediss://)" : "");
            return -1;
        }
        if (r < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                return 0;
            }
            if (l->rx == 0) {
                *st = rlock__fail(RLOCK_EIO,
                                  "connection lost before any answer: %s (a TLS port? use "
                                  "rediss://)",
                                  strerror(errno));
            } else {
                *st = lost("", errno);
            }
            return -1;
        }
        n = (int)r;
        /* A TLS record (alert 0x15, handshake 0x16) as the first bytes of
         * a plain connection: a TLS port reached with redis://. */
        if (l->rx == 0 && (buf[0] == 0x15 || buf[0] == 0x16)) {
            *st = rlock__fail(RLOCK_ETLS, "the server answered in TLS: use a rediss:// URL");
            return -1;
        }
    }
    l->rx += (uint64_t)n;
    if (redisReaderFeed(l->reader, buf, (size_t)n) != REDIS_OK) {
        *st = rlock__fail(RLOCK_ENOMEM, "out of memory for a reply");
        return -1;
    }
    return n;
}

bool rlock__link_idle_ok(rlock__link *l)
{
    struct pollfd pfd = {l->fd, POLLIN, 0};
    if (poll(&pfd, 1, 0) == 0) {
        return true;
    }
    /* Readable while idle: the server closed it (CLIENT KILL, restart,
     * idle timeout), or, over TLS, sent a record that carries no reply
     * (TLS 1.3 session tickets arrive after the handshake). */
    if (!l->ssl || (pfd.revents & (POLLHUP | POLLERR))) {
        return false;
    }
    rlock_status st;
    return rlock__link_read(l, false, 0, &st) == 0;
}
