/* kinds: one file per lock kind, each filling the table of operations that
 * the shared engine calls (rlock__kind, declared by sync/sync.h: the seam
 * points down). A new kind is a file here, its scripts in lua/ (embedded
 * as rlock__script_<file name>), its public constructor (one line:
 * rlock__handle_new(c, name, &rlock__kind_x, out)) and its tests; read
 * reentrant.c as the model. The table says:
 *   chan_prefix  the channel its releases publish on (prefix(P, name));
 *                NULL: none, its releases publish nothing (spin)
 *   layout       the layout of the name's key: RLOCK__LAYOUT_LOCK (the
 *                reentrant lock's hash, the default) or RLOCK__LAYOUT_RW
 *                (a read/write lock's, with 'mode'); a thread's call of
 *                one layout on a name it holds with the other is refused
 *   key_tag      NULL, or the tag that keeps a second kind's holds of the
 *                same name and thread apart (the write half: "write")
 *   wait         RLOCK__WAIT_SHARED: one channel per name; _OWN: a channel
 *                per waiter (<channel>:<owner field>), Redis keeps the
 *                queue; _POLL: no messages, back-off
 *   wake         what a "0" message means for local waiters ("1": all)
 *   no_reentry   the holder asking again is refused with {4,0}
 *   shared       holds share the lock (the read half): a newcomer does
 *                not queue behind local waiters without an attempt
 *   reentry      what a re-entry does to the hold's life, for the
 *                registry's deadline: RLOCK__REENTRY_SETS (the default:
 *                TTL = lease), _ADDS (TTL left + lease: the write half),
 *                _KEEPS (a key per level: the read half)
 *   attempt      one idempotent attempt (acquire latch, resend, the
 *                reply shapes of rlock__parse_attempt(): {1,n[,token]}
 *                taken, {0,ttl} held, {2,0} gone, {3,0} spent, {4,0}
 *                only the caller's own hold in the way, {5,0} another kind)
 *   give_up      NULL, or leaving a queue the attempts joined
 *   abandon, release, force_release, count, holder_ttl, is_locked, renew
 * The engine does the rest: waiting, retries, doubts, the watchdog, the
 * registry (one record per name, thread and key_tag). */
#ifndef RLOCK_KIND_H
#define RLOCK_KIND_H

#include "core/core.h"
#include "net/net.h"
#include "sync/sync.h"

extern const rlock__kind rlock__kind_reentrant;
extern const rlock__kind rlock__kind_fair;
extern const rlock__kind rlock__kind_read;
extern const rlock__kind rlock__kind_write;
extern const rlock__kind rlock__kind_fenced;
extern const rlock__kind rlock__kind_spin;
extern const rlock__kind rlock__kind_nonreentrant;
extern const rlock__kind rlock__kind_fair_nonreentrant;

/* The reentrant lock's operations (reentrant.c), for the kinds that keep
 * its hash (owner -> hold count) and differ only in a few of them (fair,
 * fenced, spin, non-reentrant): their tables point here instead of
 * copying them. Each is the rlock__kind member of the same name. */
rlock_status rlock__reentrant_attempt(struct rlock *l, const char *owner, int64_t lease_ms,
                                      int64_t held, int64_t wait_ms, const char *rid, bool resend,
                                      rlock__attempt *out, int64_t deadline_ms);
rlock_status rlock__reentrant_abandon(struct rlock *l, const char *owner, const char *rid,
                                      int64_t held, int64_t lease_ms, int *out,
                                      int64_t deadline_ms);
rlock_status rlock__reentrant_release(struct rlock *l, const char *owner, const char *rid,
                                      int64_t lease_ms, rlock__released *out, int64_t deadline_ms);
rlock_status rlock__reentrant_force_release(struct rlock *l, bool *was_locked,
                                            int64_t deadline_ms);
/* force_unlock.lua's and fair_force_unlock.lua's reply v: 2 (a read/write
 * lock's hash, nothing changed) is RLOCK_EKIND, else *was_locked = v == 1. */
rlock_status rlock__force_reply(const struct rlock *l, int64_t v, bool *was_locked);
rlock_status rlock__reentrant_count(struct rlock *l, const char *owner, int64_t *count,
                                    int64_t deadline_ms);
rlock_status rlock__reentrant_holder_ttl(struct rlock *l, int64_t *ttl, int64_t deadline_ms);

/* Reply parsers, kept apart from I/O so they can be fuzzed. Each returns
 * RLOCK_OK with *out set, or RLOCK_EPROTO / the error reply's status. */
rlock_status rlock__parse_attempt(const redisReply *r, rlock__attempt *out);
rlock_status rlock__parse_release(const redisReply *r, rlock__released *out);
rlock_status rlock__parse_int(const redisReply *r, int64_t *out);
/* rlock__run() of a call whose reply is an integer (or nil: 0); *out is
 * written only on RLOCK_OK. */
rlock_status rlock__run_int(rlock_client *c, const rlock__call *call, int64_t *out,
                           int64_t deadline_ms);

#endif
