/* rlock-bench: the standalone mode — runs the scenarios against one server,
 * measures the physical limit of that server in the same run, and prints a
 * Markdown report (or JSON with --json, the report then going to stderr). */
#include "bench.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bench_str md;      /* scenario sections, in order */
static bench_str js_rows; /* JSON objects of measured rows */
static bench_str js_goals;
static bench_str md_goals;
static int js_fields;
static int goals_met;
static int goals_missed;

const char *bench_fmt(double x, int nd)
{
    static char ring[32][48];
    static int next;
    char *out = ring[next];
    next = (next + 1) % 32;
    if (isnan(x) || isinf(x)) {
        snprintf(out, 48, "-");
        return out;
    }
    char raw[48];
    snprintf(raw, sizeof raw, "%.*f", nd, fabs(x));
    /* Thousands separators on the integer part, as the anchor tables. */
    size_t intlen = strcspn(raw, ".");
    size_t o = 0;
    if (x < 0 && strspn(raw, "0.") != strlen(raw)) {
        out[o++] = '-';
    }
    for (size_t i = 0; i < intlen; i++) {
        out[o++] = raw[i];
        size_t left = intlen - i - 1;
        if (left > 0 && left % 3 == 0) {
            out[o++] = ',';
        }
    }
    snprintf(out + o, 48 - o, "%s", raw + intlen);
    return out;
}

void bench_md(const char *fmt, ...)
{
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    bench_str_printf(&md, "%s\n", line);
}

static void js_key(const char *key)
{
    bench_str_printf(&js_rows, "%s\"%s\": ", js_fields++ ? ", " : "", key);
}

void bench_js_begin(const char *scenario)
{
    bench_str_printf(&js_rows, "%s    {", js_rows.n ? ",\n" : "");
    js_fields = 0;
    bench_js_str("scenario", scenario);
}

void bench_js_num(const char *key, double x)
{
    js_key(key);
    bench_str_num(&js_rows, x);
}

void bench_js_str(const char *key, const char *s)
{
    js_key(key);
    /* Our strings hold no quotes or backslashes; escape them anyway so the
     * output stays valid JSON whatever a name contains. */
    bench_str_printf(&js_rows, "\"");
    for (const char *p = s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            bench_str_printf(&js_rows, "\\%c", *p);
        } else if ((unsigned char)*p >= 0x20) {
            bench_str_printf(&js_rows, "%c", *p);
        }
    }
    bench_str_printf(&js_rows, "\"");
}

void bench_js_end(void)
{
    bench_str_printf(&js_rows, "}");
}

void bench_goal(const char *what, double measured, int nd, bool at_least, double target)
{
    bool met = !isnan(measured) && (at_least ? measured >= target : measured <= target);
    if (met) {
        goals_met++;
    } else {
        goals_missed++;
    }
    bench_str_printf(&md_goals, "| %s | %s | %s %s | %s |\n", what, bench_fmt(measured, nd),
                     at_least ? "≥" : "≤", bench_fmt(target, nd), met ? "yes" : "**no**");
    bench_str_printf(&js_goals, "%s    {\"goal\": \"%s\", \"measured\": ", js_goals.n ? ",\n" : "",
                     what);
    bench_str_num(&js_goals, measured);
    bench_str_printf(&js_goals, ", \"target\": ");
    bench_str_num(&js_goals, target);
    bench_str_printf(&js_goals, ", \"at_least\": %s, \"met\": %s}", at_least ? "true" : "false",
                     met ? "true" : "false");
}

const bench_rb *bench_limit(bench_ctx *x, int clients)
{
    for (int i = 0; i < x->nrb; i++) {
        if (x->rb_clients[i] == clients) {
            return &x->rb[i];
        }
    }
    if (x->nrb == (int)(sizeof x->rb / sizeof x->rb[0])) {
        bench_die("too many redis-benchmark configurations");
    }
    /* -n as the anchor harness (100000), 50000 at -c 1 to keep the run
     * short; enough for a few seconds of steady state either way. */
    int n = clients == 1 ? 50000 : 100000;
    if (x->o->quick) {
        n = clients == 1 ? 5000 : 20000;
    }
    char key[128];
    snprintf(key, sizeof key, "%s:rb:lock", x->prefix);
    bench_progress("redis-benchmark EVALSHA lock-like -c %d -n %d", clients, n);
    int i = x->nrb++;
    x->rb_clients[i] = clients;
    x->rb[i] = bench_redis_benchmark_evalsha(&x->o->target, x->sha, key, clients, n);
    bench_cmd_void(x->r, "DEL %s", key);
    return &x->rb[i];
}

static bool wanted(const bench_opts *o, const char *name, const char *num)
{
    return o->only == NULL || strcmp(o->only, name) == 0 || strcmp(o->only, num) == 0;
}

int bench_standalone_main(const bench_opts *o)
{
    static const char *names[] = {"uncontended", "parallel", "nested", "contended", "watchdog"};
    if (o->only) {
        bool known = false;
        for (size_t i = 0; i < 5; i++) {
            char num[4];
            snprintf(num, sizeof num, "%zu", i + 1);
            known = known || wanted(o, names[i], num);
        }
        if (!known) {
            bench_die("unknown scenario '%s' (uncontended, parallel, nested, "
                      "contended, watchdog or 1-5)",
                      o->only);
        }
    }

    bench_ctx x;
    memset(&x, 0, sizeof x);
    x.o = o;
    x.r = bench_connect(&o->target);
    bench_redis_version(x.r, x.redis_version, sizeof x.redis_version);
    snprintf(x.prefix, sizeof x.prefix, "rlock-bench:%ld", (long)getpid());
    x.rtt_us = bench_ping_rtt_us(x.r, o->quick ? 1000 : 5000, &x.rtt_p50_us);
    bench_load_lock_like(x.r, x.sha, sizeof x.sha);
    bench_progress("redis-server %s at %s, PING round trip %.1f us mean", x.redis_version,
                   o->target.url, x.rtt_us);

    int64_t t0 = bench_now_ns();
    if (wanted(o, "uncontended", "1")) {
        bench_scn_uncontended(&x);
    }
    if (wanted(o, "parallel", "2")) {
        bench_scn_parallel(&x);
    }
    if (wanted(o, "nested", "3")) {
        bench_scn_nested(&x);
    }
    if (wanted(o, "contended", "4")) {
        bench_scn_contended(&x);
    }
    if (wanted(o, "watchdog", "5")) {
        bench_scn_watchdog(&x);
    }
    double total_s = (double)(bench_now_ns() - t0) / 1e9;

    FILE *out = o->json ? stderr : stdout;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    fprintf(out, "# rlock-bench %s%s\n\n", rlock_version(), o->quick ? " (quick)" : "");
    fprintf(out,
            "redis-server %s at %s; %ld CPUs; PING round trip (hiredis, "
            "this run) mean %s us, p50 %s us; total %s s.\n\n",
            x.redis_version, o->target.url, ncpu, bench_fmt(x.rtt_us, 1),
            bench_fmt(x.rtt_p50_us, 1), bench_fmt(total_s, 1));
    if (x.nrb > 0) {
        fprintf(out, "Physical limit (redis-benchmark -P 1 --csv evalsha of "
                     "the anchor harness's lock-like script, HINCRBY + "
                     "PEXPIRE, same server, this run):\n\n");
        fprintf(out, "| clients | requests/s | mean us | p99 us | max us | "
                     "half (one lock+unlock = 2 calls) |\n");
        fprintf(out, "|---|---|---|---|---|---|\n");
        for (int i = 0; i < x.nrb; i++) {
            const bench_rb *b = &x.rb[i];
            fprintf(out, "| -c %d | %s | %s | %s | %s | %s |\n", x.rb_clients[i],
                    bench_fmt(b->rps, 0), bench_fmt(b->avg_us, 0), bench_fmt(b->p99_us, 0),
                    bench_fmt(b->max_us, 0), bench_fmt(b->rps / 2, 0));
        }
        fprintf(out, "\n");
    }
    fputs(md.s ? md.s : "", out);
    if (md_goals.n) {
        fprintf(out,
                "## Goals\n\n| goal | measured | target | met |\n"
                "|---|---|---|---|\n%s\n",
                md_goals.s);
        fprintf(out, "%d goals met, %d missed\n", goals_met, goals_missed);
    }
    fflush(out);

    if (o->json) {
        printf("{\"rlock_version\": \"%s\", \"redis_version\": \"%s\", "
               "\"url\": \"%s\", \"quick\": %s, \"rtt_mean_us\": ",
               rlock_version(), x.redis_version, o->target.url, o->quick ? "true" : "false");
        bench_str num = {0};
        bench_str_num(&num, x.rtt_us);
        printf("%s, \"limits\": [", num.s);
        for (int i = 0; i < x.nrb; i++) {
            num.n = 0;
            bench_str_num(&num, x.rb[i].rps);
            printf("%s{\"clients\": %d, \"evalsha_rps\": %s}", i ? ", " : "", x.rb_clients[i],
                   num.s);
        }
        bench_str_free(&num);
        printf("],\n  \"results\": [\n%s\n  ],\n  \"goals\": [\n%s\n  ]}\n",
               js_rows.s ? js_rows.s : "", js_goals.s ? js_goals.s : "");
        fflush(stdout);
    }

    redisFree(x.r);
    bench_str_free(&md);
    bench_str_free(&js_rows);
    bench_str_free(&js_goals);
    bench_str_free(&md_goals);
    return 0;
}
