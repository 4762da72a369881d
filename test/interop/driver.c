/*
 * Helpers of the interop driver: see driver.h.
 */
#include "driver.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

redisContext *R;
const char *g_url;
char g_host[64] = "127.0.0.1";
int g_port;

/* ---- time ---------------------------------------------------------- */

int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void sleep_ms(int64_t ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int64_t tms(int64_t ms)
{
    static double mult = 0;
    if (mult == 0) {
        const char *e = getenv("RLOCK_TEST_TIME_MULTIPLIER");
        mult = e && atof(e) >= 1 ? atof(e) : 1;
    }
    return (int64_t)(ms * mult);
}

static struct timespec deadline_in(int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* ---- checks -------------------------------------------------------- */

void check_failed(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stdout, "    FAIL %s:%d: ", file, line);
    vfprintf(stdout, fmt, ap);
    fputc('\n', stdout);
    fflush(stdout);
    va_end(ap);
}

/* ---- the test server ------------------------------------------------ */

long long r_int(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(R, fmt, ap);
    va_end(ap);
    if (!r) {
        return -1000;
    }
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : -1000 - r->type;
    freeReplyObject(r);
    return v;
}

char *r_str(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(R, fmt, ap);
    va_end(ap);
    char *s = NULL;
    if (r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS)) {
        s = strdup(r->str);
    }
    if (r) {
        freeReplyObject(r);
    }
    return s;
}

int r_fields(const char *key, char *field, size_t fsz, long long *value)
{
    redisReply *r = redisCommand(R, "HGETALL %s", key);
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        if (r) {
            freeReplyObject(r);
        }
        return -1;
    }
    int n = (int)r->elements / 2;
    if (n > 0) {
        snprintf(field, fsz, "%s", r->element[0]->str);
        *value = atoll(r->element[1]->str);
    }
    freeReplyObject(r);
    return n;
}

long long r_numsub(const char *channel)
{
    redisReply *r = redisCommand(R, "PUBSUB NUMSUB %s", channel);
    long long v = -1;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
        v = r->element[1]->integer;
    }
    if (r) {
        freeReplyObject(r);
    }
    return v;
}

/* ---- MONITOR tap --------------------------------------------------- */

static void *tap_main(void *arg)
{
    struct tap *t = arg;
    for (;;) {
        redisReply *r = NULL;
        if (redisGetReply(t->c, (void **)&r) != REDIS_OK || !r) {
            return NULL; /* tap_stop() shut the socket down */
        }
        if (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_STRING) {
            pthread_mutex_lock(&t->mu);
            if (t->n == t->cap) {
                t->cap = t->cap ? t->cap * 2 : 256;
                t->lines = realloc(t->lines, t->cap * sizeof *t->lines);
            }
            t->lines[t->n++] = strdup(r->str);
            pthread_mutex_unlock(&t->mu);
        }
        freeReplyObject(r);
    }
}

static int tap_start(struct tap *t)
{
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->mu, NULL);
    t->c = redisConnect(g_host, g_port);
    if (!t->c || t->c->err) {
        return -1;
    }
    redisReply *r = redisCommand(t->c, "MONITOR");
    if (!r) {
        return -1;
    }
    freeReplyObject(r);
    return pthread_create(&t->th, NULL, tap_main, t) == 0 ? 0 : -1;
}

struct tap *tap_new(void)
{
    struct tap *t = calloc(1, sizeof *t);
    if (t && tap_start(t) != 0) {
        return NULL; /* a failed start may leave a connection: kept */
    }
    return t;
}

long tap_mark(struct tap *t)
{
    static int mark;
    char want[32];
    snprintf(want, sizeof want, "tapmark-%d", ++mark);
    free(r_str("ECHO %s", want));
    for (int i = 0; i < 500; i++) {
        pthread_mutex_lock(&t->mu);
        for (size_t k = t->n; k > 0; k--) {
            if (strstr(t->lines[k - 1], want)) {
                long n = (long)t->n;
                pthread_mutex_unlock(&t->mu);
                return n;
            }
        }
        pthread_mutex_unlock(&t->mu);
        sleep_ms(10);
    }
    return -1;
}

int tap_stop(struct tap *t)
{
    long seen = tap_mark(t);
    shutdown(t->c->fd, SHUT_RDWR);
    pthread_join(t->th, NULL);
    return seen >= 0 ? 0 : -1;
}

void tap_free(struct tap *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->lines[i]);
    }
    free(t->lines);
    if (t->c) {
        redisFree(t->c);
    }
    pthread_mutex_destroy(&t->mu);
    free(t);
}

int64_t tap_find(struct tap *t, size_t from, const char *cmd, const char *arg1)
{
    int64_t ts = 0;
    pthread_mutex_lock(&t->mu);
    for (size_t i = from; i < t->n && ts == 0; i++) {
        char a[2][160];
        if (tap_args(t->lines[i], a, 2) == 2 && strcasecmp(a[0], cmd) == 0 &&
            strcmp(a[1], arg1) == 0) {
            ts = (int64_t)(atof(t->lines[i]) * 1e6);
        }
    }
    pthread_mutex_unlock(&t->mu);
    return ts;
}

int tap_args(const char *line, char argv[][160], int max)
{
    int argc = 0;
    const char *p = strchr(line, ']'); /* after "TIME [db addr]" */
    p = p ? p + 1 : line;
    while (argc < max && (p = strchr(p, '"')) != NULL) {
        p++;
        size_t n = 0;
        while (*p && *p != '"') {
            if (*p == '\\' && p[1]) {
                p++;
            }
            if (n < 159) {
                argv[argc][n++] = *p;
            }
            p++;
        }
        argv[argc++][n] = '\0';
        if (*p) {
            p++;
        }
    }
    return argc;
}

/* ---- the Java agent ------------------------------------------------ */

static void *agent_reader(void *arg)
{
    struct agent *a = arg;
    FILE *f = fdopen(a->out_fd, "r");
    char line[1024];
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        struct reply *r = calloc(1, sizeof *r);
        char status[8] = "";
        int off = 0;
        if (sscanf(line, "%u %7s %n", &r->tag, status, &off) < 2) {
            fprintf(stderr, "agent: unexpected line: %s\n", line);
            free(r);
            continue;
        }
        r->ok = strcmp(status, "ok") == 0;
        snprintf(r->text, sizeof r->text, "%s", line + off);
        pthread_mutex_lock(&a->mu);
        r->next = a->replies;
        a->replies = r;
        pthread_cond_broadcast(&a->cv);
        pthread_mutex_unlock(&a->mu);
    }
    pthread_mutex_lock(&a->mu);
    a->eof = true;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    if (f) {
        fclose(f);
    }
    return NULL;
}

int agent_start(struct agent *a, const char *classpath, const char *version, int64_t watchdog_ms)
{
    memset(a, 0, sizeof *a);
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    snprintf(a->version, sizeof a->version, "%s", version);
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
        return -1;
    }
    char wd[32];
    snprintf(wd, sizeof wd, "%lld", (long long)watchdog_ms);
    const char *log = getenv("INTEROP_AGENT_LOG");
    a->pid = fork();
    if (a->pid < 0) {
        return -1;
    }
    if (a->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        if (log) {
            int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
            if (fd >= 0) {
                dup2(fd, 2);
            }
        }
        const char *java = getenv("JAVA") ? getenv("JAVA") : "java";
        execlp(java, java, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", classpath,
               "rlock.interop.Agent", g_url, wd, version, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    a->in = fdopen(in[1], "w");
    a->out_fd = out[0];
    if (!a->in || pthread_create(&a->reader, NULL, agent_reader, a) != 0) {
        return -1;
    }
    struct reply r;
    if (agent_wait(a, 0, 60000, &r) != 0 || strncmp(r.text, "ready ", 6) != 0) {
        fprintf(stderr, "agent: no ready line from the Java agent (see %s)\n",
                log ? log : "stderr");
        return -1;
    }
    sscanf(r.text, "ready %*s %63s", a->id);
    a->next_tag = 1;
    return 0;
}

void agent_stop(struct agent *a)
{
    if (a->in) {
        fclose(a->in); /* EOF: the agent shuts Redisson down and exits */
        a->in = NULL;
    }
    if (a->pid > 0) {
        int status;
        for (int i = 0; i < 100; i++) {
            if (waitpid(a->pid, &status, WNOHANG) == a->pid) {
                a->pid = 0;
                break;
            }
            sleep_ms(100);
        }
        if (a->pid > 0) {
            kill(a->pid, SIGKILL);
            waitpid(a->pid, &status, 0);
            a->pid = 0;
        }
    }
    pthread_join(a->reader, NULL);
    while (a->replies) {
        struct reply *n = a->replies->next;
        free(a->replies);
        a->replies = n;
    }
}

unsigned agent_send(struct agent *a, const char *worker, const char *fmt, ...)
{
    pthread_mutex_lock(&a->mu);
    unsigned tag = a->next_tag++;
    fprintf(a->in, "%u %s ", tag, worker);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(a->in, fmt, ap);
    va_end(ap);
    fputc('\n', a->in);
    fflush(a->in);
    pthread_mutex_unlock(&a->mu);
    return tag;
}

static struct reply **find_reply(struct agent *a, unsigned tag)
{
    for (struct reply **p = &a->replies; *p; p = &(*p)->next) {
        if ((*p)->tag == tag) {
            return p;
        }
    }
    return NULL;
}

int agent_wait(struct agent *a, unsigned tag, int64_t timeout_ms, struct reply *out)
{
    struct timespec dl = deadline_in(timeout_ms);
    pthread_mutex_lock(&a->mu);
    struct reply **p;
    int rc = 0;
    while (!(p = find_reply(a, tag)) && !a->eof && rc != ETIMEDOUT) {
        rc = pthread_cond_timedwait(&a->cv, &a->mu, &dl);
    }
    if (!p) {
        pthread_mutex_unlock(&a->mu);
        return -1;
    }
    struct reply *r = *p;
    *p = r->next;
    pthread_mutex_unlock(&a->mu);
    *out = *r;
    out->next = NULL;
    free(r);
    return 0;
}

int agent_done(struct agent *a, unsigned tag)
{
    pthread_mutex_lock(&a->mu);
    int done = find_reply(a, tag) != NULL;
    pthread_mutex_unlock(&a->mu);
    return done;
}

int agent_call(struct agent *a, struct reply *r, const char *worker, const char *fmt, ...)
{
    char cmd[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    unsigned tag = agent_send(a, worker, "%s", cmd);
    if (agent_wait(a, tag, tms(10000), r) != 0) {
        fprintf(stdout, "    agent: no reply to \"%s\" on %s\n", cmd, worker);
        return -1;
    }
    return 0;
}

long long reply_word(const struct reply *r, int n)
{
    const char *p = r->text;
    for (int i = 0; i < n && p; i++) {
        p = strchr(p, ' ');
        p = p ? p + 1 : NULL;
    }
    return p ? atoll(p) : 0;
}

int version_at_least(const char *version, int major, int minor)
{
    int ma = 0, mi = 0;
    sscanf(version, "%d.%d", &ma, &mi);
    return ma > major || (ma == major && mi >= minor);
}

/* ---- C worker threads ---------------------------------------------- */

static void *cw_main(void *arg)
{
    struct cworker *w = arg;
    pthread_mutex_lock(&w->mu);
    w->tid = rlock_thread_id();
    pthread_cond_broadcast(&w->cv);
    for (;;) {
        while (w->op == COP_NONE) {
            pthread_cond_wait(&w->cv, &w->mu);
        }
        enum cop op = w->op;
        if (op == COP_QUIT) {
            pthread_mutex_unlock(&w->mu);
            return NULL;
        }
        rlock *l = w->lock;
        int64_t a1 = w->a1, a2 = w->a2, value = 0;
        pthread_mutex_unlock(&w->mu);
        int64_t t0 = now_us();
        rlock_status st = RLOCK_EINVAL;
        switch (op) {
        case COP_LOCK:
            st = rlock_lock(l, a1);
            break;
        case COP_TRYLOCK:
            st = rlock_try_lock(l, a1, a2);
            break;
        case COP_UNLOCK:
            st = rlock_unlock(l);
            break;
        case COP_COUNT:
            st = rlock_hold_count(l, &value);
            break;
        case COP_FORCE: {
            bool was = false;
            st = rlock_force_unlock(l, &was);
            value = was;
            break;
        }
        case COP_TOKEN:
            st = rlock_fence_token(l, &value);
            break;
        default:
            break;
        }
        int64_t t1 = now_us();
        pthread_mutex_lock(&w->mu);
        w->st = st;
        w->value = value;
        w->t_called = t0;
        w->t_returned = t1;
        w->op = COP_NONE;
        w->done = true;
        pthread_cond_broadcast(&w->cv);
    }
}

static int cw_start(struct cworker *w)
{
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (pthread_create(&w->th, NULL, cw_main, w) != 0) {
        return -1;
    }
    pthread_mutex_lock(&w->mu);
    while (w->tid == 0) {
        pthread_cond_wait(&w->cv, &w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return 0;
}

struct cworker *cw_new(void)
{
    struct cworker *w = malloc(sizeof *w);
    if (w && cw_start(w) != 0) {
        free(w);
        return NULL;
    }
    return w;
}

void cw_post(struct cworker *w, rlock *l, enum cop op, int64_t a1, int64_t a2)
{
    pthread_mutex_lock(&w->mu);
    w->lock = l;
    w->op = op;
    w->a1 = a1;
    w->a2 = a2;
    w->done = false;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

int cw_wait(struct cworker *w, int64_t timeout_ms)
{
    struct timespec dl = deadline_in(timeout_ms);
    pthread_mutex_lock(&w->mu);
    int rc = 0;
    while (!w->done && rc != ETIMEDOUT) {
        rc = pthread_cond_timedwait(&w->cv, &w->mu, &dl);
    }
    int st = w->done ? (int)w->st : -1;
    pthread_mutex_unlock(&w->mu);
    return st;
}

bool cw_idle(struct cworker *w)
{
    pthread_mutex_lock(&w->mu);
    bool idle = w->done;
    pthread_mutex_unlock(&w->mu);
    return idle;
}

void cw_stop(struct cworker *w)
{
    pthread_mutex_lock(&w->mu);
    bool running = w->op != COP_NONE;
    pthread_mutex_unlock(&w->mu);
    if (running) {
        /* Stuck in a call after a failed test: leave it to process exit. */
        pthread_detach(w->th);
        return;
    }
    cw_post(w, NULL, COP_QUIT, 0, 0);
    pthread_join(w->th, NULL);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}

/* ---- a raw subscriber ---------------------------------------------- */

#define SUB_MARK_CHANNEL "interop-mark"

static void *sub_main(void *arg)
{
    struct sub *s = arg;
    for (;;) {
        redisReply *r = NULL;
        if (redisGetReply(s->c, (void **)&r) != REDIS_OK || !r) {
            return NULL; /* sub_free() shut the socket down */
        }
        /* ["pmessage", pattern, channel, payload]; the rest are
         * subscription confirmations */
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 4 &&
            strcmp(r->element[0]->str, "pmessage") == 0) {
            const char *ch = r->element[2]->str, *pl = r->element[3]->str;
            pthread_mutex_lock(&s->mu);
            if (strncmp(ch, SUB_MARK_CHANNEL ":", strlen(SUB_MARK_CHANNEL) + 1) == 0) {
                int k = atoi(pl);
                s->marks = k > s->marks ? k : s->marks;
            } else {
                if (s->n == s->cap) {
                    s->cap = s->cap ? s->cap * 2 : 64;
                    s->msgs = realloc(s->msgs, s->cap * sizeof *s->msgs);
                }
                struct submsg *m = &s->msgs[s->n++];
                snprintf(m->channel, sizeof m->channel, "%s", ch);
                snprintf(m->payload, sizeof m->payload, "%s", pl);
                m->t_us = now_us();
            }
            pthread_mutex_unlock(&s->mu);
        }
        freeReplyObject(r);
    }
}

struct sub *sub_new(const char *pattern)
{
    struct sub *s = calloc(1, sizeof *s);
    if (!s) {
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    s->c = redisConnect(g_host, g_port);
    if (!s->c || s->c->err) {
        return NULL; /* kept: a failed start is a failed test */
    }
    redisReply *r = redisCommand(s->c, "PSUBSCRIBE %s %s:*", pattern, SUB_MARK_CHANNEL);
    if (!r) {
        return NULL;
    }
    freeReplyObject(r); /* the first confirmation; the thread reads the second */
    if (pthread_create(&s->th, NULL, sub_main, s) != 0) {
        return NULL;
    }
    return sub_mark(s) >= 0 ? s : NULL;
}

long sub_mark(struct sub *s)
{
    static int mark;
    int want = __atomic_add_fetch(&mark, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < 500; i++) {
        if (i % 50 == 0) { /* again now and then: the first may precede the PSUBSCRIBE */
            freeReplyObject(redisCommand(R, "PUBLISH %s:x %d", SUB_MARK_CHANNEL, want));
        }
        pthread_mutex_lock(&s->mu);
        long n = s->marks >= want ? (long)s->n : -1;
        pthread_mutex_unlock(&s->mu);
        if (n >= 0) {
            return n;
        }
        sleep_ms(10);
    }
    return -1;
}

int sub_count(struct sub *s, size_t from, const char *channel, const char *payload)
{
    int k = 0;
    pthread_mutex_lock(&s->mu);
    for (size_t i = from; i < s->n; i++) {
        k += (!channel || strcmp(s->msgs[i].channel, channel) == 0) &&
             (!payload || strcmp(s->msgs[i].payload, payload) == 0);
    }
    pthread_mutex_unlock(&s->mu);
    return k;
}

int sub_get(struct sub *s, size_t i, struct submsg *out)
{
    pthread_mutex_lock(&s->mu);
    int rc = i < s->n ? 0 : -1;
    if (rc == 0) {
        *out = s->msgs[i];
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void sub_free(struct sub *s)
{
    shutdown(s->c->fd, SHUT_RDWR);
    pthread_join(s->th, NULL);
    redisFree(s->c);
    free(s->msgs);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* ---- on_lock_lost events ------------------------------------------- */

static pthread_mutex_t lost_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t lost_cv = PTHREAD_COND_INITIALIZER;
static struct lost_event lost_ev[64];
static int lost_n;

void lost_cb(const char *name, uint64_t tid, void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lost_mu);
    if (lost_n < 64) {
        snprintf(lost_ev[lost_n].name, sizeof lost_ev[lost_n].name, "%s", name);
        lost_ev[lost_n].tid = tid;
        lost_ev[lost_n].t_us = now_us();
        lost_n++;
    }
    pthread_cond_broadcast(&lost_cv);
    pthread_mutex_unlock(&lost_mu);
}

int lost_wait(const char *name, int64_t timeout_ms, struct lost_event *ev)
{
    struct timespec dl = deadline_in(timeout_ms);
    pthread_mutex_lock(&lost_mu);
    int rc = 0;
    for (;;) {
        for (int i = 0; i < lost_n; i++) {
            if (strcmp(lost_ev[i].name, name) == 0) {
                *ev = lost_ev[i];
                pthread_mutex_unlock(&lost_mu);
                return 0;
            }
        }
        if (rc == ETIMEDOUT) {
            break;
        }
        rc = pthread_cond_timedwait(&lost_cv, &lost_mu, &dl);
    }
    pthread_mutex_unlock(&lost_mu);
    return -1;
}

int lost_count(void)
{
    pthread_mutex_lock(&lost_mu);
    int n = lost_n;
    pthread_mutex_unlock(&lost_mu);
    return n;
}

/* ---- measurements -------------------------------------------------- */

#define MAX_SAMPLES 64
static struct {
    const char *what;
    double ms[MAX_SAMPLES];
    int n;
} series[64];
static int nseries;

void measure(const char *what, double ms)
{
    int i = 0;
    while (i < nseries && strcmp(series[i].what, what) != 0) {
        i++;
    }
    if (i == nseries) {
        if (nseries == (int)(sizeof series / sizeof series[0])) {
            return;
        }
        series[nseries++].what = what;
    }
    if (series[i].n < MAX_SAMPLES) {
        series[i].ms[series[i].n++] = ms;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void measure_report(const char *version)
{
    for (int i = 0; i < nseries; i++) {
        qsort(series[i].ms, (size_t)series[i].n, sizeof(double), cmp_double);
        int n = series[i].n;
        printf("wake-up [Redisson %s] %-40s n=%d min %.2f ms, median %.2f ms, max %.2f ms\n",
               version, series[i].what, n, series[i].ms[0], series[i].ms[n / 2],
               series[i].ms[n - 1]);
    }
    fflush(stdout);
}
