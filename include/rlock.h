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
 * through out-parameters, which are written only on RLOCK_OK (the one
 * exception, rlock_lock_ex()'s holder_ttl_ms, is written on RLOCK_EBUSY). Every function
 * checks its arguments and returns RLOCK_EINVAL instead of crashing on NULL
 * pointers, empty names or out-of-range times.
 *
 * Lifetimes: handles may be freed before or after their client
 * (rlock_free() touches only the handle). Calls that enter while
 * rlock_client_free() runs return RLOCK_ECLOSED; once it has returned,
 * rlock_free() is the only call a handle of that client accepts.
 * Neither free unlocks: a hold stays in Redis (renewed while its client
 * lives) and, once the client is freed, its lease runs out, exactly as when
 * the process dies.
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
    RLOCK_EIO = 6,       /* cannot reach Redis (connect, AUTH, broken link),
                            or it could not run commands (LOADING, BUSY,
                            ...) for command_timeout_ms: the call did not
                            run (since 0.3; RLOCK_EREDIS before) */
    RLOCK_ETIMEDOUT = 7, /* Redis did not answer within command_timeout_ms */
    RLOCK_EREDIS = 8,    /* Redis answered with an error reply */
    RLOCK_EPROTO = 9,    /* reply of an unexpected shape */
    RLOCK_ECLOSED = 10,  /* client closing, or used in a fork()ed child */
    RLOCK_EAUTH = 11,    /* the server refused the password or user (since 0.2) */
    RLOCK_ECANCELED = 12, /* the wait was cancelled with rlock_cancel_fire() (since 0.2) */
    RLOCK_EPOOL = 13,    /* no pooled connection became free within
                            command_timeout_ms: too many threads for
                            pool_size (since 0.2) */
    RLOCK_EPERM = 14,    /* the server's ACL denies a command, key or
                            channel the lock needs; nothing was changed
                            (since 0.3) */
    RLOCK_ETLS = 15,     /* TLS itself refused: the server's certificate
                            does not verify (unknown CA, another host
                            name, expired), the server sent a TLS alert
                            (it refused the client's certificate, ...),
                            or the answer is not TLS (rediss:// to a plain
                            port, a TLS answer to redis://); the reason is
                            in rlock_last_error(). Never for a connection
                            closed or reset without an alert (a full or
                            restarting server): that is RLOCK_EIO,
                            retried like any outage (since 0.3) */
    RLOCK_EDEADLK = 16,  /* the wait could never end: the calling thread
                            holds the lock itself (since 0.3), or holds
                            the read lock and asks for the write lock, or
                            asks a non-reentrant lock again (since 0.3) */
    RLOCK_EKIND = 17,    /* the name holds another kind of lock (a read/
                            write lock where a reentrant one is asked, or
                            the reverse; or the calling thread holds it
                            through the other: nothing sent) or a key of
                            another type: nothing was changed (since 0.3) */
    RLOCK_ESTALE = 18,   /* a fenced write refused: a newer fence token
                            has already written the key; nothing was
                            written (since 0.3) */
} rlock_status;

/* The longest lock name rlock_new() accepts, in bytes (64 KiB); longer
 * ones are RLOCK_EINVAL (since 0.3; 0.2 took any length). Far more than
 * any real name, and small enough that a renewal batch of the largest
 * watchdog_batch_size (10000 names) stays within Redis's default
 * client-query-buffer-limit (1 GiB). */
#define RLOCK_NAME_MAX 65536

/* lease_ms value: hold the lock with watchdog_timeout_ms as its lease and
 * renew it every watchdog_timeout_ms / 3 for as long as it is held. */
#define RLOCK_WATCHDOG ((int64_t)-1)
/* wait_ms value: wait until acquired, however long it takes. */
#define RLOCK_WAIT_FOREVER ((int64_t)-1)
/* Largest lease, wait or timeout accepted, in ms (100 years). */
#define RLOCK_MAX_TIME_MS ((int64_t)3153600000000)

/* Client configuration. Initialise with rlock_config_init(), then change
 * the fields you need. rlock_client_new() copies it (the url string too).
 * The struct grows with new fields at its end; rlock_config_init() records
 * the size the caller was compiled with, so a program built against an
 * older header keeps working with a newer library of the same SONAME (the
 * fields it does not know get their defaults). */
typedef struct rlock_config {
    /* sizeof(rlock_config) as the caller was compiled: set by
     * rlock_config_init(); rlock_client_new() returns RLOCK_EINVAL for a
     * config that was not initialised by it. */
    size_t size;
    /* redis://[[user]:password@]host[:port][/db]
     * rediss://[[user]:password@]host[:port][/db]   (TLS; since 0.3)
     * unix:///path/to/redis.sock[?db=N][&password=P][&user=U]
     * NULL -> redis://127.0.0.1:6379. Percent-escapes (%40) are decoded in
     * the user and password. An empty password without a user
     * (redis://:@host) sends no AUTH. */
    const char *url;
    int pool_size;               /* most command connections, made on
                                    demand; 0 -> 32 */
    int64_t connect_timeout_ms;  /* per connect attempt; 0 -> 2000 */
    int64_t command_timeout_ms;  /* per reply, and per AUTH/SETNAME of a
                                    connect; a reconnect made for a call or
                                    renewal round ends within that call's
                                    bound too; 0 -> 3000 */
    int64_t watchdog_timeout_ms; /* lease while renewing; 0 -> 30000 */
    /* Called when a watchdog-mode hold is gone: a renewal found it missing
     * from Redis (expired, force-unlocked from anywhere, this client
     * included, Redis restarted without the key); or no renewal could
     * confirm it in time (a stalled server, a slow link, a link that accepts
     * and never answers): it is reported a tenth of watchdog_timeout_ms
     * before the key can have expired in Redis (the send time of the
     * latest acquire, re-entry, unlock or renewal that set its TTL, plus
     * that TTL), so before another owner can take it, and it is no longer
     * renewed; or the thread holding it exited without unlocking (the
     * hold is no longer renewed and runs out with its lease). It runs on
     * the client's own callback thread, never on the renewal path, with no
     * rlock mutex held, one call at a time, in the order the losses were
     * found. A queued report whose hold has ended by its turn (its thread
     * unlocked, was told RLOCK_ELOST and perhaps took the lock again) is
     * dropped, never delivered about a newer hold; a report for an exited
     * thread is always delivered. The name pointer is valid only during the
     * call. It may call any rlock function, block or take long (renewals
     * carry on meanwhile; later reports queue up), except
     * rlock_client_free() on its own client. rlock_client_free() waits for
     * the call in progress and delivers the reports still queued, those of
     * losses found while it closes too. */
    void (*on_lock_lost)(const char *name, uint64_t thread_id, void *arg);
    void *on_lock_lost_arg;
    /* Most locks renewed by one script call; 0 -> 100 (as Redisson). */
    int watchdog_batch_size;
    /* How long a blocked rlock_lock()/rlock_try_lock() waits for the server
     * to confirm its SUBSCRIBE before it falls back to sleeping on the
     * holder's TTL; 0 -> 7500. */
    int64_t subscribe_timeout_ms;
    /* How long a waiter keeps retrying through connection errors (Redis
     * restarting, link dropped) and a server that cannot run commands yet
     * (LOADING a large dataset after a restart, BUSY, ...) before it
     * returns RLOCK_EIO; 0 -> 30000. */
    int64_t retry_timeout_ms;
    /* TLS, for rediss:// URLs only (since 0.3; any of these set with a
     * redis:// or unix:// URL is RLOCK_EINVAL: the traffic would be in
     * clear text). The files are read by rlock_client_new(), which
     * returns RLOCK_EINVAL (with the reason in rlock_last_error()) for
     * one that does not load; the strings need not outlive that call.
     * The server's certificate is verified against tls_ca_file (PEM, one
     * or more CAs) and/or tls_ca_dir (a c_rehash'ed directory); with
     * neither, against OpenSSL's default store, which honours the
     * SSL_CERT_FILE and SSL_CERT_DIR environment variables. */
    const char *tls_ca_file;
    const char *tls_ca_dir;
    /* Client certificate (PEM, chain allowed) and its key, for servers
     * that require one (mutual TLS, tls-auth-clients yes). NULL
     * tls_key_file: the key is in tls_cert_file. */
    const char *tls_cert_file;
    const char *tls_key_file;
    /* The name the server's certificate must carry, also sent as SNI;
     * NULL -> the URL's host. An IP address is checked against the
     * certificate's IP entries and not sent as SNI. */
    const char *tls_server_name;
    /* true: do not verify the server's certificate at all (chain, name),
     * for tests against a server with a throwaway certificate only: it
     * lets anyone on the path read and change every command. Default
     * false: verified. */
    bool tls_insecure;
    /* The fair lock (since 0.3): how long each waiter's place in Redis's
     * queue is kept for it beyond the one before it when the waiter gives
     * no wait time of its own (Redisson's fairLockWaitTimeout; it must
     * match the Java clients sharing the names); 0 -> 300000. */
    int64_t fair_wait_timeout_ms;
    /* The spin lock (since 0.3): a waiter sleeps spin_min_delay_ms after
     * its first failed attempt, then twice the last delay plus a random
     * 0..attempts-1 ms, at most spin_max_delay_ms (Redisson's exponential
     * back-off, 1 and 128 by default; min == max is its constant one);
     * 0 -> 1 and 128. */
    int64_t spin_min_delay_ms;
    int64_t spin_max_delay_ms;
} rlock_config;

/* Fills every field with its default. Never fails; a NULL cfg is ignored.
 * A macro, so that the size the caller was compiled with is recorded;
 * rlock_config_init_size() is the function behind it. */
#define rlock_config_init(cfg) rlock_config_init_size((cfg), sizeof(rlock_config))
RLOCK_API void rlock_config_init_size(rlock_config *cfg, size_t size);

/* Creates a client: parses the URL, opens one command connection and the
 * pub/sub connection (to report a bad address or password now rather than
 * later: AUTH, SELECT and CLIENT SETNAME in one round trip on each; no
 * PING), checks on the pub/sub connection, with a SUBSCRIBE and
 * UNSUBSCRIBE of the unused lock channel
 * "redisson_lock__channel:{rlock:acl-probe}", that the server's ACL lets
 * this user wait on lock channels (since 0.3), and starts the pub/sub,
 * watchdog and (with on_lock_lost) callback threads. Connections are named
 * with CLIENT SETNAME
 * "rlock:<first 8 characters of the client id>:<host name>:<pid>", so an
 * operator can tell who holds a lock (CLIENT LIST). Blocks for at most
 * about 2 x (connect_timeout_ms + 3 x command_timeout_ms) + 2 x
 * command_timeout_ms. cfg may be NULL for all defaults. rlock_last_error()
 * says what went wrong in words. Returns RLOCK_OK (and *out), RLOCK_EINVAL
 * (bad URL or field, a config not set up by rlock_config_init(), or a db
 * index the server refuses), RLOCK_EIO (cannot connect), RLOCK_EAUTH
 * (password or user refused, or the server wants one and none was given),
 * RLOCK_EPERM (the ACL denies SUBSCRIBE or the lock channels: Redis 7's
 * default for new users, acl-pubsub-default resetchannels; see
 * docs/operations.md for the ACL a user needs), RLOCK_ETIMEDOUT,
 * RLOCK_ENOMEM. */
RLOCK_API rlock_status rlock_client_new(const rlock_config *cfg, rlock_client **out);

/* Closes a client: wakes every thread blocked in rlock_lock()/try_lock() on
 * it (they return RLOCK_ECLOSED), waits for calls in progress to return
 * (each at most about 2 x command_timeout_ms), settles what earlier calls
 * left in doubt, those of threads that have exited included (an acquire
 * whose reply never came but that ran is released, an unanswered unlock is
 * sent again with its request id; together at most about 2 x
 * command_timeout_ms), stops the watchdog, deletes the unlock latch keys
 * it still had queued, delivers the on_lock_lost reports still queued
 * (losses found until the watchdog stopped included), stops its other
 * threads, closes the connections and frees everything. Held locks are not
 * unlocked; their leases run out. Call it
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

/* Creates a handle on the lock called name (any bytes but NUL, not empty,
 * at most RLOCK_NAME_MAX bytes). Touches no server. Returns RLOCK_OK,
 * RLOCK_EINVAL (NULL, empty, or longer than RLOCK_NAME_MAX; since 0.3),
 * RLOCK_ENOMEM, RLOCK_ECLOSED. */
RLOCK_API rlock_status rlock_new(rlock_client *c, const char *name, rlock **out);

/* The rest of Redisson's lock family (since 0.3), each sharing its names
 * with Redisson's object of the same kind (docs/protocol.md): arguments
 * and statuses as rlock_new(). Every call on a lock handle works on a
 * handle of any kind, with that kind's semantics (docs/api.md, "Lock
 * kinds"); one that makes no sense for a kind returns RLOCK_EINVAL. Never
 * mix kinds on one name: a call that finds another kind's state there
 * returns RLOCK_EKIND and changes nothing.
 *   rlock_new_fair()    getFairLock(name): first come, first served
 *                       across processes; only the queue's head is woken
 *   rlock_new_read()    getReadWriteLock(name).readLock(): shared
 *   rlock_new_write()   getReadWriteLock(name).writeLock(): exclusive
 *   rlock_new_fenced()  getFencedLock(name): each acquisition gets a
 *                       strictly increasing token (rlock_fence_token())
 *   rlock_new_spin()    getSpinLock(name): no pub/sub, waiters retry with
 *                       back-off (spin_min_delay_ms, spin_max_delay_ms)
 *   rlock_new_nonreentrant(), rlock_new_fair_nonreentrant()
 *                       Redisson 4.4+'s non-reentrant forms: the holder
 *                       asking again gets RLOCK_EDEADLK at once */
RLOCK_API rlock_status rlock_new_fair(rlock_client *c, const char *name, rlock **out);
RLOCK_API rlock_status rlock_new_read(rlock_client *c, const char *name, rlock **out);
RLOCK_API rlock_status rlock_new_write(rlock_client *c, const char *name, rlock **out);
RLOCK_API rlock_status rlock_new_fenced(rlock_client *c, const char *name, rlock **out);
RLOCK_API rlock_status rlock_new_spin(rlock_client *c, const char *name, rlock **out);
RLOCK_API rlock_status rlock_new_nonreentrant(rlock_client *c, const char *name, rlock **out);
RLOCK_API rlock_status rlock_new_fair_nonreentrant(rlock_client *c, const char *name,
                                                   rlock **out);

/* The handle's kind: "reentrant", "fair", "read", "write", "fenced",
 * "spin", "nonreentrant", "fair-nonreentrant"; NULL if l is NULL
 * (since 0.3). */
RLOCK_API const char *rlock_kind(const rlock *l);

/* Frees a handle. Does not unlock: holds belong to threads, not handles,
 * and stay (and are renewed) until unlocked through any handle of the same
 * name. Touches only the handle's memory, never the client or Redis, so it
 * may come before or after rlock_client_free() (the one call a handle of a
 * freed client accepts). NULL is a no-op. Do not free a handle another
 * thread is using. */
RLOCK_API void rlock_free(rlock *l);

/* The lock's name as given to rlock_new(). NULL if l is NULL. */
RLOCK_API const char *rlock_name(const rlock *l);

/* Takes the lock for the calling thread, blocking until it is acquired.
 * lease_ms: RLOCK_WATCHDOG (renewed while held) or 1..RLOCK_MAX_TIME_MS
 * (expires after that, no renewal). Re-entry by the holder succeeds at once
 * and resets the lease. A hold is renewed while any of its levels taken
 * with RLOCK_WATCHDOG is held, as in Redisson: renewals reset the key to
 * watchdog_timeout_ms even after a re-entry with a longer explicit lease,
 * and the unlock of a watchdog level nested in an explicit one ends them
 * (the key then lives by the explicit lease). Waiting uses pub/sub: no polling; a waiter retries
 * at the latest when the holder's lease (as its last attempt saw it) runs
 * out. Connection errors and replies that say the server cannot run
 * commands yet (LOADING, BUSY, TRYAGAIN, CLUSTERDOWN, MASTERDOWN) are
 * retried for up to retry_timeout_ms, however long each one lasts (0.2
 * returned RLOCK_EREDIS when one outlasted command_timeout_ms).
 * Returns RLOCK_OK, RLOCK_EINVAL, RLOCK_ELOST (a re-entry found that this
 * thread's outer hold is gone from Redis: nothing was acquired; each level
 * the thread took unwinds with RLOCK_ELOST from rlock_unlock(), and its
 * next lock takes a fresh hold), RLOCK_EIO (connection errors, or
 * a server that cannot run commands yet, for longer than retry_timeout_ms;
 * rlock_try_lock() whose wait ends first returns it too), RLOCK_ETIMEDOUT
 * (no reply: the acquire carries a request id whose outcome Redis
 * remembers, so it is sent again with that id, never counted twice, until
 * the wait or retry_timeout_ms runs out; wait_ms 0: one command_timeout_ms;
 * a request still unanswered then is abandoned by this thread's next call
 * for the name, or by rlock_client_free(): a hold it took is given back;
 * see docs/api.md), RLOCK_EKIND (the key holds another type or kind; or
 * the calling thread holds the name through a kind of the other hash: a
 * read/write lock's half against the others; nothing changed; since 0.3),
 * RLOCK_EDEADLK (a non-reentrant lock asked again by its holder, or the
 * write half asked by a thread holding the read half: at once, nothing
 * changed; since 0.3), RLOCK_EREDIS,
 * RLOCK_EPERM (the ACL denies a command or key the acquire needs, or, to a
 * waiter, the SUBSCRIBE of the lock's channel: it returns at once rather
 * than sleep on leases; since 0.3), RLOCK_EPROTO, RLOCK_ECLOSED,
 * RLOCK_ENOMEM, RLOCK_EAUTH, RLOCK_EPOOL. */
RLOCK_API rlock_status rlock_lock(rlock *l, int64_t lease_ms);

/* Like rlock_lock(), but gives up after wait_ms (0: one attempt, no wait;
 * RLOCK_WAIT_FOREVER: same as rlock_lock()). Returns RLOCK_EBUSY when the
 * wait ran out with the lock held elsewhere, and every status of
 * rlock_lock(). */
RLOCK_API rlock_status rlock_try_lock(rlock *l, int64_t wait_ms, int64_t lease_ms);

/* A cancellation token: rlock_cancel_fire() interrupts every rlock_lock_ex()
 * waiting with it, from any thread (a signal handler excluded). */
typedef struct rlock_cancel rlock_cancel;

/* Creates a token, not cancelled. RLOCK_OK, RLOCK_EINVAL, RLOCK_ENOMEM. */
RLOCK_API rlock_status rlock_cancel_new(rlock_cancel **out);
/* Cancels: every call waiting with the token returns RLOCK_ECANCELED within
 * about command_timeout_ms (at once when it is asleep; after the command in
 * flight otherwise), without the lock. The token stays cancelled, and later
 * calls with it return RLOCK_ECANCELED at once, until rlock_cancel_reset().
 * Never blocks on Redis; NULL is a no-op. */
RLOCK_API void rlock_cancel_fire(rlock_cancel *t);
/* Makes the token usable again. */
RLOCK_API void rlock_cancel_reset(rlock_cancel *t);
/* Whether the token is cancelled. False for NULL. */
RLOCK_API bool rlock_cancel_is_set(const rlock_cancel *t);
/* Frees a token no call is using any more. NULL is a no-op. */
RLOCK_API void rlock_cancel_free(rlock_cancel *t);

/* rlock_try_lock() with the extras: cancel (may be NULL) interrupts the
 * wait (RLOCK_ECANCELED); on RLOCK_EBUSY, *holder_ttl_ms (may be NULL) is
 * the holder's remaining lease as the last attempt saw it, in ms (-1: the
 * key has no expiry), at no extra round trip. wait_ms as rlock_try_lock()
 * (RLOCK_WAIT_FOREVER: like rlock_lock()). Returns every status of
 * rlock_try_lock() and RLOCK_ECANCELED. */
RLOCK_API rlock_status rlock_lock_ex(rlock *l, int64_t wait_ms, int64_t lease_ms,
                                     rlock_cancel *cancel, int64_t *holder_ttl_ms);

/* Waits until nobody holds the lock, without taking it (a script or a
 * service that only needs to know a job holding the lock has finished).
 * It waits as rlock_lock_ex() does, in the same local queue: woken by the
 * release message, at the latest when the holder's lease (as its latest
 * probe saw it) runs out, retrying connection errors for up to
 * retry_timeout_ms within the wait. wait_ms: RLOCK_WAIT_FOREVER (-1),
 * 0 (one look) or up to RLOCK_MAX_TIME_MS. cancel may be NULL. A lock that
 * is taken again at once by a waiter may never be seen free; a lock seen
 * free may be taken by anyone the moment after. An earlier call of this
 * thread on the name left in doubt (an acquire or unlock whose reply was
 * lost) is settled first, as by every call: a doubtful acquire is given
 * back, never waited for.
 * Returns RLOCK_OK (seen free), RLOCK_EBUSY (still held when the wait ran
 * out: contention, as from rlock_try_lock()), RLOCK_EDEADLK (the calling
 * thread holds it: it could never become free while this thread waits;
 * returned at once), RLOCK_ECANCELED (the token was fired, before or
 * during the wait), RLOCK_EINVAL, RLOCK_EIO, RLOCK_ETIMEDOUT (Redis did
 * not answer), RLOCK_EKIND (a read/write half finding a key of another
 * type; the other kinds take such a key for a lock held, by its TTL),
 * RLOCK_EREDIS, RLOCK_EPROTO, RLOCK_ECLOSED, RLOCK_ENOMEM,
 * RLOCK_EAUTH, RLOCK_EPOOL, RLOCK_EPERM (the ACL denies the key or the
 * lock's channel). Any thread. Since 0.3. */
RLOCK_API rlock_status rlock_wait_unlocked(rlock *l, int64_t wait_ms, rlock_cancel *cancel);

/* Releases one hold of the calling thread. The last release deletes the key
 * and publishes "0" on the lock's channel, which wakes one waiter in every
 * process. A partial release resets the TTL to the hold's lease (the
 * watchdog timeout, or the last explicit lease). One round trip; after a
 * transport error it is sent once more with the same request id (the
 * unlock latch makes that safe), and replies that say the server cannot
 * run it yet (LOADING, BUSY, ...) are retried, for at most about
 * 2 x command_timeout_ms in all (still refused then: RLOCK_EIO, and the
 * script did not run) (up to 2 x more when it first settles an
 * earlier call of this thread left in doubt).
 * Returns RLOCK_OK, RLOCK_ENOTOWNER (this thread holds no hold on it;
 * Redis unchanged), RLOCK_ELOST (this thread held it but the lease ran out,
 * it was force-unlocked or deleted: every unlock answers RLOCK_ELOST until
 * each level the thread took is unwound, then RLOCK_ENOTOWNER; a hold taken
 * meanwhile is released by the unlocks that come first, last in first out;
 * nothing another owner holds is touched; since 0.3), RLOCK_EIO,
 * RLOCK_ETIMEDOUT, RLOCK_EREDIS (not known to have run: the hold is still
 * counted until settled, but a last hold is no longer renewed; this
 * request's id is kept, and this thread's next unlock of the name sends
 * that same request again and returns its outcome, so a retry releases
 * exactly one hold, never two; its next lock of the name completes it
 * first, then acquires; retried after its latch can be gone, about 20 s
 * after its first send, a hold found gone answers RLOCK_ELOST),
 * RLOCK_EPERM (the ACL refused a command, key or channel of the unlock,
 * e.g. the PUBLISH of a last unlock: nothing was changed, the hold is still
 * held and renewed; unlock again once the ACL allows it; since 0.3),
 * RLOCK_EPROTO, RLOCK_ECLOSED, RLOCK_EINVAL, RLOCK_EAUTH, RLOCK_EPOOL,
 * RLOCK_EKIND (another kind of lock or type at the name, or the calling
 * thread holds it through a kind of the other hash: a read/write lock's
 * half against the others; nothing sent; since 0.3). */
RLOCK_API rlock_status rlock_unlock(rlock *l);

/* Deletes the lock whoever holds it, and publishes "0" if it was held.
 * *was_locked (may be NULL) tells whether there was a lock to delete. A
 * read/write lock at the name is left alone by every kind but its own
 * halves (RLOCK_EKIND, nothing changed); a key of another type is deleted
 * (the read/write halves refuse it, RLOCK_EKIND).
 * Holders find out from Redis itself, in this client as elsewhere: at their
 * next renewal (on_lock_lost), unlock or re-entry (RLOCK_ELOST). A thread
 * of this client that acquires the lock after the delete keeps it. One
 * round trip, at most command_timeout_ms (and transient replies retried
 * within it). Returns RLOCK_OK, RLOCK_EINVAL, RLOCK_EIO, RLOCK_ETIMEDOUT,
 * RLOCK_EKIND (see above: nothing deleted; since 0.3), RLOCK_EREDIS,
 * RLOCK_EPERM (the ACL refused it: nothing was deleted),
 * RLOCK_EPROTO, RLOCK_ECLOSED, RLOCK_ENOMEM, RLOCK_EAUTH, RLOCK_EPOOL. */
RLOCK_API rlock_status rlock_force_unlock(rlock *l, bool *was_locked);

/* The queries below each run one command (one round trip, at most
 * command_timeout_ms) and return RLOCK_OK, RLOCK_EINVAL (NULL argument),
 * RLOCK_EIO, RLOCK_ETIMEDOUT, RLOCK_EKIND (WRONGTYPE: the key holds
 * another type), RLOCK_EREDIS, RLOCK_EPROTO (e.g. a non-numeric hold count, or one
 * beyond int64), RLOCK_EPERM (the ACL denies the command or key),
 * RLOCK_ECLOSED, RLOCK_ENOMEM, RLOCK_EAUTH (the server wants a login the
 * connection lost) or RLOCK_EPOOL. */

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

/* ---- the fenced lock (since 0.3) ---------------------------------------
 * A handle made by rlock_new_fenced() is Redisson's RFencedLock: the
 * reentrant lock's hash, channel, unlock and renewal, plus a token that
 * every acquisition, re-entry included, takes from the counter
 * "redisson_lock_token:{name}" (no TTL): a number larger than every token
 * handed out for the name before (docs/api.md, "Fenced lock", says what
 * happens when that counter is lost). A resource that remembers the
 * largest token it has seen and refuses smaller ones is safe from a
 * holder that was paused past its lease. */

/* The token of the calling thread's latest acquisition of l (the lock()
 * or try_lock() that took or re-entered it; it stays until the thread
 * releases its last hold: Redisson's lockAndGetToken() result). Reads
 * only this client's memory: never blocks on Redis, any thread. Returns
 * RLOCK_OK, RLOCK_EINVAL (NULL argument, or l is not a fenced lock),
 * RLOCK_ENOTOWNER (the calling thread holds no hold of l), RLOCK_ELOST
 * (it held one, and this client knows it is gone: a renewal found it
 * missing, its explicit lease ran out, or a call on it answered
 * RLOCK_ELOST; rlock_unlock() unwinds it), RLOCK_ECLOSED. */
RLOCK_API rlock_status rlock_fence_token(rlock *l, int64_t *token);

/* The newest token handed out for l's name by anyone (Redisson's
 * getToken(): GET of the token counter); 0 when the counter does not
 * exist, as Redisson answers. One round trip, at most
 * command_timeout_ms. Returns RLOCK_OK, RLOCK_EINVAL (NULL argument, or l
 * is not a fenced lock), RLOCK_EKIND (the counter holds another type),
 * RLOCK_EPROTO (not a number), RLOCK_EIO, RLOCK_ETIMEDOUT, RLOCK_EREDIS,
 * RLOCK_EPERM, RLOCK_ECLOSED, RLOCK_ENOMEM, RLOCK_EAUTH, RLOCK_EPOOL. */
RLOCK_API rlock_status rlock_fence_token_latest(rlock *l, int64_t *token);

/* Fenced writes: SET key value, or HSET key field value, run by Redis in
 * one script only if the calling thread holds the fenced lock l (its
 * field is in the lock's hash) and no write through these calls with a
 * newer token of l has reached key; the write records its token (the
 * calling thread's, rlock_fence_token()) in the hash "rlock_fence:{name}"
 * (field "k:" + key). key and field are NUL-terminated; value is len
 * bytes (value may be NULL when len is 0). In Redis Cluster, key must
 * share the lock name's hash slot (give it the name as hash tag). An
 * earlier call of this thread on l left in doubt is settled first. One
 * round trip, at most command_timeout_ms; a write whose reply is lost
 * (RLOCK_EIO, RLOCK_ETIMEDOUT) may have run, and is not sent again.
 * Returns RLOCK_OK (written), RLOCK_EINVAL (NULL argument, or l is not a
 * fenced lock), RLOCK_ENOTOWNER (the calling thread does not hold l;
 * nothing written), RLOCK_ELOST (it held l, and the hold is gone: nothing
 * written; rlock_unlock() answers RLOCK_ELOST too), RLOCK_ESTALE (a newer
 * token has written key: nothing written), RLOCK_EKIND (the lock name,
 * "rlock_fence:{name}" or, for the HSET, key holds another type: nothing
 * written), RLOCK_EPERM (the ACL denies the script, a key or the command:
 * nothing written), RLOCK_EIO, RLOCK_ETIMEDOUT, RLOCK_EREDIS, RLOCK_EPROTO,
 * RLOCK_ECLOSED, RLOCK_ENOMEM, RLOCK_EAUTH, RLOCK_EPOOL. Any thread (the
 * one that holds l). */
RLOCK_API rlock_status rlock_fenced_set(rlock *l, const char *key, const void *value,
                                        size_t len);
RLOCK_API rlock_status rlock_fenced_hset(rlock *l, const char *key, const char *field,
                                         const void *value, size_t len);

/* ---- guarded commands, every kind (since 0.3) ---------------------------
 * rlock_guarded() runs one Redis command only if the calling thread still
 * holds the lock l, atomically with the check (one script: the thread's
 * field is in the lock's hash; for the write half of a read/write lock,
 * its ":write" field), so a holder paused past its lease can never
 * overwrite what the next holder wrote. argv[0..argc-1] is the command and
 * its arguments (argvlen[i] bytes each, or NUL-terminated when argvlen is
 * NULL), 1 <= argc <= RLOCK_GUARDED_ARGS_MAX. In Redis Cluster its keys
 * must share the lock name's hash slot. The command runs inside a Lua
 * script: commands a script may not run (SUBSCRIBE, blocking forms, ...)
 * are refused by Redis (RLOCK_EREDIS). An earlier call of this thread on
 * l left in doubt is settled first. One round trip, at most
 * command_timeout_ms; without an answer (RLOCK_EIO, RLOCK_ETIMEDOUT) the
 * command may have run, and is not sent again.
 * *reply (reply may be NULL: not wanted) gets the command's reply on
 * RLOCK_OK, the caller's to free with rlock_reply_free().
 * Returns RLOCK_OK (it ran), RLOCK_EINVAL, RLOCK_ENOTOWNER (the calling
 * thread does not hold l: nothing ran), RLOCK_ELOST (it held l and the hold
 * is gone, expired or force-unlocked: nothing ran; as from rlock_unlock(),
 * which answers RLOCK_ELOST for it too), RLOCK_EKIND (the lock's key holds
 * another type: nothing ran; or the command answered WRONGTYPE),
 * RLOCK_EREDIS (the command answered another error, in
 * rlock_last_error(): a failed command changes nothing), RLOCK_EPERM (the
 * ACL denies the script or the command or its key: nothing ran), RLOCK_EIO,
 * RLOCK_ETIMEDOUT, RLOCK_EPROTO, RLOCK_ECLOSED, RLOCK_ENOMEM, RLOCK_EAUTH,
 * RLOCK_EPOOL. Any thread (the one that holds l). */
#define RLOCK_GUARDED_ARGS_MAX 7000
typedef struct rlock_reply rlock_reply; /* a command's reply; opaque */
RLOCK_API rlock_status rlock_guarded(rlock *l, int argc, const char *const *argv,
                                     const size_t *argvlen, rlock_reply **reply);

/* A reply's type, as Redis (RESP2) answered: a nil reply is
 * RLOCK_REPLY_NIL, a status such as OK is RLOCK_REPLY_STATUS. */
typedef enum rlock_reply_type {
    RLOCK_REPLY_NIL = 0,
    RLOCK_REPLY_INTEGER = 1,
    RLOCK_REPLY_STRING = 2,
    RLOCK_REPLY_STATUS = 3,
    RLOCK_REPLY_ARRAY = 4,
    RLOCK_REPLY_ERROR = 5, /* only as an element of an array */
} rlock_reply_type;
/* Reading a reply, never failing: its type (RLOCK_REPLY_NIL for NULL); its
 * integer (0 unless RLOCK_REPLY_INTEGER); its bytes (a string, status or
 * error: NUL-terminated, *len bytes when len is not NULL; else NULL and
 * *len 0), valid until the reply is freed; its elements (an array: their
 * number, else 0; element i, or NULL when out of range), owned by the
 * reply. rlock_reply_free() frees a reply rlock_guarded() returned (not
 * an element); NULL is a no-op. Any thread. */
RLOCK_API rlock_reply_type rlock_reply_type_of(const rlock_reply *r);
RLOCK_API int64_t rlock_reply_integer(const rlock_reply *r);
RLOCK_API const char *rlock_reply_string(const rlock_reply *r, size_t *len);
RLOCK_API size_t rlock_reply_elements(const rlock_reply *r);
RLOCK_API const rlock_reply *rlock_reply_element(const rlock_reply *r, size_t i);
RLOCK_API void rlock_reply_free(rlock_reply *r);

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

/* What went wrong in the calling thread's last rlock call that failed, in
 * words: the server's own error text (e.g. "WRONGPASS invalid
 * username-password pair or user is disabled.", "ERR DB index is out of
 * range"), or what the library saw ("connect to 127.0.0.1:6380: Connection
 * refused", "no reply within 3000 ms"). Never contains a password. "" when
 * no call of this thread failed yet. Statuses stay the contract; this text
 * is for people and logs, and may change. The pointer is valid until this
 * thread's next rlock call. */
RLOCK_API const char *rlock_last_error(void);

/* Redis key and channel names derived from a lock name (spec 0.1), for
 * tools and tests: each writes a NUL-terminated name into buf when it fits
 * in size bytes, and returns its length without the NUL (as snprintf), so
 * a caller can size buf. buf may be NULL when size is 0.
 * rlock_prefixed_name(): prefix + ":" + name, with name wrapped in braces
 * unless it already holds a '{' (so every derived key shares the name's
 * cluster slot). rlock_channel_name(): the lock's pub/sub channel,
 * "redisson_lock__channel:{name}". Return 0 for a NULL or empty name. */
RLOCK_API size_t rlock_prefixed_name(const char *prefix, const char *name, char *buf,
                                     size_t size);
RLOCK_API size_t rlock_channel_name(const char *name, char *buf, size_t size);

/* Checks a server URL the way rlock_client_new() parses rlock_config.url
 * (the same parser), and writes it into buf with every password replaced
 * by "***", for logs and messages: the user, host, port and db stay as
 * written. A malformed URL is redacted too, cautiously: in the authority,
 * everything from its first ':' to its last '@' (a '/' or '?' in a
 * password does not end it); with no '@', a port that is not a number (it
 * may be a password whose '@' was forgotten); and every password= query
 * value. buf gets the text NUL-terminated, cut to size - 1 bytes like
 * snprintf() (after the redaction, so a cut never shows more of a
 * password); 2 * strlen(url) + 8 bytes always suffice. buf may be NULL
 * when size is 0, to check only. Touches no server, never blocks; any
 * thread. Returns RLOCK_OK (rlock_client_new() accepts the URL's form),
 * RLOCK_EINVAL (malformed, or url NULL: rlock_last_error() names the wrong
 * part, "the port must be a number from 1 to 65535", and never quotes the
 * URL), RLOCK_ENOMEM. Since 0.3. */
RLOCK_API rlock_status rlock_url_redact(const char *url, char *buf, size_t size);
/* Optional, GNU C only (gcc, clang): a release bound to a scope, the
 * nearest C gets to try-with-resources. A variable of type rlock * declared
 * with RLOCK_SCOPED_UNLOCK is passed to rlock_unlock() when it goes out of
 * scope (the block ends, return, break, goto out of it) if it is not NULL
 * then. Set it to the handle only once the lock is taken, so a failed lock
 * releases nothing; set it back to NULL after releasing by hand. The
 * unlock's status is dropped: code that must act on RLOCK_ELOST unlocks by
 * hand. Not for C++ (use an RAII type there) and not across longjmp()
 * (cleanups do not run), nor in a thread that did not take the lock.
 *
 *     rlock *held RLOCK_SCOPED_UNLOCK = NULL;
 *     rlock_status st = rlock_lock(l, RLOCK_WATCHDOG);
 *     if (st != RLOCK_OK)
 *         return st;              // nothing to release
 *     held = l;
 *     if (nothing_to_do())
 *         return RLOCK_OK;        // unlocked here
 *
 * RLOCK_SCOPED_LOCK(var, l, lease_ms, &st) does the three lines above in
 * one declaration: var is l when rlock_lock() returned RLOCK_OK (in st),
 * else NULL. Since 0.3. */
#if defined(__GNUC__) && !defined(__cplusplus)
/* The cleanup function; not to be called directly. */
static __inline__ void rlock__scoped_release(rlock **held)
{
    if (*held) {
        (void)rlock_unlock(*held);
    }
}
/* rlock_lock(), and l when it returned RLOCK_OK, else NULL. */
static __inline__ rlock *rlock__scoped_take(rlock *l, int64_t lease_ms, rlock_status *st)
{
    *st = rlock_lock(l, lease_ms);
    return *st == RLOCK_OK ? l : (rlock *)0;
}
/* unused: a variable named only for its cleanup draws clang's
 * -Wunused-variable otherwise. */
#define RLOCK_SCOPED_UNLOCK __attribute__((cleanup(rlock__scoped_release), unused))
#define RLOCK_SCOPED_LOCK(var, l, lease_ms, st_out) \
    rlock *var RLOCK_SCOPED_UNLOCK = rlock__scoped_take((l), (lease_ms), (st_out))
#endif

#ifdef __cplusplus
}
#endif

#endif /* RLOCK_H */
