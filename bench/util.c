/* rlock-bench: time, statistics, direct hiredis helpers, redis-benchmark,
 * memory figures and a JSON string builder. */
#include "bench.h"

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

bool bench_quiet = false;

/* ---- time and statistics --------------------------------------------- */

int64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void bench_sleep_ms(int64_t ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    /* nanosleep stops early on signals; sleep the rest. */
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void bench_vec_push(bench_vec *a, int64_t x)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 1024;
        int64_t *v = realloc(a->v, cap * sizeof *v);
        if (v == NULL) {
            bench_die("out of memory");
        }
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
}

void bench_vec_append(bench_vec *a, const int64_t *xs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        bench_vec_push(a, xs[i]);
    }
}

void bench_vec_free(bench_vec *a)
{
    free(a->v);
    a->v = NULL;
    a->n = a->cap = 0;
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* Nearest-rank on the sorted sample, as the anchor runners compute it
 * (index round(q * (n - 1))), so the figures compare. */
static double pct_us(const bench_vec *a, double q)
{
    size_t i = (size_t)llround(q * (double)(a->n - 1));
    if (i >= a->n) {
        i = a->n - 1;
    }
    return (double)a->v[i] / 1000.0;
}

bench_lat bench_lat_of(bench_vec *a)
{
    bench_lat l = {0, NAN, NAN, NAN, NAN};
    if (a->n == 0) {
        return l;
    }
    qsort(a->v, a->n, sizeof a->v[0], cmp_i64);
    double sum = 0;
    for (size_t i = 0; i < a->n; i++) {
        sum += (double)a->v[i];
    }
    l.n = a->n;
    l.mean_us = sum / (double)a->n / 1000.0;
    l.p50_us = pct_us(a, 0.50);
    l.p99_us = pct_us(a, 0.99);
    l.max_us = (double)a->v[a->n - 1] / 1000.0;
    return l;
}

void bench_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("rlock-bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stdout);
    exit(2);
}

void bench_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("rlock-bench: warning: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void bench_progress(const char *fmt, ...)
{
    if (bench_quiet) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    fputs("rlock-bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void *bench_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL) {
        bench_die("out of memory");
    }
    return p;
}

void *bench_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL) {
        bench_die("out of memory");
    }
    return p;
}

char *bench_xstrdup(const char *s)
{
    char *p = strdup(s);
    if (p == NULL) {
        bench_die("out of memory");
    }
    return p;
}

/* ---- the server --------------------------------------------------------- */

bool bench_target_parse(const char *url, bench_target *t)
{
    memset(t, 0, sizeof *t);
    t->port = 6379;
    if (strlen(url) >= sizeof t->url || strncmp(url, "redis://", 8) != 0) {
        return false;
    }
    snprintf(t->url, sizeof t->url, "%s", url);
    const char *p = url + 8;
    const char *at = strrchr(p, '@');
    if (at != NULL) {
        /* [user]:password@ — percent-escapes are left as they are: the
         * benchmark's own servers have no password. */
        const char *colon = memchr(p, ':', (size_t)(at - p));
        if (colon == NULL) {
            return false;
        }
        snprintf(t->user, sizeof t->user, "%.*s", (int)(colon - p), p);
        snprintf(t->password, sizeof t->password, "%.*s", (int)(at - colon - 1), colon + 1);
        p = at + 1;
    }
    size_t hl = strcspn(p, ":/");
    if (hl == 0 || hl >= sizeof t->host) {
        return false;
    }
    memcpy(t->host, p, hl);
    t->host[hl] = '\0';
    p += hl;
    if (*p == ':') {
        char *end;
        long port = strtol(p + 1, &end, 10);
        if (end == p + 1 || port <= 0 || port > 65535) {
            return false;
        }
        t->port = (int)port;
        p = end;
    }
    if (*p == '/' && p[1] != '\0') {
        char *end;
        long db = strtol(p + 1, &end, 10);
        if (*end != '\0' || db < 0) {
            return false;
        }
        t->db = (int)db;
    }
    return true;
}

void bench_target_from_port(int port, bench_target *t)
{
    memset(t, 0, sizeof *t);
    snprintf(t->host, sizeof t->host, "127.0.0.1");
    t->port = port;
    snprintf(t->url, sizeof t->url, "redis://127.0.0.1:%d", port);
}

static redisReply *vcmd(redisContext *r, const char *fmt, va_list ap)
{
    redisReply *rep = redisvCommand(r, fmt, ap);
    if (rep == NULL) {
        bench_die("redis: %s", r->errstr[0] ? r->errstr : "no reply");
    }
    if (rep->type == REDIS_REPLY_ERROR) {
        bench_die("redis error reply to '%s': %s", fmt, rep->str);
    }
    return rep;
}

redisReply *bench_cmd(redisContext *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = vcmd(r, fmt, ap);
    va_end(ap);
    return rep;
}

void bench_cmd_void(redisContext *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    freeReplyObject(vcmd(r, fmt, ap));
    va_end(ap);
}

redisContext *bench_connect(const bench_target *t)
{
    struct timeval tv = {5, 0};
    redisContext *r = redisConnectWithTimeout(t->host, t->port, tv);
    if (r == NULL || r->err) {
        bench_die("cannot connect to %s:%d: %s", t->host, t->port, r ? r->errstr : "out of memory");
    }
    /* Replies wait at most 60 s: redis-benchmark or a watchdog batch may
     * keep the server busy, but never that long. */
    struct timeval rtv = {60, 0};
    redisSetTimeout(r, rtv);
    if (t->password[0] && t->user[0]) {
        bench_cmd_void(r, "AUTH %s %s", t->user, t->password);
    } else if (t->password[0]) {
        bench_cmd_void(r, "AUTH %s", t->password);
    }
    if (t->db != 0) {
        bench_cmd_void(r, "SELECT %d", t->db);
    }
    return r;
}

/* Finds "field:value" in an INFO text; returns the value's start. */
static const char *info_find(const char *text, const char *field)
{
    size_t fl = strlen(field);
    for (const char *p = text; p && *p;) {
        if (strncmp(p, field, fl) == 0 && p[fl] == ':') {
            return p + fl + 1;
        }
        p = strchr(p, '\n');
        if (p) {
            p++;
        }
    }
    return NULL;
}

double bench_info_double(redisContext *r, const char *section, const char *field)
{
    redisReply *rep = bench_cmd(r, "INFO %s", section);
    double v = NAN;
    const char *p = rep->type == REDIS_REPLY_STRING ? info_find(rep->str, field) : NULL;
    if (p != NULL) {
        v = strtod(p, NULL);
    }
    freeReplyObject(rep);
    return v;
}

void bench_redis_version(redisContext *r, char *out, size_t outlen)
{
    redisReply *rep = bench_cmd(r, "INFO server");
    const char *p = rep->type == REDIS_REPLY_STRING ? info_find(rep->str, "redis_version") : NULL;
    snprintf(out, outlen, "%.*s", p ? (int)strcspn(p, "\r\n") : 1, p ? p : "?");
    freeReplyObject(rep);
}

void bench_cmdstats_read(redisContext *r, bench_cmdstats *out)
{
    out->v = NULL;
    out->n = 0;
    redisReply *rep = bench_cmd(r, "INFO commandstats");
    if (rep->type != REDIS_REPLY_STRING) {
        freeReplyObject(rep);
        return;
    }
    size_t cap = 0;
    for (const char *p = rep->str; p && *p;) {
        /* cmdstat_<name>:calls=N,usec=... */
        if (strncmp(p, "cmdstat_", 8) == 0) {
            const char *name = p + 8;
            const char *colon = strchr(name, ':');
            const char *calls = colon ? strstr(colon, "calls=") : NULL;
            size_t nl = colon ? (size_t)(colon - name) : 0;
            bool harness = (nl == 4 && strncmp(name, "info", 4) == 0) ||
                           (nl >= 6 && strncmp(name, "config", 6) == 0);
            if (calls && nl > 0 && nl < sizeof out->v[0].name && !harness) {
                if (out->n == cap) {
                    cap = cap ? cap * 2 : 16;
                    out->v = realloc(out->v, cap * sizeof *out->v);
                    if (out->v == NULL) {
                        bench_die("out of memory");
                    }
                }
                bench_cmdstat *s = &out->v[out->n++];
                memcpy(s->name, name, nl);
                s->name[nl] = '\0';
                s->calls = strtoull(calls + 6, NULL, 10);
            }
        }
        p = strchr(p, '\n');
        if (p) {
            p++;
        }
    }
    freeReplyObject(rep);
}

void bench_cmdstats_free(bench_cmdstats *s)
{
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

uint64_t bench_cmdstats_total(const bench_cmdstats *s)
{
    uint64_t t = 0;
    for (size_t i = 0; i < s->n; i++) {
        t += s->v[i].calls;
    }
    return t;
}

uint64_t bench_cmdstats_get(const bench_cmdstats *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++) {
        if (strcmp(s->v[i].name, name) == 0) {
            return s->v[i].calls;
        }
    }
    return 0;
}

static int cmp_stat_desc(const void *x, const void *y)
{
    const bench_cmdstat *a = x, *b = y;
    if (a->calls != b->calls) {
        return a->calls < b->calls ? 1 : -1;
    }
    return strcmp(a->name, b->name);
}

void bench_cmdstats_format(const bench_cmdstats *s, uint64_t ops, const char *const *sub,
                           size_t nsub, char *out, size_t outlen)
{
    out[0] = '\0';
    if (ops == 0 || s->n == 0) {
        return;
    }
    bench_cmdstat *v = bench_xcalloc(s->n, sizeof *v);
    memcpy(v, s->v, s->n * sizeof *v);
    for (size_t i = 0; i < s->n; i++) {
        for (size_t j = 0; j < nsub; j++) {
            if (strcmp(v[i].name, sub[j]) == 0) {
                v[i].calls = v[i].calls > ops ? v[i].calls - ops : 0;
            }
        }
    }
    qsort(v, s->n, sizeof *v, cmp_stat_desc);
    size_t used = 0;
    for (size_t i = 0; i < s->n && used + 1 < outlen; i++) {
        if (v[i].calls == 0) {
            continue;
        }
        int k = snprintf(out + used, outlen - used, "%s%s %.2f", used ? ", " : "", v[i].name,
                         (double)v[i].calls / (double)ops);
        if (k < 0) {
            break;
        }
        used += (size_t)k;
    }
    if (used >= outlen) {
        out[outlen - 1] = '\0';
    }
    free(v);
}

double bench_ping_rtt_us(redisContext *r, int n, double *p50_us)
{
    bench_vec lat = {0};
    /* Warm the connection first: the first replies pay for slow start and
     * cold caches, which is not what a round trip costs. */
    for (int i = 0; i < 200; i++) {
        bench_cmd_void(r, "PING");
    }
    for (int i = 0; i < n; i++) {
        int64_t t0 = bench_now_ns();
        bench_cmd_void(r, "PING");
        bench_vec_push(&lat, bench_now_ns() - t0);
    }
    bench_lat l = bench_lat_of(&lat);
    bench_vec_free(&lat);
    if (p50_us) {
        *p50_us = l.p50_us;
    }
    return l.mean_us;
}

/* The same text as LOCK_LIKE_LUA in the anchor harness's driver.py, so both
 * measure the same physical limit (and the server caches one script). */
static const char lock_like_lua[] = "redis.call('HINCRBY', KEYS[1], ARGV[1], 1); "
                                    "redis.call('PEXPIRE', KEYS[1], 30000); return 1";

void bench_load_lock_like(redisContext *r, char *sha, size_t shalen)
{
    redisReply *rep = bench_cmd(r, "SCRIPT LOAD %s", lock_like_lua);
    if (rep->type != REDIS_REPLY_STRING) {
        bench_die("SCRIPT LOAD: unexpected reply");
    }
    snprintf(sha, shalen, "%s", rep->str);
    freeReplyObject(rep);
}

/* Splits one redis-benchmark CSV line ("a","b",...) into fields in place. */
static int csv_fields(char *line, char **f, int max)
{
    int n = 0;
    char *p = line;
    while (*p && n < max) {
        if (*p != '"') {
            break;
        }
        char *start = ++p;
        char *q = strchr(start, '"');
        if (q == NULL) {
            break;
        }
        *q = '\0';
        f[n++] = start;
        p = q + 1;
        if (*p == ',') {
            p++;
        }
    }
    return n;
}

bench_rb bench_redis_benchmark_evalsha(const bench_target *t, const char *sha, const char *key,
                                       int clients, int requests)
{
    bench_rb res = {false, NAN, NAN, NAN, NAN};
    char auth[800] = "";
    if (t->password[0]) {
        snprintf(auth, sizeof auth, "-a '%s' %s%s%s --no-auth-warning", t->password,
                 t->user[0] ? "--user '" : "", t->user, t->user[0] ? "'" : "");
    }
    char cmd[2048];
    /* The same command line as the anchor harness (driver.py), with -c
     * and -n ours; --csv prints a header line and one line per test. */
    snprintf(cmd, sizeof cmd,
             "redis-benchmark -h '%s' -p %d %s --dbnum %d -c %d -P 1 -n %d "
             "--csv evalsha %s 1 '%s' field",
             t->host, t->port, auth, t->db, clients, requests, sha, key);
    fflush(stdout);
    FILE *p = popen(cmd, "r");
    if (p == NULL) {
        bench_warn("cannot run redis-benchmark: %s", strerror(errno));
        return res;
    }
    char line[1024];
    char *hdr[16] = {0}, *val[16] = {0};
    char hdrbuf[1024] = "";
    int nh = 0;
    while (fgets(line, sizeof line, p) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] != '"') {
            continue;
        }
        if (nh == 0) {
            snprintf(hdrbuf, sizeof hdrbuf, "%s", line);
            nh = csv_fields(hdrbuf, hdr, 16);
            continue;
        }
        int nv = csv_fields(line, val, 16);
        for (int i = 0; i < nv && i < nh; i++) {
            double x = strtod(val[i], NULL);
            if (strcmp(hdr[i], "rps") == 0) {
                res.rps = x;
                res.ok = true;
            } else if (strcmp(hdr[i], "avg_latency_ms") == 0) {
                res.avg_us = x * 1000.0;
            } else if (strcmp(hdr[i], "p99_latency_ms") == 0) {
                res.p99_us = x * 1000.0;
            } else if (strcmp(hdr[i], "max_latency_ms") == 0) {
                res.max_us = x * 1000.0;
            }
        }
    }
    int rc = pclose(p);
    if (rc != 0 || !res.ok) {
        bench_warn("redis-benchmark failed (status %d): %s", rc, cmd);
        res.ok = false;
    }
    return res;
}

/* ---- memory --------------------------------------------------------------- */

int64_t bench_heap_bytes(void)
{
    struct mallinfo2 mi = mallinfo2();
    return (int64_t)(mi.uordblks + mi.hblkhd);
}

int64_t bench_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, rss = 0;
    if (f == NULL) {
        return -1;
    }
    if (fscanf(f, "%ld %ld", &size, &rss) != 2) {
        rss = -1;
    }
    fclose(f);
    return rss < 0 ? -1 : (int64_t)rss * sysconf(_SC_PAGESIZE);
}

/* ---- string builder ---------------------------------------------------- */

void bench_str_printf(bench_str *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->n;
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? room : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            bench_die("vsnprintf failed");
        }
        if (b->s && (size_t)k < room) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + (size_t)k + 1) {
            cap *= 2;
        }
        char *s = realloc(b->s, cap);
        if (s == NULL) {
            bench_die("out of memory");
        }
        b->s = s;
        b->cap = cap;
    }
}

void bench_str_free(bench_str *b)
{
    free(b->s);
    b->s = NULL;
    b->n = b->cap = 0;
}

void bench_str_num(bench_str *b, double x)
{
    if (isnan(x) || isinf(x)) {
        bench_str_printf(b, "null");
    } else {
        bench_str_printf(b, "%.10g", x);
    }
}
