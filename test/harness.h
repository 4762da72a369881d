/* Test harness: the shared throwaway redis-server started by
 * scripts/run-tests.sh, private servers for fault tests, direct hiredis
 * connections to assert what Redis holds, and small process helpers. */
#ifndef RLOCK_TEST_HARNESS_H
#define RLOCK_TEST_HARNESS_H

#include <criterion/criterion.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "rlock.h"

/* Asserts a status and prints both names on failure. */
#define th_assert_status(got, want)                                                       \
    do {                                                                                  \
        rlock_status th_got_ = (got), th_want_ = (want);                                  \
        cr_assert_eq(th_got_, th_want_, "%s:%d: expected %s, got %s", __FILE__, __LINE__, \
                     rlock_status_name(th_want_), rlock_status_name(th_got_));            \
    } while (0)
#define th_ok(expr) th_assert_status((expr), RLOCK_OK)

/* Built with -fsanitize=address or thread. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TH_UNDER_SANITIZER 1
#else
#define TH_UNDER_SANITIZER 0
#endif

/* Whether this process runs under valgrind (its preload is mapped): an
 * address-space limit there stops valgrind itself, not a malloc. */
bool th_under_valgrind(void);

/* Whether a fork()ed child of a multithreaded test may make and free
 * clients. With glibc it may (its malloc is fork-safe). Not under the
 * sanitizers of Debian's GCC 12: ASan does not hold its allocator locks
 * across fork(), so a child whose parent had a thread inside malloc or free
 * at that instant waits forever in its own next malloc; TSan aborts a child
 * that starts a thread with the id of one of the parent's ("dup thread with
 * used id"). There the child stops after the calls that allocate nothing. */
#define TH_FORKED_CHILD_CAN_MAKE_CLIENTS (!TH_UNDER_SANITIZER)

/* The shared server: "redis://127.0.0.1:<port>" and its port. */
const char *th_url(void);
int th_port(void);

/* A new client on the shared server (or on url when not NULL), with the
 * given watchdog timeout (0: default). Aborts the test on failure. */
rlock_client *th_client(const char *url, int64_t watchdog_ms);
rlock_client *th_client_cfg(const rlock_config *cfg);

/* A unique lock name: "<prefix>:<pid>:<counter>:<random>". Static buffer
 * per call slot is not used: the caller frees it. */
char *th_name(const char *prefix);

/* A direct hiredis connection to port (0: the shared server). */
redisContext *th_redis(int port);
/* Runs a command and returns the reply; aborts the test on a transport
 * error. The caller frees it with freeReplyObject(). */
redisReply *th_cmd(redisContext *r, const char *fmt, ...);
/* Runs a command whose reply is not needed, and frees it. */
void th_run(redisContext *r, const char *fmt, ...);
/* Integer replies and common look-ups. */
long long th_hget_int(redisContext *r, const char *key, const char *field);
long long th_pttl(redisContext *r, const char *key);
long long th_exists(redisContext *r, const char *key);
long long th_hlen(redisContext *r, const char *key);
/* "<uuid>:<tid>" for client c and thread tid. The caller frees it. */
char *th_owner(rlock_client *c, uint64_t tid);

/* The pub/sub channel of lock name (spec 0.1): "redisson_lock__channel:"
 * then the name, wrapped in braces unless it has a hash tag. Caller frees. */
char *th_channel(const char *name);

/* A subscriber on its own connection, for asserting published messages;
 * th_psubscribe subscribes to a pattern (keyspace notifications). */
redisContext *th_subscribe(int port, const char *channel);
redisContext *th_psubscribe(int port, const char *pattern);
/* Waits up to th_ms(timeout_ms) for the next message (or pmessage);
 * returns a malloc'd payload or NULL on timeout. */
char *th_next_message(redisContext *sub, int timeout_ms);

/* Certificates for TLS tests, made with the openssl command into a temp
 * directory by th_tls_make() and removed by th_tls_free(): a CA; a server
 * certificate it signed for localhost and 127.0.0.1 (SAN) and another for
 * the host name "other.example" only; a client certificate it signed; an
 * unrelated second CA. Each X.crt has its key in X.key. */
typedef struct th_tls {
    char dir[256];
    char ca[300], other_ca[300];
    char server_crt[300], server_key[300];
    char other_crt[300], other_key[300]; /* CN and SAN other.example */
    char client_crt[300], client_key[300];
} th_tls;
void th_tls_make(th_tls *t);
void th_tls_free(th_tls *t);

/* Private server for fault tests (restart, kill). */
typedef struct th_server {
    int port;
    pid_t pid;
    char dir[256];
    const char *const *args; /* extra redis-server arguments, or NULL */
    /* Set by th_server_start_tls(). */
    const th_tls *tls;
    bool tls_other_host;
    const char *tls_auth;
    int tls_port;
} th_server;
void th_server_start(th_server *s);
/* The same with extra redis-server arguments (NULL-terminated; they must
 * outlive the server, e.g. a static array), e.g. {"--rename-command",
 * "EXISTS", "", NULL}. */
void th_server_start_args(th_server *s, const char *const *args);
/* A server that also listens with TLS on s->tls_port (picked by the
 * start) with tls->server_crt (or other_crt with other_host), and
 * tls-auth-clients auth ("no" when NULL; "yes" wants a client
 * certificate). s->port stays plain, for the test's own checks. */
void th_server_start_tls(th_server *s, const th_tls *tls, const char *auth, bool other_host);
void th_server_stop(th_server *s);       /* SIGTERM and wait */
void th_server_kill(th_server *s);       /* SIGKILL and wait */
void th_server_restart(th_server *s);    /* stop, start again on the same port */
char *th_server_url(const th_server *s); /* caller frees */
/* "rediss://127.0.0.1:<tls_port>"; caller frees. */
char *th_server_tls_url(const th_server *s);

/* The TLS suites' init and fini: fresh certificates in *certs, a private
 * server with a TLS port as th_server_start_tls(), and its rediss:// URL
 * (returned; th_tls_teardown() frees it). */
char *th_tls_setup(th_tls *certs, th_server *srv, const char *auth, bool other_host);
void th_tls_teardown(th_tls *certs, th_server *srv, char *url);
/* cfg initialised for url, trusting ca, with 1 s connect and command
 * timeouts. */
void th_tls_config(rlock_config *cfg, const char *url, const char *ca);

/* Monotonic milliseconds. */
int64_t th_now_ms(void);
void th_sleep_ms(int64_t ms);

/* Test timing scales with one multiplier, RLOCK_TEST_TIME_MULTIPLIER (a
 * positive number, default 1; the sanitizer and valgrind targets raise it),
 * as libuv's UV_TEST_TIMEOUT_MULTIPLIER does. th_ms(x) is x times it: use it
 * for every bound a test waits for, never for a time the library is asked
 * to keep (a lease, a wait_ms whose expiry is asserted). */
double th_time_multiplier(void);
int64_t th_ms(int64_t ms);

/* ---- polling instead of sleeping --------------------------------------
 * A test that waits for a state (a subscription in place, a renewal, a key
 * gone) polls for it with a bound rather than sleeping a fixed time. Every
 * timeout_ms below is the nominal bound: the helpers scale it with th_ms()
 * themselves. A fixed th_sleep_ms() is kept only where the point of the
 * test is that time passes (waiting past a lease), with a comment. The
 * th_wait_* macros assert, naming the caller's file and line. */

/* Evaluates expr every few ms until it is true or th_ms(timeout_ms) has
 * passed; the value is whether it became true. A GNU statement expression,
 * so expr may use the caller's variables. */
#define TH_POLL(expr, timeout_ms)                                       \
    ({                                                                  \
        int64_t th_poll_end_ = th_now_ms() + th_ms(timeout_ms);         \
        bool th_poll_ok_;                                               \
        while (!(th_poll_ok_ = (expr)) && th_now_ms() < th_poll_end_) { \
            th_sleep_ms(5);                                             \
        }                                                               \
        th_poll_ok_;                                                    \
    })

/* The same with a callback. */
bool th_poll_until(bool (*cond)(void *), void *arg, int64_t timeout_ms);

/* PUBSUB NUMSUB of channel on port (0: the shared server). */
long long th_numsub(int port, const char *channel);
/* Asserts that at least n connections subscribe to channel within
 * th_ms(timeout_ms): a waiter's subscription is in place. */
void th__wait_numsub(const char *file, int line, int port, const char *channel, long long n,
                     int64_t timeout_ms);
#define th_wait_numsub(port, channel, n, timeout_ms) \
    th__wait_numsub(__FILE__, __LINE__, port, channel, n, timeout_ms)
/* The same for the channel of lock name. */
void th__wait_waiters(const char *file, int line, int port, const char *name, long long n,
                      int64_t timeout_ms);
#define th_wait_waiters(port, name, n, timeout_ms) \
    th__wait_waiters(__FILE__, __LINE__, port, name, n, timeout_ms)
/* Asserts that the server on port (0: the shared one) stops answering (a
 * DEBUG SLEEP or CLIENT PAUSE took effect), or answers again, within
 * th_ms(timeout_ms). */
void th__wait_stalled(const char *file, int line, int port, int64_t timeout_ms);
#define th_wait_stalled(port, timeout_ms) th__wait_stalled(__FILE__, __LINE__, port, timeout_ms)
void th__wait_awake(const char *file, int line, int port, int64_t timeout_ms);
#define th_wait_awake(port, timeout_ms) th__wait_awake(__FILE__, __LINE__, port, timeout_ms)
/* Asserts that EXISTS key becomes want within th_ms(timeout_ms). */
void th__wait_exists(const char *file, int line, redisContext *r, const char *key, long long want,
                     int64_t timeout_ms);
#define th_wait_exists(r, key, want, timeout_ms) \
    th__wait_exists(__FILE__, __LINE__, r, key, want, timeout_ms)
/* Asserts that PTTL key rises above its current value within
 * th_ms(timeout_ms): a renewal reset the lease. Returns the new PTTL. */
long long th__wait_renewal(const char *file, int line, redisContext *r, const char *key,
                           int64_t timeout_ms);
#define th_wait_renewal(r, key, timeout_ms) th__wait_renewal(__FILE__, __LINE__, r, key, timeout_ms)

/* The calling thread's kernel id, for th_wait_blocked(). */
pid_t th_gettid(void);
/* Asserts that thread tid of this process is asleep in the kernel waiting
 * on a futex (a condition variable: a waiter inside rlock_lock() between
 * attempts) in three samples in a row, within th_ms(timeout_ms). No rlock
 * call tells from outside that a thread sleeps inside it; its kernel state
 * does (/proc/self/task/<tid>/syscall). */
void th__wait_blocked(const char *file, int line, pid_t tid, int64_t timeout_ms);
#define th_wait_blocked(tid, timeout_ms) th__wait_blocked(__FILE__, __LINE__, tid, timeout_ms)

/* Runs fn(arg) in a forked child that exits with fn's return value, through
 * th_child_exit(). */
pid_t th_fork(int (*fn)(void *), void *arg);
/* Ends a forked child with _exit(code), after writing its gcov counters when
 * the tests are built for coverage (make coverage): _exit() skips the
 * atexit handler that writes them, so a child's calls would not count. */
_Noreturn void th_child_exit(int code);
/* Waits for a child; returns its exit status, or 128+signal. */
int th_wait(pid_t pid);
/* The same for at most th_ms(timeout_ms); -1 (after killing it with
 * SIGKILL and reaping it) when the child did not finish in time. */
int th_wait_bounded(pid_t pid, int64_t timeout_ms);

/* ---- stalling the server ---------------------------------------------
 * DEBUG SLEEP for ms on a connection of its own, from a thread, on the
 * server at port (0: the shared one). th_stall_start() returns once the
 * server has stopped answering (th_wait_stalled), so the caller's next
 * command meets a stalled server; th_stall_end() waits for the sleep to
 * end. Private servers only: a stall would stall every other test. */
typedef struct th_stall {
    int port;
    int64_t ms;
    pthread_t th;
} th_stall;
void th__stall_start(const char *file, int line, th_stall *s, int port, int64_t ms);
#define th_stall_start(s, port, ms) th__stall_start(__FILE__, __LINE__, s, port, ms)
void th_stall_end(th_stall *s);

/* ---- callbacks and threads of the lock tests --------------------------
 * A count of on_lock_lost calls: set cfg.on_lock_lost = th_count_lost and
 * cfg.on_lock_lost_arg to a th_lost_count = {PTHREAD_MUTEX_INITIALIZER, 0};
 * th_lost_calls() reads it. */
typedef struct th_lost_count {
    pthread_mutex_t mu;
    int calls;
} th_lost_count;
void th_count_lost(const char *name, uint64_t tid, void *arg);
int th_lost_calls(th_lost_count *k);

/* A thread (th_bg_main) that waits on lock name of client c: with
 * rlock_wait_unlocked(wait_ms, cancel), or, with lock, takes it with
 * rlock_lock_ex(wait_ms, RLOCK_WATCHDOG, cancel) and unlocks it. st is
 * what the call returned, returned_at when (th_now_ms()). */
typedef struct th_bg {
    rlock_client *c;
    const char *name;
    int64_t wait_ms;
    rlock_cancel *cancel;
    bool lock;
    pid_t tid;
    rlock_status st;
    int64_t returned_at;
} th_bg;
void *th_bg_main(void *arg);
/* The kernel id of b's thread, once it has started (th_wait_blocked). */
pid_t th_bg_tid(th_bg *b);

/* Path of a built program (build dir from RLOCK_TEST_BUILD), caller frees. */
char *th_build_path(const char *rel);

#endif
