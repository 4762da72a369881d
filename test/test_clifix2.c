/* Fixes after the second review of issue 15 §1 (test_revcli2.c): rlock
 * run notices a lost lock early. */
#include "cli_helpers.h"

TestSuite(clifix2, .init = cli_setup, .fini = cli_teardown, .timeout = 120);

/* The key of a default-lease (30 s) `rlock run` deleted behind its back:
 * rlock's TTL check for the guards' deadline (every sixth of the lease,
 * 5 s) saw the key missing (PTTL -2) and ignored it, so COMMAND got -S
 * only at the watchdog's next renewal, 10 s after the acquisition. The
 * check now treats a missing key (or one another thread holds) as the
 * loss, at once. Failed before: COMMAND got SIGTERM about 9.6 s after
 * the DEL. The bound is not scaled by the time multiplier: the interval
 * of the check is the point (5 s, plus 2 s for a busy machine, still
 * under the 10 s of the renewal). */
Test(clifix2, deleted_key_is_noticed_by_the_ttl_check)
{
    char *name = th_name("clifix2-del");
    char *mark = tpath("mark");
    char *ready = tpath("mark.ready");
    redisContext *r = th_redis(0);
    pid_t p = START(NULL, "run", name, "--", "sh", "-c",
                    "trap 'echo TERM > \"$0\"; exit 0' TERM; : > \"$0.ready\"; "
                    "while :; do sleep 0.05; done",
                    mark);
    wait_for_file(ready, 10000);
    cr_assert_eq(th_exists(r, name), 1);
    int64_t t0 = th_now_ms();
    th_run(r, "DEL %s", name);
    bool got = TH_POLL(access(mark, F_OK) == 0, 20000);
    int64_t took = th_now_ms() - t0;
    int code = wait_exit(p, 10000);
    cr_assert(got, "COMMAND got no SIGTERM after the DEL (rlock exit %d)", code);
    cr_assert(took <= 7000, "COMMAND got SIGTERM %lld ms after the DEL (the check runs every 5 s)",
              (long long)took);
    char *text = slurp(mark);
    cr_assert_str_eq(text, "TERM\n");
    cr_assert_eq(code, 79, "rlock exit %d", code);
    cr_assert_eq(th_exists(r, name), 0);
    free(text);
    redisFree(r);
    free(ready);
    free(mark);
    free(name);
}
