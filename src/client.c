/* The client: configuration, URL parsing, identity, lifecycle and the
 * in-progress call count that lets rlock_client_free() wait for callers. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uuid/uuid.h>

#include "internal.h"

RLOCK_API void rlock_config_init(rlock_config *cfg)
{
    if (!cfg) {
        return;
    }
    memset(cfg, 0, sizeof *cfg);
    cfg->url = NULL;
    cfg->pool_size = RLOCK__DEFAULT_POOL;
    cfg->connect_timeout_ms = RLOCK__DEFAULT_CONNECT_MS;
    cfg->command_timeout_ms = RLOCK__DEFAULT_COMMAND_MS;
    cfg->watchdog_timeout_ms = RLOCK__DEFAULT_WATCHDOG_MS;
    cfg->watchdog_batch_size = RLOCK__DEFAULT_BATCH;
    cfg->subscribe_timeout_ms = RLOCK__DEFAULT_SUBSCRIBE_MS;
    cfg->retry_timeout_ms = RLOCK__DEFAULT_RETRY_MS;
}

/* ---- URL ------------------------------------------------------------- */

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9') {
        return ch - '0';
    }
    if (ch >= 'a' && ch <= 'f') {
        return ch - 'a' + 10;
    }
    if (ch >= 'A' && ch <= 'F') {
        return ch - 'A' + 10;
    }
    return -1;
}

/* Copies [s, s+n) decoding %XX escapes; NULL on a bad escape or NUL. */
static char *dup_decoded(const char *s, size_t n, rlock_status *st)
{
    char *out = malloc(n + 1);
    if (!out) {
        *st = RLOCK_ENOMEM;
        return NULL;
    }
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            int hi = i + 1 < n ? hexval(s[i + 1]) : -1;
            int lo = i + 2 < n ? hexval(s[i + 2]) : -1;
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
                free(out);
                *st = RLOCK_EINVAL;
                return NULL;
            }
            out[j++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            out[j++] = s[i];
        }
    }
    out[j] = '\0';
    return out;
}

/* A decimal integer in [lo, hi] spanning exactly [s, s+n). */
static bool parse_int(const char *s, size_t n, long lo, long hi, int *out)
{
    if (n == 0 || n > 9) {
        return false;
    }
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return false;
        }
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi) {
        return false;
    }
    *out = (int)v;
    return true;
}

void rlock__endpoint_free(rlock__endpoint *ep)
{
    free(ep->host);
    free(ep->path);
    free(ep->user);
    free(ep->password);
    memset(ep, 0, sizeof *ep);
}

/* unix:///path[?db=N][&password=P][&user=U] */
static rlock_status parse_unix(const char *rest, rlock__endpoint *ep)
{
    rlock_status st = RLOCK_OK;
    const char *q = strchr(rest, '?');
    size_t plen = q ? (size_t)(q - rest) : strlen(rest);
    if (plen == 0 || rest[0] != '/') {
        return RLOCK_EINVAL;
    }
    if (!(ep->path = dup_decoded(rest, plen, &st))) {
        return st;
    }
    while (q && *q) {
        const char *p = q + 1;
        const char *amp = strchr(p, '&');
        size_t n = amp ? (size_t)(amp - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        if (!eq) {
            return RLOCK_EINVAL;
        }
        size_t klen = (size_t)(eq - p);
        const char *v = eq + 1;
        size_t vlen = n - klen - 1;
        if (klen == 2 && memcmp(p, "db", 2) == 0) {
            if (!parse_int(v, vlen, 0, INT_MAX, &ep->db)) {
                return RLOCK_EINVAL;
            }
        } else if (klen == 8 && memcmp(p, "password", 8) == 0 && !ep->password) {
            if (!(ep->password = dup_decoded(v, vlen, &st))) {
                return st;
            }
        } else if (klen == 4 && memcmp(p, "user", 4) == 0 && !ep->user) {
            if (!(ep->user = dup_decoded(v, vlen, &st))) {
                return st;
            }
        } else {
            return RLOCK_EINVAL;
        }
        q = amp;
    }
    if (ep->user && !ep->password) {
        return RLOCK_EINVAL;
    }
    return RLOCK_OK;
}

/* redis://[[user]:password@]host[:port][/db] */
static rlock_status parse_tcp(const char *rest, rlock__endpoint *ep)
{
    rlock_status st = RLOCK_OK;
    const char *end = rest + strlen(rest);
    const char *slash = strchr(rest, '/');
    const char *auth_end = NULL;
    /* The last '@' before the path separates credentials from the host, so
     * a password may contain '@' unescaped. */
    for (const char *p = rest; p < (slash ? slash : end); p++) {
        if (*p == '@') {
            auth_end = p;
        }
    }
    const char *host = rest;
    if (auth_end) {
        const char *colon = memchr(rest, ':', (size_t)(auth_end - rest));
        if (!colon) {
            return RLOCK_EINVAL; /* user without password */
        }
        if (colon > rest && !(ep->user = dup_decoded(rest, (size_t)(colon - rest), &st))) {
            return st;
        }
        if (!(ep->password = dup_decoded(colon + 1, (size_t)(auth_end - colon - 1), &st))) {
            return st;
        }
        host = auth_end + 1;
    }
    const char *host_end = slash ? slash : end;
    const char *port_at = NULL;
    const char *h = host, *he;
    if (*host == '[') { /* [ipv6]:port */
        const char *rb = memchr(host, ']', (size_t)(host_end - host));
        if (!rb) {
            return RLOCK_EINVAL;
        }
        h = host + 1;
        he = rb;
        if (rb + 1 < host_end) {
            if (rb[1] != ':') {
                return RLOCK_EINVAL;
            }
            port_at = rb + 2;
        }
    } else {
        const char *colon = memchr(host, ':', (size_t)(host_end - host));
        he = colon ? colon : host_end;
        port_at = colon ? colon + 1 : NULL;
    }
    if (he == h) {
        return RLOCK_EINVAL;
    }
    for (const char *p = h; p < he; p++) {
        if (*p == '?' || *p == '#' || *p == ' ' || *p == '@') {
            return RLOCK_EINVAL;
        }
    }
    if (!(ep->host = strndup(h, (size_t)(he - h)))) {
        return RLOCK_ENOMEM;
    }
    ep->port = 6379;
    if (port_at && !parse_int(port_at, (size_t)(host_end - port_at), 1, 65535, &ep->port)) {
        return RLOCK_EINVAL;
    }
    if (slash && slash + 1 < end) {
        if (!parse_int(slash + 1, (size_t)(end - slash - 1), 0, INT_MAX, &ep->db)) {
            return RLOCK_EINVAL;
        }
    }
    return RLOCK_OK;
}

rlock_status rlock__parse_url(const char *url, rlock__endpoint *ep)
{
    memset(ep, 0, sizeof *ep);
    rlock_status st;
    if (strncmp(url, "redis://", 8) == 0) {
        st = parse_tcp(url + 8, ep);
    } else if (strncmp(url, "unix://", 7) == 0) {
        st = parse_unix(url + 7, ep);
    } else {
        st = RLOCK_EINVAL;
    }
    if (st != RLOCK_OK) {
        rlock__endpoint_free(ep);
        return st;
    }
    /* redis://:@host is a URL without a password, as in redis-py: AUTH
     * with an empty password would be refused. A user keeps its AUTH. */
    if (ep->password && !ep->password[0] && !ep->user) {
        free(ep->password);
        ep->password = NULL;
    }
    return RLOCK_OK;
}

/* ---- identity -------------------------------------------------------- */

static atomic_uint_fast64_t next_thread_id = 1;
static __thread uint64_t this_thread_id;

RLOCK_API uint64_t rlock_thread_id(void)
{
    if (this_thread_id == 0) {
        this_thread_id = atomic_fetch_add(&next_thread_id, 1);
    }
    return this_thread_id;
}

RLOCK_API const char *rlock_client_id(const rlock_client *c)
{
    return c ? c->id : NULL;
}

/* ---- calls in progress ----------------------------------------------- */

rlock_status rlock__enter(rlock_client *c)
{
    if (c->pid != getpid()) {
        return RLOCK_ECLOSED;
    }
    pthread_mutex_lock(&c->life_mu);
    if (atomic_load(&c->closing)) {
        pthread_mutex_unlock(&c->life_mu);
        return RLOCK_ECLOSED;
    }
    c->active++;
    pthread_mutex_unlock(&c->life_mu);
    return RLOCK_OK;
}

void rlock__leave(rlock_client *c)
{
    pthread_mutex_lock(&c->life_mu);
    if (--c->active == 0 && atomic_load(&c->closing)) {
        pthread_cond_broadcast(&c->life_cv);
    }
    pthread_mutex_unlock(&c->life_mu);
}

bool rlock__closing(rlock_client *c)
{
    return atomic_load(&c->closing);
}

void rlock__stat_add(rlock_client *c, rlock_stat s, uint64_t n)
{
    atomic_fetch_add_explicit(&c->stat[s], n, memory_order_relaxed);
}

RLOCK_API rlock_status rlock_client_stat(rlock_client *c, rlock_stat which, uint64_t *value)
{
    if (!c || !value || (unsigned)which > RLOCK_STAT_HELD) {
        return RLOCK_EINVAL;
    }
    if (which == RLOCK_STAT_HELD) {
        pthread_mutex_lock(&c->hold_mu);
        *value = c->holders_count;
        pthread_mutex_unlock(&c->hold_mu);
    } else {
        *value = atomic_load(&c->stat[which]);
    }
    return RLOCK_OK;
}

/* ---- lifecycle ------------------------------------------------------- */

static bool time_ok(int64_t v)
{
    return v >= 0 && v <= RLOCK_MAX_TIME_MS;
}

static rlock_status check_config(rlock_config *cfg)
{
    if (cfg->pool_size < 0 || cfg->pool_size > 1024 || cfg->watchdog_batch_size < 0 ||
        cfg->watchdog_batch_size > 10000 || !time_ok(cfg->connect_timeout_ms) ||
        !time_ok(cfg->command_timeout_ms) || !time_ok(cfg->watchdog_timeout_ms) ||
        !time_ok(cfg->subscribe_timeout_ms) || !time_ok(cfg->retry_timeout_ms)) {
        return RLOCK_EINVAL;
    }
    /* A renewal period of watchdog/3 must be at least a millisecond. */
    if (cfg->watchdog_timeout_ms != 0 && cfg->watchdog_timeout_ms < 3) {
        return RLOCK_EINVAL;
    }
    if (cfg->pool_size == 0) {
        cfg->pool_size = RLOCK__DEFAULT_POOL;
    }
    if (cfg->connect_timeout_ms == 0) {
        cfg->connect_timeout_ms = RLOCK__DEFAULT_CONNECT_MS;
    }
    if (cfg->command_timeout_ms == 0) {
        cfg->command_timeout_ms = RLOCK__DEFAULT_COMMAND_MS;
    }
    if (cfg->watchdog_timeout_ms == 0) {
        cfg->watchdog_timeout_ms = RLOCK__DEFAULT_WATCHDOG_MS;
    }
    if (cfg->watchdog_batch_size == 0) {
        cfg->watchdog_batch_size = RLOCK__DEFAULT_BATCH;
    }
    if (cfg->subscribe_timeout_ms == 0) {
        cfg->subscribe_timeout_ms = RLOCK__DEFAULT_SUBSCRIBE_MS;
    }
    if (cfg->retry_timeout_ms == 0) {
        cfg->retry_timeout_ms = RLOCK__DEFAULT_RETRY_MS;
    }
    return RLOCK_OK;
}

static void free_memory(rlock_client *c)
{
    rlock__endpoint_free(&c->ep);
    free(c->url);
    free(c);
}

RLOCK_API rlock_status rlock_client_new(const rlock_config *cfg, rlock_client **out)
{
    if (!out) {
        return RLOCK_EINVAL;
    }
    rlock_client *c = calloc(1, sizeof *c);
    if (!c) {
        return RLOCK_ENOMEM;
    }
    if (cfg) {
        c->cfg = *cfg;
    } else {
        rlock_config_init(&c->cfg);
    }
    rlock_status st = check_config(&c->cfg);
    if (st != RLOCK_OK) {
        free(c);
        return st;
    }
    c->url = strdup(c->cfg.url ? c->cfg.url : "redis://127.0.0.1:6379");
    if (!c->url) {
        free(c);
        return RLOCK_ENOMEM;
    }
    c->cfg.url = c->url;
    if ((st = rlock__parse_url(c->url, &c->ep)) != RLOCK_OK) {
        free_memory(c);
        return st;
    }
    uuid_t u;
    uuid_generate_random(u);
    uuid_unparse_lower(u, c->id);
    c->pid = getpid();
    atomic_init(&c->closing, false);
    for (int i = 0; i <= RLOCK_STAT_HELD; i++) {
        atomic_init(&c->stat[i], 0);
    }
    pthread_mutex_init(&c->life_mu, NULL);
    rlock__cond_init(&c->life_cv);

    if ((st = rlock__pool_init(c)) != RLOCK_OK) {
        goto fail_pool;
    }
    /* Connect one command connection now, so that a wrong address or
     * password is reported by rlock_client_new() itself. */
    rlock__conn *conn;
    if ((st = rlock__pool_borrow(c, &conn)) != RLOCK_OK) {
        goto fail_conn;
    }
    /* A PING shows a server that wants a password we did not give
     * (NOAUTH): the connection is not usable as configured. */
    const char *ping[1] = {"PING"};
    redisReply *pong = NULL;
    st = rlock__conn_command(c, conn, 1, ping, NULL, &pong);
    if (st == RLOCK_OK) {
        if (pong->type == REDIS_REPLY_ERROR) {
            st = RLOCK_EIO;
        }
        freeReplyObject(pong);
    }
    rlock__pool_return(c, conn);
    if (st != RLOCK_OK) {
        goto fail_conn;
    }
    if ((st = rlock__watchdog_start(c)) != RLOCK_OK) {
        goto fail_conn;
    }
    if ((st = rlock__pubsub_start(c)) != RLOCK_OK) {
        goto fail_pubsub;
    }
    *out = c;
    return RLOCK_OK;

fail_pubsub:
    rlock__watchdog_stop(c);
fail_conn:
    rlock__pool_destroy(c);
fail_pool:
    pthread_mutex_destroy(&c->life_mu);
    pthread_cond_destroy(&c->life_cv);
    free_memory(c);
    return st;
}

RLOCK_API void rlock_client_free(rlock_client *c)
{
    if (!c) {
        return;
    }
    if (c->pid != getpid()) {
        /* A fork()ed child: the parent's threads do not exist here and its
         * mutexes may have been copied locked, so only memory and file
         * descriptors are released; nothing is sent to Redis. */
        atomic_store(&c->closing, true);
        c->ps_running = false;
        c->wd_running = false;
        rlock__pubsub_stop(c);
        rlock__watchdog_stop(c);
        rlock__pool_destroy(c);
        rlock__pubsub_free(c);
        free_memory(c);
        return;
    }
    pthread_mutex_lock(&c->life_mu);
    atomic_store(&c->closing, true);
    pthread_mutex_unlock(&c->life_mu);

    /* Wake everything a caller may be blocked on, then wait for them. */
    pthread_mutex_lock(&c->pool.mu);
    c->pool.closing = true;
    pthread_cond_broadcast(&c->pool.cv);
    pthread_mutex_unlock(&c->pool.mu);
    rlock__pubsub_stop(c);

    pthread_mutex_lock(&c->life_mu);
    while (c->active > 0) {
        pthread_cond_wait(&c->life_cv, &c->life_mu);
    }
    pthread_mutex_unlock(&c->life_mu);

    rlock__watchdog_stop(c);
    rlock__pool_destroy(c);
    rlock__pubsub_free(c);
    pthread_mutex_destroy(&c->life_mu);
    pthread_cond_destroy(&c->life_cv);
    free_memory(c);
}
