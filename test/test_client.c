/* The client: configuration, identity, statuses and closing (fork() is in
 * test_faults.c).
 *
 * Which test produces each (call, status) pair include/rlock.h documents
 * ("suite::test"; statuses:: is test_statuses.c, one test per status for
 * every call that documents it). Pairs marked "none" are not produced by
 * any test, and why.
 *
 * rlock_client_new
 *   OK          every test
 *   EINVAL      client::einval_for_bad_arguments, badinput::config_fields_out_of_range
 *   EIO         client::eio_when_nothing_listens, badinput::unreachable_endpoints_give_eio
 *   EAUTH       badauth::passwords_and_acl_users
 *   ETIMEDOUT   statuses::etimedout_from_every_call_when_the_server_stalls
 *   ENOMEM      none: it allocates small, bounded amounts (pool_size <= 1024);
 *               only a malloc hook could fail them, and the tests use none
 * rlock_new
 *   OK, EINVAL  client::einval_for_bad_arguments
 *   ENOMEM      statuses::enomem_from_rlock_new_when_the_name_cannot_be_copied
 *               (under ASan too; under TSan it skips: GCC 12's TSan never
 *               returns NULL from malloc for a name this small; under valgrind
 *               too: an address-space limit stops valgrind itself)
 *   ECLOSED     faults::fork_while_holding,
 *               statuses::eclosed_from_every_call_entering_a_closing_client
 * rlock_lock, rlock_try_lock, rlock_lock_ex
 *   OK          lock::reentrant_hold_count_in_redis, engine::cancel_interrupts_a_blocked_lock
 *   EINVAL      client::einval_for_bad_arguments (lock, try_lock),
 *               statuses::einval_from_lock_ex_and_cancel_new (lock_ex)
 *   EBUSY       lock::try_lock_zero_wait_on_held_lock, wait::try_lock_gives_up_after_its_wait
 *               (try_lock), engine::cancel_interrupts_a_blocked_lock (lock_ex)
 *   ELOST       statuses::elost_from_every_acquire_call_and_unlock,
 *               engine::reentry_after_loss_reports_it
 *   EIO         statuses::eio_from_every_call_when_the_server_is_gone,
 *               faults::outage_longer_than_retry_timeout_gives_eio
 *   ETIMEDOUT   statuses::etimedout_from_every_call_when_the_server_stalls,
 *               faults::client_pause_calls_time_out_and_leave_no_orphan
 *   EREDIS      statuses::eredis_from_every_call_on_error_replies
 *   EKIND       lock::wrongtype_key_is_ekind, statuses::eredis_from_every_call_on_error_replies
 *               (WRONGTYPE), badinput::key_of_another_type
 *   EPROTO      statuses::eproto_from_every_call_on_a_reply_of_another_shape
 *   ECLOSED     statuses::eclosed_from_every_call_entering_a_closing_client,
 *               client::free_wakes_waiters_with_eclosed, faults::fork_while_holding
 *   EAUTH       statuses::eauth_from_every_call_when_a_reconnect_is_refused
 *   EPOOL       statuses::epool_from_every_call_when_the_pool_stays_busy
 *   ECANCELED   engine::cancel_interrupts_a_blocked_lock (lock_ex)
 *   ENOMEM      none (see rlock_client_new)
 * rlock_unlock
 *   OK          lock::reentrant_hold_count_in_redis
 *   EINVAL      client::einval_for_bad_arguments
 *   ENOTOWNER   lock::unlock_by_non_owner_thread_is_refused
 *   ELOST       watchdog::lost_lock_is_reported_and_unlock_says_elost,
 *               statuses::elost_from_every_acquire_call_and_unlock,
 *               unwind::* (every level of a lost hold, each cause)
 *   EIO, ETIMEDOUT, EREDIS, EPROTO, ECLOSED, EAUTH, EPOOL
 *               statuses::<status>_from_every_call_... as for rlock_lock
 * rlock_wait_unlocked
 *   OK          wait_unlocked::free_at_once, wait_unlocked::woken_by_another_clients_unlock
 *   EINVAL      wait_unlocked::free_at_once
 *   EBUSY       wait_unlocked::still_held_when_the_wait_runs_out_is_ebusy
 *   EDEADLK     wait_unlocked::caller_holding_it_is_edeadlk
 *   ECANCELED   wait_unlocked::cancelled_from_another_thread
 *   EIO, ETIMEDOUT, EREDIS, EPROTO, ECLOSED, EAUTH, EPOOL, EPERM, ENOMEM
 *               none yet: the same probe and queue paths as rlock_lock_ex()
 *               and the queries, whose tests produce them
 * rlock_force_unlock
 *   OK          lock::force_unlock_publishes_and_forgets
 *   EINVAL      client::einval_for_bad_arguments
 *   EIO, ETIMEDOUT, EREDIS (NOREPLICAS: DEL works on any type, so WRONGTYPE
 *   cannot fail it), EPROTO, ECLOSED, EAUTH, EPOOL
 *               statuses::<status>_from_every_call_... as for rlock_lock
 *   ENOMEM      none (see rlock_client_new)
 * rlock_is_locked, rlock_is_held_by_current_thread, rlock_is_held_by_thread,
 * rlock_hold_count, rlock_remain_ttl
 *   OK          lock::reentrant_hold_count_in_redis, lock::explicit_lease_expires,
 *               statuses::elost_from_every_acquire_call_and_unlock (is_held_by_thread)
 *   EINVAL      client::einval_for_bad_arguments, badinput::null_arguments_every_function
 *   EREDIS      statuses::eredis_from_every_call_on_error_replies (EXISTS and PTTL on a
 *               server that renamed them away)
 *   EKIND       statuses::eredis_from_every_call_on_error_replies (WRONGTYPE for the
 *               HEXISTS/HGET ones)
 *   EPROTO      statuses::eproto_from_every_call_on_a_reply_of_another_shape,
 *               client::eproto_for_a_non_numeric_count (hold_count)
 *   ETIMEDOUT   statuses::etimedout_from_every_call_when_the_server_stalls,
 *               client::etimedout_when_server_is_paused (hold_count)
 *   EIO, ECLOSED, EAUTH, EPOOL
 *               statuses::<status>_from_every_call_... as for rlock_lock
 *   ENOMEM      none (see rlock_client_new)
 * rlock_cancel_new
 *   OK          engine::cancel_interrupts_a_blocked_lock
 *   EINVAL      statuses::einval_from_lock_ex_and_cancel_new
 *   ENOMEM      none (see rlock_client_new)
 * rlock_client_stat
 *   OK, EINVAL  client::einval_for_bad_arguments
 *
 * Sends that fail (a reset connection: EPIPE, a peer that stops reading: a
 * full send buffer) are in test_statuses.c too, suite send::. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

TestSuite(client, .timeout = 60);

Test(client, config_defaults)
{
    rlock_config cfg;
    memset(&cfg, 0x5a, sizeof cfg);
    rlock_config_init(&cfg);
    cr_assert_null(cfg.url);
    cr_assert_eq(cfg.command_timeout_ms, 3000);
    cr_assert_eq(cfg.watchdog_timeout_ms, 30000);
    cr_assert_eq(cfg.watchdog_batch_size, 100);
    cr_assert_eq(cfg.subscribe_timeout_ms, 7500);
    cr_assert_null(cfg.on_lock_lost);
    rlock_config_init(NULL); /* no crash */
}

Test(client, status_strings_cover_every_value)
{
    for (int s = RLOCK_OK; s <= RLOCK_ECLOSED; s++) {
        cr_assert_not_null(rlock_strerror((rlock_status)s));
        cr_assert_eq(strncmp(rlock_status_name((rlock_status)s), "RLOCK_", 6), 0);
    }
    cr_assert_str_eq(rlock_status_name(RLOCK_EBUSY), "RLOCK_EBUSY");
    cr_assert_str_eq(rlock_status_name((rlock_status)99), "RLOCK_UNKNOWN");
    cr_assert_str_eq(rlock_strerror((rlock_status)-1), "unknown rlock status");
    cr_assert_str_eq(rlock_version(), RLOCK_VERSION_STRING);
}

Test(client, einval_for_bad_arguments)
{
    rlock_client *c = NULL;
    th_assert_status(rlock_client_new(NULL, NULL), RLOCK_EINVAL);
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = "http://127.0.0.1:6379";
    th_assert_status(rlock_client_new(&cfg, &c), RLOCK_EINVAL);
    cfg.url = "redis://127.0.0.1:70000";
    th_assert_status(rlock_client_new(&cfg, &c), RLOCK_EINVAL);
    cfg.url = th_url();
    cfg.command_timeout_ms = -5;
    th_assert_status(rlock_client_new(&cfg, &c), RLOCK_EINVAL);
    cr_assert_null(c, "out untouched on failure");

    c = th_client(NULL, 0);
    rlock *l = NULL;
    th_assert_status(rlock_new(c, "", &l), RLOCK_EINVAL);
    th_assert_status(rlock_new(c, NULL, &l), RLOCK_EINVAL);
    th_assert_status(rlock_new(NULL, "x", &l), RLOCK_EINVAL);
    th_assert_status(rlock_new(c, "x", NULL), RLOCK_EINVAL);
    char *name = th_name("einval");
    th_ok(rlock_new(c, name, &l));
    th_assert_status(rlock_lock(l, 0), RLOCK_EINVAL);
    th_assert_status(rlock_lock(l, -7), RLOCK_EINVAL);
    th_assert_status(rlock_lock(l, RLOCK_MAX_TIME_MS + 1), RLOCK_EINVAL);
    th_assert_status(rlock_try_lock(l, -2, RLOCK_WATCHDOG), RLOCK_EINVAL);
    th_assert_status(rlock_try_lock(l, INT64_MAX, RLOCK_WATCHDOG), RLOCK_EINVAL);
    th_assert_status(rlock_lock(NULL, RLOCK_WATCHDOG), RLOCK_EINVAL);
    th_assert_status(rlock_unlock(NULL), RLOCK_EINVAL);
    th_assert_status(rlock_force_unlock(NULL, NULL), RLOCK_EINVAL);
    th_assert_status(rlock_is_locked(l, NULL), RLOCK_EINVAL);
    th_assert_status(rlock_is_held_by_current_thread(l, NULL), RLOCK_EINVAL);
    th_assert_status(rlock_hold_count(l, NULL), RLOCK_EINVAL);
    th_assert_status(rlock_remain_ttl(NULL, NULL), RLOCK_EINVAL);
    uint64_t v;
    th_assert_status(rlock_client_stat(c, (rlock_stat)42, &v), RLOCK_EINVAL);
    th_assert_status(rlock_client_stat(NULL, RLOCK_STAT_COMMANDS, &v), RLOCK_EINVAL);
    cr_assert_null(rlock_client_id(NULL));
    cr_assert_null(rlock_name(NULL));
    rlock_free(NULL);
    rlock_client_free(NULL);
    /* The huge lease was refused before anything reached Redis. */
    redisContext *r = th_redis(0);
    cr_assert_eq(th_exists(r, name), 0);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    free(name);
}

Test(client, eio_when_nothing_listens)
{
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = "redis://127.0.0.1:1"; /* reserved port: refused at once */
    rlock_client *c = NULL;
    th_assert_status(rlock_client_new(&cfg, &c), RLOCK_EIO);
    cr_assert_null(c);
}

static void *thread_id_of_new_thread(void *arg)
{
    *(uint64_t *)arg = rlock_thread_id();
    return NULL;
}

Test(client, thread_ids_are_distinct_and_stable)
{
    uint64_t me = rlock_thread_id();
    cr_assert(me >= 1);
    cr_assert_eq(rlock_thread_id(), me);
    uint64_t other = 0;
    pthread_t t;
    pthread_create(&t, NULL, thread_id_of_new_thread, &other);
    pthread_join(t, NULL);
    cr_assert(other >= 1);
    cr_assert_neq(other, me);
    rlock_client *a = th_client(NULL, 0), *b = th_client(NULL, 0);
    cr_assert_str_neq(rlock_client_id(a), rlock_client_id(b), "fresh uuid per client");
    rlock_client_free(a);
    rlock_client_free(b);
}

struct blocked {
    rlock_client *c;
    const char *name;
    rlock_status st;
    atomic_bool started; /* about to call rlock_lock() */
    atomic_int tid;      /* its kernel id, for th_wait_blocked() */
};

static void *block_on(void *arg)
{
    struct blocked *b = arg;
    rlock *l;
    th_ok(rlock_new(b->c, b->name, &l));
    atomic_store(&b->tid, (int)th_gettid());
    atomic_store(&b->started, true);
    b->st = rlock_lock(l, RLOCK_WATCHDOG);
    rlock_free(l);
    return NULL;
}

Test(client, free_wakes_waiters_with_eclosed)
{
    rlock_client *holder = th_client(NULL, 0), *c = th_client(NULL, 0);
    char *name = th_name("closed");
    rlock *l;
    th_ok(rlock_new(holder, name, &l));
    th_ok(rlock_lock(l, 30000));
    struct blocked b[2] = {{c, name, RLOCK_OK, false, 0}, {c, name, RLOCK_OK, false, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        pthread_create(&t[i], NULL, block_on, &b[i]);
    }
    th_wait_waiters(0, name, 1, 3000);
    cr_assert(TH_POLL(atomic_load(&b[0].started) && atomic_load(&b[1].started), 3000));
    /* Both asleep inside rlock_lock(), as their threads' state shows. */
    th_wait_blocked(atomic_load(&b[0].tid), 3000);
    th_wait_blocked(atomic_load(&b[1].tid), 3000);
    int64_t t0 = th_now_ms();
    rlock_client_free(c);
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        th_assert_status(b[i].st, RLOCK_ECLOSED);
    }
    cr_assert(th_now_ms() - t0 < th_ms(2000), "closing does not wait for the 30 s lease");
    /* The holder is unaffected. */
    bool held = false;
    th_ok(rlock_is_held_by_current_thread(l, &held));
    cr_assert(held);
    th_ok(rlock_unlock(l));
    rlock_free(l);
    rlock_client_free(holder);
    free(name);
}

Test(client, etimedout_when_server_is_paused)
{
    th_server s;
    th_server_start(&s);
    char *url = th_server_url(&s);
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.command_timeout_ms = 300;
    rlock_client *c = th_client_cfg(&cfg);
    rlock *l;
    th_ok(rlock_new(c, "paused", &l));
    redisContext *r = th_redis(s.port);
    th_run(r, "CLIENT PAUSE 1500 ALL");
    int64_t t0 = th_now_ms();
    int64_t n;
    th_assert_status(rlock_hold_count(l, &n), RLOCK_ETIMEDOUT);
    cr_assert(th_now_ms() - t0 < 1400, "answered by the timeout, not by the pause");
    th_wait_awake(s.port, 3000);
    th_ok(rlock_hold_count(l, &n)); /* a fresh connection after the pause */
    cr_assert_eq(n, 0);
    rlock_free(l);
    rlock_client_free(c);
    redisFree(r);
    th_server_stop(&s);
    free(url);
}

Test(client, eproto_for_a_non_numeric_count)
{
    rlock_client *c = th_client(NULL, 0);
    char *name = th_name("proto");
    char *owner = th_owner(c, rlock_thread_id());
    redisContext *r = th_redis(0);
    th_run(r, "HSET %s %s not-a-number", name, owner);
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    int64_t n;
    th_assert_status(rlock_hold_count(l, &n), RLOCK_EPROTO);
    th_run(r, "DEL %s", name);
    rlock_free(l);
    rlock_client_free(c);
    redisFree(r);
    free(owner);
    free(name);
}

