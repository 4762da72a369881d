-- SPDX-License-Identifier: BSD-3-Clause
-- Settle an acquire whose reply never came (rlock's own, not Redisson's):
-- after this script no copy of that request can take a hold any more, and
-- a hold it took is given back. Its outcome is exact while the acquire's
-- latch lives (it is written whenever the acquire took a hold).
-- KEYS[1] lock name, KEYS[2] lock channel, KEYS[3] the acquire's latch
-- ARGV[1] owner, ARGV[2] latch TTL in ms, ARGV[3] lease in ms for the
-- holds left, ARGV[4] message to publish ("0"), ARGV[5] publish command
-- Reply: 0 it took nothing (and now never will)
--        1 it took a hold, now given back; the owner still holds the rest
--        2 it took the owner's only hold, now given back: the key is
--          deleted and ARGV[4] published
--        3 it took a hold, but the owner's field is gone already
-- The publish comes before any write, so a publish the server refuses
-- (an ACL without the channel) leaves everything as it was.
local done = tonumber(redis.call('get', KEYS[3]) or '0') or 0
if done <= 0 then
    redis.call('set', KEYS[3], '0', 'px', ARGV[2])
    return 0
end
local n = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0') or 0
if n <= 0 then
    redis.call('set', KEYS[3], '0', 'px', ARGV[2])
    return 3
end
if n > 1 then
    redis.call('hincrby', KEYS[1], ARGV[1], -1)
    redis.call('pexpire', KEYS[1], ARGV[3])
    redis.call('set', KEYS[3], '0', 'px', ARGV[2])
    return 1
end
redis.call(ARGV[5], KEYS[2], ARGV[4])
redis.call('del', KEYS[1])
redis.call('set', KEYS[3], '0', 'px', ARGV[2])
return 2
