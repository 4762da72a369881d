/* The non-reentrant lock (Redisson 4.4+'s non-reentrant getLock, spec
 * 2.8): the reentrant lock's hash, channel, unlock, force unlock and
 * renewal; only its acquire differs. A holder asking again is refused
 * (lua/acquire.lua with ARGV[6] "1" answers {4,0}, changing nothing):
 * the caller gets RLOCK_EDEADLK at once where Redisson throws
 * IllegalMonitorStateException (its script's NON_REENTRANT_REACQUIRE
 * error reply). In Redis the two leave the same state. */
#include "internal.h"

const rlock__kind rlock__kind_nonreentrant = {
    .name = "nonreentrant",
    .chan_prefix = "redisson_lock__channel",
    .wait = RLOCK__WAIT_SHARED,
    .no_reentry = true,
    .attempt = rlock__reentrant_attempt,
    .abandon = rlock__reentrant_abandon,
    .release = rlock__reentrant_release,
    .force_release = rlock__reentrant_force_release,
    .count = rlock__reentrant_count,
    .holder_ttl = rlock__reentrant_holder_ttl,
    .renew = &rlock__script_renew,
    .wake = RLOCK__WAKE_ONE,
};

RLOCK_API rlock_status rlock_new_nonreentrant(rlock_client *c, const char *name, rlock **out)
{
    return rlock__handle_new(c, name, &rlock__kind_nonreentrant, out);
}
