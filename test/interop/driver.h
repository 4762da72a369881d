/*
 * The C side of the interop tests: the Java agent process, a MONITOR tap
 * on the test server, C worker threads, and the checks. Public rlock API
 * only; hiredis for what Redis holds.
 */
#ifndef INTEROP_DRIVER_H
#define INTEROP_DRIVER_H

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "rlock.h"

/* ---- time ---------------------------------------------------------- */

/* Microseconds since the epoch (CLOCK_REALTIME, the clock the agent's
 * Instant.now() reads). */
int64_t now_us(void);
void sleep_ms(int64_t ms);
/* ms scaled by RLOCK_TEST_TIME_MULTIPLIER (default 1). */
int64_t tms(int64_t ms);

/* ---- checks -------------------------------------------------------- */

/* Each check prints expected and actual on failure and returns from the
 * test function (which returns int: 0 passed, -1 failed). */
void check_failed(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define CHECK(cond, ...)                                   \
    do {                                                   \
        if (!(cond)) {                                     \
            check_failed(__FILE__, __LINE__, __VA_ARGS__); \
            return -1;                                     \
        }                                                  \
    } while (0)
#define CHECK_ST(st, want)                                                            \
    do {                                                                              \
        rlock_status st_ = (st);                                                      \
        CHECK(st_ == (want), "%s: expected %s, got %s", #st, rlock_status_name(want), \
              rlock_status_name(st_));                                                \
    } while (0)
#define CHECK_INT(got, want)                                          \
    do {                                                              \
        long long g_ = (long long)(got), w_ = (long long)(want);      \
        CHECK(g_ == w_, "%s: expected %lld, got %lld", #got, w_, g_); \
    } while (0)
#define CHECK_RANGE(got, lo, hi)                                                            \
    do {                                                                                    \
        long long g_ = (long long)(got), l_ = (long long)(lo), h_ = (long long)(hi);        \
        CHECK(g_ >= l_ && g_ <= h_, "%s: expected %lld..%lld, got %lld", #got, l_, h_, g_); \
    } while (0)
#define CHECK_STR(got, want)                                                         \
    do {                                                                             \
        const char *g_ = (got), *w_ = (want);                                        \
        CHECK(g_ &&strcmp(g_, w_) == 0, "%s: expected \"%s\", got \"%s\"", #got, w_, \
              g_ ? g_ : "(null)");                                                   \
    } while (0)

/* ---- the test server, read directly -------------------------------- */

extern redisContext *R; /* one connection of the driver's own */
extern const char *g_url;
extern char g_host[64];
extern int g_port;

/* Runs a command; the integer reply, or -1000 + type on anything else. */
long long r_int(const char *fmt, ...);
/* Runs a command; a malloc()ed copy of the string/status reply, NULL if
 * nil or not a string. */
char *r_str(const char *fmt, ...);
/* HLEN-free view of a lock hash: number of fields, and the first one. */
int r_fields(const char *key, char *field, size_t fsz, long long *value);
/* Subscribers of a channel (PUBSUB NUMSUB). */
long long r_numsub(const char *channel);

/* ---- MONITOR tap --------------------------------------------------- */

struct tap {
    redisContext *c;
    pthread_t th;
    pthread_mutex_t mu;
    char **lines;
    size_t n, cap;
};

/* Starts MONITOR on a connection of its own: every command the server
 * runs afterwards (scripts' inner calls included) is recorded. On the heap,
 * so a test that fails and returns early leaves its thread valid memory.
 * NULL on failure. */
struct tap *tap_new(void);
/* Waits until the tap has seen everything sent before the call; returns
 * the number of lines it holds then (-1 if it never caught up). */
long tap_mark(struct tap *t);
/* Waits until the tap has seen everything sent before the call, stops
 * it. The lines stay readable until tap_free(). */
int tap_stop(struct tap *t);
void tap_free(struct tap *t); /* after tap_stop(); frees t */
/* Server time (us) of the first line at or after index from whose command
 * is cmd (any case) with first argument arg1; 0 if none yet. */
int64_t tap_find(struct tap *t, size_t from, const char *cmd, const char *arg1);
/* Splits a MONITOR line into its quoted arguments; returns argc. */
int tap_args(const char *line, char argv[][160], int max);

/* ---- the Java agent ------------------------------------------------ */

struct reply {
    unsigned tag;
    bool ok;
    char text[512];
    struct reply *next;
};

struct agent {
    pid_t pid;
    FILE *in;
    int out_fd;
    pthread_t reader;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct reply *replies;
    bool eof;
    unsigned next_tag;
    char version[32];
    char id[64];
};

/* Starts "java -cp CP rlock.interop.Agent URL WATCHDOG_MS VERSION" and
 * waits for its "ready" line (at most 60 s, the JVM start). */
int agent_start(struct agent *a, const char *classpath, const char *version, int64_t watchdog_ms);
void agent_stop(struct agent *a);
/* Sends "TAG WORKER fmt..." and returns TAG without waiting. */
unsigned agent_send(struct agent *a, const char *worker, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Waits up to timeout_ms for the reply to tag; 0 and *r, or -1. */
int agent_wait(struct agent *a, unsigned tag, int64_t timeout_ms, struct reply *r);
/* Non-blocking: 1 if the reply to tag has arrived (left in place). */
int agent_done(struct agent *a, unsigned tag);
/* agent_send + agent_wait (10 s scaled); -1 if no reply. */
int agent_call(struct agent *a, struct reply *r, const char *worker, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The n-th (0-based) space-separated word of a reply's text as an
 * integer; 0 if absent. */
long long reply_word(const struct reply *r, int n);
int version_at_least(const char *version, int major, int minor);

/* ---- C worker threads ---------------------------------------------- */

/* A thread that runs one rlock call at a time on request, so a hold it
 * takes is released by the same thread (rlock owners are threads). */
enum cop {
    COP_NONE,
    COP_LOCK,
    COP_TRYLOCK,
    COP_UNLOCK,
    COP_COUNT,
    COP_FORCE, /* rlock_force_unlock: value = was_locked */
    COP_TOKEN, /* rlock_fence_token: value = the token */
    COP_QUIT
};

struct cworker {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    rlock *lock;
    enum cop op;
    int64_t a1, a2;
    bool busy, done;
    rlock_status st;
    int64_t value;
    int64_t t_called, t_returned; /* now_us() around the call */
    uint64_t tid;                 /* rlock_thread_id() of the thread */
};

/* On the heap, for the same reason as tap_new(). NULL on failure. */
struct cworker *cw_new(void);
/* Posts one call; cw_wait returns its status (or -1 on timeout). */
void cw_post(struct cworker *w, rlock *l, enum cop op, int64_t a1, int64_t a2);
int cw_wait(struct cworker *w, int64_t timeout_ms);
bool cw_idle(struct cworker *w);
/* Ends the thread and frees w; one still inside a call (after a failed
 * test) is left running and w is not freed. */
void cw_stop(struct cworker *w);

/* ---- a raw subscriber ---------------------------------------------- */

/* A connection of its own PSUBSCRIBEd to a pattern; every message on a
 * matching channel is recorded with its arrival time. On the heap, for the
 * same reason as tap_new(). */
struct submsg {
    char channel[200];
    char payload[64];
    int64_t t_us;
};

struct sub {
    redisContext *c;
    pthread_t th;
    pthread_mutex_t mu;
    struct submsg *msgs;
    size_t n, cap;
    int marks; /* markers seen (not in msgs) */
};

/* NULL on failure; returns once the subscription is active. */
struct sub *sub_new(const char *pattern);
/* Waits until the subscriber has seen every message published before the
 * call; returns the number of messages it holds then (-1 if it never
 * caught up). */
long sub_mark(struct sub *s);
/* Messages from index from on whose channel is channel (NULL: any) and
 * whose payload is payload (NULL: any). */
int sub_count(struct sub *s, size_t from, const char *channel, const char *payload);
/* Copies message i; 0, or -1 if there is none. */
int sub_get(struct sub *s, size_t i, struct submsg *out);
/* Stops and frees it. */
void sub_free(struct sub *s);

/* ---- on_lock_lost events of the C client --------------------------- */

struct lost_event {
    char name[128];
    uint64_t tid;
    int64_t t_us;
};
void lost_cb(const char *name, uint64_t tid, void *arg);
/* Waits up to timeout_ms for an event on name; 0 and *ev, or -1. */
int lost_wait(const char *name, int64_t timeout_ms, struct lost_event *ev);
int lost_count(void);

/* ---- wake-up measurements, printed at the end ---------------------- */

void measure(const char *what, double ms);
void measure_report(const char *version);

#endif
