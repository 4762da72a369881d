-- SPDX-License-Identifier: BSD-3-Clause
-- Renew many watchdog-mode read locks in one call (Redisson 4.4+'s read
-- renewal, spec 4.6): only the listed owners' own readers. For each
-- KEYS[i] whose field ARGV[i + 1] exists with count c, the timeout keys
-- <tag>:<owner>:rwlock_timeout:1..c and the name get at least the lease.
-- Other readers' timeout keys are never touched, so a reader whose
-- process died expires with its keys (Redisson before 4.4.0 kept them
-- alive).
-- KEYS[1..n] lock names
-- ARGV[1] lease in ms, ARGV[2..n+1] the owner "<uuid>:<thread id>" of
-- each KEYS[i]
-- Reply: an array of n integers: 0 when the owner's field in KEYS[i] was
--        gone (or the key holds another type); else the name's TTL in ms
--        after the renewal (-1: the key has no expiry).
-- A renewal extends, never shortens (see renew.lua): a TTL already longer
-- than the lease is left as it is. A timeout key that is gone stays gone.
local lease = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS do
    local raw = redis.pcall('hget', KEYS[i], ARGV[i + 1])
    if type(raw) == 'string' then
        local tag = KEYS[i]
        if string.find(tag, '{', 1, true) == nil then
            tag = '{' .. tag .. '}'
        end
        local prefix = tag .. ':' .. ARGV[i + 1] .. ':rwlock_timeout:'
        for k = tonumber(raw) or 0, 1, -1 do
            local t = redis.call('pttl', prefix .. k)
            if t >= 0 and t < lease then
                redis.call('pexpire', prefix .. k, lease)
            end
        end
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
