-- SPDX-License-Identifier: BSD-3-Clause
-- Acquire or re-enter a reentrant lock (Redisson RLock, spec 2.2).
-- KEYS[1] lock name (hash: owner -> hold count)
-- ARGV[1] lease in ms, ARGV[2] owner "<uuid>:<thread id>"
-- Reply: nil when acquired or re-entered (count + 1, TTL reset to the lease);
--        otherwise the holder's PTTL in ms (-1 when the key has no TTL).
local held = redis.call('exists', KEYS[1]) == 1
if (not held) or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])
