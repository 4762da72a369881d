-- SPDX-License-Identifier: BSD-3-Clause
-- Renew many watchdog-mode locks in one call (Redisson renewal, spec 2.4).
-- KEYS[1..n] lock names
-- ARGV[1] lease in ms, ARGV[2..n+1] the owner to renew in each KEYS[i]
-- Reply: an array of n integers: 0 when the owner's field in KEYS[i] was
--        gone (or the key holds another type); else the key's TTL in ms
--        after the renewal (-1: the key has no expiry).
-- A renewal extends, never shortens: a TTL already longer than the lease
-- (a re-entry or partial unlock with a longer explicit lease, sent after
-- this renewal but run before it) is left as it is, so a renewal that
-- reaches Redis late can never cut a lease its holder was told of.
-- A key that now holds another type (overwritten) counts as gone: pcall
-- keeps its WRONGTYPE error from aborting the renewal of the whole batch.
local lease = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS do
    if redis.pcall('hexists', KEYS[i], ARGV[i + 1]) == 1 then
        local ttl = redis.call('pttl', KEYS[i])
        if ttl >= 0 and ttl < lease then
            redis.call('pexpire', KEYS[i], lease)
            ttl = lease
        end
        out[i] = ttl
    else
        out[i] = 0
    end
end
return out
