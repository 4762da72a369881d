/* The layers of src/, bottom up, and the client object they share:
 *
 *   core/     time, map, statuses and error detail, names, request ids,
 *             URL, the hold registry, configuration, calls in progress,
 *             thread ids and the live-client list their exit walks
 *   net/      one connection, the pool, the topology (standalone.c;
 *             Sentinel and Cluster go beside it), the script runner
 *   sync/     subscriptions and waiters, cancellation, the acquire loop and
 *             release, the watchdog, the callback thread
 *   kinds/    one file per lock kind (reentrant.c), filling rlock__kind
 *   lock.c    the public calls on handles, for every kind
 *   client.c  the client's life cycle: create (connect, start the threads
 *             of sync/), close (in an order where nothing reports after
 *             the callback thread is gone), the fork()ed child's free
 *
 * Calls only point down the list. core/ calls nothing of net/, sync/ or
 * kinds/: it reports a lost hold through the hook the client carries
 * (lost_fn), which client.c sets. The client object (object.h) is shared
 * by all layers; core/ includes only that header, so the compiler keeps it
 * from calling up. sync/ calls a lock kind only through the table it
 * declares (rlock__kind, sync/sync.h) and kinds/ fill. scripts/
 * check-layers.sh (make layers, part of make check) fails on any call
 * that points up.
 *
 * Nothing here is installed. Internal non-static names carry the rlock__
 * prefix. */
#ifndef RLOCK_INTERNAL_H
#define RLOCK_INTERNAL_H

#include "object.h"
#include "kinds/kind.h"
#include "sync/sync.h"

#endif
