-- SPDX-License-Identifier: BSD-3-Clause
-- A guarded command (rlock's own, not Redisson's): runs one command only
-- if the caller still holds the lock, atomically with the check, so a
-- holder paused past its lease cannot overwrite what the next holder
-- wrote (etcd's transaction "if the lock is mine, then write").
-- KEYS[1] lock name
-- ARGV[1] the caller's field in the lock: "<uuid>:<thread id>" (reentrant,
-- fenced, fair, spin, read), "<uuid>:<thread id>:write" (the write half),
-- ARGV[2..] the command and its arguments
-- Reply: {1, r}      the command ran: r is its reply
--        {0}         the caller's field is not in the lock (expired,
--                    force-unlocked, never taken): nothing ran
--        {2, error}  the command ran and failed (e.g. WRONGTYPE); Redis
--                    commands change nothing when they fail
-- A lock key of another type fails the HEXISTS (WRONGTYPE) before the
-- command. The command's error is wrapped, so that it is never taken for
-- an error of the script itself (a transient one would be sent again).
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    return {0}
end
local r = redis.pcall(unpack(ARGV, 2))
if type(r) == 'table' and r.err then
    return {2, r}
end
return {1, r}
