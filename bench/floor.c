/* rlock-bench: the floors of the uncontended pair. The commands an
 * uncontended rlock_lock(l, RLOCK_WATCHDOG) + rlock_unlock(l) of each kind
 * sends, sent by the barest loop that can send them: one blocking
 * connection (bench_wire: our socket, optional TLS, hiredis's formatter and
 * reader), the build's own script text loaded once, then EVALSHA pairs
 * with the keys and arguments rlock sends (src/kinds/). The reentrant lock:
 *
 *   EVALSHA acquire 2 NAME rlock_acquire_latch:{NAME}:<id>
 *           LEASE OWNER 0 LATCH_TTL 0 0         -> {1, 1}
 *   EVALSHA unlock  3 NAME redisson_lock__channel:{NAME}
 *           redisson_unlock_latch:{NAME}:<id> 0 LEASE OWNER publish 20000 -> 1
 *
 * the other kinds their own scripts and keys (kind_args() below), and, as
 * rlock's watchdog thread does for every 256 unlocks, one DEL of the
 * unlock latches those left (a first acquire writes no latch). Redis does
 * the same work for both; what is left between rlock and this loop is the
 * library: its registry, pool, formatting and checks. `rlock-bench
 * --check` compares the two under MONITOR (check.c). */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

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
#ifndef BENCH_NO_LIB_KINDS
extern const embedded_script rlock__script_fair_acquire;
extern const embedded_script rlock__script_fair_unlock;
extern const embedded_script rlock__script_fenced_acquire;
extern const embedded_script rlock__script_read_acquire;
extern const embedded_script rlock__script_read_unlock;
extern const embedded_script rlock__script_write_acquire;
extern const embedded_script rlock__script_write_unlock;
#endif

#define RID_LEN 32         /* request ids: 16 random bytes as hex */
#define LATCH_BATCH 256    /* unlock latches per DEL (src/sync/watchdog.c) */
#define UNLOCK_TTL "20000" /* RLOCK__LATCH_TTL_MS */
#define KEY_MAX 192
#define MAX_ARGS 20

/* A command's words and lengths. */
typedef struct argv_buf {
    const char *v[MAX_ARGS];
    size_t len[MAX_ARGS];
    int n;
} argv_buf;

static void push(argv_buf *a, const char *s, size_t len)
{
    a->v[a->n] = s;
    a->len[a->n] = len;
    a->n++;
}

static void push_s(argv_buf *a, const char *s)
{
    push(a, s, strlen(s));
}

struct bench_floor {
    bench_wire *w;
    bench_kind kind;
    const embedded_script *acq, *unl;
    char acq_sha[48], unl_sha[48];
    char name[128], channel[KEY_MAX];            /* channel: "" for the spin lock */
    char queue[KEY_MAX], timeouts[KEY_MAX];      /* the fair lock's */
    char token[KEY_MAX], fence[KEY_MAX];         /* the fenced lock's */
    char acq_latch[KEY_MAX], unl_latch[KEY_MAX]; /* prefix, then the request id */
    size_t namelen, chanlen, acq_plen, unl_plen;
    char owner[80], lease[24], latch_ttl[24], slot[24];
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

/* "<prefix>:{name}" into buf (KEY_MAX); dies when too long. */
static void key_of(const char *prefix, const char *name, char *buf)
{
    size_t n = rlock_prefixed_name(prefix, name, buf, KEY_MAX);
    if (n == 0 || n >= KEY_MAX) {
        bench_die("floor: lock name too long");
    }
}

bench_floor *bench_floor_new(const char *host, int port, const bench_tls *tls, const char *name,
                             bench_kind k)
{
    bench_floor *f = bench_xcalloc(1, sizeof *f);
    f->kind = k;
    f->acq = &rlock__script_acquire;
    f->unl = &rlock__script_unlock;
    const char *chan = "redisson_lock__channel";
#ifndef BENCH_NO_LIB_KINDS
    switch (k) {
    case BK_FAIR:
    case BK_FAIR_NONREENTRANT:
        f->acq = &rlock__script_fair_acquire;
        f->unl = &rlock__script_fair_unlock;
        key_of("redisson_lock_queue", name, f->queue);
        key_of("redisson_lock_timeout", name, f->timeouts);
        break;
    case BK_FENCED:
        f->acq = &rlock__script_fenced_acquire;
        key_of("redisson_lock_token", name, f->token);
        key_of("rlock_fence", name, f->fence);
        break;
    case BK_SPIN:
        chan = NULL; /* publishes nothing */
        break;
    case BK_READ:
        f->acq = &rlock__script_read_acquire;
        f->unl = &rlock__script_read_unlock;
        chan = "redisson_rwlock";
        break;
    case BK_WRITE:
        f->acq = &rlock__script_write_acquire;
        f->unl = &rlock__script_write_unlock;
        chan = "redisson_rwlock";
        break;
    default:
        break;
    }
#endif
    f->w = bench_wire_open(host, port, tls);
    load(f->w, f->acq, f->acq_sha, sizeof f->acq_sha);
    load(f->w, f->unl, f->unl_sha, sizeof f->unl_sha);
    f->namelen = (size_t)snprintf(f->name, sizeof f->name, "%s", name);
    if (f->namelen >= sizeof f->name) {
        bench_die("floor: lock name too long");
    }
    if (chan) {
        key_of(chan, name, f->channel);
    }
    f->chanlen = strlen(f->channel);
    f->acq_plen = latch_prefix("rlock_acquire_latch", name, f->acq_latch, sizeof f->acq_latch);
    f->unl_plen = latch_prefix("redisson_unlock_latch", name, f->unl_latch, sizeof f->unl_latch);
    if (getrandom(f->rng, sizeof f->rng, 0) != sizeof f->rng) {
        f->rng[0] = (uint64_t)bench_now_ns();
    }
    f->rng[0] |= 1;
    /* An owner of rlock's shape: "<client uuid>:<thread id>", the uuid
     * random per floor (floors of one thread are different owners, as
     * threads of different clients are). */
    uint64_t a = next(f->rng), b = next(f->rng);
    snprintf(f->owner, sizeof f->owner, "%08llx-%04llx-4%03llx-%04llx-%012llx:%llu",
             (unsigned long long)(a >> 32), (unsigned long long)(a >> 16 & 0xffff),
             (unsigned long long)(a & 0xfff), (unsigned long long)(b >> 48),
             (unsigned long long)(b & 0xffffffffffffull), (unsigned long long)rlock_thread_id());
    /* The lease and acquire latch TTL of a default client (what
     * bench_client() makes): watchdog_timeout_ms, and 20 s +
     * retry_timeout_ms + command_timeout_ms (src/core/client.c); the fair
     * lock's place in the queue of a waiter that waits forever:
     * fair_wait_timeout_ms (src/kinds/fair.c). */
    rlock_config cfg;
    rlock_config_init(&cfg);
    snprintf(f->lease, sizeof f->lease, "%lld", (long long)cfg.watchdog_timeout_ms);
    snprintf(f->latch_ttl, sizeof f->latch_ttl, "%lld",
             (long long)(20000 + cfg.retry_timeout_ms + cfg.command_timeout_ms));
#ifndef BENCH_NO_LIB_KINDS
    snprintf(f->slot, sizeof f->slot, "%lld", (long long)cfg.fair_wait_timeout_ms);
#endif
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

/* Wall-clock ms, as the fair lock's scripts take "now" (rlock__wall_ms). */
static size_t wall_ms(char *buf, size_t size)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (size_t)snprintf(buf, size, "%lld",
                            (long long)ts.tv_sec * 1000 + (long long)(ts.tv_nsec / 1000000));
}

/* The acquire of f's kind: keys, then arguments (src/kinds/<kind>.c). */
static void acquire_args(bench_floor *f, argv_buf *a, char *now, size_t nowlen)
{
    push(a, "EVALSHA", 7);
    push(a, f->acq_sha, 40);
    bench_kind k = f->kind;
    (void)k;
    bool fair = false, fenced = false, plain = true;
#ifndef BENCH_NO_LIB_KINDS
    fair = k == BK_FAIR || k == BK_FAIR_NONREENTRANT;
    fenced = k == BK_FENCED;
    plain = k == BK_REENTRANT || k == BK_NONREENTRANT || k == BK_SPIN;
#endif
    push_s(a, fair || fenced ? "4" : "2");
    push(a, f->name, f->namelen);
    if (fair) {
        push_s(a, f->queue);
        push_s(a, f->timeouts);
    }
    push(a, f->acq_latch, f->acq_plen + RID_LEN);
    if (fenced) {
        push_s(a, f->token);
        push_s(a, f->fence);
    }
    push_s(a, f->lease);
    push_s(a, f->owner);
    push(a, "0", 1); /* holds the caller has */
    push_s(a, f->latch_ttl);
    push(a, "0", 1); /* a first send, not a resend */
#ifndef BENCH_NO_LIB_KINDS
    if (plain) {
        /* ARGV[6]: re-entry refused (the non-reentrant lock; a library
         * from before issue 16 sends no ARGV[6]) */
        push(a, k == BK_NONREENTRANT ? "1" : "0", 1);
    }
#else
    (void)plain;
#endif
    if (fair) {
        push_s(a, f->slot);
        push(a, now, nowlen);
        push(a, "1", 1); /* it waits (rlock_lock) */
#ifndef BENCH_NO_LIB_KINDS
        push(a, k == BK_FAIR ? "1" : "0", 1); /* reentrant */
#endif
    }
}

/* The release of f's kind. */
static void unlock_args(bench_floor *f, argv_buf *a, char *now, size_t nowlen)
{
    push(a, "EVALSHA", 7);
    push(a, f->unl_sha, 40);
    bench_kind k = f->kind;
    bool fair = false, rw = false;
#ifndef BENCH_NO_LIB_KINDS
    fair = k == BK_FAIR || k == BK_FAIR_NONREENTRANT;
    rw = k == BK_READ || k == BK_WRITE;
#else
    (void)k;
#endif
    int nkeys = (fair ? 5 : 3) - (f->chanlen ? 0 : 1);
    push_s(a, nkeys == 5 ? "5" : nkeys == 3 ? "3" : "2");
    push(a, f->name, f->namelen);
    if (fair) {
        push_s(a, f->queue);
        push_s(a, f->timeouts);
    }
    if (f->chanlen) {
        push(a, f->channel, f->chanlen);
    }
    push(a, f->unl_latch, f->unl_plen + RID_LEN);
    if (!rw) {
        push(a, "0", 1); /* the message */
    }
    push_s(a, f->lease);
    push_s(a, f->owner);
    if (fair) {
        push(a, now, nowlen);
    }
    push(a, "publish", 7);
    push(a, UNLOCK_TTL, 5);
}

static void pair(bench_floor *f)
{
    char now[24];
    size_t nowlen = 0;
    if (f->queue[0]) {
        nowlen = wall_ms(now, sizeof now);
    }
    request_id(f->rng, f->acq_latch + f->acq_plen);
    argv_buf acq = {.n = 0};
    acquire_args(f, &acq, now, nowlen);
    redisReply *r = bench_wire_call(f->w, acq.n, acq.v, acq.len);
    /* {1, 1}, the fenced lock {1, 1, token} */
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[0]->integer != 1 ||
        r->element[1]->type != REDIS_REPLY_INTEGER || r->element[1]->integer != 1) {
        bench_die("floor: %s did not take the lock (type %d%s%s)", f->acq->name, r->type,
                  r->type == REDIS_REPLY_ERROR ? ": " : "",
                  r->type == REDIS_REPLY_ERROR ? r->str : "");
    }
    freeReplyObject(r);

    request_id(f->rng, f->unl_latch + f->unl_plen);
    if (f->queue[0]) {
        nowlen = wall_ms(now, sizeof now);
    }
    argv_buf unl = {.n = 0};
    unlock_args(f, &unl, now, nowlen);
    r = bench_wire_call(f->w, unl.n, unl.v, unl.len);
    /* 1: released; a read lock that other readers still hold: 0 */
    bool shared = bench_kinds[f->kind].shared;
    if (r->type != REDIS_REPLY_INTEGER || r->integer < (shared ? 0 : 1) || r->integer > 1) {
        bench_die("floor: %s did not release the lock (type %d%s%s)", f->unl->name, r->type,
                  r->type == REDIS_REPLY_ERROR ? ": " : "",
                  r->type == REDIS_REPLY_ERROR ? r->str : "");
    }
    freeReplyObject(r);
    f->commands += 2;
    memcpy(f->garbage + f->ngarbage * (f->unl_plen + RID_LEN), f->unl_latch, f->unl_plen + RID_LEN);
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
