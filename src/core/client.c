/* What core knows of a client: its configuration, identity (client id,
 * thread ids), the count of calls in progress that lets rlock_client_free()
 * wait for callers, its statistics, and the process's list of live clients
 * that lets a thread's exit end its holds. Creating and closing a client
 * (threads, connections, the order of shutdown) is src/client.c's, above
 * every layer it starts. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "object.h"

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
    d.fair_wait_timeout_ms = RLOCK__DEFAULT_FAIR_WAIT_MS;
    d.spin_min_delay_ms = RLOCK__DEFAULT_SPIN_MIN_MS;
    d.spin_max_delay_ms = RLOCK__DEFAULT_SPIN_MAX_MS;
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
 * thread-specific value's destructor stops that. Only clients made in this
 * process count: a fork()ed child's copies of its parent's clients are not
 * in the list (see in_child), and the fork generation check says the same
 * in a second way. */
static void thread_exit(void *value)
{
    uint64_t tid = (uint64_t)(uintptr_t)value;
    uint64_t gen = rlock__fork_generation();
    pthread_mutex_lock(&live_mu);
    for (rlock_client *c = live; c; c = c->next_live) {
        if (c->fork_gen == gen) {
            rlock__holds_thread_exit(c, tid);
        }
    }
    pthread_mutex_unlock(&live_mu);
}

/* live_mu is held across fork() so that a child never inherits it locked. */
static void before_fork(void)
{
    pthread_mutex_lock(&live_mu);
}

static void in_parent(void)
{
    pthread_mutex_unlock(&live_mu);
}

/* The child's copies of the parent's clients are unusable there
 * (rlock__enter() says RLOCK_ECLOSED) and their mutexes may have been
 * copied locked (a parent thread counting holds at the instant of fork()):
 * a thread-exit hook that walked them would lock one and hang. The child
 * starts with no live client; rlock_client_free() of a copy frees its
 * memory only. */
static void in_child(void)
{
    live = NULL;
    pthread_mutex_unlock(&live_mu);
}

static void init_once(void)
{
    pthread_key_create(&exit_key, thread_exit);
    pthread_atfork(before_fork, in_parent, in_child);
}

void rlock__live_add(rlock_client *c)
{
    pthread_once(&exit_once, init_once);
    pthread_mutex_lock(&live_mu);
    c->next_live = live;
    live = c;
    pthread_mutex_unlock(&live_mu);
}

/* Once this returns, no thread-exit hook is inside c or will enter it. */
void rlock__live_remove(rlock_client *c)
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

/* c->active counts the calls in progress, with RLOCK__CLOSING or'ed in once
 * rlock_client_free() has begun. One word, so that a leaving call learns
 * in the same atomic step whether the closer may be looking at the count:
 *   - not closing: the common path, one compare-and-swap, no mutex, no
 *     system call; the closer, when it comes, sees the count without it;
 *   - closing: the call takes life_mu first and counts itself out under
 *     it. The closer reads the count only under life_mu, so it cannot see
 *     zero until that call has unlocked life_mu, its last touch of the
 *     client (a call that decremented first and locked after could find
 *     the client freed in between). */
#define RLOCK__CLOSING (1 << 30)

void rlock__calls_init(rlock_client *c)
{
    atomic_init(&c->active, 0);
    pthread_mutex_init(&c->life_mu, NULL);
    rlock__cond_init(&c->life_cv);
}

void rlock__calls_destroy(rlock_client *c)
{
    pthread_mutex_destroy(&c->life_mu);
    pthread_cond_destroy(&c->life_cv);
}

rlock_status rlock__enter(rlock_client *c)
{
    rlock__error_clear();
    if (c->fork_gen != rlock__fork_generation()) {
        return rlock__fail(RLOCK_ECLOSED, "the client belongs to the parent process");
    }
    if (atomic_fetch_add(&c->active, 1) & RLOCK__CLOSING) {
        rlock__leave(c);
        return rlock__fail(RLOCK_ECLOSED, "the client is closing");
    }
    return RLOCK_OK;
}

void rlock__leave(rlock_client *c)
{
    int v = atomic_load_explicit(&c->active, memory_order_relaxed);
    while (!(v & RLOCK__CLOSING)) {
        if (atomic_compare_exchange_weak(&c->active, &v, v - 1)) {
            return;
        }
    }
    pthread_mutex_lock(&c->life_mu);
    if (atomic_fetch_sub(&c->active, 1) == (RLOCK__CLOSING | 1)) {
        pthread_cond_broadcast(&c->life_cv);
    }
    pthread_mutex_unlock(&c->life_mu);
}

void rlock__calls_close(rlock_client *c)
{
    atomic_fetch_or(&c->active, RLOCK__CLOSING);
}

void rlock__calls_wait(rlock_client *c)
{
    pthread_mutex_lock(&c->life_mu);
    while (atomic_load(&c->active) & ~RLOCK__CLOSING) {
        pthread_cond_wait(&c->life_cv, &c->life_mu);
    }
    pthread_mutex_unlock(&c->life_mu);
}

bool rlock__closing(rlock_client *c)
{
    return atomic_load(&c->active) & RLOCK__CLOSING;
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

/* ---- configuration -------------------------------------------------- */

static bool time_ok(int64_t v)
{
    return v >= 0 && v <= RLOCK_MAX_TIME_MS;
}

rlock_status rlock__config_fill(rlock_config *cfg)
{
    if (cfg->pool_size < 0 || cfg->pool_size > 1024 || cfg->watchdog_batch_size < 0 ||
        cfg->watchdog_batch_size > 10000 || !time_ok(cfg->connect_timeout_ms) ||
        !time_ok(cfg->command_timeout_ms) || !time_ok(cfg->watchdog_timeout_ms) ||
        !time_ok(cfg->subscribe_timeout_ms) || !time_ok(cfg->retry_timeout_ms) ||
        !time_ok(cfg->fair_wait_timeout_ms) || !time_ok(cfg->spin_min_delay_ms) ||
        !time_ok(cfg->spin_max_delay_ms)) {
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
    if (cfg->fair_wait_timeout_ms == 0) {
        cfg->fair_wait_timeout_ms = RLOCK__DEFAULT_FAIR_WAIT_MS;
    }
    if (cfg->spin_min_delay_ms == 0) {
        cfg->spin_min_delay_ms = RLOCK__DEFAULT_SPIN_MIN_MS;
    }
    if (cfg->spin_max_delay_ms == 0) {
        cfg->spin_max_delay_ms = RLOCK__DEFAULT_SPIN_MAX_MS;
    }
    if (cfg->spin_max_delay_ms < cfg->spin_min_delay_ms) {
        return RLOCK_EINVAL;
    }
    return RLOCK_OK;
}

int64_t rlock__acquire_latch_ttl(const rlock_client *c)
{
    /* A day at most: the key lives that long only when its request never
     * got an answer. */
    int64_t ttl = RLOCK__LATCH_TTL_MS + c->cfg.retry_timeout_ms + c->cfg.command_timeout_ms;
    return ttl < 86400000 ? ttl : 86400000;
}

bool rlock__latch_trusted(const rlock_client *c, int64_t first_sent_ms, int64_t ttl_ms)
{
    return rlock__now_ms() + c->cfg.command_timeout_ms + 1000 < first_sent_ms + ttl_ms;
}
