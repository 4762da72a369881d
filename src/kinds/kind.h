/* kinds: one file per lock kind, each filling the table of operations that
 * the shared engine calls (rlock__kind, declared by sync/sync.h: the seam
 * points down): how to attempt, abandon, release, force-release and
 * renew, which channel to wait on and what its message means. A new kind
 * (fair, read, write, fenced, spin) is a file here, its scripts in lua/,
 * and its tests. */
#ifndef RLOCK_KIND_H
#define RLOCK_KIND_H

#include "core/core.h"
#include "net/net.h"
#include "sync/sync.h"

extern const rlock__kind rlock__kind_reentrant;

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
