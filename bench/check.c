/* rlock-bench --check: is each floor what the library sends? For every
 * kind, one uncontended lock(WATCHDOG) + unlock pair by rlock, then one by
 * the kind's floor (floor.c), on the same name, recorded by MONITOR. The
 * commands each side sent must be the same words after masking what
 * differs by right: the owner "<uuid>:<thread id>", the request ids of the
 * latch keys and the wall clock (the fair lock's "now"). The commands the
 * scripts ran inside Redis ("lua" lines) must be the same commands on the
 * same keys (their values may differ: a fenced token, a TTL). The latch
 * DELs of rlock's watchdog are left out: they run on a timer. */
#include "bench.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_LINES 256

typedef struct cmdlog {
    char *line[MAX_LINES];
    int n;
} cmdlog;

static void log_free(cmdlog *g)
{
    for (int i = 0; i < g->n; i++) {
        free(g->line[i]);
    }
    g->n = 0;
}

/* Masks a run of hex digits of length n that starts at s when it is one;
 * returns the characters masked (0: none). */
static size_t hex_run(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i])) {
            return 0;
        }
    }
    return isxdigit((unsigned char)s[n]) ? 0 : n;
}

/* The owner "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx:<digits>" at s, its
 * length, or 0. */
static size_t owner_at(const char *s)
{
    static const int parts[5] = {8, 4, 4, 4, 12};
    size_t i = 0;
    for (int p = 0; p < 5; p++) {
        if (hex_run(s + i, (size_t)parts[p]) == 0) {
            return 0;
        }
        i += (size_t)parts[p];
        if (p < 4 && s[i++] != '-') {
            return 0;
        }
    }
    if (s[i] != ':' || !isdigit((unsigned char)s[i + 1])) {
        return 0;
    }
    i++;
    while (isdigit((unsigned char)s[i])) {
        i++;
    }
    return i;
}

/* A MONITOR line without its time stamp and client, masked:
 * 'lua "hset" "k" ...' or 'cmd "EVALSHA" ...'. NULL: a line to leave out. */
static char *mask(const char *m, const char *name)
{
    const char *b = strchr(m, '[');
    const char *e = b ? strchr(b, ']') : NULL;
    if (!b || !e || e[1] != ' ') {
        return NULL;
    }
    bool lua = strstr(b, " lua]") && strstr(b, " lua]") < e;
    const char *p = e + 2;
    if (!strstr(p, name)) {
        return NULL; /* another name's (the control connection's markers) */
    }
    if (!lua && strncmp(p, "\"DEL\" ", 6) == 0 && strstr(p, "redisson_unlock_latch")) {
        return NULL; /* the watchdog's batched DEL of unlock latches */
    }
    size_t cap = strlen(p) + 16, k = 0;
    char *out = bench_xcalloc(cap + 64, 1);
    k += (size_t)snprintf(out, cap, "%s", lua ? "lua " : "cmd ");
    for (size_t i = 0; p[i];) {
        size_t n;
        if ((n = owner_at(p + i)) > 0) {
            k += (size_t)snprintf(out + k, cap + 64 - k, "OWNER");
            i += n;
        } else if ((i == 0 || !isxdigit((unsigned char)p[i - 1])) && (n = hex_run(p + i, 32)) &&
                   i > 0 && p[i - 1] == ':') {
            k += (size_t)snprintf(out + k, cap + 64 - k, "RID");
            i += n;
        } else if ((i == 0 || !isdigit((unsigned char)p[i - 1])) && p[i] == '1' &&
                   strspn(p + i, "0123456789") == 13) {
            k += (size_t)snprintf(out + k, cap + 64 - k, "NOW");
            i += 13;
        } else {
            out[k++] = p[i++];
        }
        if (k + 16 >= cap + 64) {
            break;
        }
    }
    out[k] = '\0';
    if (lua) {
        /* Inside a script: the command and its first key only. */
        char *q = out + 4;
        for (int words = 0; *q; q++) {
            if (*q == '"' && (q == out + 4 || q[-1] != '\\')) {
                if (++words == 4) {
                    q[1] = '\0';
                    break;
                }
            }
        }
    }
    return out;
}

/* Reads MONITOR lines from m into the log of the side they belong to:
 * lib until the marker "rlock-bench-check-floor", floor until
 * "rlock-bench-check-end". */
static void collect(redisContext *m, const char *name, cmdlog *lib, cmdlog *floor)
{
    cmdlog *g = lib;
    for (;;) {
        void *rp = NULL;
        if (redisGetReply(m, &rp) != REDIS_OK || !rp) {
            bench_die("check: MONITOR: %s", m->errstr);
        }
        redisReply *r = rp;
        if (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_STRING) {
            if (strstr(r->str, "rlock-bench-check-floor")) {
                g = floor;
            } else if (strstr(r->str, "rlock-bench-check-end")) {
                freeReplyObject(r);
                return;
            } else {
                char *l = mask(r->str, name);
                if (l && g->n < MAX_LINES) {
                    g->line[g->n++] = l;
                } else {
                    free(l);
                }
            }
        }
        freeReplyObject(r);
    }
}

static int check_kind(bench_ctx *x, bench_kind k)
{
    char name[128];
    snprintf(name, sizeof name, "rlock-bench:check:%ld:%s", (long)getpid(), bench_kinds[k].name);
    rlock *l = bench_lock_kind(x->c, k, name);
    bench_floor *f = bench_floor_new(x->host, x->port, NULL, name, k);
    uint64_t errors = 0;
    /* Warm: scripts loaded, connections made, the latch flush armed. */
    bench_pairs(l, 2, 0, NULL, &errors);
    bench_floor_pairs(f, 2, NULL);

    redisContext *m = bench_connect(x->host, x->port);
    freeReplyObject(bench_cmd(m, "MONITOR"));
    bench_pairs(l, 1, 0, NULL, &errors);
    freeReplyObject(bench_cmd(x->r, "ECHO rlock-bench-check-floor"));
    bench_floor_pairs(f, 1, NULL);
    freeReplyObject(bench_cmd(x->r, "ECHO rlock-bench-check-end"));
    cmdlog lib = {{0}, 0}, fl = {{0}, 0};
    collect(m, name, &lib, &fl);
    redisFree(m);
    rlock_free(l);
    bench_floor_free(f);

    int bad = errors > 0 || lib.n == 0 || lib.n != fl.n;
    for (int i = 0; i < lib.n && i < fl.n; i++) {
        bad |= strcmp(lib.line[i], fl.line[i]) != 0;
    }
    int top = 0;
    for (int i = 0; i < lib.n; i++) {
        top += strncmp(lib.line[i], "cmd ", 4) == 0;
    }
    printf("%-18s %s: %d commands, %d script steps%s\n", bench_kinds[k].name,
           bad ? "DIFFERS" : "same", top, lib.n - top, errors ? " (rlock's pair failed)" : "");
    if (bad || !bench_quiet) {
        for (int i = 0; i < lib.n || i < fl.n; i++) {
            const char *a = i < lib.n ? lib.line[i] : "(none)";
            const char *b = i < fl.n ? fl.line[i] : "(none)";
            if (strcmp(a, b) == 0) {
                if (!bench_quiet) {
                    printf("    = %s\n", a);
                }
            } else {
                printf("  rlock %s\n  floor %s\n", a, b);
            }
        }
    }
    log_free(&lib);
    log_free(&fl);
    return bad;
}

int bench_check_main(bench_ctx *x)
{
    x->r = bench_connect(x->host, x->port);
    x->c = bench_client(x->host, x->port, 0);
    int bad = 0;
    for (int k = 0; k < BK_COUNT; k++) {
        bad += check_kind(x, (bench_kind)k);
    }
    printf("%d of %d floors differ from the library's commands\n", bad, BK_COUNT);
    rlock_client_free(x->c);
    redisFree(x->r);
    return bad ? 1 : 0;
}
