/* rlock-bench: the floor of the uncontended pair. The commands an
 * uncontended rlock_lock(l, RLOCK_WATCHDOG) + rlock_unlock(l) sends, sent by
 * the barest loop that can send them: one blocking connection (bench_wire:
 * our socket, optional TLS, hiredis's formatter and reader), the build's own
 * script text loaded once, then EVALSHA pairs with the keys and arguments
 * rlock sends (src/kinds/reentrant.c):
 *
 *   EVALSHA acquire 2 NAME rlock_acquire_latch:{NAME}:<id>
 *           LEASE OWNER 0 LATCH_TTL 0           -> {1, 1}
 *   EVALSHA unlock  3 NAME redisson_lock__channel:{NAME}
 *           redisson_unlock_latch:{NAME}:<id> 0 LEASE OWNER publish 20000 -> 1
 *
 * and, as rlock's watchdog thread does for every 256 unlocks, one DEL of
 * the unlock latches those left (a first acquire writes no latch). Redis
 * does the same work for both; what is left between rlock and this loop is
 * the library: its registry, pool, formatting and checks. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* The build's embedded copy of lua/ (scripts/embed-lua.sh writes one such
 * record per script; its type is rlock__script in src/net/net.h): the floor
 * sends the very text this build's library sends, whatever lua/ holds now. */
typedef struct embedded_script {
    const char *name;
    const char *sha;
    const char *body;
} embedded_script;
extern const embedded_script rlock__script_acquire;
extern const embedded_script rlock__script_unlock;

#define RID_LEN 32       /* request ids: 16 random bytes as hex */
#define LATCH_BATCH 256  /* unlock latches per DEL (src/sync/watchdog.c) */
#define UNLOCK_TTL "20000" /* RLOCK__LATCH_TTL_MS */

struct bench_floor {
    bench_wire *w;
    char acq_sha[48], unl_sha[48];
    char name[128], channel[160];
    char acq_latch[192], unl_latch[192]; /* prefix, then the request id */
    size_t namelen, chanlen, acq_plen, unl_plen;
    char owner[80], lease[24], latch_ttl[24];
    uint64_t rng[2];
    char *garbage; /* LATCH_BATCH unlock latch keys of unl_plen + RID_LEN */
    size_t ngarbage;
    uint64_t commands;
};

static const char *load(bench_wire *w, const embedded_script *s, char *sha, size_t size)
{
    redisReply *r = bench_wire_cmd(w, "SCRIPT", "LOAD", s->body);
    if (r->type != REDIS_REPLY_STRING || strcmp(r->str, s->sha) != 0) {
        bench_die("floor: SCRIPT LOAD of %s: unexpected reply", s->name);
    }
    snprintf(sha, size, "%s", r->str);
    freeReplyObject(r);
    return sha;
}

/* "<prefix>:{name}:" into buf; its length. */
static size_t latch_prefix(const char *prefix, const char *name, char *buf, size_t size)
{
    size_t n = rlock_prefixed_name(prefix, name, buf, size);
    if (n == 0 || n + 2 + RID_LEN > size) {
        bench_die("floor: lock name too long");
    }
    buf[n] = ':';
    buf[n + 1] = '\0';
    return n + 1;
}

static uint64_t next(uint64_t s[2])
{
    uint64_t x = s[0], y = s[1];
    s[0] = y;
    x ^= x << 23;
    s[1] = x ^ y ^ (x >> 17) ^ (y >> 26);
    return s[1] + y;
}

/* A fresh request id, written after the latch prefix at p. */
static void request_id(uint64_t s[2], char *p)
{
    static const char hex[] = "0123456789abcdef";
    for (int k = 0; k < 2; k++) {
        uint64_t v = next(s);
        for (int i = 15; i >= 0; i--, v >>= 4) {
            p[16 * k + i] = hex[v & 15];
        }
    }
    p[RID_LEN] = '\0';
}

bench_floor *bench_floor_new(const char *host, int port, const bench_tls *tls, const char *name)
{
    bench_floor *f = bench_xcalloc(1, sizeof *f);
    f->w = bench_wire_open(host, port, tls);
    load(f->w, &rlock__script_acquire, f->acq_sha, sizeof f->acq_sha);
    load(f->w, &rlock__script_unlock, f->unl_sha, sizeof f->unl_sha);
    f->namelen = (size_t)snprintf(f->name, sizeof f->name, "%s", name);
    f->chanlen = rlock_channel_name(name, f->channel, sizeof f->channel);
    if (f->namelen >= sizeof f->name || f->chanlen == 0 || f->chanlen >= sizeof f->channel) {
        bench_die("floor: lock name too long");
    }
    f->acq_plen = latch_prefix("rlock_acquire_latch", name, f->acq_latch, sizeof f->acq_latch);
    f->unl_plen = latch_prefix("redisson_unlock_latch", name, f->unl_latch, sizeof f->unl_latch);
    if (getrandom(f->rng, sizeof f->rng, 0) != sizeof f->rng) {
        f->rng[0] = (uint64_t)bench_now_ns();
    }
    f->rng[0] |= 1;
    /* An owner of rlock's shape: "<client uuid>:<thread id>". */
    uint64_t a = next(f->rng), b = next(f->rng);
    snprintf(f->owner, sizeof f->owner, "%08llx-%04llx-4%03llx-%04llx-%012llx:%llu",
             (unsigned long long)(a >> 32), (unsigned long long)(a >> 16 & 0xffff),
             (unsigned long long)(a & 0xfff), (unsigned long long)(b >> 48),
             (unsigned long long)(b & 0xffffffffffffull), (unsigned long long)rlock_thread_id());
    /* The lease and acquire latch TTL of a default client (what
     * bench_client() makes): watchdog_timeout_ms, and 20 s +
     * retry_timeout_ms + command_timeout_ms (src/core/client.c). */
    rlock_config cfg;
    rlock_config_init(&cfg);
    snprintf(f->lease, sizeof f->lease, "%lld", (long long)cfg.watchdog_timeout_ms);
    snprintf(f->latch_ttl, sizeof f->latch_ttl, "%lld",
             (long long)(20000 + cfg.retry_timeout_ms + cfg.command_timeout_ms));
    f->garbage = bench_xcalloc(LATCH_BATCH, f->unl_plen + RID_LEN);
    return f;
}

static void flush_latches(bench_floor *f)
{
    if (f->ngarbage == 0) {
        return;
    }
    const char *argv[LATCH_BATCH + 1];
    size_t lens[LATCH_BATCH + 1];
    argv[0] = "DEL";
    lens[0] = 3;
    for (size_t i = 0; i < f->ngarbage; i++) {
        argv[i + 1] = f->garbage + i * (f->unl_plen + RID_LEN);
        lens[i + 1] = f->unl_plen + RID_LEN;
    }
    redisReply *r = bench_wire_call(f->w, (int)f->ngarbage + 1, argv, lens);
    if (r->type != REDIS_REPLY_INTEGER) {
        bench_die("floor: DEL of unlock latches: unexpected reply");
    }
    freeReplyObject(r);
    f->commands++;
    f->ngarbage = 0;
}

static void pair(bench_floor *f)
{
    request_id(f->rng, f->acq_latch + f->acq_plen);
    const char *acq[11] = {"EVALSHA", f->acq_sha, "2",         f->name, f->acq_latch, f->lease,
                           f->owner,  "0",        f->latch_ttl, "0"};
    size_t acql[11] = {7, 40, 1, f->namelen, f->acq_plen + RID_LEN, strlen(f->lease),
                       strlen(f->owner), 1, strlen(f->latch_ttl), 1};
    redisReply *r = bench_wire_call(f->w, 10, acq, acql);
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[0]->integer != 1) {
        bench_die("floor: acquire did not take the lock (type %d%s%s)", r->type,
                  r->type == REDIS_REPLY_ERROR ? ": " : "",
                  r->type == REDIS_REPLY_ERROR ? r->str : "");
    }
    freeReplyObject(r);

    char *latch = f->unl_latch + f->unl_plen;
    request_id(f->rng, latch);
    const char *unl[11] = {"EVALSHA", f->unl_sha, "3",      f->name,  f->channel, f->unl_latch,
                           "0",       f->lease,   f->owner, "publish", UNLOCK_TTL};
    size_t unll[11] = {7,   40, 1, f->namelen, f->chanlen, f->unl_plen + RID_LEN,
                       1,   strlen(f->lease),  strlen(f->owner), 7, 5};
    r = bench_wire_call(f->w, 11, unl, unll);
    if (r->type != REDIS_REPLY_INTEGER || r->integer != 1) {
        bench_die("floor: unlock did not release the lock (type %d%s%s)", r->type,
                  r->type == REDIS_REPLY_ERROR ? ": " : "",
                  r->type == REDIS_REPLY_ERROR ? r->str : "");
    }
    freeReplyObject(r);
    f->commands += 2;
    memcpy(f->garbage + f->ngarbage * (f->unl_plen + RID_LEN), f->unl_latch,
           f->unl_plen + RID_LEN);
    if (++f->ngarbage == LATCH_BATCH) {
        flush_latches(f);
    }
}

uint64_t bench_floor_pairs(bench_floor *f, uint64_t n, double *lat_us)
{
    for (uint64_t i = 0; i < n; i++) {
        int64_t t0 = lat_us ? bench_now_ns() : 0;
        pair(f);
        if (lat_us) {
            lat_us[i] = (double)(bench_now_ns() - t0) / 1e3;
        }
    }
    return n;
}

uint64_t bench_floor_commands(const bench_floor *f)
{
    return f->commands;
}

void bench_floor_free(bench_floor *f)
{
    if (!f) {
        return;
    }
    flush_latches(f);
    bench_wire_close(f->w);
    free(f->garbage);
    free(f);
}
