-- SPDX-License-Identifier: BSD-3-Clause
-- Release one write hold of a read/write lock (Redisson RWriteLock, spec
-- 4.5).
-- KEYS[1] lock name, KEYS[2] lock channel (redisson_rwlock:{name}),
-- KEYS[3] unlock latch key
-- ARGV[1] lease in ms for a partial release, ARGV[2] owner
-- "<uuid>:<thread id>" (the script appends ":write"), ARGV[3] publish
-- command ("publish"), ARGV[4] latch TTL in ms
-- Reply: the latch's value when this request already ran (a retry);
--        nil when the owner holds no write lock (no 'mode' at the name:
--        "1" is published anyway, as Redisson does, spec 11.9);
--        0 when still held (count - 1, TTL reset to the lease, or to the
--        longest TTL of the owner's own read holds under it when that is
--        longer: Redisson's would cut them short);
--        1 when the last write hold was released: "1" published (every
--        waiting reader wakes), then the name deleted, or, when the owner
--        still holds read locks under it, mode set to 'read' (downgrade).
-- Redisson does not publish on a downgrade (spec 11.11), so its waiting
-- readers only notice on their TTL poll; this script publishes "1" there
-- too: a message only wakes waiters, who try again, and every reader
-- waiting anywhere, Java ones included, gets in at once.
-- The publish comes before any write: a PUBLISH the server's ACL refuses
-- leaves everything as it was. So do the reads of the read holds' timeout
-- keys, which are not in KEYS: an ACL that refuses them aborts the script
-- before the HINCRBY. Like read_unlock.lua, no latch is written
-- when there is no 'mode' (Redisson writes "1" there).
-- The lease, or longer while the owner's own read holds under its write
-- lock have timeout keys that live longer (Redisson's partial write
-- unlock would cut them short; nobody else can read under a write lock).
local function longest(lease)
    local all = redis.call('hgetall', KEYS[1])
    if #all <= 4 then
        return lease
    end
    local tag = KEYS[1]
    if string.find(tag, '{', 1, true) == nil then
        tag = '{' .. tag .. '}'
    end
    for i = 1, #all, 2 do
        local v = tonumber(all[i + 1])
        if v ~= nil then
            for k = v, 1, -1 do
                local key = tag .. ':' .. all[i] .. ':rwlock_timeout:' .. k
                lease = math.max(lease, redis.call('pttl', key))
            end
        end
    end
    return lease
end
local done = redis.call('get', KEYS[3])
if done ~= false then
    return tonumber(done)
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call(ARGV[3], KEYS[2], '1')
    return nil
end
if mode ~= 'write' then
    return nil
end
local writer = ARGV[2] .. ':write'
local raw = redis.call('hget', KEYS[1], writer)
if raw == false then
    return nil
end
if #raw > 20 or not (raw == '0' or string.match(raw, '^%-?[1-9]%d*$')) then
    return redis.error_reply('ERR hash value is not an integer')
end
if tonumber(raw) > 1 then
    local ttl = longest(tonumber(ARGV[1])) -- reads keys not in KEYS: first
    redis.call('hincrby', KEYS[1], writer, -1)
    redis.call('pexpire', KEYS[1], ttl)
    redis.call('set', KEYS[3], '0', 'px', ARGV[4])
    return 0
end
redis.call(ARGV[3], KEYS[2], '1')
if redis.call('hlen', KEYS[1]) == 2 then
    redis.call('del', KEYS[1])
else
    redis.call('hdel', KEYS[1], writer)
    redis.call('hset', KEYS[1], 'mode', 'read')
end
redis.call('set', KEYS[3], '1', 'px', ARGV[4])
return 1
