-- SPDX-License-Identifier: BSD-3-Clause
-- Settle a read acquire whose reply never came (rlock's own; abandon.lua's
-- contract for the read half): after this script no copy of that request
-- can take a hold any more, and a read hold it took is given back as a
-- read unlock would give it back. Only the owner's own requests change its
-- field and every other one was answered or settled, so the count tells
-- exactly whether the request ran: ARGV[6] + 1 if it did.
-- KEYS[1] lock name, KEYS[2] lock channel, KEYS[3] the acquire's latch
-- ARGV[1] owner "<uuid>:<thread id>", ARGV[2] latch TTL in ms, ARGV[3]
-- lease in ms for the holds left, ARGV[4] message to publish ("0"),
-- ARGV[5] publish command, ARGV[6] the read holds the owner had when it
-- sent the request
-- Reply: 0 it took nothing (and now never will)
--        1 it took a hold, now given back; the owner still holds the rest
--          (their timeout keys get at least the lease, written again if
--          one ran out, as read_unlock.lua does; the name's TTL is the
--          longest left, never shortened under the owner's write lock)
--        2 it took the owner's only read hold, now given back (the name
--          deleted and ARGV[4] published when no holder is left)
--        3 the owner's read holds are gone (expired, force-unlocked)
-- The latch ("0") stops a copy still on its way. The publish comes before
-- any write, so a publish the server refuses leaves everything as it was;
-- the owner's timeout keys (not in KEYS) are written before the hash, so a
-- write of theirs that the ACL refuses leaves the hash as it was.
local held = tonumber(ARGV[6])
local raw = redis.call('hget', KEYS[1], ARGV[1])
local n = tonumber(raw) or 0
if raw ~= false and tonumber(raw) == nil then
    return redis.error_reply('ERR hash value is not an integer')
end
if n > held and n >= 1 then
    local c = n - 1
    local lease = tonumber(ARGV[3])
    local tag = KEYS[1]
    if string.find(tag, '{', 1, true) == nil then
        tag = '{' .. tag .. '}'
    end
    local mode = redis.call('hget', KEYS[1], 'mode')
    local best = -3
    local all = redis.call('hgetall', KEYS[1])
    for i = 1, #all, 2 do
        local f, v = all[i], tonumber(all[i + 1])
        if f == ARGV[1] then
            v = c
        end
        if v ~= nil then
            for k = v, 1, -1 do
                local t = redis.call('pttl', tag .. ':' .. f .. ':rwlock_timeout:' .. k)
                if f == ARGV[1] and (t == -2 or (t >= 0 and t < lease)) then
                    t = lease -- written or extended to the lease below
                end
                best = math.max(best, t)
            end
        end
    end
    local left = #all / 2
    if c == 0 then
        left = left - 1
    end
    local mine = tag .. ':' .. ARGV[1] .. ':rwlock_timeout:'
    if left > 1 and (best > 0 or mode == 'write') then
        -- The timeout keys first (not in KEYS: see above), then the hash.
        for k = 1, c do
            local t = redis.call('pttl', mine .. k)
            if t == -2 then
                redis.call('set', mine .. k, '1', 'px', lease)
            elseif t >= 0 and t < lease then
                redis.call('pexpire', mine .. k, lease)
            end
        end
        redis.call('del', mine .. n)
        if c == 0 then
            redis.call('hdel', KEYS[1], ARGV[1])
        else
            redis.call('hincrby', KEYS[1], ARGV[1], -1)
        end
        if mode == 'write' then
            best = math.max(best, redis.call('pttl', KEYS[1]))
        end
        if best > 0 then
            redis.call('pexpire', KEYS[1], best)
        end
        redis.call('set', KEYS[3], '0', 'px', ARGV[2])
        if c > 0 then
            return 1
        end
        return 2
    end
    -- Its only read hold (c 0: with c > 0 the holds left keep the lock),
    -- and no other holder is left.
    redis.call(ARGV[5], KEYS[2], ARGV[4])
    redis.call('del', mine .. n)
    redis.call('del', KEYS[1])
    redis.call('set', KEYS[3], '0', 'px', ARGV[2])
    return 2
end
redis.call('set', KEYS[3], '0', 'px', ARGV[2])
if held > 0 and n == 0 then
    return 3
end
return 0
