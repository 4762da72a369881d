-- SPDX-License-Identifier: BSD-3-Clause
-- Acquire, re-enter or queue for a fair lock (Redisson getFairLock, spec
-- 3.2-3.3, and its non-reentrant form, 3.8). The lock's hash, queue and
-- deadlines change exactly as Redisson's acquire changes them; the reply
-- also says which branch ran and how long the caller may sleep, and the
-- acquire latch makes a resend exact as in acquire.lua.
-- KEYS[1] lock name N, KEYS[2] queue Q (redisson_lock_queue:{N}, a list of
--         owners), KEYS[3] deadlines T (redisson_lock_timeout:{N}, a sorted
--         set: owner -> ms since the epoch after which, at the head of Q,
--         it counts as dead), KEYS[4] acquire latch
--         (rlock_acquire_latch:{N}:<id>, a key Redisson never reads)
-- ARGV[1] lease in ms, ARGV[2] owner "<uuid>:<thread id>",
-- ARGV[3] the hold count the caller believes it has (0: none),
-- ARGV[4] latch TTL in ms, ARGV[5] "0" first send, "1" a resend,
-- ARGV[6] the waiter's slot in ms (the caller's wait, or
--         fairLockWaitTimeout), ARGV[7] now, the caller's wall clock in ms
--         since the epoch, ARGV[8] "1" queue when it cannot take the lock
--         (Redisson's waiting variant), "0" never queue (its tryLock()),
-- ARGV[9] "1" reentrant, "0" the non-reentrant form
-- Reply: {1, n}  acquired (n = 1: HSET owner 1, the queue's head or no
--                queue, every deadline one slot earlier) or re-entered
--                (n > 1: HINCRBY); PEXPIRE lease. Or (a resend) the first
--                copy did that and the hold is still there.
--        {0, ms} not taken; sleep at most ms before trying again: the
--                holder's lease, but no longer than this waiter's own
--                deadline (past it, at the head, it is purged: it must
--                come back and queue again, Redisson #3004); while the lock
--                is free and another waiter heads the queue, until that
--                head's deadline (then it is purged and the next goes:
--                Redisson's reply 0 makes its waiters spin until then).
--                Queued (ARGV[8] "1"): ZADD T deadline owner, RPUSH Q owner
--                the first time, with Redisson's deadline (the last
--                waiter's, or now + the lock's PTTL, plus the slot).
--        {2, 0}  the caller believed it held the lock, its field is gone
--        {3, 0}  this request was settled already (resent or abandoned)
--        {4, 0}  the non-reentrant form, asked again by its holder
--                (Redisson: the error NON_REENTRANT_REACQUIRE)
--        {5, 0}  the name holds a read/write lock (its 'mode' field)
--        {2,0}, {3,0} and {5,0} change nothing; {4,0} and {0,ms} purge
--        the dead heads as Redisson's acquire does.
-- A key of another type fails a read (WRONGTYPE) before any write.
-- Resend: as acquire.lua, only the owner's own requests change its field,
-- so the count tells whether the first copy took a hold; every reply of a
-- resend leaves its outcome in the latch first, which stops a copy of the
-- first send still on its way (it finds the latch: {3, 0}).
local held = tonumber(ARGV[3])
local resend = ARGV[5] == '1'
local slot = tonumber(ARGV[6])
local now = tonumber(ARGV[7])
local done = redis.call('get', KEYS[4])
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
local function latch(v)
    if resend then
        redis.call('set', KEYS[4], v, 'px', ARGV[4])
    end
end
-- Before anything of the owner's is looked at: a read/write lock's reader
-- field has the very name of this owner's field (as in acquire.lua).
if redis.call('hexists', KEYS[1], 'mode') == 1 then
    latch('0')
    return {5, 0}
end
local raw = redis.call('hget', KEYS[1], ARGV[2])
local n = tonumber(raw) or 0
if raw ~= false and tonumber(raw) == nil then
    -- a field written by hand: refused as HINCRBY refuses it
    return redis.error_reply('ERR hash value is not an integer')
end
if resend and n == held + 1 then
    latch(n)
    return {1, n}
end
if held > 0 and n == 0 then
    latch('0')
    return {2, 0}
end
-- Redisson's prologue: heads whose deadline has passed are dead waiters.
while true do
    local h = redis.call('lindex', KEYS[2], 0)
    if h == false then
        break
    end
    local s = redis.call('zscore', KEYS[3], h)
    if s == false or tonumber(s) > now then
        break
    end
    redis.call('zrem', KEYS[3], h)
    redis.call('lpop', KEYS[2])
end
if n > 0 then
    if ARGV[9] ~= '1' then
        latch('0')
        return {4, 0}
    end
    latch(n + 1)
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, n + 1}
end
local head = redis.call('lindex', KEYS[2], 0)
local free = redis.call('exists', KEYS[1]) == 0
if free and (head == false or head == ARGV[2]) then
    latch(1)
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], ARGV[2])
    -- everybody behind moves one slot forward
    local members = redis.call('zrange', KEYS[3], 0, -1)
    for i = 1, #members do
        redis.call('zincrby', KEYS[3], -slot, members[i])
    end
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, 1}
end
-- Not ours to take: held, or free with another waiter at the head.
local pttl = redis.call('pttl', KEYS[1])
local head_left = -1
if free then
    local hs = redis.call('zscore', KEYS[3], head)
    if hs ~= false then
        head_left = tonumber(hs) - now
    end
end
if ARGV[8] ~= '1' then
    latch('0')
    if free then
        return {0, head_left}
    end
    return {0, pttl}
end
latch('0')
local mine = redis.call('zscore', KEYS[3], ARGV[2])
if mine == false then
    local last = redis.call('lindex', KEYS[2], -1)
    local base = pttl
    if last ~= false and last ~= ARGV[2] then
        local ls = redis.call('zscore', KEYS[3], last)
        if ls ~= false then
            base = tonumber(ls) - now
        end
    end
    mine = base + slot + now
    if redis.call('zadd', KEYS[3], mine, ARGV[2]) == 1 then
        redis.call('rpush', KEYS[2], ARGV[2])
    end
end
-- How long to sleep: the first of the holder's lease end, this waiter's
-- own deadline, and (free) the head's deadline.
local own = tonumber(mine) - now
local ttl = -1
if not free and pttl >= 0 then
    ttl = pttl
end
if free and head_left > 0 then
    ttl = head_left
end
if own > 0 and (ttl < 0 or own < ttl) then
    ttl = own
end
if ttl < 0 then
    -- no bound at all (a key without expiry, this waiter overdue): poll
    ttl = 1000
end
return {0, ttl}
