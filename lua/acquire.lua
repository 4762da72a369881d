-- SPDX-License-Identifier: BSD-3-Clause
-- Acquire or re-enter a reentrant lock (Redisson RLock, spec 2.2). It leaves
-- the lock's hash exactly as Redisson's acquire does; its reply also says
-- which of the two happened, it refuses to turn a lost hold into a new one,
-- and it remembers its own outcome under its request id, so that a copy of
-- the request sent again after a lost reply learns what happened instead of
-- taking a second hold.
-- KEYS[1] lock name, KEYS[2] acquire latch (rlock_acquire_latch:{name}:<id>,
--         a key Redisson never reads)
-- ARGV[1] lease in ms, ARGV[2] owner "<uuid>:<thread id>",
-- ARGV[3] the hold count the caller believes it has (0: none),
-- ARGV[4] latch TTL in ms, ARGV[5] "0" first send, "1" a resend (then an
--         outcome that took nothing is remembered too)
-- Reply: {1, n}    acquired (n = 1) or re-entered (n > 1): HINCRBY + PEXPIRE,
--                  latch = n; or a copy of this request already did that
--                  and the owner's field is still there
--        {0, pttl} held by another owner (pttl -1: no TTL); nothing changed
--        {2, 0}    the caller believed it held the lock, but its field is
--                  gone (lease ran out, force-unlocked): nothing changed;
--                  or a copy of this re-entry ran and the hold is gone since
--        {3, 0}    a copy of this request already ran and took nothing, or
--                  took a first hold that has expired since, or the request
--                  was abandoned: nothing changed
local done = redis.call('get', KEYS[2])
if done ~= false then
    local n = tonumber(done)
    if n ~= nil and n > 0 and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
        return {1, n}
    end
    if n ~= nil and n > 0 and tonumber(ARGV[3]) > 0 then
        return {2, 0} -- it re-entered, and the hold has been lost since
    end
    return {3, 0}
end
if tonumber(ARGV[3]) > 0 and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    if ARGV[5] == '1' then
        redis.call('set', KEYS[2], '0', 'px', ARGV[4])
    end
    return {2, 0}
end
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    -- The latch first: a write the server refuses then leaves the lock as
    -- it was, never a hold without its latch.
    local n = (tonumber(redis.call('hget', KEYS[1], ARGV[2])) or 0) + 1
    redis.call('set', KEYS[2], n, 'px', ARGV[4])
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, n}
end
if ARGV[5] == '1' then
    redis.call('set', KEYS[2], '0', 'px', ARGV[4])
end
return {0, redis.call('pttl', KEYS[1])}
