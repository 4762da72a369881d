-- SPDX-License-Identifier: BSD-3-Clause
-- Release one hold of a reentrant lock (Redisson RLock, spec 2.3), or of
-- a spin lock (spec 6: the same without the publish).
-- KEYS[1] lock name, KEYS[2] lock channel, KEYS[3] unlock latch key; a
-- kind that publishes nothing (the spin lock) passes KEYS[1] and the latch
-- key only, as Redisson's spin unlock does, and ARGV[1] and ARGV[4] unused
-- ARGV[1] message to publish ("0"), ARGV[2] lease in ms for a partial
-- release, ARGV[3] owner, ARGV[4] publish command ("publish"),
-- ARGV[5] latch TTL in ms
-- Reply: the latch's value when this request already ran (a retry);
--        nil when the owner holds no hold; 0 when still held (count - 1,
--        TTL reset); 1 when fully released (key deleted, ARGV[1] published
--        when there is a channel).
-- Redis has no rollback: a command the server's ACL refuses aborts the
-- script after the writes before it. So the last hold PUBLISHes before it
-- writes anything, and a refused PUBLISH leaves the lock exactly as it was.
-- The count is read (HGET) rather than decremented first; a field that is
-- not a canonical integer is refused as HINCRBY refuses it.
local latch = KEYS[#KEYS]
local done = redis.call('get', latch)
if done ~= false then
    return tonumber(done)
end
local n = redis.call('hget', KEYS[1], ARGV[3])
if n == false then
    return nil
end
if #n > 20 or not (n == '0' or string.match(n, '^%-?[1-9]%d*$')) then
    return redis.error_reply('ERR hash value is not an integer')
end
if tonumber(n) > 1 then
    redis.call('hincrby', KEYS[1], ARGV[3], -1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', latch, '0', 'px', ARGV[5])
    return 0
end
if #KEYS == 3 then
    redis.call(ARGV[4], KEYS[2], ARGV[1])
end
redis.call('del', KEYS[1])
redis.call('set', latch, '1', 'px', ARGV[5])
return 1
