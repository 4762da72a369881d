-- SPDX-License-Identifier: BSD-3-Clause
-- Release one hold of a reentrant lock (Redisson RLock, spec 2.3).
-- KEYS[1] lock name, KEYS[2] lock channel, KEYS[3] unlock latch key
-- ARGV[1] message to publish ("0"), ARGV[2] lease in ms for a partial
-- release, ARGV[3] owner, ARGV[4] publish command ("publish"),
-- ARGV[5] latch TTL in ms
-- Reply: the latch's value when this request already ran (a retry);
--        nil when the owner holds no hold; 0 when still held (count - 1,
--        TTL reset); 1 when fully released (key deleted, ARGV[1] published).
local done = redis.call('get', KEYS[3])
if done ~= false then
    return tonumber(done)
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local left = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if left > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[3], '0', 'px', ARGV[5])
    return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[4], KEYS[2], ARGV[1])
redis.call('set', KEYS[3], '1', 'px', ARGV[5])
return 1
