/* The standalone topology: one server, one pool; every key lives there and
 * every key is in the same group. Sentinel (resolve the master, follow a
 * failover) and Cluster (route by slot, follow MOVED/ASK) fill the same
 * table in files of their own. */
#include "internal.h"

static rlock_status borrow(rlock_client *c, const char *key, size_t keylen, rlock__conn **out,
                           int64_t deadline_ms)
{
    (void)key;
    (void)keylen;
    return rlock__pool_borrow(c, &c->pool, out, deadline_ms);
}

static void give_back(rlock_client *c, rlock__conn *conn)
{
    rlock__pool_return(c, &c->pool, conn);
}

static unsigned group_of(const char *key, size_t keylen)
{
    (void)key;
    (void)keylen;
    return 0;
}

static void close_topology(rlock_client *c)
{
    rlock__pool_close(&c->pool);
}

static void destroy(rlock_client *c)
{
    rlock__pool_destroy(c, &c->pool);
}

const rlock__topology rlock__standalone = {
    .kind = "standalone",
    .borrow = borrow,
    .give_back = give_back,
    .group_of = group_of,
    .close = close_topology,
    .destroy = destroy,
};
