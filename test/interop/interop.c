/*
 * Interop tests: rlock (this process) against real Redisson (the Java agent,
 * test/interop/src/main/java/rlock/interop/Agent.java) on one throwaway
 * redis-server. Run by test/interop/run.sh once per Redisson version:
 *
 *   interop URL CLASSPATH REDISSON_VERSION [TEST...]
 *
 * This file: the shared helpers, the test table and main. The tests are in
 * locks.c (single locks), wire.c (both sides over time, on the wire) and
 * kinds.c (the fair, read/write, fenced, spin and non-reentrant locks);
 * driver.c has the agent, the MONITOR tap and the C worker threads.
 *
 * Every test checks what each side reports and what Redis holds (hash
 * fields, counts, TTLs, the commands scripts ran, via MONITOR). Wake-up
 * times are printed per direction at the end. Time bounds scale with
 * RLOCK_TEST_TIME_MULTIPLIER.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "interop.h"

struct agent J;      /* the Java side */
rlock_client *C;     /* the C side */
int64_t JWD, CWD;    /* watchdog timeouts: Java's, C's (distinct) */
const char *VERSION; /* Redisson version of the agent */
static int name_seq;

/* A fresh lock name per use: no test sees another's keys or channels. */
void new_name(char *buf, size_t n, const char *test)
{
    snprintf(buf, n, "interop:%s:%s:%d", VERSION, test, ++name_seq);
}

void channel_of(const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "redisson_lock__channel:{%s}", name);
}

void c_field(uint64_t tid, char *buf, size_t n)
{
    snprintf(buf, n, "%s:%" PRIu64, rlock_client_id(C), tid);
}

/* Waits until at least n connections subscribe to the lock's channel. */
int wait_subscribers(const char *name, long long n)
{
    char ch[200];
    channel_of(name, ch, sizeof ch);
    for (int64_t t = 0; t < tms(5000); t += 5) {
        if (r_numsub(ch) >= n) {
            return 0;
        }
        sleep_ms(5);
    }
    return -1;
}

int java_field(const char *worker, char *buf, size_t n)
{
    struct reply r;
    if (agent_call(&J, &r, worker, "whoami") != 0 || !r.ok) {
        return -1;
    }
    size_t len = strlen(r.text);
    if (len >= n) {
        return -1;
    }
    memcpy(buf, r.text, len + 1);
    return 0;
}

/* ---- main ------------------------------------------------------------ */

static const struct {
    const char *name;
    int (*fn)(void);
} tests[] = {
    {"reentry_java", t_reentry_java},
    {"reentry_c", t_reentry_c},
    {"lease_reentry", t_lease_reentry},
    {"wake_java_to_c", t_wake_java_to_c},
    {"wake_c_to_java", t_wake_c_to_java},
    {"lease_expiry", t_lease_expiry},
    {"force_java_wakes_c", t_force_java_wakes_c},
    {"force_c_wakes_java", t_force_c_wakes_java},
    {"lock_lost", t_lock_lost},
    {"watchdog_turns", t_watchdog_turns},
    /* before mutex_mixed: after many watchdog holds come and gone from
     * several threads, Redisson >= 3.44 renews far more often than every
     * timeout/3 (see docs/interop.md) */
    {"wire_unlock_latch", t_wire_unlock_latch},
    {"wire_renewal_batch", t_wire_renewal_batch},
    {"fair_mixed_fifo", t_fair_mixed_fifo},
    {"fair_give_up_both_ways", t_fair_give_up_both_ways},
    {"mutex_mixed", t_mutex_mixed},
    {"fenced_tokens", t_fenced_tokens},
    {"porting_guide", t_porting_guide},
    {"rw_readers_share", t_rw_readers_share},
    {"rw_java_writer_wakes_c_readers", t_rw_java_writer_wakes_c_readers},
    {"rw_c_writer_wakes_java_readers", t_rw_c_writer_wakes_java_readers},
    {"rw_last_reader_wakes_writer", t_rw_last_reader_wakes_writer},
    {"rw_downgrade_wakes_java_reader", t_rw_downgrade_wakes_java_reader},
    {"rw_force_both_ways", t_rw_force_both_ways},
    {"rw_writers_mutex_mixed", t_rw_writers_mutex_mixed},
    {"fair_fifo", t_fair_fifo},
    {"fair_force", t_fair_force},
    {"fair_giveup", t_fair_giveup},
    {"rw_share", t_rw_share},
    {"rw_wake", t_rw_wake},
    {"rw_force", t_rw_force},
    {"rw_downgrade", t_rw_downgrade},
    /* last of the read/write tests: on 3.44-3.52 it leaves Redisson's
     * read renewal failing until its reader is gone */
    {"rw_renewal", t_rw_renewal},
    {"rw_renewal_batch", t_rw_renewal_batch},
    {"fenced_cross", t_fenced_cross},
    {"spin", t_spin},
    {"nonreentrant", t_nonreentrant},
    {"fair_nonreentrant", t_fair_nonreentrant},
    {"mutex_fair", t_mutex_fair},
    {"mutex_rw", t_mutex_rw},
    {"mutex_fenced", t_mutex_fenced},
    {"mutex_spin", t_mutex_spin},
    {"mutex_nonreentrant", t_mutex_nonreentrant},
    {"mutex_fair_nonreentrant", t_mutex_fair_nonreentrant},
    {"wire_effects_lock", t_wire_effects_lock},
    {"wire_effects_fair", t_wire_effects_fair},
    {"wire_effects_rw", t_wire_effects_rw},
    {"wire_effects_fenced", t_wire_effects_fenced},
    {"wire_effects_spin", t_wire_effects_spin},
    {"wire_effects_nonreentrant", t_wire_effects_nonreentrant},
};

static bool selected(int argc, char **argv, const char *name)
{
    if (argc <= 4) {
        return true;
    }
    for (int i = 4; i < argc; i++) {
        if (strcmp(argv[i], name) == 0) {
            return true;
        }
    }
    return false;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s REDIS_URL CLASSPATH VERSION [TEST...]\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    g_url = argv[1];
    VERSION = argv[3];
    for (int a = 4; a < argc; a++) {
        bool known = false;
        for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
            known = known || strcmp(argv[a], tests[i].name) == 0;
        }
        if (!known) {
            fprintf(stderr, "interop: no test called %s\n", argv[a]);
            return 2;
        }
    }
    if (sscanf(g_url, "redis://%63[^:]:%d", g_host, &g_port) != 2) {
        fprintf(stderr, "interop: URL must be redis://HOST:PORT\n");
        return 2;
    }
    R = redisConnect(g_host, g_port);
    if (!R || R->err) {
        fprintf(stderr, "interop: cannot connect to %s\n", g_url);
        return 2;
    }
    JWD = tms(1200);
    CWD = tms(900);
    if (agent_start(&J, argv[2], VERSION, JWD) != 0) {
        return 2;
    }
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = g_url;
    cfg.watchdog_timeout_ms = CWD;
    cfg.on_lock_lost = lost_cb;
    rlock_status st = rlock_client_new(&cfg, &C);
    if (st != RLOCK_OK) {
        fprintf(stderr, "interop: rlock_client_new: %s\n", rlock_status_name(st));
        return 2;
    }
    printf("interop: Redisson %s (client %s, lockWatchdogTimeout %lld ms) vs rlock "
           "(client %s, watchdog_timeout_ms %lld)\n",
           VERSION, J.id, (long long)JWD, rlock_client_id(C), (long long)CWD);
    int passed = 0, failed = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (!selected(argc, argv, tests[i].name)) {
            continue;
        }
        int64_t t0 = now_us();
        int rc = tests[i].fn();
        printf("%s %s [Redisson %s] (%.0f ms)\n", rc == 0 ? "PASS" : "FAIL", tests[i].name, VERSION,
               (double)(now_us() - t0) / 1000.0);
        rc == 0 ? passed++ : failed++;
    }
    measure_report(VERSION);
    agent_stop(&J);
    rlock_client_free(C);
    redisFree(R);
    printf("interop [Redisson %s]: %d passed, %d failed\n", VERSION, passed, failed);
    return failed ? 1 : 0;
}
