-- SPDX-License-Identifier: BSD-3-Clause
-- Acquire or re-enter a fenced lock (Redisson RFencedLock, spec 5): the
-- reentrant lock's effect (lua/acquire.lua: HINCRBY + PEXPIRE), and each
-- acquisition, re-entry included, takes the next token from the token key
-- (INCR, no TTL), as Redisson's does. Exact as lua/acquire.lua is: a
-- resend learns what the first copy did, token included.
-- KEYS[1] lock name, KEYS[2] acquire latch (rlock_acquire_latch:{name}:<id>),
-- KEYS[3] token key (redisson_lock_token:{name}), KEYS[4] rlock's fence
--         record (rlock_fence:{name}, a hash Redisson never reads)
-- ARGV[1] lease in ms, ARGV[2] owner "<uuid>:<thread id>",
-- ARGV[3] the hold count the caller believes it has (0: none),
-- ARGV[4] latch TTL in ms, ARGV[5] "0" first send, "1" a resend
-- Reply: {1, n, t} acquired (n = 1) or re-entered (n > 1) with token t:
--                  INCR token key, HINCRBY, PEXPIRE; or (a resend) the
--                  first copy did that, with token t, and the hold is
--                  still there
--        {0, pttl} held by another owner (pttl -1: no TTL); nothing changed
--        {2, 0}    the caller believed it held the lock, but its field is
--                  gone (lease ran out, force-unlocked): nothing changed
--        {3, 0}    this request was settled already (resent or abandoned):
--                  this copy changes nothing
--        {5, 0}    the name holds another kind of lock (a read/write lock's
--                  hash, with its 'mode' field), even when the owner is one
--                  of its readers (same field name): nothing changed but,
--                  on a resend, the latch ("0": no copy takes it later)
-- A lock key, token key or fence record of another type fails a read
-- (WRONGTYPE) before any write; a token key that is not an integer (of at
-- most 18 characters) is refused, as INCR would refuse it, before any
-- write.
-- Tokens never go back: the fence record's field 'max' keeps the largest
-- token rlock has handed out (or written with, lua/fenced_write.lua) for
-- the name, and a token key found lower than it (deleted, evicted, set by
-- hand) is moved past it (SET) instead of INCRed. Redisson's own acquire
-- INCRs the token key alone; it learns the repaired value from the key.
-- The latch of a resend that took, or found taken, the hold says "n:t".
-- A first send writes no latch: a resend that finds the first copy ran
-- (count one more than the caller's) reads its token back from the token
-- key and 'max', which no other acquisition can have moved while this
-- owner's field stood (only a holder takes a token).
-- Tokens are Lua numbers here: exact, and written in full, below 10^14.
local held = tonumber(ARGV[3])
local resend = ARGV[5] == '1'

-- The largest token handed out for the name: the token key or 'max'.
local function latest()
    local t = tonumber(redis.call('get', KEYS[3])) or 0
    local m = tonumber(redis.call('hget', KEYS[4], 'max')) or 0
    if m > t then
        return m
    end
    return t
end

local done = redis.call('get', KEYS[2])
if done ~= false then
    local n, t = string.match(done, '^(%d+):(%d+)$')
    n = tonumber(n) or tonumber(done) or 0
    if resend and n > 0 and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
        return {1, n, tonumber(t) or latest()}
    end
    if resend and n > 0 and held > 0 then
        return {2, 0}
    end
    return {3, 0}
end
-- Before anything of the owner's is looked at: a read/write lock's reader
-- field has the very name of this owner's field (as in acquire.lua).
if redis.call('hexists', KEYS[1], 'mode') == 1 then
    if resend then
        redis.call('set', KEYS[2], '0', 'px', ARGV[4])
    end
    return {5, 0}
end
local raw = redis.call('hget', KEYS[1], ARGV[2])
local n = tonumber(raw) or 0
if raw ~= false and tonumber(raw) == nil then
    -- a field written by hand: refused as HINCRBY refuses it
    return redis.error_reply('ERR hash value is not an integer')
end
if resend and n == held + 1 then
    local t = latest()
    redis.call('set', KEYS[2], n .. ':' .. t, 'px', ARGV[4])
    return {1, n, t}
end
if held > 0 and n == 0 then
    if resend then
        redis.call('set', KEYS[2], '0', 'px', ARGV[4])
    end
    return {2, 0}
end
if n > 0 or redis.call('exists', KEYS[1]) == 0 then
    local tk = redis.call('get', KEYS[3])
    if tk ~= false and (#tk > 18 or not string.match(tk, '^%-?%d+$')) then
        return redis.error_reply('ERR value is not an integer or out of range')
    end
    local m = tonumber(redis.call('hget', KEYS[4], 'max')) or 0
    local t = (tonumber(tk) or 0) + 1
    local repair = t <= m
    if repair then
        t = m + 1
    end
    if resend then
        redis.call('set', KEYS[2], (n + 1) .. ':' .. t, 'px', ARGV[4])
    end
    if repair then
        redis.call('set', KEYS[3], t)
    else
        redis.call('incr', KEYS[3])
    end
    redis.call('hset', KEYS[4], 'max', t)
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, n + 1, t}
end
if resend then
    redis.call('set', KEYS[2], '0', 'px', ARGV[4])
end
return {0, redis.call('pttl', KEYS[1])}
