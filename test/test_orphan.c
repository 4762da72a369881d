/* An acquire whose reply is lost while the server is stalled may still run
 * later. It must not be counted twice nor leave a hold behind: the thread's
 * next call for the name reconciles Redis's count with its own. */
#include <pthread.h>
#include <stdlib.h>

#include "harness.h"

static th_server srv;

static void setup(void)
{
    th_server_start(&srv);
}

static void teardown(void)
{
    th_server_stop(&srv);
}

TestSuite(orphan, .init = setup, .fini = teardown, .timeout = 60);

Test(orphan, late_acquire_is_released_on_next_call)
{
    char *url = th_server_url(&srv);
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.command_timeout_ms = 250;
    rlock_client *c = th_client_cfg(&cfg);
    rlock *l;
    th_ok(rlock_new(c, "orphan", &l));
    th_ok(rlock_lock(l, 5000)); /* connections made, script cached */
    th_ok(rlock_unlock(l));

    th_stall t;
    th_stall_start(&t, srv.port, 1500);
    /* The acquire sits in the stalled server's socket buffer; its reply
     * and the HGET that would check it both time out. */
    th_assert_status(rlock_try_lock(l, 0, 60000), RLOCK_ETIMEDOUT);
    th_stall_end(&t);

    redisContext *r = th_redis(srv.port);
    char *owner = th_owner(c, rlock_thread_id());
    cr_assert_eq(th_hget_int(r, "orphan", owner), 1,
                 "the stalled acquire ran once the server woke up");
    uint64_t held = 1;
    th_ok(rlock_client_stat(c, RLOCK_STAT_HELD, &held));
    cr_assert_eq(held, 0, "the caller was told it does not hold it");

    /* The next call of this thread for the name releases the orphan first,
     * so this acquisition is counted once. */
    th_ok(rlock_try_lock(l, 0, 60000));
    cr_assert_eq(th_hget_int(r, "orphan", owner), 1, "one hold, not two");
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, "orphan"), 0, "nothing left behind after the only unlock");
    redisFree(r);
    free(owner);
    rlock_free(l);
    rlock_client_free(c);
    free(url);
}
