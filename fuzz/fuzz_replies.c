/* libFuzzer target: the code that reads server replies. The input is raw
 * RESP, as a server (or anything pretending to be one) could send it; the
 * hiredis reader turns it into replies, and each goes through every
 * parser: acquire, release and integer replies, renewal arrays, and the
 * pub/sub thread's handling of messages and (un)subscribe confirmations
 * for a channel with waiters. Nothing may crash, leak or read out of
 * bounds, and a parser that fails must leave its output untouched.
 * Built by the fuzz target of the Makefile. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static rlock_client fake;
static rlock__chan *chan;
static rlock__waiter *waiter;

static void fake_init(void)
{
    static bool done;
    if (done) {
        return;
    }
    done = true;
    fake.pid = getpid();
    fake.fork_gen = rlock__fork_generation();
    rlock_config_init(&fake.cfg);
    atomic_init(&fake.active, 0);
    pthread_mutex_init(&fake.ps_mu, NULL);
    rlock__map_init(&fake.chans);
    if (pipe2(fake.wake_pipe, O_NONBLOCK | O_CLOEXEC) != 0) {
        abort();
    }
    bool behind, live;
    int64_t hint;
    /* A waiter on the channel "ch", so that messages wake somebody. */
    if (rlock__chan_join(&fake, "ch", 2, RLOCK__WAKE_ONE, &chan, &waiter, &behind, &hint, NULL,
                         &live) != RLOCK_OK) {
        abort();
    }
}

/* hiredis 0.14's reader allocates an aggregate's element array as soon as
 * it reads the header (1.x caps it with maxelements; 0.14 has no cap), so
 * "*999999999" makes it calloc 8 GB: a limit of the dependency, not of the
 * parsers fuzzed here. Inputs that declare an aggregate of more than a
 * million elements are skipped. */
static bool huge_aggregate(const uint8_t *data, size_t size)
{
    for (size_t i = 0; i < size; i++) {
        if (data[i] != '*' && data[i] != '%' && data[i] != '~' && data[i] != '>') {
            continue;
        }
        size_t digits = 0;
        while (i + 1 + digits < size && data[i + 1 + digits] >= '0' && data[i + 1 + digits] <= '9') {
            digits++;
        }
        if (digits > 6) {
            return true;
        }
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (huge_aggregate(data, size)) {
        return 0;
    }
    fake_init();
    redisReader *rd = redisReaderCreate();
    if (!rd) {
        return 0;
    }
    if (redisReaderFeed(rd, (const char *)data, size) != REDIS_OK) {
        redisReaderFree(rd);
        return 0;
    }
    for (int n = 0; n < 64; n++) {
        void *v = NULL;
        if (redisReaderGetReply(rd, &v) != REDIS_OK || !v) {
            break;
        }
        redisReply *r = v;
        rlock__attempt a = {RLOCK__TAKEN, -7, -7, -7};
        if (rlock__parse_attempt(r, &a) != RLOCK_OK &&
            (a.count != -7 || a.ttl != -7 || a.token != -7)) {
            abort();
        }
        if (rlock__parse_attempt(r, &a) == RLOCK_OK &&
            ((a.what == RLOCK__TAKEN && a.count < 1) || (a.what == RLOCK__HELD && a.ttl < -1))) {
            abort();
        }
        rlock__released rel = (rlock__released)7;
        if (rlock__parse_release(r, &rel) != RLOCK_OK && rel != (rlock__released)7) {
            abort();
        }
        int64_t i = 12345;
        rlock_status ist = rlock__parse_int(r, &i);
        if (ist != RLOCK_OK && i != 12345) {
            abort();
        }
        /* A hold count written as a string is read exactly as strtoll()
         * reads a canonical decimal number; one beyond int64 is refused. */
        if (r->type == REDIS_REPLY_STRING && r->len > 0 && r->len < 64 &&
            strlen(r->str) == r->len && r->str[0] != '+' && !isspace((unsigned char)r->str[0])) {
            char *end = NULL;
            errno = 0;
            long long want = strtoll(r->str, &end, 10);
            bool whole = end == r->str + r->len && end != r->str;
            if (ist == RLOCK_OK && (!whole || errno == ERANGE || want != i)) {
                abort();
            }
            if (ist != RLOCK_OK && whole && errno == 0 && r->len <= 19 + (r->str[0] == '-')) {
                abort();
            }
        }
        int64_t res[8];
        for (size_t k = 0; k < 8; k++) {
            res[k] = RLOCK__RENEW_UNANSWERED;
        }
        size_t k = r->type == REDIS_REPLY_ARRAY && r->elements <= 8 ? r->elements : 8;
        rlock__parse_renewal(r, k, res);
        for (size_t k = 0; k < 8; k++) {
            if (res[k] != RLOCK__RENEW_UNANSWERED && (res[k] < -1 || res[k] > RLOCK_MAX_TIME_MS)) {
                abort();
            }
        }
        pthread_mutex_lock(&fake.ps_mu);
        rlock__pubsub_on_reply(&fake, r);
        pthread_mutex_unlock(&fake.ps_mu);
        freeReplyObject(r);
    }
    redisReaderFree(rd);
    /* Drain the wake-up pipe the entry pokes. */
    char buf[256];
    while (read(fake.wake_pipe[0], buf, sizeof buf) > 0) {
    }
    return 0;
}
