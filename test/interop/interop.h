/*
 * Shared by the interop tests (interop.c, locks.c, wire.c): the two sides,
 * naming, and checks of what Redis holds. See interop.c.
 */
#ifndef INTEROP_H
#define INTEROP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "driver.h"

extern struct agent J;      /* the Java side */
extern rlock_client *C;     /* the C side */
extern int64_t JWD, CWD;    /* watchdog timeouts: Java's, C's (distinct) */
extern const char *VERSION; /* Redisson version of the agent */

/* A fresh lock name per use: no test sees another's keys or channels. */
void new_name(char *buf, size_t n, const char *test);
void channel_of(const char *name, char *buf, size_t n);
/* The owner field of thread tid of the C client. */
void c_field(uint64_t tid, char *buf, size_t n);
/* Waits until at least n connections subscribe to the lock's channel. */
int wait_subscribers(const char *name, long long n);
/* The owner field of a Java worker thread ("whoami"). */
int java_field(const char *worker, char *buf, size_t n);

/* Calls the agent and requires an "ok" reply. */
#define JOK(r, worker, ...)                                                   \
    do {                                                                      \
        CHECK(agent_call(&J, (r), (worker), __VA_ARGS__) == 0, "agent call"); \
        CHECK((r)->ok, "agent %s: %s", #__VA_ARGS__, (r)->text);              \
    } while (0)

/* Requires the lock hash to hold exactly one field, with this count. */
#define CHECK_HOLD(name, field, count)                                      \
    do {                                                                    \
        char f_[160] = "";                                                  \
        long long v_ = 0;                                                   \
        int n_ = r_fields((name), f_, sizeof f_, &v_);                      \
        CHECK(n_ == 1, "HGETALL %s: expected 1 field, got %d", (name), n_); \
        CHECK_STR(f_, (field));                                             \
        CHECK_INT(v_, (count));                                             \
    } while (0)

typedef rlock_status (*ctor_fn)(rlock_client *, const char *, rlock **);

/* The tests: 0 passed, -1 failed (a CHECK printed why). */
int t_reentry_java(void);
int t_reentry_c(void);
int t_lease_reentry(void);
int t_wake_java_to_c(void);
int t_wake_c_to_java(void);
int t_lease_expiry(void);
int t_force_java_wakes_c(void);
int t_force_c_wakes_java(void);
int t_lock_lost(void);
int t_watchdog_turns(void);
int t_mutex_mixed(void);
int t_wire_unlock_latch(void);
int t_wire_renewal_batch(void);
int t_porting_guide(void);
/* fair.c, fenced.c, rwlock.c: the kinds' own interop tests */
int t_fenced_tokens(void);
int t_fair_mixed_fifo(void);
int t_fair_give_up_both_ways(void);
int t_rw_readers_share(void);
int t_rw_java_writer_wakes_c_readers(void);
int t_rw_c_writer_wakes_java_readers(void);
int t_rw_last_reader_wakes_writer(void);
int t_rw_downgrade_wakes_java_reader(void);
int t_rw_force_both_ways(void);
int t_rw_writers_mutex_mixed(void);
/* kinds.c: the rest of the lock family */
int t_fair_fifo(void);
int t_fair_force(void);
int t_fair_giveup(void);
int t_rw_share(void);
int t_rw_wake(void);
int t_rw_force(void);
int t_rw_downgrade(void);
int t_rw_renewal(void);
int t_rw_renewal_batch(void);
int t_fenced_cross(void);
int t_spin(void);
int t_nonreentrant(void);
int t_fair_nonreentrant(void);
int t_mutex_fair(void);
int t_mutex_rw(void);
int t_mutex_fenced(void);
int t_mutex_spin(void);
int t_mutex_nonreentrant(void);
int t_mutex_fair_nonreentrant(void);
/* effects.c: the same steps on both sides, Redis compared */
int t_wire_effects_lock(void);
int t_wire_effects_fair(void);
int t_wire_effects_rw(void);
int t_wire_effects_fenced(void);
int t_wire_effects_spin(void);
int t_wire_effects_nonreentrant(void);

#endif
