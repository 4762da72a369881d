/* rlock-bench: the floor's connection. A blocking socket of our own, with
 * an optional OpenSSL 3 session on it, and hiredis only for what every
 * client needs anyway: the command formatter and the reply reader (the
 * parts that hiredis 0.14, which has no TLS, shares with 1.x). Nothing else
 * stands between the loop and the kernel, so the floor's cost per call is
 * the transport's and the server's, not a library's. */
#include "bench.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct bench_wire {
    int fd;
    SSL_CTX *ctx;
    SSL *ssl; /* NULL: plain TCP */
    redisReader *rd;
    char buf[16384];
};

static const char *ssl_error(void)
{
    static char msg[256];
    unsigned long e = ERR_get_error();
    if (!e) {
        return "no OpenSSL error queued";
    }
    ERR_error_string_n(e, msg, sizeof msg);
    return msg;
}

static int tcp_connect(const char *host, int port)
{
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(host, ps, &hints, &ai);
    if (rc != 0) {
        bench_die("floor: cannot resolve %s: %s", host, gai_strerror(rc));
    }
    int fd = -1;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0) {
        bench_die("floor: cannot connect to %s:%d", host, port);
    }
    /* As hiredis and rlock do: a request goes out as soon as it is written. */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void tls_start(bench_wire *w, const char *host, const bench_tls *t)
{
    w->ctx = SSL_CTX_new(TLS_client_method());
    if (!w->ctx) {
        bench_die("floor: SSL_CTX_new: %s", ssl_error());
    }
    SSL_CTX_set_min_proto_version(w->ctx, TLS1_2_VERSION);
    if (t->ca_file ? SSL_CTX_load_verify_locations(w->ctx, t->ca_file, NULL) != 1
                   : SSL_CTX_set_default_verify_paths(w->ctx) != 1) {
        bench_die("floor: CA %s: %s", t->ca_file ? t->ca_file : "(default)", ssl_error());
    }
    if (t->cert_file &&
        (SSL_CTX_use_certificate_chain_file(w->ctx, t->cert_file) != 1 ||
         SSL_CTX_use_PrivateKey_file(w->ctx, t->key_file ? t->key_file : t->cert_file,
                                     SSL_FILETYPE_PEM) != 1)) {
        bench_die("floor: client certificate %s: %s", t->cert_file, ssl_error());
    }
    SSL_CTX_set_verify(w->ctx, t->insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    w->ssl = SSL_new(w->ctx);
    if (!w->ssl || SSL_set_fd(w->ssl, w->fd) != 1) {
        bench_die("floor: SSL_new: %s", ssl_error());
    }
    const char *name = t->server_name ? t->server_name : host;
    unsigned char ip[16];
    bool is_ip = inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1;
    if (!is_ip) {
        SSL_set_tlsext_host_name(w->ssl, name);
    }
    if (!t->insecure && (is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(w->ssl), name)
                               : SSL_set1_host(w->ssl, name)) != 1) {
        bench_die("floor: cannot check the server's name %s: %s", name, ssl_error());
    }
    if (SSL_connect(w->ssl) != 1) {
        bench_die("floor: TLS handshake with %s: %s", host, ssl_error());
    }
}

bench_wire *bench_wire_open(const char *host, int port, const bench_tls *tls)
{
    bench_wire *w = bench_xcalloc(1, sizeof *w);
    w->fd = tcp_connect(host, port);
    if (tls) {
        tls_start(w, host, tls);
    }
    w->rd = redisReaderCreate();
    if (!w->rd) {
        bench_die("out of memory");
    }
    return w;
}

void bench_wire_close(bench_wire *w)
{
    if (!w) {
        return;
    }
    if (w->ssl) {
        SSL_shutdown(w->ssl);
        SSL_free(w->ssl);
    }
    SSL_CTX_free(w->ctx);
    close(w->fd);
    redisReaderFree(w->rd);
    free(w);
}

static void send_all(bench_wire *w, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = w->ssl ? SSL_write(w->ssl, p, (int)n) : send(w->fd, p, n, MSG_NOSIGNAL);
        if (k <= 0) {
            bench_die("floor: send failed: %s", w->ssl ? ssl_error() : "connection lost");
        }
        p += k;
        n -= (size_t)k;
    }
}

redisReply *bench_wire_call(bench_wire *w, int argc, const char **argv, const size_t *lens)
{
    char *cmd = NULL;
    long long len = redisFormatCommandArgv(&cmd, argc, argv, lens);
    if (len < 0) {
        bench_die("out of memory");
    }
    send_all(w, cmd, (size_t)len);
    free(cmd);
    void *reply = NULL;
    for (;;) {
        if (redisReaderGetReply(w->rd, &reply) != REDIS_OK) {
            bench_die("floor: bad reply: %s", w->rd->errstr);
        }
        if (reply) {
            return reply;
        }
        ssize_t k = w->ssl ? SSL_read(w->ssl, w->buf, (int)sizeof w->buf)
                           : recv(w->fd, w->buf, sizeof w->buf, 0);
        if (k <= 0) {
            bench_die("floor: receive failed: %s", w->ssl ? ssl_error() : "connection lost");
        }
        if (redisReaderFeed(w->rd, w->buf, (size_t)k) != REDIS_OK) {
            bench_die("floor: bad reply: %s", w->rd->errstr);
        }
    }
}

redisReply *bench_wire_cmd(bench_wire *w, const char *a0, const char *a1, const char *a2)
{
    const char *argv[3] = {a0, a1, a2};
    size_t lens[3] = {strlen(a0), a1 ? strlen(a1) : 0, a2 ? strlen(a2) : 0};
    int argc = a2 ? 3 : a1 ? 2 : 1;
    redisReply *r = bench_wire_call(w, argc, argv, lens);
    if (r->type == REDIS_REPLY_ERROR) {
        bench_die("floor: %s: %s", a0, r->str);
    }
    return r;
}
