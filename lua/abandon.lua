-- SPDX-License-Identifier: BSD-3-Clause
-- Settle an acquire whose reply never came (rlock's own, not Redisson's):
-- after this script no copy of that request can take a hold any more, and
-- a hold it took is given back. Only the owner's own requests change its
-- field and every other one was answered or settled, so the count tells
-- exactly whether the request ran: ARGV[6] + 1 if it did.
-- KEYS[1] lock name, KEYS[2] lock channel, KEYS[3] the acquire's latch;
-- a kind that publishes nothing (the spin lock) passes KEYS[1] and the
-- latch only, and ARGV[4] and ARGV[5] unused
-- ARGV[1] owner, ARGV[2] latch TTL in ms, ARGV[3] lease in ms for the
-- holds left, ARGV[4] message to publish ("0"), ARGV[5] publish command,
-- ARGV[6] the hold count the owner had when it sent the request
-- Reply: 0 it took nothing (and now never will)
--        1 it took a hold, now given back; the owner still holds the rest
--        2 it took the owner's only hold, now given back: the key is
--          deleted and ARGV[4] published (when there is a channel)
--        3 the owner's holds are gone (expired, force-unlocked)
-- The latch ("0") stops a copy still on its way. The publish comes before
-- any write, so a publish the server refuses (an ACL without the channel)
-- leaves everything as it was.
local latch = KEYS[#KEYS]
local held = tonumber(ARGV[6])
local raw = redis.call('hget', KEYS[1], ARGV[1])
local n = tonumber(raw) or 0
if raw ~= false and tonumber(raw) == nil then
    return redis.error_reply('ERR hash value is not an integer')
end
if n > held and n > 1 then
    redis.call('hincrby', KEYS[1], ARGV[1], -1)
    redis.call('pexpire', KEYS[1], ARGV[3])
    redis.call('set', latch, '0', 'px', ARGV[2])
    return 1
end
if n > held then
    if #KEYS == 3 then
        redis.call(ARGV[5], KEYS[2], ARGV[4])
    end
    redis.call('del', KEYS[1])
    redis.call('set', latch, '0', 'px', ARGV[2])
    return 2
end
redis.call('set', latch, '0', 'px', ARGV[2])
if held > 0 and n == 0 then
    return 3
end
return 0
