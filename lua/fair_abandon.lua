-- SPDX-License-Identifier: BSD-3-Clause
-- Settle a fair lock's acquire whose reply never came (rlock's own, not
-- Redisson's): abandon.lua's contract, and the owner leaves the queue its
-- request may have joined. Only the owner's own requests change its field
-- and every other one was answered or settled, so the count tells exactly
-- whether the request took a hold: ARGV[6] + 1 if it did.
-- KEYS[1] lock name N, KEYS[2] queue Q, KEYS[3] deadlines T,
-- KEYS[4] lock channel (redisson_lock__channel:{N}), KEYS[5] the
-- acquire's latch
-- ARGV[1] owner, ARGV[2] latch TTL in ms, ARGV[3] lease in ms for the
-- holds left, ARGV[4] message to publish ("0"), ARGV[5] publish command,
-- ARGV[6] the hold count the owner had when it sent the request,
-- ARGV[7] now (wall clock, ms since the epoch)
-- Reply: 0 it took nothing (and now never will)
--        1 it took a hold, now given back; the owner still holds the rest
--        2 it took the owner's only hold, now given back: the key is
--          deleted and ARGV[4] published to the queue's head, as a
--          release does (dead heads purged first)
--        3 the owner's holds are gone (expired, force-unlocked)
-- Every reply: the owner is in neither Q nor T afterwards. The deadlines
-- behind it are left as they are (the slot it queued with is not known
-- here): a dead waiter behind is purged one slot later, never earlier. An
-- owner that heads the queue of a free lock passes the turn on: ARGV[4] to
-- the next live waiter, as fair_give_up.lua does.
-- The latch ("0") stops a copy still on its way. The publish comes before
-- any write, so a publish the server refuses (an ACL without the channel)
-- leaves everything as it was.
local held = tonumber(ARGV[6])
local raw = redis.call('hget', KEYS[1], ARGV[1])
local n = tonumber(raw) or 0
if raw ~= false and tonumber(raw) == nil then
    return redis.error_reply('ERR hash value is not an integer')
end
local function leave()
    redis.call('zrem', KEYS[3], ARGV[1])
    redis.call('lrem', KEYS[2], 0, ARGV[1])
end
if n > held and n > 1 then
    redis.call('hincrby', KEYS[1], ARGV[1], -1)
    redis.call('pexpire', KEYS[1], ARGV[3])
    redis.call('set', KEYS[5], '0', 'px', ARGV[2])
    leave()
    return 1
end
-- The queue as the next script will see it: the dead heads (deadline
-- passed) its purge pops, the first live waiter (first), and the first
-- live waiter other than the owner (next), who is to be told when the
-- owner gives the lock back or leaves the head of a free lock's queue.
local now = tonumber(ARGV[7])
local q = redis.call('lrange', KEYS[2], 0, -1)
local dead = 0
local gone = {}
local first = false
local nxt = false
for i = 1, #q do
    local h = q[i]
    local s = false
    if not gone[h] then
        s = redis.call('zscore', KEYS[3], h)
    end
    if first == false and s ~= false and tonumber(s) <= now then
        gone[h] = true
        dead = dead + 1
    elseif first == false then
        first = h
    end
    if first ~= false and h ~= ARGV[1] and (s == false or tonumber(s) > now) then
        nxt = h
        break
    end
end
if n > held then
    if nxt ~= false then
        redis.call(ARGV[5], KEYS[4] .. ':' .. nxt, ARGV[4])
    end
    for h in pairs(gone) do
        redis.call('zrem', KEYS[3], h)
    end
    if dead > 0 then
        redis.call('ltrim', KEYS[2], dead, -1)
    end
    redis.call('del', KEYS[1])
    redis.call('set', KEYS[5], '0', 'px', ARGV[2])
    leave()
    return 2
end
if first == ARGV[1] and nxt ~= false and redis.call('exists', KEYS[1]) == 0 then
    -- it heads a free lock's queue and leaves: the next one goes
    redis.call(ARGV[5], KEYS[4] .. ':' .. nxt, ARGV[4])
end
redis.call('set', KEYS[5], '0', 'px', ARGV[2])
leave()
if held > 0 and n == 0 then
    return 3
end
return 0
