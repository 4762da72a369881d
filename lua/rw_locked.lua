-- SPDX-License-Identifier: BSD-3-Clause
-- Whether one half of a read/write lock is locked, and for how long
-- (Redisson's isLocked, spec 4.6): the read half while mode is 'read', or
-- mode is 'write' with a reader beside the writer (more than two fields);
-- the write half while mode is 'write'. A read, changing nothing.
-- KEYS[1] lock name
-- ARGV[1] the half ("read" or "write")
-- Reply: -2 when that half is not locked, else the name's PTTL (-1: no
-- TTL). A key of another type fails the HGET (WRONGTYPE).
local mode = redis.call('hget', KEYS[1], 'mode')
local locked
if ARGV[1] == 'write' then
    locked = mode == 'write'
else
    locked = mode == 'read' or (mode == 'write' and redis.call('hlen', KEYS[1]) > 2)
end
if locked then
    return redis.call('pttl', KEYS[1])
end
return -2
