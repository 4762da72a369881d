/* The client: configuration, identity (client id, thread ids, connection
 * name), lifecycle, the count of calls in progress that lets
 * rlock_client_free() wait for callers, and the process's list of live
 * clients that lets a thread's exit end its holds. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uuid/uuid.h>

#include "internal.h"

RLOCK_API void rlock_config_init_size(rlock_config *cfg, size_t size)
{
    if (!cfg || size < sizeof(size_t)) {
        return;
    }
    /* A caller compiled against a smaller (older) struct gets only the
     * fields it has; one compiled against a larger (newer) one gets ours
     * and zeroes beyond them. */
    memset(cfg, 0, size);
    rlock_config d = {0};
    d.size = size;
    d.pool_size = RLOCK__DEFAULT_POOL;
    d.connect_timeout_ms = RLOCK__DEFAULT_CONNECT_MS;
    d.command_timeout_ms = RLOCK__DEFAULT_COMMAND_MS;
    d.watchdog_timeout_ms = RLOCK__DEFAULT_WATCHDOG_MS;
    d.watchdog_batch_size = RLOCK__DEFAULT_BATCH;
    d.subscribe_timeout_ms = RLOCK__DEFAULT_SUBSCRIBE_MS;
    d.retry_timeout_ms = RLOCK__DEFAULT_RETRY_MS;
    memcpy(cfg, &d, size < sizeof d ? size : sizeof d);
}

/* ---- the process's live clients and its threads ----------------------- */

/* Every client of this process, so that a thread's exit can end its holds
 * in each. Lock order: live_mu, then a client's hold_mu. */
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static rlock_client *live;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

/* A thread that exits while holding watchdog locks would keep them renewed
 * for ever (Redisson's users hit this: #2590, #3521, #5115). Its
 * thread-specific value's destructor stops that. */
static void thread_exit(void *value)
{
    uint64_t tid = (uint64_t)(uintptr_t)value;
    pthread_mutex_lock(&live_mu);
    for (rlock_client *c = live; c; c = c->next_live) {
        rlock__holds_thread_exit(c, tid);
    }
    pthread_mutex_unlock(&live_mu);
}

/* live_mu is held across fork() so that a child never inherits it locked. */
static void before_fork(void)
{
    pthread_mutex_lock(&live_mu);
}

static void after_fork(void)
{
    pthread_mutex_unlock(&live_mu);
}

static void init_once(void)
{
    pthread_key_create(&exit_key, thread_exit);
    pthread_atfork(before_fork, after_fork, after_fork);
}

static atomic_uint_fast64_t next_thread_id = 1;
static __thread uint64_t this_thread_id;

RLOCK_API uint64_t rlock_thread_id(void)
{
    if (this_thread_id == 0) {
        this_thread_id = atomic_fetch_add(&next_thread_id, 1);
        pthread_once(&exit_once, init_once);
        pthread_setspecific(exit_key, (void *)(uintptr_t)this_thread_id);
    }
    return this_thread_id;
}

RLOCK_API const char *rlock_client_id(const rlock_client *c)
{
    return c ? c->id : NULL;
}

int rlock__thread_start(pthread_t *th, void *(*fn)(void *), void *arg)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(th, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

/* ---- calls in progress ----------------------------------------------- */

/* The common path takes no mutex and makes no system call: an atomic count
 * of calls in progress and a flag, ordered so that rlock_client_free()
 * either sees a call or the call sees the flag. */
rlock_status rlock__enter(rlock_client *c)
{
    rlock__error_clear();
    if (c->fork_gen != rlock__fork_generation()) {
        return rlock__fail(RLOCK_ECLOSED, "the client belongs to the parent process");
    }
    atomic_fetch_add(&c->active, 1);
    if (atomic_load(&c->closing)) {
        rlock__leave(c);
        return rlock__fail(RLOCK_ECLOSED, "the client is closing");
    }
    return RLOCK_OK;
}

void rlock__leave(rlock_client *c)
{
    if (atomic_fetch_sub(&c->active, 1) == 1 && atomic_load(&c->closing)) {
        pthread_mutex_lock(&c->life_mu);
        pthread_cond_broadcast(&c->life_cv);
        pthread_mutex_unlock(&c->life_mu);
    }
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
        /* In a fork()ed child the registry's mutex may have been copied
         * locked: the child holds nothing of this client anyway. */
        *value = c->pid == getpid() ? rlock__holds_count(c) : 0;
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
    rlock_status st = check_config(&c->cfg);
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
        return st == RLOCK_EINVAL ? rlock__fail(st, "the URL is malformed") : st;
    }
    uuid_t u;
    uuid_generate_random(u);
    uuid_unparse_lower(u, c->id);
    c->pid = getpid();
    c->fork_gen = rlock__fork_generation();
    name_connections(c);
    atomic_init(&c->closing, false);
    atomic_init(&c->active, 0);
    for (int i = 0; i <= RLOCK_STAT_HELD; i++) {
        atomic_init(&c->stat[i], 0);
    }
    pthread_mutex_init(&c->life_mu, NULL);
    rlock__cond_init(&c->life_cv);
    c->topo = &rlock__standalone;

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
    if ((st = rlock__watchdog_start(c)) != RLOCK_OK) {
        goto fail_watchdog;
    }
    if ((st = rlock__callbacks_start(c)) != RLOCK_OK) {
        goto fail_callbacks;
    }
    if ((st = rlock__pubsub_start(c)) != RLOCK_OK) {
        goto fail_pubsub;
    }
    pthread_once(&exit_once, init_once);
    pthread_mutex_lock(&live_mu);
    c->next_live = live;
    live = c;
    pthread_mutex_unlock(&live_mu);
    *out = c;
    return RLOCK_OK;

fail_pubsub:
    rlock__callbacks_stop(c);
fail_callbacks:
    rlock__watchdog_stop(c);
fail_watchdog:
    rlock__holds_free(c);
fail_conn:
    c->topo->destroy(c);
fail_pool:
    pthread_mutex_destroy(&c->life_mu);
    pthread_cond_destroy(&c->life_cv);
    free_memory(c);
    return st;
}

static void unlist(rlock_client *c)
{
    pthread_mutex_lock(&live_mu);
    for (rlock_client **p = &live; *p; p = &(*p)->next_live) {
        if (*p == c) {
            *p = c->next_live;
            break;
        }
    }
    pthread_mutex_unlock(&live_mu);
}

RLOCK_API void rlock_client_free(rlock_client *c)
{
    if (!c) {
        return;
    }
    if (c->pid != getpid()) {
        /* A fork()ed child: the parent's threads do not exist here and its
         * mutexes may have been copied locked, so only memory and file
         * descriptors are released; nothing is sent to Redis. The child's
         * list of live clients is its own copy: drop this one from it. */
        unlist(c);
        atomic_store(&c->closing, true);
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
        return;
    }
    unlist(c);
    atomic_store(&c->closing, true);

    /* Wake everything a caller may be blocked on, then wait for them. */
    c->topo->close(c);
    rlock__pubsub_stop(c);
    pthread_mutex_lock(&c->life_mu);
    while (atomic_load(&c->active) > 0) {
        pthread_cond_wait(&c->life_cv, &c->life_mu);
    }
    pthread_mutex_unlock(&c->life_mu);

    rlock__callbacks_stop(c);
    /* An acquire that ran after its reply was lost, an unlock that got no
     * answer: settle them now, or the lock stays held for a lease. */
    rlock__settle_all(c, rlock__now_ms() + 2 * c->cfg.command_timeout_ms);
    rlock__watchdog_stop(c);
    rlock__holds_free(c);
    c->topo->destroy(c);
    rlock__pubsub_free(c);
    pthread_mutex_destroy(&c->life_mu);
    pthread_cond_destroy(&c->life_cv);
    free_memory(c);
}
