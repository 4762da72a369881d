-- SPDX-License-Identifier: BSD-3-Clause
-- Release one read hold of a read/write lock (Redisson RReadLock, spec 4.3).
-- KEYS[1] lock name, KEYS[2] lock channel (redisson_rwlock:{name}),
-- KEYS[3] unlock latch key
-- ARGV[1] lease in ms of the owner's holds left, ARGV[2] owner
-- "<uuid>:<thread id>", ARGV[3] publish command ("publish"), ARGV[4]
-- latch TTL in ms
-- Reply: the latch's value when this request already ran (a retry);
--        nil when the owner holds no read lock (no 'mode' at the name:
--        "0" is published anyway, as Redisson does, spec 11.9);
--        0 when the lock is still held (by this owner's other holds, other
--        readers, or this owner's write lock): the owner's count - 1, the
--        hold's timeout key deleted, the name's TTL = the longest TTL among
--        the timeout keys left;
--        1 when it was the last hold (the other readers' timeout keys all
--        expired count as gone): the name deleted, "0" published.
-- Two differences from Redisson's script, both only ever lengthening TTLs
-- of this owner's own holds: the owner's holds left get at least ARGV[1]
-- (the TTL the client counts on for them, as a partial unlock of the
-- reentrant lock sets it: a timeout key of theirs that ran out is written
-- again, since while the owner's field stands the hash was never deleted
-- and no writer has been in; so the client's deadline for the holds left,
-- this request's send time + ARGV[1], is never later than Redis's), and
-- under the owner's own write lock the name's
-- TTL is never shortened (Redisson's would cut the write lock's lease to
-- the longest reader's). Redisson's script also writes a latch "1" when
-- there is no 'mode'; this one writes none there, so a retry answers nil
-- again rather than "released" (the latch is read only by its own request).
-- The outcome is worked out before anything is written, and the publish
-- comes before any write: a PUBLISH the server's ACL refuses leaves
-- everything as it was. The timeout keys are not in KEYS (Redisson's
-- layout), so the ACL checks them only when they are read or written: they
-- are read before any write and written before the hash, so an ACL that
-- refuses them (no access, or read-only access, to '{'-tagged keys) aborts
-- the script with the hash as it was.
local done = redis.call('get', KEYS[3])
if done ~= false then
    return tonumber(done)
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call(ARGV[3], KEYS[2], '0')
    return nil
end
local raw = redis.call('hget', KEYS[1], ARGV[2])
if raw == false then
    return nil
end
if #raw > 20 or not (raw == '0' or string.match(raw, '^%-?[1-9]%d*$')) then
    return redis.error_reply('ERR hash value is not an integer')
end
local c = tonumber(raw) - 1
local lease = tonumber(ARGV[1])
local tag = KEYS[1]
if string.find(tag, '{', 1, true) == nil then
    tag = '{' .. tag .. '}'
end
local mine = tag .. ':' .. ARGV[2] .. ':rwlock_timeout:'
-- The longest-lived reader left: every numeric field's timeout keys (a
-- writer's field has none), this owner's counted as c, with the lease.
local best = -3
local all = redis.call('hgetall', KEYS[1])
for i = 1, #all, 2 do
    local f, v = all[i], tonumber(all[i + 1])
    if f == ARGV[2] then
        v = c
    end
    if v ~= nil then
        for k = v, 1, -1 do
            local t = redis.call('pttl', tag .. ':' .. f .. ':rwlock_timeout:' .. k)
            if f == ARGV[2] and (t == -2 or (t >= 0 and t < lease)) then
                t = lease -- written or extended below
            end
            best = math.max(best, t)
        end
    end
end
local left = #all / 2
if c <= 0 then
    left = left - 1
end
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
    redis.call('del', mine .. (c + 1))
    if c <= 0 then
        redis.call('hdel', KEYS[1], ARGV[2])
    else
        redis.call('hincrby', KEYS[1], ARGV[2], -1)
    end
    if mode == 'write' then
        best = math.max(best, redis.call('pttl', KEYS[1]))
    end
    if best > 0 then
        redis.call('pexpire', KEYS[1], best)
    end
    redis.call('set', KEYS[3], '0', 'px', ARGV[4])
    return 0
end
redis.call(ARGV[3], KEYS[2], '0')
redis.call('del', mine .. (c + 1))
redis.call('del', KEYS[1])
redis.call('set', KEYS[3], '1', 'px', ARGV[4])
return 1
