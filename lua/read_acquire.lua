-- SPDX-License-Identifier: BSD-3-Clause
-- Acquire or re-enter the read half of a read/write lock (Redisson
-- RReadLock, spec 4.2). It leaves the hash and the timeout keys exactly as
-- Redisson's read acquire does; its reply, the acquire latch and the
-- resend rules are those of acquire.lua.
-- KEYS[1] lock name, KEYS[2] acquire latch (rlock_acquire_latch:{name}:<id>)
-- ARGV[1] lease in ms, ARGV[2] owner "<uuid>:<thread id>",
-- ARGV[3] the read holds the caller believes it has (0: none),
-- ARGV[4] latch TTL in ms, ARGV[5] "0" first send, "1" a resend
-- Reply: {1, n}    read lock taken (n = 1) or re-entered (n > 1): field
--                  owner = n, mode 'read' (or 'write' left as it was: the
--                  caller holds the write lock too), timeout key
--                  <tag>:<owner>:rwlock_timeout:<n> = "1" with the lease,
--                  the name's TTL at least the lease
--        {0, pttl} a writer holds it (pttl -1: no TTL); nothing changed
--        {2, 0}    the caller believed it held a read lock, but its field
--                  is gone: nothing changed
--        {3, 0}    this request was settled already: this copy changes
--                  nothing
--        {5, 0}    the name holds another kind of lock (a hash without
--                  'mode': a reentrant, fair, fenced or spin lock):
--                  nothing changed (Redisson's read lock would take it)
-- A key of another type fails the first HGET (WRONGTYPE) before any write.
-- The timeout key is not in KEYS (Redisson's layout), so the server's ACL
-- checks it only when it is written: it is written first, before the latch
-- and the hash, so an ACL that refuses it (a user whose key patterns cover
-- the name but not '{'-tagged keys) aborts the script with nothing changed.
-- <tag> is the name when it has a '{', else '{' name '}' (spec 0.1's
-- suffix()). Readers share: one is let in while a writer waits, as in
-- Redisson; a writer's own thread may read under its write lock.
local held = tonumber(ARGV[3])
local resend = ARGV[5] == '1'
local done = redis.call('get', KEYS[2])
if done ~= false then
    local n = tonumber(done) or 0
    if resend and n > 0 and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
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
local raw = redis.call('hget', KEYS[1], ARGV[2])
if raw ~= false and
    (#raw > 20 or not (raw == '0' or string.match(raw, '^%-?[1-9]%d*$'))) then
    -- as HINCRBY would answer, but before any write
    return redis.error_reply('ERR hash value is not an integer')
end
local n = tonumber(raw) or 0
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
local tag = KEYS[1]
if string.find(tag, '{', 1, true) == nil then
    tag = '{' .. tag .. '}'
end
local timeout = tag .. ':' .. ARGV[2] .. ':rwlock_timeout:'
if mode == false then
    redis.call('set', timeout .. '1', '1', 'px', ARGV[1]) -- first: see above
    if resend then
        redis.call('set', KEYS[2], '1', 'px', ARGV[4])
    end
    redis.call('hset', KEYS[1], 'mode', 'read')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, 1}
end
if mode == 'read' or
    (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2] .. ':write') == 1) then
    local k = n + 1 -- what the HINCRBY below answers
    redis.call('set', timeout .. k, '1', 'px', ARGV[1]) -- first: see above
    if resend then
        redis.call('set', KEYS[2], k, 'px', ARGV[4])
    end
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    local ttl = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], math.max(ttl, tonumber(ARGV[1])))
    return {1, k}
end
if resend then
    redis.call('set', KEYS[2], '0', 'px', ARGV[4])
end
return {0, redis.call('pttl', KEYS[1])}
