-- SPDX-License-Identifier: BSD-3-Clause
-- Release one hold of a fair lock (Redisson RFairLock unlock, spec 3.5).
-- KEYS[1] lock name N, KEYS[2] queue Q, KEYS[3] deadlines T,
-- KEYS[4] lock channel (redisson_lock__channel:{N}), KEYS[5] unlock latch
-- ARGV[1] message to publish ("0"), ARGV[2] lease in ms for a partial
-- release, ARGV[3] owner, ARGV[4] now (wall clock, ms since the epoch),
-- ARGV[5] publish command ("publish"), ARGV[6] latch TTL in ms
-- Reply: the latch's value when this request already ran (a retry; "-1"
--        reads as nil); nil when the owner holds no hold; 0 when still
--        held (count - 1, TTL reset); 1 when fully released (key deleted,
--        ARGV[1] published to the queue's head: KEYS[4] ":" <head>).
-- Every path first purges the dead heads (deadline passed) as Redisson's
-- does. Redisson's one quirk here (spec 11.8): when N does not exist at
-- all it still notifies the head and replies 1, success, though nothing
-- was held. The effects are kept (the publish to the head, the latch) but
-- the reply is nil: the caller's hold is gone, and saying "released" would
-- hide a lost lock. Its latch holds "-1" (Redisson's "1"; nobody but this
-- request reads it) so that a retry answers nil too.
-- Redis has no rollback: a command the server's ACL refuses aborts the
-- script after the writes before it. So the dead heads are found first
-- without writing, the PUBLISH (to the head left after the purge) comes
-- before any write, and a refused PUBLISH leaves everything as it was.
local done = redis.call('get', KEYS[5])
if done ~= false then
    if done == '-1' then
        return nil
    end
    return tonumber(done)
end
local now = tonumber(ARGV[4])
-- The dead heads Redisson's prologue pops, and the head after them.
local dead = 0
local gone = {}
local head = false
while true do
    local h = redis.call('lindex', KEYS[2], dead)
    if h == false then
        break
    end
    local s = false
    if not gone[h] then
        s = redis.call('zscore', KEYS[3], h)
    end
    if s == false or tonumber(s) > now then
        head = h
        break
    end
    gone[h] = true
    dead = dead + 1
end
local function purge()
    for h in pairs(gone) do
        redis.call('zrem', KEYS[3], h)
    end
    if dead > 0 then
        redis.call('ltrim', KEYS[2], dead, -1)
    end
end
local function notify()
    if head ~= false then
        redis.call(ARGV[5], KEYS[4] .. ':' .. head, ARGV[1])
    end
end
local n = redis.call('hget', KEYS[1], ARGV[3])
if n == false then
    if redis.call('exists', KEYS[1]) == 0 then
        notify()
        purge()
        redis.call('set', KEYS[5], '-1', 'px', ARGV[6])
    else
        purge()
    end
    return nil
end
if #n > 20 or not (n == '0' or string.match(n, '^%-?[1-9]%d*$')) then
    return redis.error_reply('ERR hash value is not an integer')
end
if tonumber(n) > 1 then
    purge()
    redis.call('hincrby', KEYS[1], ARGV[3], -1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[5], '0', 'px', ARGV[6])
    return 0
end
notify()
purge()
redis.call('del', KEYS[1])
redis.call('set', KEYS[5], '1', 'px', ARGV[6])
return 1
