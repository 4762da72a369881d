/* Internal entry points for the rlock command (tools/), which links the
 * static library and so resolves these hidden symbols. Not installed, not
 * exported from librlock.so, not for other programs: what the command needs
 * here and a library user would too should become public API instead.
 *
 * Why the command needs them: `rlock status` reads a lock's raw state (type,
 * TTL, every holder field, CLIENT LIST) in one consistent snapshot, which
 * no public call gives; going through the client's own pool gives that read
 * the client's URL, password, database, timeouts and connection naming,
 * and whatever transport the pool speaks (TLS), instead of a hiredis
 * connection of the command's own. */
#ifndef RLOCK_TOOL_H
#define RLOCK_TOOL_H

#include <hiredis/hiredis.h>
#include <stddef.h>

#include "core/core.h"
#include "rlock.h"

/* Sends the n commands cmds[0..n) (each formatted by hiredis's
 * redisFormatCommand or redisFormatCommandArgv, lens[i] bytes long)
 * pipelined, in order, on one pooled connection of c to the node that owns
 * key, and reads their replies into replies[0..n), error replies included
 * (the caller frees each with freeReplyObject). The borrow (a reconnect
 * included) and the first reply end within command_timeout_ms, each later
 * reply within command_timeout_ms of the one before. Nothing is retried:
 * the caller sends only reads. Returns RLOCK_OK, RLOCK_EINVAL, or the
 * status of the borrow or the link (RLOCK_EIO, RLOCK_ETIMEDOUT,
 * RLOCK_EAUTH, RLOCK_EPERM, RLOCK_EPOOL, RLOCK_ECLOSED, RLOCK_ENOMEM) with
 * rlock_last_error() saying why; then every replies[i] is NULL. Any
 * thread. */
rlock_status rlock__client_pipeline(rlock_client *c, const char *key, size_t keylen, int n,
                                    char *const *cmds, const long long *lens,
                                    redisReply **replies);

/* One command in argv form (lens[i]: the length of argv[i]), routed by its
 * first argument (the key of a key command): rlock__client_pipeline() of
 * one. On RLOCK_OK *reply is set, and may be an error reply. */
rlock_status rlock__client_command(rlock_client *c, int argc, const char **argv,
                                   const size_t *lens, redisReply **reply);

/* The version of hiredis the library was built with, "major.minor.patch"
 * (rlock --version; the command itself does not use hiredis). */
const char *rlock__hiredis_version(void);

#endif
