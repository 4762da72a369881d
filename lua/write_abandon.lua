-- SPDX-License-Identifier: BSD-3-Clause
-- Settle a write acquire whose reply never came (rlock's own; abandon.lua's
-- contract for the write half): after this script no copy of that request
-- can take a hold any more, and a write hold it took is given back as a
-- write unlock would give it back. Only the owner's own requests change
-- its field and every other one was answered or settled, so the count
-- tells exactly whether the request ran: ARGV[6] + 1 if it did.
-- KEYS[1] lock name, KEYS[2] lock channel, KEYS[3] the acquire's latch
-- ARGV[1] owner "<uuid>:<thread id>" (the script appends ":write"),
-- ARGV[2] latch TTL in ms, ARGV[3] lease in ms for the holds left,
-- ARGV[4] message to publish ("1"), ARGV[5] publish command, ARGV[6] the
-- write holds the owner had when it sent the request
-- Reply: 0 it took nothing (and now never will)
--        1 it took a hold, now given back; the owner still holds the rest
--        2 it took the owner's only write hold, now given back: ARGV[4]
--          published, the name deleted (or, under the owner's own read
--          holds, mode set to 'read')
--        3 the owner's write holds are gone (expired, force-unlocked)
-- The latch ("0") stops a copy still on its way. The publish comes before
-- any write, so a publish the server refuses leaves everything as it was.
local held = tonumber(ARGV[6])
local writer = ARGV[1] .. ':write'
local raw = redis.call('hget', KEYS[1], writer)
local n = tonumber(raw) or 0
if raw ~= false and tonumber(raw) == nil then
    return redis.error_reply('ERR hash value is not an integer')
end
if n > held and n > 1 then
    -- as write_unlock.lua: the lease, or the owner's longer read holds
    local ttl = tonumber(ARGV[3])
    local all = redis.call('hgetall', KEYS[1])
    local tag = KEYS[1]
    if string.find(tag, '{', 1, true) == nil then
        tag = '{' .. tag .. '}'
    end
    for i = 1, #all, 2 do
        local v = tonumber(all[i + 1])
        if v ~= nil and #all > 4 then
            for k = v, 1, -1 do
                local key = tag .. ':' .. all[i] .. ':rwlock_timeout:' .. k
                ttl = math.max(ttl, redis.call('pttl', key))
            end
        end
    end
    redis.call('hincrby', KEYS[1], writer, -1)
    redis.call('pexpire', KEYS[1], ttl)
    redis.call('set', KEYS[3], '0', 'px', ARGV[2])
    return 1
end
if n > held then
    redis.call(ARGV[5], KEYS[2], ARGV[4])
    if redis.call('hlen', KEYS[1]) == 2 then
        redis.call('del', KEYS[1])
    else
        redis.call('hdel', KEYS[1], writer)
        redis.call('hset', KEYS[1], 'mode', 'read')
    end
    redis.call('set', KEYS[3], '0', 'px', ARGV[2])
    return 2
end
redis.call('set', KEYS[3], '0', 'px', ARGV[2])
if held > 0 and n == 0 then
    return 3
end
return 0
