-- SPDX-License-Identifier: BSD-3-Clause
-- Acquire or re-enter a reentrant lock (Redisson RLock, spec 2.2; the spin
-- lock's is the same, spec 6), or acquire a non-reentrant one (Redisson
-- 4.4+, spec 2.8: ARGV[6] "1"). It leaves the lock's hash exactly as
-- Redisson's acquire does; its reply also says
-- which of the two happened, it refuses to turn a lost hold into a new one,
-- and a request sent again after a lost reply learns what the first copy
-- did instead of taking a second hold.
-- KEYS[1] lock name, KEYS[2] acquire latch (rlock_acquire_latch:{name}:<id>,
--         a key Redisson never reads)
-- ARGV[1] lease in ms, ARGV[2] owner "<uuid>:<thread id>",
-- ARGV[3] the hold count the caller believes it has (0: none),
-- ARGV[4] latch TTL in ms, ARGV[5] "0" first send, "1" a resend,
-- ARGV[6] "1": not reentrant (the owner's own hold is refused), "0": reentrant
-- Reply: {1, n}    acquired (n = 1) or re-entered (n > 1): HINCRBY + PEXPIRE;
--                  or (a resend) the first copy did that, and the hold is
--                  still there
--        {0, pttl} held by another owner (pttl -1: no TTL); nothing changed
--        {2, 0}    the caller believed it held the lock, but its field is
--                  gone (lease ran out, force-unlocked): nothing changed
--        {3, 0}    this request was settled already (resent or abandoned):
--                  this copy changes nothing
--        {4, 0}    not reentrant (ARGV[6] "1") and the owner holds it
--                  already (Redisson's NON_REENTRANT_REACQUIRE): nothing
--                  changed
--        {5, 0}    the name holds another kind of lock (a read/write lock's
--                  hash, with its 'mode' field), even when the owner is one
--                  of its readers (same field name): nothing changed but,
--                  on a resend, the latch ("0": no copy takes it later)
-- A key of another type fails the HGET (WRONGTYPE) before any write.
-- Only the owner's own requests change its field, and every earlier one
-- was answered or settled, so on a resend the field's count tells exactly
-- whether the first copy ran (ARGV[3] + 1) or not. A first send writes
-- nothing but the lock; a resend writes the latch (the outcome), which
-- stops a copy of the request still on its way: it finds the latch and
-- returns {3, 0}. Reads come first and the latch before the hold, so a
-- write the server refuses leaves everything as it was.
local held = tonumber(ARGV[3])
local resend = ARGV[5] == '1'
local done = redis.call('get', KEYS[2])
if done ~= false then
    local n = tonumber(done) or 0
    if resend and n > 0 and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
        return {1, n}
    end
    if resend and n > 0 and held > 0 then
        return {2, 0}
    end
    return {3, 0}
end
-- Before anything of the owner's is looked at: a read/write lock's reader
-- field has the very name of this owner's field.
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
    redis.call('set', KEYS[2], n, 'px', ARGV[4])
    return {1, n}
end
if held > 0 and n == 0 then
    if resend then
        redis.call('set', KEYS[2], '0', 'px', ARGV[4])
    end
    return {2, 0}
end
if n > 0 and ARGV[6] == '1' then
    if resend then
        redis.call('set', KEYS[2], '0', 'px', ARGV[4])
    end
    return {4, 0}
end
if n > 0 or redis.call('exists', KEYS[1]) == 0 then
    if resend then
        redis.call('set', KEYS[2], n + 1, 'px', ARGV[4])
    end
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, n + 1}
end
if resend then
    redis.call('set', KEYS[2], '0', 'px', ARGV[4])
end
return {0, redis.call('pttl', KEYS[1])}
