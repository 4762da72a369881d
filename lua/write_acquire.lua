-- SPDX-License-Identifier: BSD-3-Clause
-- Acquire or re-enter the write half of a read/write lock (Redisson
-- RWriteLock, spec 4.4). It leaves the hash exactly as Redisson's write
-- acquire does (field "<owner>:write"; a re-entry ADDS the lease to the
-- TTL left); its reply, the acquire latch and the resend rules are those
-- of acquire.lua.
-- KEYS[1] lock name, KEYS[2] acquire latch (rlock_acquire_latch:{name}:<id>)
-- ARGV[1] lease in ms, ARGV[2] owner "<uuid>:<thread id>" (the script
-- appends ":write"), ARGV[3] the write holds the caller believes it has,
-- ARGV[4] latch TTL in ms, ARGV[5] "0" first send, "1" a resend
-- Reply: {1, n}    write lock taken (n = 1: mode 'write', field = 1, TTL the
--                  lease) or re-entered (n > 1: TTL + lease)
--        {0, pttl} held by others (readers, or another writer)
--        {2, 0}    the caller believed it held the write lock, but its
--                  field is gone: nothing changed
--        {3, 0}    this request was settled already: nothing changed
--        {4, 0}    the caller holds the read lock (mode 'read' and its
--                  field): it would wait on itself forever, as Redisson's
--                  does (#4796); nothing changed
--        {5, 0}    the name holds another kind of lock (a hash without
--                  'mode'): nothing changed (Redisson would take it)
-- A key of another type fails the first HGET (WRONGTYPE) before any write.
local held = tonumber(ARGV[3])
local resend = ARGV[5] == '1'
local writer = ARGV[2] .. ':write'
local done = redis.call('get', KEYS[2])
if done ~= false then
    local n = tonumber(done) or 0
    if resend and n > 0 and redis.call('hexists', KEYS[1], writer) == 1 then
        return {1, n}
    end
    if resend and n > 0 and held > 0 then
        return {2, 0}
    end
    return {3, 0}
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false and redis.call('exists', KEYS[1]) == 1 then
    if resend then
        redis.call('set', KEYS[2], '0', 'px', ARGV[4])
    end
    return {5, 0}
end
local raw = redis.call('hget', KEYS[1], writer)
local n = tonumber(raw) or 0
if raw ~= false and tonumber(raw) == nil then
    return redis.error_reply('ERR hash value is not an integer')
end
if resend and n == held + 1 then
    redis.call('set', KEYS[2], n, 'px', ARGV[4])
    return {1, n}
end
if held > 0 and n == 0 then
    if resend then
        redis.call('set', KEYS[2], '0', 'px', ARGV[4])
    end
    return {2, 0}
end
if mode == false then
    if resend then
        redis.call('set', KEYS[2], '1', 'px', ARGV[4])
    end
    redis.call('hset', KEYS[1], 'mode', 'write')
    redis.call('hset', KEYS[1], writer, 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, 1}
end
if mode == 'write' and raw ~= false then
    if resend then
        redis.call('set', KEYS[2], n + 1, 'px', ARGV[4])
    end
    local k = redis.call('hincrby', KEYS[1], writer, 1)
    local ttl = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], ttl + tonumber(ARGV[1]))
    return {1, k}
end
if resend then
    redis.call('set', KEYS[2], '0', 'px', ARGV[4])
end
if mode == 'read' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    return {4, 0}
end
return {0, redis.call('pttl', KEYS[1])}
