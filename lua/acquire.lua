-- SPDX-License-Identifier: BSD-3-Clause
-- Acquire or re-enter a reentrant lock (Redisson RLock, spec 2.2). It leaves
-- Redis exactly as Redisson's acquire does; its reply also says which of
-- the two happened, and it refuses to turn a lost hold into a new one.
-- KEYS[1] lock name
-- ARGV[1] lease in ms, ARGV[2] owner "<uuid>:<thread id>",
-- ARGV[3] the hold count the caller believes it has (0: none)
-- Reply: {1, n}    acquired (n = 1) or re-entered (n > 1): HINCRBY + PEXPIRE
--        {0, pttl} held by another owner (pttl -1: no TTL); nothing changed
--        {2, 0}    the caller believed it held the lock, but its field is
--                  gone (lease ran out, force-unlocked): nothing changed
if tonumber(ARGV[3]) > 0 and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return {2, 0}
end
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, n}
end
return {0, redis.call('pttl', KEYS[1])}
