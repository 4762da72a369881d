-- SPDX-License-Identifier: BSD-3-Clause
-- Renew many watchdog-mode locks in one call (Redisson renewal, spec 2.4).
-- KEYS[1..n] lock names
-- ARGV[1] lease in ms, ARGV[2..n+1] the owner to renew in each KEYS[i]
-- Reply: an array of n integers: 1 when KEYS[i] still had its owner field
--        and its TTL was reset to the lease, 0 when the field was gone (or
--        the key holds another type).
-- A key that now holds another type (overwritten) counts as gone: pcall
-- keeps its WRONGTYPE error from aborting the renewal of the whole batch.
local out = {}
for i = 1, #KEYS do
    if redis.pcall('hexists', KEYS[i], ARGV[i + 1]) == 1 then
        redis.call('pexpire', KEYS[i], ARGV[1])
        out[i] = 1
    else
        out[i] = 0
    end
end
return out
