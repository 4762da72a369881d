/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rlock — Redisson-compatible distributed reentrant locks on Redis.
 *
 * One installed header. It includes only standard headers; hiredis and
 * pthreads stay private to the library.
 *
 * Model
 * -----
 * An rlock_client is one connection to one Redis server (a pool of command
 * connections, one pub/sub connection, one watchdog thread). Make one per
 * process and share it between threads. An rlock is a handle on one lock
 * name; any thread may use any handle.
 *
 * Ownership is per thread, as in Redisson: the owner of a hold is the string
 * "<client uuid>:<thread id>", where the thread id is rlock_thread_id(). A
 * lock is reentrant: the same thread may take it again, and must unlock it
 * as many times as it locked it.
 *
 * Every function that can fail returns an rlock_status; results come back
 * through out-parameters, which are written only on RLOCK_OK. Every function
 * checks its arguments and returns RLOCK_EINVAL instead of crashing on NULL
 * pointers, empty names or out-of-range times.
 *
 * Lifetimes: free every rlock before its client. Freeing a client does not
 * unlock the locks it holds: their leases run out in Redis (the watchdog
 * stops renewing them), exactly as when the process dies.
 */
#ifndef RLOCK_H
#define RLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && !defined(RLOCK_STATIC_ONLY)
#define RLOCK_API __attribute__((visibility("default")))
#else
#define RLOCK_API
#endif

/* The version of this header: the one place the version is written. The
 * Makefile reads these three lines for the library's file name, rlock.pc,
 * the CMake package and the man pages; rlock_version() returns the string
 * the library was built with. */
#define RLOCK_VERSION_MAJOR 0
#define RLOCK_VERSION_MINOR 2
#define RLOCK_VERSION_PATCH 0
#define RLOCK__STR(x) #x
#define RLOCK__XSTR(x) RLOCK__STR(x)
#define RLOCK_VERSION_STRING         \
    RLOCK__XSTR(RLOCK_VERSION_MAJOR) \
    "." RLOCK__XSTR(RLOCK_VERSION_MINOR) "." RLOCK__XSTR(RLOCK_VERSION_PATCH)

typedef struct rlock_client rlock_client; /* one per process; thread-safe */
typedef struct rlock rlock;               /* a lock name; thread-safe handle */

/* Status of every call. Values never change; new ones are only appended. */
typedef enum rlock_status {
    RLOCK_OK = 0,
    RLOCK_EINVAL = 1,    /* bad argument or configuration */
    RLOCK_ENOMEM = 2,    /* out of memory */
    RLOCK_EBUSY = 3,     /* not acquired: held elsewhere when the wait ran out */
    RLOCK_ENOTOWNER = 4, /* unlock by a thread that does not hold it */
    RLOCK_ELOST = 5,     /* this thread held it, but the lease was lost */
    RLOCK_EIO = 6,       /* cannot reach Redis (connect, AUTH, broken link) */
    RLOCK_ETIMEDOUT = 7, /* Redis did not answer within command_timeout_ms */
    RLOCK_EREDIS = 8,    /* Redis answered with an error reply */
    RLOCK_EPROTO = 9,    /* reply of an unexpected shape */
    RLOCK_ECLOSED = 10,  /* client closing, or used in a fork()ed child */
} rlock_status;

/* lease_ms value: hold the lock with watchdog_timeout_ms as its lease and
 * renew it every watchdog_timeout_ms / 3 for as long as it is held. */
#define RLOCK_WATCHDOG ((int64_t)-1)
/* wait_ms value: wait until acquired, however long it takes. */
#define RLOCK_WAIT_FOREVER ((int64_t)-1)
/* Largest lease, wait or timeout accepted, in ms (100 years). */
#define RLOCK_MAX_TIME_MS ((int64_t)3153600000000)

/* Client configuration. Initialise with rlock_config_init(), then change
 * the fields you need. rlock_client_new() copies it (the url string too). */
typedef struct rlock_config {
    /* redis://[[user]:password@]host[:port][/db]
     * unix:///path/to/redis.sock[?db=N][&password=P][&user=U]
     * NULL -> redis://127.0.0.1:6379. Percent-escapes (%40) are decoded in
     * the user and password. An empty password without a user
     * (redis://:@host) sends no AUTH. */
    const char *url;
    int pool_size;               /* most command connections, made on
                                    demand; 0 -> 32 */
    int64_t connect_timeout_ms;  /* per connect attempt; 0 -> 2000 */
    int64_t command_timeout_ms;  /* per reply; 0 -> 3000 */
    int64_t watchdog_timeout_ms; /* lease while renewing; 0 -> 30000 */
    /* Called from the watchdog thread, with no rlock mutex held, when a
     * renewal finds that a watchdog-mode hold is gone from Redis (expired,
     * force-unlocked, Redis restarted without the key). The name pointer is
     * valid only during the call. The callback may call any rlock function
     * except rlock_client_free() on its own client. */
    void (*on_lock_lost)(const char *name, uint64_t thread_id, void *arg);
    void *on_lock_lost_arg;
    /* Most locks renewed by one script call; 0 -> 100 (as Redisson). */
    int watchdog_batch_size;
    /* How long a blocked rlock_lock()/rlock_try_lock() waits for the server
     * to confirm its SUBSCRIBE before it falls back to sleeping on the
     * holder's TTL; 0 -> 7500. */
    int64_t subscribe_timeout_ms;
    /* How long a waiter keeps retrying through connection errors (Redis
     * restarting, link dropped) before it returns RLOCK_EIO; 0 -> 30000. */
    int64_t retry_timeout_ms;
} rlock_config;

/* Fills every field with its default. Never fails; a NULL cfg is ignored. */
RLOCK_API void rlock_config_init(rlock_config *cfg);

/* Creates a client: parses the URL, opens one command connection and the
 * pub/sub connection (to report a bad address or password now rather than
 * later), and starts the pub/sub and watchdog threads. Blocks for at most
 * about 2 x (connect_timeout_ms + command_timeout_ms). cfg may be NULL for
 * all defaults.
 * Returns RLOCK_OK (and *out), RLOCK_EINVAL (bad URL or field), RLOCK_EIO
 * (cannot connect, AUTH refused, bad db), RLOCK_ETIMEDOUT, RLOCK_ENOMEM. */
RLOCK_API rlock_status rlock_client_new(const rlock_config *cfg, rlock_client **out);

/* Closes a client: wakes every thread blocked in rlock_lock()/try_lock() on
 * it (they return RLOCK_ECLOSED), waits for calls in progress to return
 * (each at most command_timeout_ms), stops both threads, deletes the unlock
 * latch keys it still had queued, closes the connections and frees
 * everything. Held locks are not unlocked; their leases run out. Call it
 * once. rlock_free() touches only the handle, so handles may be freed
 * before or after their client (a thread woken with RLOCK_ECLOSED frees its
 * handle afterwards); no other call may use a handle of a freed client.
 * NULL is a no-op. In a fork()ed child it only frees memory and closes the
 * child's copies of the sockets: it sends nothing and never touches the
 * parent's connections or threads. Memory a parent thread was using at the
 * instant of fork() (a connection being re-opened, a reply being read) is
 * out of the child's reach and stays allocated. */
RLOCK_API void rlock_client_free(rlock_client *c);

/* The client's UUID (36 lowercase characters), the first half of every owner
 * field it writes. Constant for the client's life; NULL if c is NULL. */
RLOCK_API const char *rlock_client_id(const rlock_client *c);

/* This thread's id in owner fields: a process-wide counter assigned on the
 * thread's first call, starting at 1, never reused within the process.
 * Never blocks, never fails. */
RLOCK_API uint64_t rlock_thread_id(void);

/* Creates a handle on the lock called name (any bytes but NUL, not empty).
 * Touches no server. Returns RLOCK_OK, RLOCK_EINVAL, RLOCK_ENOMEM,
 * RLOCK_ECLOSED. */
RLOCK_API rlock_status rlock_new(rlock_client *c, const char *name, rlock **out);

/* Frees a handle. Does not unlock: holds belong to threads, not handles,
 * and stay (and are renewed) until unlocked through any handle of the same
 * name. Touches only the handle's memory, never the client or Redis. NULL
 * is a no-op. Do not free a handle another thread is using. */
RLOCK_API void rlock_free(rlock *l);

/* The lock's name as given to rlock_new(). NULL if l is NULL. */
RLOCK_API const char *rlock_name(const rlock *l);

/* Takes the lock for the calling thread, blocking until it is acquired.
 * lease_ms: RLOCK_WATCHDOG (renewed while held) or 1..RLOCK_MAX_TIME_MS
 * (expires after that, no renewal). Re-entry by the holder succeeds at once
 * and resets the lease. Waiting uses pub/sub: no polling.
 * Returns RLOCK_OK, RLOCK_EINVAL, RLOCK_EIO (connection errors for longer
 * than retry_timeout_ms), RLOCK_ETIMEDOUT (an acquire got no reply; see
 * docs/operations.md), RLOCK_EREDIS (e.g. the key holds another type),
 * RLOCK_EPROTO, RLOCK_ECLOSED, RLOCK_ENOMEM. */
RLOCK_API rlock_status rlock_lock(rlock *l, int64_t lease_ms);

/* Like rlock_lock(), but gives up after wait_ms (0: one attempt, no wait;
 * RLOCK_WAIT_FOREVER: same as rlock_lock()). Returns RLOCK_EBUSY when the
 * wait ran out with the lock held elsewhere, and every status of
 * rlock_lock(). */
RLOCK_API rlock_status rlock_try_lock(rlock *l, int64_t wait_ms, int64_t lease_ms);

/* Releases one hold of the calling thread. The last release deletes the key
 * and publishes "0" on the lock's channel, which wakes one waiter in every
 * process. A partial release resets the TTL to the hold's lease (the
 * watchdog timeout, or the last explicit lease). One round trip; after a
 * transport error it is sent once more with the same request id (the
 * unlock latch makes that safe), so it blocks for at most about twice
 * command_timeout_ms. Returns RLOCK_OK, RLOCK_ENOTOWNER (this thread holds
 * no hold on it; Redis unchanged), RLOCK_ELOST (this thread held it but the
 * lease ran out or it was force-unlocked; the hold is forgotten), RLOCK_EIO
 * and RLOCK_ETIMEDOUT (outcome unknown: the hold is still counted, and if
 * the release did happen the next unlock reports RLOCK_ELOST), RLOCK_EREDIS,
 * RLOCK_EPROTO, RLOCK_ECLOSED, RLOCK_EINVAL. */
RLOCK_API rlock_status rlock_unlock(rlock *l);

/* Deletes the lock whoever holds it, and publishes "0" if it was held.
 * *was_locked (may be NULL) tells whether there was a lock to delete.
 * Holders in this client are forgotten (their watchdog stops, their next
 * unlock returns RLOCK_ELOST); holders elsewhere find out at their next
 * renewal or unlock. One round trip, at most command_timeout_ms.
 * Returns RLOCK_OK, RLOCK_EINVAL, RLOCK_EIO, RLOCK_ETIMEDOUT, RLOCK_EREDIS,
 * RLOCK_EPROTO, RLOCK_ECLOSED, RLOCK_ENOMEM. */
RLOCK_API rlock_status rlock_force_unlock(rlock *l, bool *was_locked);

/* The queries below each run one command (one round trip, at most
 * command_timeout_ms) and return RLOCK_OK, RLOCK_EINVAL (NULL argument),
 * RLOCK_EIO, RLOCK_ETIMEDOUT, RLOCK_EREDIS (e.g. WRONGTYPE: the key holds
 * another type), RLOCK_EPROTO (e.g. a non-numeric hold count),
 * RLOCK_ECLOSED or RLOCK_ENOMEM. */

/* Whether anyone holds the lock (EXISTS). */
RLOCK_API rlock_status rlock_is_locked(rlock *l, bool *locked);

/* Whether the calling thread holds the lock, as Redis sees it (HEXISTS). */
RLOCK_API rlock_status rlock_is_held_by_current_thread(rlock *l, bool *held);

/* Whether thread thread_id of this client holds the lock (HEXISTS). Any
 * value is accepted; 0 is never a real thread id, so it answers false. */
RLOCK_API rlock_status rlock_is_held_by_thread(rlock *l, uint64_t thread_id, bool *held);

/* The calling thread's hold count in Redis (HGET), 0 if it holds none. */
RLOCK_API rlock_status rlock_hold_count(rlock *l, int64_t *count);

/* Milliseconds left on the lock's lease (PTTL): -2 when not locked, -1 when
 * the key has no expiry (written by hand). */
RLOCK_API rlock_status rlock_remain_ttl(rlock *l, int64_t *ttl_ms);

/* Counters of one client, for benchmarks and monitoring. */
typedef enum rlock_stat {
    RLOCK_STAT_COMMANDS = 0,      /* commands sent on command connections */
    RLOCK_STAT_RENEWAL_CALLS = 1, /* renewal script calls by the watchdog */
    RLOCK_STAT_RENEWED = 2,       /* locks renewed (sum over calls) */
    RLOCK_STAT_RECONNECTS = 3,    /* command + pub/sub connections re-made */
    RLOCK_STAT_WAKEUPS = 4,       /* unlock messages received */
    RLOCK_STAT_HELD = 5,          /* (lock, thread) holds this client tracks */
} rlock_stat;

/* Reads one counter. Never blocks on Redis. Returns RLOCK_OK or
 * RLOCK_EINVAL (NULL or unknown counter). */
RLOCK_API rlock_status rlock_client_stat(rlock_client *c, rlock_stat which, uint64_t *value);

/* A constant English sentence for every value, unknown ones included. */
RLOCK_API const char *rlock_strerror(rlock_status s);

/* The enum name, e.g. "RLOCK_EBUSY"; "RLOCK_UNKNOWN" for unknown values. */
RLOCK_API const char *rlock_status_name(rlock_status s);

/* The library version, "major.minor.patch". */
RLOCK_API const char *rlock_version(void);

#ifdef __cplusplus
}
#endif

#endif /* RLOCK_H */
