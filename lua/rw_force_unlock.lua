-- SPDX-License-Identifier: BSD-3-Clause
-- Delete a read/write lock whoever holds it, from either half (Redisson
-- RReadLock / RWriteLock forceUnlock, spec 4.6): the read half deletes it
-- only in mode 'read' and publishes "0", the write half only in mode
-- 'write' and publishes "1".
-- KEYS[1] lock name, KEYS[2] lock channel (redisson_rwlock:{name})
-- ARGV[1] the half's mode ("read" or "write"), ARGV[2] message to publish
-- ("0" or "1"), ARGV[3] publish command ("publish")
-- Reply: 1 when the lock was deleted (and ARGV[2] published), else 0.
-- Readers' timeout keys are left to expire, as Redisson leaves them. A key
-- of another type fails the HGET (WRONGTYPE) and nothing is deleted. The
-- PUBLISH comes first: a PUBLISH the server's ACL refuses aborts the
-- script before the DEL.
if redis.call('hget', KEYS[1], 'mode') == ARGV[1] then
    redis.call(ARGV[3], KEYS[2], ARGV[2])
    redis.call('del', KEYS[1])
    return 1
end
return 0
