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
--        gone (or the key holds another type), or none of its timeout keys
--        is left; else the hold's own life in ms after the renewal: the
--        longest TTL among the owner's timeout keys (-1: one has no
--        expiry), no longer than the name's TTL (-1: neither expires).
-- Why the longest: a read hold is exposed only once its last timeout key
-- is gone (any reader's unlock then counts it as gone and may free the
-- lock for a writer), while the name lives as long as the longest-lived
-- reader, which may be another client's: its TTL alone would let the
-- watchdog believe in a hold whose own keys run out much sooner.
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
        local own = -2 -- the longest own timeout key: -2 none, -1 no expiry
        for k = tonumber(raw) or 0, 1, -1 do
            local t = redis.call('pttl', prefix .. k)
            if t >= 0 and t < lease then
                redis.call('pexpire', prefix .. k, lease)
                t = lease
            end
            if t == -1 or own == -1 then
                own = -1
            elseif t > own then
                own = t
            end
        end
        local ttl = redis.call('pttl', KEYS[i])
        if ttl >= 0 and ttl < lease then
            redis.call('pexpire', KEYS[i], lease)
            ttl = lease
        end
        if own == -2 then
            out[i] = 0
        elseif own == -1 or (ttl >= 0 and ttl < own) then
            out[i] = ttl
        else
            out[i] = own
        end
    else
        out[i] = 0
    end
end
return out
