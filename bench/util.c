/* rlock-bench: time, statistics, the control connection and the lock loop
 * shared by the runner and the standalone report. */
#include "bench.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

bool bench_quiet = false;

int64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void bench_sleep_ms(int64_t ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

double bench_cpu_s(bool self)
{
    struct rusage ru;
    getrusage(self ? RUSAGE_SELF : RUSAGE_CHILDREN, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

int64_t bench_heap_bytes(void)
{
    struct mallinfo2 mi = mallinfo2();
    return (int64_t)(mi.uordblks + mi.hblkhd);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_quantile(double *v, size_t n, double q)
{
    if (n == 0) {
        return NAN;
    }
    qsort(v, n, sizeof *v, cmp_double);
    /* Linear interpolation between the two nearest ranks: the median of an
     * even count is the mean of the middle two. */
    double pos = q * (double)(n - 1);
    size_t lo = (size_t)pos;
    size_t hi = lo + 1 < n ? lo + 1 : lo;
    return v[lo] + (v[hi] - v[lo]) * (pos - (double)lo);
}

double bench_mean(const double *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        s += v[i];
    }
    return n ? s / (double)n : NAN;
}

void bench_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "rlock-bench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

void bench_note(const char *fmt, ...)
{
    if (bench_quiet) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "  ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

void *bench_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        bench_die("out of memory");
    }
    return p;
}

bool bench_pin_server(redisContext *r, const char *host, int cpu)
{
    if (strcmp(host, "127.0.0.1") != 0 && strcmp(host, "localhost") != 0 &&
        strcmp(host, "::1") != 0) {
        return false;
    }
    long pid = (long)bench_info(r, "server", "process_id", NULL);
    char path[64], comm[64] = "";
    snprintf(path, sizeof path, "/proc/%ld/comm", pid);
    FILE *f = pid > 0 ? fopen(path, "r") : NULL;
    if (f) {
        if (!fgets(comm, sizeof comm, f)) {
            comm[0] = '\0';
        }
        fclose(f);
    }
    /* The pid must be a redis-server of this machine: INFO of a server
     * behind a forwarded port could name any local process. */
    if (strncmp(comm, "redis-server", 12) != 0) {
        return false;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity((pid_t)pid, sizeof set, &set) == 0; /* its main thread */
}

void bench_pin_self(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (long i = 0; i < n && i < CPU_SETSIZE; i++) {
        if (cpu < 0 || i == cpu) {
            CPU_SET(i, &set);
        }
    }
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
        bench_die("cannot pin the bench to CPU %d", cpu);
    }
}

redisContext *bench_connect(const char *host, int port)
{
    struct timeval tv = {5, 0};
    redisContext *r = redisConnectWithTimeout(host, port, tv);
    if (!r || r->err) {
        bench_die("cannot connect to %s:%d: %s", host, port, r ? r->errstr : "out of memory");
    }
    /* A watchdog batch or redis-benchmark may keep the server busy, but
     * never for a minute. */
    struct timeval rtv = {60, 0};
    redisSetTimeout(r, rtv);
    return r;
}

redisReply *bench_cmd(redisContext *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(r, fmt, ap);
    va_end(ap);
    if (!rep) {
        bench_die("redis: %s", r->errstr[0] ? r->errstr : "no reply");
    }
    if (rep->type == REDIS_REPLY_ERROR) {
        bench_die("redis error reply to '%s': %s", fmt, rep->str);
    }
    return rep;
}

double bench_info(redisContext *r, const char *section, const char *field, const char *sub)
{
    redisReply *rep = bench_cmd(r, "INFO %s", section);
    double v = NAN;
    size_t fl = strlen(field);
    for (const char *p = rep->type == REDIS_REPLY_STRING ? rep->str : NULL; p && *p;) {
        if (strncmp(p, field, fl) == 0 && p[fl] == ':') {
            /* "field:value" or, in commandstats, "field:calls=1,usec=2,..." */
            const char *s = p + fl + 1;
            if (sub) {
                char key[64];
                snprintf(key, sizeof key, "%s=", sub);
                s = strstr(s, key);
                s = s && s < strchr(p, '\n') ? s + strlen(key) : NULL;
            }
            v = s ? strtod(s, NULL) : NAN;
            break;
        }
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    freeReplyObject(rep);
    return v;
}

rlock_client *bench_client(const char *host, int port, int64_t watchdog_ms)
{
    char url[300];
    snprintf(url, sizeof url, "redis://%s:%d", host, port);
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    if (watchdog_ms > 0) {
        cfg.watchdog_timeout_ms = watchdog_ms;
    }
    rlock_client *c = NULL;
    rlock_status s = rlock_client_new(&cfg, &c);
    if (s != RLOCK_OK) {
        bench_die("rlock_client_new(%s): %s", url, rlock_status_name(s));
    }
    return c;
}

rlock_client *bench_client_tls(const char *host, int port, const bench_tls *tls)
{
#ifdef BENCH_NO_LIB_TLS
    /* A baseline built before the library had rediss:// (an A/B build,
     * docs/performance.md): the floor speaks TLS, the library cannot. */
    (void)host;
    (void)port;
    (void)tls;
    bench_die("this build's library has no rediss:// (built with -DBENCH_NO_LIB_TLS)");
#else
    char url[300];
    snprintf(url, sizeof url, "rediss://%s:%d", host, port);
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.tls_ca_file = tls->ca_file;
    cfg.tls_cert_file = tls->cert_file;
    cfg.tls_key_file = tls->key_file;
    cfg.tls_server_name = tls->server_name;
    cfg.tls_insecure = tls->insecure;
    rlock_client *c = NULL;
    rlock_status s = rlock_client_new(&cfg, &c);
    if (s != RLOCK_OK) {
        bench_die("rlock_client_new(%s): %s: %s", url, rlock_status_name(s), rlock_last_error());
    }
    return c;
#endif
}

rlock *bench_lock(rlock_client *c, const char *name)
{
    rlock *l = NULL;
    rlock_status s = rlock_new(c, name, &l);
    if (s != RLOCK_OK) {
        bench_die("rlock_new(%s): %s", name, rlock_status_name(s));
    }
    return l;
}

uint64_t bench_stat(rlock_client *c, rlock_stat which)
{
    uint64_t v = 0;
    if (rlock_client_stat(c, which, &v) != RLOCK_OK) {
        bench_die("rlock_client_stat(%d) failed", (int)which);
    }
    return v;
}

uint64_t bench_pairs(rlock *l, uint64_t n, int64_t deadline_ns, double *lat_us, uint64_t *errors)
{
    uint64_t done = 0;
    while (n == 0 || done < n) {
        int64_t t0 = bench_now_ns();
        rlock_status s = rlock_lock(l, RLOCK_WATCHDOG);
        if (s == RLOCK_OK) {
            s = rlock_unlock(l);
        }
        int64_t t1 = bench_now_ns();
        if (s != RLOCK_OK) {
            if (++*errors <= 3) {
                fprintf(stderr, "rlock-bench: lock/unlock(%s): %s\n", rlock_name(l),
                        rlock_status_name(s));
            }
            break;
        }
        if (lat_us) {
            lat_us[done] = (double)(t1 - t0) / 1e3;
        }
        done++;
        if (deadline_ns && t1 >= deadline_ns) {
            break;
        }
    }
    return done;
}
