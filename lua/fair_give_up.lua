-- SPDX-License-Identifier: BSD-3-Clause
-- A waiter of a fair lock stops waiting without the lock (Redisson's
-- acquire-failed step, spec 3.4): it leaves the queue, and everybody
-- behind it moves one slot (its own) forward.
-- KEYS[1] lock name N, KEYS[2] queue Q (redisson_lock_queue:{N}),
-- KEYS[3] deadlines T (redisson_lock_timeout:{N}), KEYS[4] lock channel
-- (redisson_lock__channel:{N})
-- ARGV[1] owner, ARGV[2] the slot in ms it queued with, ARGV[3] now (wall
-- clock, ms since the epoch), ARGV[4] message to publish ("0"),
-- ARGV[5] publish command ("publish")
-- Reply: 1 when the owner was in the queue, else 0.
-- Safe to run again: the second run finds nothing to leave. As in
-- Redisson, every waiter after the owner's first place gets ZINCRBY -slot
-- (one without a deadline gets one), then ZREM T and LREM Q remove every
-- place of the owner. rlock's one addition: a waiter that leaves the head
-- of the queue while the lock is free (it was woken, or the lease ran out
-- without a release, and its wait ended before it took the lock) passes
-- the wake-up on: ARGV[4] is published to the next waiter whose deadline
-- (moved) has not passed, KEYS[4] ":" <owner>, before any write. Redisson
-- publishes nothing here, and the next waiter sleeps until its own bound.
local q = redis.call('lrange', KEYS[2], 0, -1)
local at = nil
for i = 1, #q do
    if q[i] == ARGV[1] then
        at = i
        break
    end
end
if at == nil then
    redis.call('zrem', KEYS[3], ARGV[1])
    return 0
end
local slot = tonumber(ARGV[2])
if at == 1 and redis.call('exists', KEYS[1]) == 0 then
    local now = tonumber(ARGV[3])
    for i = 2, #q do
        if q[i] ~= ARGV[1] then
            local s = redis.call('zscore', KEYS[3], q[i])
            if s == false or tonumber(s) - slot > now then
                redis.call(ARGV[5], KEYS[4] .. ':' .. q[i], ARGV[4])
                break
            end
        end
    end
end
for i = at + 1, #q do
    redis.call('zincrby', KEYS[3], -slot, q[i])
end
redis.call('zrem', KEYS[3], ARGV[1])
redis.call('lrem', KEYS[2], 0, ARGV[1])
return 1
