-- SPDX-License-Identifier: BSD-3-Clause
-- Delete a lock whoever holds it (Redisson RLock forceUnlock, spec 2.5; the
-- spin lock's too, spec 6, which publishes nothing).
-- KEYS[1] lock name, KEYS[2] lock channel (absent: nothing is published,
-- the spin lock)
-- ARGV[1] message to publish ("0"), ARGV[2] publish command ("publish")
-- Reply: 1 when a lock was deleted (and ARGV[1] published), 0 when there
--        was none, 2 when the name holds a read/write lock (a hash with a
--        'mode' field): nothing changed, as the read/write halves refuse a
--        hash without 'mode'; they are the way to force-unlock it (Redisson
--        deletes it). A key of another type is deleted, as Redisson does:
--        the way out of a name wedged by a foreign key.
-- The PUBLISH comes first: a PUBLISH the server's ACL refuses aborts the
-- script before the DEL (Redis has no rollback), so the lock stays as it
-- was. Inside a script the order is invisible to other clients.
-- No TYPE: the ACL of docs/operations.md allows only the commands the
-- locks use. HEXISTS answers WRONGTYPE for a key of another type (deleted
-- below); any other error (the ACL) is the script's answer.
if redis.call('exists', KEYS[1]) == 0 then
    return 0
end
local m = redis.pcall('hexists', KEYS[1], 'mode')
if type(m) == 'table' and not string.find(m.err or '', 'WRONGTYPE', 1, true) then
    return m
end
if m == 1 then
    return 2
end
if #KEYS > 1 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
end
redis.call('del', KEYS[1])
return 1
