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
-- here): a dead waiter behind is purged one slot later, never earlier.
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
if n > held then
    -- The head after the dead ones, as a release finds it.
    local now = tonumber(ARGV[7])
    local dead = 0
    local gone = {}
    local head = false
    while true do
        local h = redis.call('lindex', KEYS[2], dead)
        if h == false then
            break
        end
        local s = false
        if not gone[h] then
            s = redis.call('zscore', KEYS[3], h)
        end
        if s == false or tonumber(s) > now then
            head = h
            break
        end
        gone[h] = true
        dead = dead + 1
    end
    if head == ARGV[1] then
        -- its own place, left below: the next one is the head
        head = redis.call('lindex', KEYS[2], dead + 1)
    end
    if head ~= false then
        redis.call(ARGV[5], KEYS[4] .. ':' .. head, ARGV[4])
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
redis.call('set', KEYS[5], '0', 'px', ARGV[2])
leave()
if held > 0 and n == 0 then
    return 3
end
return 0
