/* The client's life cycle: rlock_client_new() and rlock_client_free(), in
 * the fork()ed child too. It sits above every layer because it starts and
 * stops them all: the pool (net/), the pub/sub, watchdog and callback
 * threads (sync/), the settling of doubts left by calls (sync/), and it
 * wires core's report of a lost hold to the callback queue.
 *
 * The order of shutdown is the point of this file:
 *   1. leave the live-client list: no thread-exit hook enters the client;
 *   2. refuse new calls, wake the blocked ones (pool, pub/sub) and wait
 *      until every call in progress has left (core/client.c says why the
 *      last touch of a leaving call comes before that wait ends);
 *   3. settle what calls left in doubt: this needs the pool, and the
 *      watchdog still renews and reports meanwhile;
 *   4. stop the watchdog: it flushes the queued latch keys, and after it
 *      nothing finds a loss any more;
 *   5. stop the callback thread, which first delivers every report queued,
 *      the losses found during 3 and 4 included;
 *   6. free the registry, the connections, the memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uuid/uuid.h>

#include "internal.h"

static void free_memory(rlock_client *c)
{
    rlock__tls_free(c);
    rlock__endpoint_free(&c->ep);
    free(c->url);
    free(c);
}

/* CLIENT SETNAME value: "rlock:<id prefix>:<host>:<pid>" with no spaces. */
static void name_connections(rlock_client *c)
{
    char host[64] = "unknown";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    snprintf(c->conn_name, sizeof c->conn_name, "rlock:%.8s:%s:%ld", c->id, host,
             (long)getpid());
    for (char *p = c->conn_name; *p; p++) {
        if (*p <= ' ' || *p == 127) {
            *p = '_';
        }
    }
}

RLOCK_API rlock_status rlock_client_new(const rlock_config *cfg, rlock_client **out)
{
    rlock__error_clear();
    if (!out) {
        return rlock__fail(RLOCK_EINVAL, "out is NULL");
    }
    if (cfg && cfg->size < offsetof(rlock_config, watchdog_batch_size)) {
        return rlock__fail(RLOCK_EINVAL, "the config was not set up by rlock_config_init()");
    }
    rlock_client *c = calloc(1, sizeof *c);
    if (!c) {
        return rlock__fail(RLOCK_ENOMEM, "out of memory");
    }
    rlock_config_init(&c->cfg);
    if (cfg) {
        memcpy(&c->cfg, cfg, cfg->size < sizeof c->cfg ? cfg->size : sizeof c->cfg);
        c->cfg.size = sizeof c->cfg;
    }
    rlock_status st = rlock__config_fill(&c->cfg);
    if (st != RLOCK_OK) {
        free(c);
        return rlock__fail(st, "a config field is out of range");
    }
    c->url = strdup(c->cfg.url ? c->cfg.url : "redis://127.0.0.1:6379");
    if (!c->url) {
        free(c);
        return rlock__fail(RLOCK_ENOMEM, "out of memory");
    }
    c->cfg.url = c->url;
    if ((st = rlock__parse_url(c->url, &c->ep)) != RLOCK_OK) {
        free_memory(c);
        return st; /* the parser's detail names the wrong part */
    }
    /* The certificate and key files are read now: a bad one is the
     * caller's configuration, reported here rather than at first use. */
    if ((st = rlock__tls_init(c)) != RLOCK_OK) {
        free_memory(c);
        return st;
    }
    c->cfg.tls_ca_file = c->cfg.tls_ca_dir = NULL;
    c->cfg.tls_cert_file = c->cfg.tls_key_file = NULL;
    c->cfg.tls_server_name = c->tls_name;
    uuid_t u;
    uuid_generate_random(u);
    uuid_unparse_lower(u, c->id);
    c->pid = getpid();
    c->fork_gen = rlock__fork_generation();
    name_connections(c);
    for (int i = 0; i <= RLOCK_STAT_HELD; i++) {
        atomic_init(&c->stat[i], 0);
    }
    rlock__calls_init(c);
    c->topo = &rlock__standalone;
    c->lost_fn = rlock__lost_queue;
    c->lost_arg = c;

    if ((st = rlock__pool_init(&c->pool, c->cfg.pool_size)) != RLOCK_OK) {
        goto fail_pool;
    }
    /* Connect one command connection now, so that a wrong address or
     * password is reported by rlock_client_new() itself. */
    rlock__conn *conn;
    if ((st = c->topo->borrow(c, NULL, 0, &conn, -1)) != RLOCK_OK) {
        goto fail_conn;
    }
    c->topo->give_back(c, conn);
    if ((st = rlock__holds_init(c)) != RLOCK_OK) {
        goto fail_conn;
    }
    /* The callback thread first: the watchdog may report as soon as it
     * runs. */
    if ((st = rlock__callbacks_start(c)) != RLOCK_OK) {
        goto fail_callbacks;
    }
    if ((st = rlock__watchdog_start(c)) != RLOCK_OK) {
        goto fail_watchdog;
    }
    if ((st = rlock__pubsub_start(c)) != RLOCK_OK) {
        goto fail_pubsub;
    }
    rlock__live_add(c);
    *out = c;
    return RLOCK_OK;

fail_pubsub:
    rlock__watchdog_stop(c);
fail_watchdog:
    rlock__callbacks_stop(c);
fail_callbacks:
    rlock__holds_free(c);
fail_conn:
    c->topo->destroy(c);
fail_pool:
    rlock__calls_destroy(c);
    free_memory(c);
    return st;
}

/* A fork()ed child: the parent's threads do not exist here and its mutexes
 * may have been copied locked, so only memory and file descriptors are
 * released; nothing is sent to Redis. The child's list of live clients
 * never had this copy in it (core/client.c empties it at fork()). */
static void free_in_child(rlock_client *c)
{
    rlock__live_remove(c);
    rlock__calls_close(c);
    c->ps_running = false;
    c->wd_running = false;
    c->cb_running = false;
    rlock__pubsub_stop(c);
    rlock__callbacks_stop(c);
    rlock__watchdog_stop(c);
    rlock__holds_free(c);
    c->topo->destroy(c);
    rlock__pubsub_free(c);
    free_memory(c);
}

RLOCK_API void rlock_client_free(rlock_client *c)
{
    if (!c) {
        return;
    }
    if (c->pid != getpid()) {
        free_in_child(c);
        return;
    }
    rlock__live_remove(c);
    rlock__calls_close(c);
    /* Wake everything a caller may be blocked on, then wait for them. */
    c->topo->close(c);
    rlock__pubsub_stop(c);
    rlock__calls_wait(c);

    /* An acquire that ran after its reply was lost, an unlock that got no
     * answer: settle them now, or the lock stays held for a lease. */
    rlock__settle_all(c, rlock__now_ms() + 2 * c->cfg.command_timeout_ms, false);
    rlock__watchdog_stop(c);
    rlock__callbacks_stop(c);
    rlock__holds_free(c);
    c->topo->destroy(c);
    rlock__pubsub_free(c);
    rlock__calls_destroy(c);
    free_memory(c);
}
