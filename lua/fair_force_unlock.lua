-- SPDX-License-Identifier: BSD-3-Clause
-- Delete a fair lock whoever holds it (Redisson RFairLock forceUnlock,
-- spec 3.6).
-- KEYS[1] lock name N, KEYS[2] queue Q, KEYS[3] deadlines T,
-- KEYS[4] lock channel (redisson_lock__channel:{N})
-- ARGV[1] message to publish ("0"), ARGV[2] now (wall clock, ms since the
-- epoch), ARGV[3] publish command ("publish")
-- Reply: 1 when a lock was deleted (and ARGV[1] published to the queue's
--        head, KEYS[4] ":" <head>, if there is one), else 0. Either way
--        the dead heads (deadline passed) are purged first, as Redisson's
--        does. 2 when N holds a read/write lock (a hash with a 'mode'
--        field): nothing changed, nothing purged (force_unlock.lua's rule;
--        Redisson deletes it). A key of another type is deleted.
-- The dead heads are found without writing and the PUBLISH comes before
-- any write: a PUBLISH the server's ACL refuses leaves everything as it
-- was.
-- No TYPE (force_unlock.lua's rule): HEXISTS answers WRONGTYPE for a key
-- of another type; any other error (the ACL) is the script's answer.
local m = redis.pcall('hexists', KEYS[1], 'mode')
if type(m) == 'table' and not string.find(m.err or '', 'WRONGTYPE', 1, true) then
    return m
end
if m == 1 then
    return 2
end
local now = tonumber(ARGV[2])
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
local locked = redis.call('exists', KEYS[1]) == 1
if locked and head ~= false then
    redis.call(ARGV[3], KEYS[4] .. ':' .. head, ARGV[1])
end
for h in pairs(gone) do
    redis.call('zrem', KEYS[3], h)
end
if dead > 0 then
    redis.call('ltrim', KEYS[2], dead, -1)
end
if locked then
    redis.call('del', KEYS[1])
    return 1
end
return 0
