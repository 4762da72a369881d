-- SPDX-License-Identifier: BSD-3-Clause
-- Delete a lock whoever holds it (Redisson RLock forceUnlock, spec 2.5).
-- KEYS[1] lock name, KEYS[2] lock channel
-- ARGV[1] message to publish ("0"), ARGV[2] publish command ("publish")
-- Reply: 1 when a lock was deleted (and ARGV[1] published), else 0.
-- The PUBLISH comes first: a PUBLISH the server's ACL refuses aborts the
-- script before the DEL (Redis has no rollback), so the lock stays as it
-- was. Inside a script the order is invisible to other clients.
if redis.call('exists', KEYS[1]) == 1 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    redis.call('del', KEYS[1])
    return 1
end
return 0
