-- SPDX-License-Identifier: BSD-3-Clause
-- A fenced write (rlock's own, not Redisson's): one command that writes
-- one key (SET key value, HSET key field value), run only if the caller
-- holds the fenced lock and no write with a newer token of that lock has
-- reached the key. The token of each write is kept in rlock's fence
-- record of the lock, field "k:" + key, and 'max' keeps the largest token
-- the lock has handed out or written with (lua/fenced_acquire.lua reads
-- it, so that tokens never go back even if the token key is lost).
-- KEYS[1] lock name, KEYS[2] fence record (rlock_fence:{name}),
-- KEYS[3] the key the command writes
-- ARGV[1] the caller's field in the lock ("<uuid>:<thread id>"),
-- ARGV[2] the caller's token, ARGV[3] the key's field in the record
-- ("k:" + key), ARGV[4..] the command and its arguments
-- Reply: {1, r}      written: r is the command's reply
--        {0}         the caller's field is not in the lock: nothing written
--        {2, t}      a write with the newer token t reached the key
--                    before: nothing written
--        {3, error}  the command failed (e.g. WRONGTYPE): nothing written
--                    (the record is put back as it was)
-- The lock key or the record of another type fails a read (WRONGTYPE)
-- before any write. The record is written before the command, and put
-- back if the command fails, so a command the server refuses (an ACL
-- without the key) never leaves a write without its token.
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    return {0}
end
local token = tonumber(ARGV[2])
local stored = redis.call('hget', KEYS[2], ARGV[3])
if stored ~= false and (tonumber(stored) or 0) > token then
    return {2, tonumber(stored)}
end
local max = redis.call('hget', KEYS[2], 'max')
local raise = (tonumber(max) or 0) < token
redis.call('hset', KEYS[2], ARGV[3], ARGV[2])
if raise then
    redis.call('hset', KEYS[2], 'max', ARGV[2])
end
local r = redis.pcall(unpack(ARGV, 4))
if type(r) == 'table' and r.err then
    if stored == false then
        redis.call('hdel', KEYS[2], ARGV[3])
    else
        redis.call('hset', KEYS[2], ARGV[3], stored)
    end
    if raise and max == false then
        redis.call('hdel', KEYS[2], 'max')
    elseif raise then
        redis.call('hset', KEYS[2], 'max', max)
    end
    return {3, r}
end
return {1, r}
