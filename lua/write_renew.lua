-- SPDX-License-Identifier: BSD-3-Clause
-- Renew many watchdog-mode write locks in one call (Redisson's renewal with
-- the owner "<uuid>:<tid>:write", spec 4.6 and 2.4); renew.lua's effect.
-- KEYS[1..n] lock names
-- ARGV[1] lease in ms, ARGV[2..n+1] the owner "<uuid>:<thread id>" of
-- each KEYS[i] (the script appends ":write")
-- Reply: an array of n integers: 0 when the owner's write field in KEYS[i]
--        was gone (or the key holds another type); else the key's TTL in
--        ms after the renewal (-1: the key has no expiry).
-- A renewal extends, never shortens (see renew.lua). pcall keeps a key of
-- another type from aborting the renewal of the whole batch.
local lease = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS do
    if redis.pcall('hexists', KEYS[i], ARGV[i + 1] .. ':write') == 1 then
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
