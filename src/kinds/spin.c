/* The spin lock (Redisson RSpinLock, getSpinLock, spec 6): the reentrant
 * lock's hash (owner -> hold count) and scripts, with no pub/sub at all.
 * Its releases publish nothing (unlock.lua and abandon.lua without a
 * channel key, as Redisson's spin unlock has none), its force unlock is
 * force_unlock.lua without one (Redisson's is a plain DEL; this one leaves
 * a read/write lock alone, RLOCK_EKIND, as every hash kind's), and its
 * waiters poll: the engine sleeps between attempts with
 * Redisson's exponential back-off (spin_min_delay_ms doubling, plus a
 * little jitter, to spin_max_delay_ms; RLOCK__WAIT_POLL). Suited to names
 * so busy that a publish per release costs more than the polling (spec
 * 10, #3349), and to Redis deployments without pub/sub. */
#include "internal.h"

const rlock__kind rlock__kind_spin = {
    .name = "spin",
    .chan_prefix = NULL, /* no channel: nothing is published */
    .wait = RLOCK__WAIT_POLL,
    .attempt = rlock__reentrant_attempt,
    .abandon = rlock__reentrant_abandon,
    .release = rlock__reentrant_release,
    .force_release = rlock__reentrant_force_release, /* no channel: no publish */
    .count = rlock__reentrant_count,
    .holder_ttl = rlock__reentrant_holder_ttl,
    .renew = &rlock__script_renew,
    .wake = RLOCK__WAKE_ONE,
};

RLOCK_API rlock_status rlock_new_spin(rlock_client *c, const char *name, rlock **out)
{
    return rlock__handle_new(c, name, &rlock__kind_spin, out);
}
