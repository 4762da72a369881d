-- SPDX-License-Identifier: BSD-3-Clause
-- A waiter of a fair lock stops waiting without the lock (Redisson's
-- acquire-failed step, spec 3.4): it leaves the queue, and everybody
-- behind it moves one slot (its own) forward.
-- KEYS[1] queue Q (redisson_lock_queue:{N}), KEYS[2] deadlines T
-- (redisson_lock_timeout:{N})
-- ARGV[1] owner, ARGV[2] the slot in ms it queued with
-- Reply: 1 when the owner was in the queue, else 0.
-- Safe to run again: the second run finds nothing to leave. As in
-- Redisson, every waiter after the owner's first place gets ZINCRBY -slot
-- (one without a deadline gets one), then ZREM T and LREM Q remove every
-- place of the owner.
local q = redis.call('lrange', KEYS[1], 0, -1)
local at = nil
for i = 1, #q do
    if q[i] == ARGV[1] then
        at = i
        break
    end
end
if at == nil then
    redis.call('zrem', KEYS[2], ARGV[1])
    return 0
end
local slot = tonumber(ARGV[2])
for i = at + 1, #q do
    redis.call('zincrby', KEYS[2], -slot, q[i])
end
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('lrem', KEYS[1], 0, ARGV[1])
return 1
