/* The rlock command's internal way to Redis (tool.h): reads that no public
 * call offers, on the client's own pooled connections. */
#include <stdlib.h>

#include "internal.h"
#include "tool.h"

rlock_status rlock__client_pipeline(rlock_client *c, const char *key, size_t keylen, int n,
                                    char *const *cmds, const long long *lens,
                                    redisReply **replies)
{
    if (!c || !key || n <= 0 || !cmds || !lens || !replies) {
        return rlock__fail(RLOCK_EINVAL, "bad arguments");
    }
    for (int i = 0; i < n; i++) {
        replies[i] = NULL;
    }
    rlock_status st = rlock__enter(c);
    if (st != RLOCK_OK) {
        return st;
    }
    /* The first reply's deadline covers the borrow too, as for the
     * library's own single calls. */
    int64_t deadline = rlock__now_ms() + c->cfg.command_timeout_ms;
    rlock__conn *conn = NULL;
    st = c->topo->borrow(c, key, keylen, &conn, deadline);
    if (st == RLOCK_OK) {
        st = rlock__conn_exchange(conn, n, cmds, lens, replies, deadline, -1);
        c->topo->give_back(c, conn);
    }
    if (st != RLOCK_OK) {
        for (int i = 0; i < n; i++) {
            if (replies[i]) {
                freeReplyObject(replies[i]);
                replies[i] = NULL;
            }
        }
    }
    rlock__leave(c);
    return st;
}

rlock_status rlock__client_command(rlock_client *c, int argc, const char **argv,
                                   const size_t *lens, redisReply **reply)
{
    if (!c || argc <= 0 || !argv || !lens || !reply) {
        return rlock__fail(RLOCK_EINVAL, "bad arguments");
    }
    char *cmd = NULL;
    long long len = redisFormatCommandArgv(&cmd, argc, argv, lens);
    if (len < 0) {
        return rlock__fail(RLOCK_ENOMEM, "out of memory for a command");
    }
    const char *key = argc > 1 ? argv[1] : argv[0];
    size_t keylen = argc > 1 ? lens[1] : lens[0];
    rlock_status st = rlock__client_pipeline(c, key, keylen, 1, &cmd, &len, reply);
    redisFreeCommand(cmd);
    return st;
}

#define TOOL_STR_(x) #x
#define TOOL_STR(x) TOOL_STR_(x)

const char *rlock__hiredis_version(void)
{
    return TOOL_STR(HIREDIS_MAJOR) "." TOOL_STR(HIREDIS_MINOR) "." TOOL_STR(HIREDIS_PATCH);
}
