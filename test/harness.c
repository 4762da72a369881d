#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int64_t th_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool th_under_valgrind(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f)) {
        found = strstr(line, "vgpreload") != NULL;
    }
    if (f) {
        fclose(f);
    }
    return found;
}

double th_time_multiplier(void)
{
    const char *s = getenv("RLOCK_TEST_TIME_MULTIPLIER");
    char *end = NULL;
    double m = s ? strtod(s, &end) : 1.0;
    return (s && end != s && m > 0) ? m : 1.0;
}

int64_t th_ms(int64_t ms)
{
    return (int64_t)((double)ms * th_time_multiplier());
}

bool th_poll_until(bool (*cond)(void *), void *arg, int64_t timeout_ms)
{
    return TH_POLL(cond(arg), timeout_ms);
}

void th_sleep_ms(int64_t ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int th_port(void)
{
    const char *p = getenv("RLOCK_TEST_PORT");
    cr_assert(p != NULL, "RLOCK_TEST_PORT is not set: run the tests with make check");
    return atoi(p);
}

const char *th_url(void)
{
    static char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", th_port());
    return url;
}

rlock_client *th_client_cfg(const rlock_config *cfg)
{
    rlock_client *c = NULL;
    rlock_status s = rlock_client_new(cfg, &c);
    cr_assert_eq(s, RLOCK_OK, "rlock_client_new: %s", rlock_status_name(s));
    return c;
}

rlock_client *th_client(const char *url, int64_t watchdog_ms)
{
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url ? url : th_url();
    cfg.watchdog_timeout_ms = watchdog_ms;
    return th_client_cfg(&cfg);
}

char *th_name(const char *prefix)
{
    static int counter;
    char *s = NULL;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    cr_assert(asprintf(&s, "%s:%d:%d:%ld", prefix, (int)getpid(), ++counter,
                       (long)(ts.tv_nsec ^ (long)rand())) > 0);
    return s;
}

redisContext *th_redis(int port)
{
    struct timeval tv = {5, 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", port ? port : th_port(), tv);
    cr_assert(r != NULL && !r->err, "connect to redis: %s", r ? r->errstr : "oom");
    redisSetTimeout(r, tv);
    return r;
}

redisReply *th_cmd(redisContext *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(r, fmt, ap);
    va_end(ap);
    cr_assert(rep != NULL, "redis command '%s' failed: %s", fmt, r->errstr);
    return rep;
}

void th_run(redisContext *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(r, fmt, ap);
    va_end(ap);
    cr_assert(rep != NULL, "redis command '%s' failed: %s", fmt, r->errstr);
    freeReplyObject(rep);
}

static long long int_reply(redisReply *rep)
{
    long long v;
    if (rep->type == REDIS_REPLY_INTEGER) {
        v = rep->integer;
    } else if (rep->type == REDIS_REPLY_NIL) {
        v = -1000000;
    } else if (rep->type == REDIS_REPLY_STRING) {
        v = atoll(rep->str);
    } else {
        cr_assert_fail("unexpected reply type %d", rep->type);
        v = 0;
    }
    freeReplyObject(rep);
    return v;
}

/* HGET of a missing field gives 0. */
long long th_hget_int(redisContext *r, const char *key, const char *field)
{
    long long v = int_reply(th_cmd(r, "HGET %s %s", key, field));
    return v == -1000000 ? 0 : v;
}

long long th_pttl(redisContext *r, const char *key)
{
    return int_reply(th_cmd(r, "PTTL %s", key));
}

long long th_exists(redisContext *r, const char *key)
{
    return int_reply(th_cmd(r, "EXISTS %s", key));
}

long long th_hlen(redisContext *r, const char *key)
{
    return int_reply(th_cmd(r, "HLEN %s", key));
}

char *th_owner(rlock_client *c, uint64_t tid)
{
    char *s = NULL;
    cr_assert(asprintf(&s, "%s:%llu", rlock_client_id(c), (unsigned long long)tid) > 0);
    return s;
}

char *th_channel(const char *name)
{
    char *s = NULL;
    cr_assert(
        asprintf(&s,
                 strchr(name, '{') ? "redisson_lock__channel:%s" : "redisson_lock__channel:{%s}",
                 name) > 0);
    return s;
}

/* The subscribe command's reply is its confirmation: once it is read, the
 * subscription is in place. */
redisContext *th_subscribe(int port, const char *channel)
{
    redisContext *r = th_redis(port);
    th_run(r, "SUBSCRIBE %s", channel);
    return r;
}

redisContext *th_psubscribe(int port, const char *pattern)
{
    redisContext *r = th_redis(port);
    th_run(r, "PSUBSCRIBE %s", pattern);
    return r;
}

static char *message_payload(const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 || !r->element[0]->str) {
        return NULL;
    }
    if (r->elements == 3 && strcmp(r->element[0]->str, "message") == 0) {
        return strdup(r->element[2]->str);
    }
    if (r->elements == 4 && strcmp(r->element[0]->str, "pmessage") == 0) {
        return strdup(r->element[3]->str);
    }
    return NULL;
}

char *th_next_message(redisContext *sub, int timeout_ms)
{
    int64_t deadline = th_now_ms() + th_ms(timeout_ms);
    for (;;) {
        void *rep = NULL;
        if (redisGetReplyFromReader(sub, &rep) != REDIS_OK) {
            return NULL;
        }
        if (rep != NULL) {
            char *out = message_payload(rep);
            freeReplyObject(rep);
            if (out) {
                return out;
            }
            continue;
        }
        int64_t left = deadline - th_now_ms();
        if (left <= 0) {
            return NULL;
        }
        struct pollfd pfd = {sub->fd, POLLIN, 0};
        if (poll(&pfd, 1, (int)left) <= 0) {
            return NULL;
        }
        if (redisBufferRead(sub) != REDIS_OK) {
            return NULL;
        }
    }
}

char *th_server_url(const th_server *s)
{
    char *u = NULL;
    cr_assert(asprintf(&u, "redis://127.0.0.1:%d", s->port) > 0);
    return u;
}

char *th_server_tls_url(const th_server *s)
{
    char *u = NULL;
    cr_assert(asprintf(&u, "rediss://127.0.0.1:%d", s->tls_port) > 0);
    return u;
}

char *th_tls_setup(th_tls *certs, th_server *srv, const char *auth, bool other_host)
{
    th_tls_make(certs);
    th_server_start_tls(srv, certs, auth, other_host);
    return th_server_tls_url(srv);
}

void th_tls_teardown(th_tls *certs, th_server *srv, char *url)
{
    th_server_stop(srv);
    th_tls_free(certs);
    free(url);
}

void th_tls_config(rlock_config *cfg, const char *url, const char *ca)
{
    rlock_config_init(cfg);
    cfg->url = url;
    cfg->tls_ca_file = ca;
    cfg->connect_timeout_ms = 1000;
    cfg->command_timeout_ms = 1000;
}

/* Runs a shell command in dir; aborts the test when it fails. */
static void tls_sh(const char *dir, const char *cmd)
{
    char *full = NULL;
    cr_assert(asprintf(&full, "cd '%s' && { %s ; } >>openssl.log 2>&1", dir, cmd) > 0);
    int rc = system(full);
    cr_assert_eq(rc, 0, "openssl failed (%s/openssl.log): %s", dir, cmd);
    free(full);
}

/* A key and a certificate signed by ca.crt, with the given subject and
 * extensions. EC keys: fast to make. */
static void tls_leaf(const char *dir, const char *name, const char *cn, const char *ext)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout %s.key -out %s.csr -subj '/CN=%s' && printf '%%s\\n' '%s' > %s.ext && "
             "openssl x509 -req -in %s.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
             "-out %s.crt -days 2 -extfile %s.ext",
             name, name, cn, ext, name, name, name, name);
    tls_sh(dir, cmd);
}

void th_tls_make(th_tls *t)
{
    snprintf(t->dir, sizeof t->dir, "/tmp/rlock-tls.XXXXXX");
    cr_assert(mkdtemp(t->dir) != NULL);
    const char *ca = "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
                     "-days 2 -keyout %s.key -out %s.crt -subj '/CN=%s'";
    char cmd[512];
    snprintf(cmd, sizeof cmd, ca, "ca", "ca", "rlock test CA");
    tls_sh(t->dir, cmd);
    snprintf(cmd, sizeof cmd, ca, "other-ca", "other-ca", "unrelated CA");
    tls_sh(t->dir, cmd);
    tls_leaf(t->dir, "server", "localhost", "subjectAltName=DNS:localhost,IP:127.0.0.1");
    tls_leaf(t->dir, "other", "other.example", "subjectAltName=DNS:other.example");
    tls_leaf(t->dir, "client", "rlock client", "extendedKeyUsage=clientAuth");
    snprintf(t->ca, sizeof t->ca, "%s/ca.crt", t->dir);
    snprintf(t->other_ca, sizeof t->other_ca, "%s/other-ca.crt", t->dir);
    snprintf(t->server_crt, sizeof t->server_crt, "%s/server.crt", t->dir);
    snprintf(t->server_key, sizeof t->server_key, "%s/server.key", t->dir);
    snprintf(t->other_crt, sizeof t->other_crt, "%s/other.crt", t->dir);
    snprintf(t->other_key, sizeof t->other_key, "%s/other.key", t->dir);
    snprintf(t->client_crt, sizeof t->client_crt, "%s/client.crt", t->dir);
    snprintf(t->client_key, sizeof t->client_key, "%s/client.key", t->dir);
}

void th_tls_free(th_tls *t)
{
    if (t->dir[0]) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->dir);
        if (system(cmd) != 0) {
            /* best effort */
        }
        t->dir[0] = '\0';
    }
}

static void server_spawn(th_server *s)
{
    char port[16], tls_port[16], log[300];
    snprintf(port, sizeof port, "%d", s->port);
    snprintf(tls_port, sizeof tls_port, "%d", s->tls_port);
    snprintf(log, sizeof log, "%s/redis.log", s->dir);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int fd = open("/dev/null", O_RDWR);
        dup2(fd, 0);
        dup2(fd, 1);
        dup2(fd, 2); /* never hold the test's output pipe open */
        const char *argv[64] = {"redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "no", "--dir", s->dir, "--logfile", log,
                                "--enable-debug-command", "yes"};
        int n = 15;
        if (s->tls) {
            const char *tls[] = {"--tls-port", tls_port, "--tls-cert-file",
                                 s->tls_other_host ? s->tls->other_crt : s->tls->server_crt,
                                 "--tls-key-file",
                                 s->tls_other_host ? s->tls->other_key : s->tls->server_key,
                                 "--tls-ca-cert-file", s->tls->ca, "--tls-auth-clients",
                                 s->tls_auth ? s->tls_auth : "no"};
            for (size_t i = 0; i < sizeof tls / sizeof tls[0]; i++) {
                argv[n++] = tls[i];
            }
        }
        for (int i = 0; s->args && s->args[i] && n < 63; i++) {
            argv[n++] = s->args[i];
        }
        argv[n] = NULL;
        execvp("redis-server", (char *const *)argv);
        _exit(127);
    }
    s->pid = pid;
}

/* Whether the server on port answers a PING within timeout_ms. */
static int server_answers(int port, int timeout_ms)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", port, tv);
    int ok = 0;
    if (r && !r->err) {
        redisSetTimeout(r, tv);
        redisReply *rep = redisCommand(r, "PING");
        ok = rep && rep->type == REDIS_REPLY_STATUS;
        if (rep) {
            freeReplyObject(rep);
        }
    }
    if (r) {
        redisFree(r);
    }
    return ok;
}

/* Whether the server on port is the one we spawned: a server of another
 * test on a colliding port answers PING too. */
static int server_is(int port, pid_t pid)
{
    struct timeval tv = {1, 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", port, tv);
    int ok = 0;
    if (r && !r->err) {
        redisSetTimeout(r, tv);
        redisReply *rep = redisCommand(r, "INFO server");
        char want[40];
        snprintf(want, sizeof want, "process_id:%ld\r\n", (long)pid);
        ok = rep && rep->type == REDIS_REPLY_STRING && strstr(rep->str, want) != NULL;
        if (rep) {
            freeReplyObject(rep);
        }
    }
    if (r) {
        redisFree(r);
    }
    return ok;
}

static int wait_ready(th_server *s)
{
    for (int i = 0; i < 100; i++) {
        if (server_answers(s->port, 1000) && server_is(s->port, s->pid)) {
            return 1;
        }
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            return 0; /* exited: port taken, probably */
        }
        th_sleep_ms(50);
    }
    return 0;
}

void th_server_start(th_server *s)
{
    th_server_start_args(s, NULL);
}

static void server_start(th_server *s, const char *const *args)
{
    s->args = args;
    snprintf(s->dir, sizeof s->dir, "/tmp/rlock-th.XXXXXX");
    cr_assert(mkdtemp(s->dir) != NULL);
    for (int attempt = 0; attempt < 20; attempt++) {
        s->port =
            20000 +
            (int)((getpid() * 7919u + (unsigned)th_now_ms() * 31u + attempt * 104729u) % 40000u);
        s->tls_port = s->tls ? s->port + 1 : 0;
        server_spawn(s);
        if (wait_ready(s)) {
            return;
        }
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
    }
    cr_assert_fail("could not start a private redis-server");
}

void th_server_start_args(th_server *s, const char *const *args)
{
    s->tls = NULL;
    s->tls_auth = NULL;
    s->tls_other_host = false;
    server_start(s, args);
}

void th_server_start_tls(th_server *s, const th_tls *tls, const char *auth, bool other_host)
{
    s->tls = tls;
    s->tls_auth = auth;
    s->tls_other_host = other_host;
    server_start(s, NULL);
}

static void server_reap(th_server *s, int sig)
{
    if (s->pid > 0) {
        kill(s->pid, sig);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
}

void th_server_stop(th_server *s)
{
    server_reap(s, SIGTERM);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", s->dir);
    if (system(cmd) != 0) {
        /* best effort */
    }
}

void th_server_kill(th_server *s)
{
    server_reap(s, SIGKILL);
}

void th_server_restart(th_server *s)
{
    server_reap(s, SIGTERM);
    for (int i = 0; i < 100; i++) {
        server_spawn(s);
        if (wait_ready(s)) {
            return;
        }
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        th_sleep_ms(100);
    }
    cr_assert_fail("could not restart the private redis-server on port %d", s->port);
}

/* __gcov_dump() is in libgcov, linked only by --coverage: elsewhere the
 * weak reference stays NULL. A coverage build makes it strong, since a weak
 * reference does not pull the member out of libgcov.a. */
#ifdef TH_COVERAGE
extern void __gcov_dump(void);
#else
extern void __gcov_dump(void) __attribute__((weak));
#endif

_Noreturn void th_child_exit(int code)
{
#ifdef TH_COVERAGE
    __gcov_dump();
#else
    if (__gcov_dump) {
        __gcov_dump();
    }
#endif
    _exit(code);
}

#ifdef TH_COVERAGE
/* make coverage links the tests with -Wl,--wrap=_exit: every _exit() of
 * test code (children of tests that do not end through th_child_exit())
 * lands here first. A second __gcov_dump() in one process writes nothing. */
extern _Noreturn void __real__exit(int code);
_Noreturn void __wrap__exit(int code);
_Noreturn void __wrap__exit(int code)
{
    __gcov_dump();
    __real__exit(code);
}
#endif

pid_t th_fork(int (*fn)(void *), void *arg)
{
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        th_child_exit(fn(arg));
    }
    return pid;
}

int th_wait(pid_t pid)
{
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(st)) {
        return WEXITSTATUS(st);
    }
    return 128 + WTERMSIG(st);
}

int th_wait_bounded(pid_t pid, int64_t timeout_ms)
{
    int64_t deadline = th_now_ms() + th_ms(timeout_ms);
    for (;;) {
        int st = 0;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        if (r < 0 && errno != EINTR) {
            return -1;
        }
        if (th_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            return -1;
        }
        th_sleep_ms(10);
    }
}

/* A stalled server (DEBUG SLEEP, CLIENT PAUSE) still accepts connections
 * (the kernel does), but does not answer; each probe leaves a PING that
 * runs once it wakes up, which is harmless. A probe waits 200 ms for its
 * answer, far more than a busy machine delays a live server's PONG. */
void th__wait_stalled(const char *file, int line, int port, int64_t timeout_ms)
{
    bool ok = TH_POLL(!server_answers(port ? port : th_port(), 200), timeout_ms);
    cr_assert(ok, "%s:%d: the server on port %d still answers after %lld ms", file, line, port,
              (long long)th_ms(timeout_ms));
}

void th__wait_awake(const char *file, int line, int port, int64_t timeout_ms)
{
    bool ok = TH_POLL(server_answers(port ? port : th_port(), 100), timeout_ms);
    cr_assert(ok, "%s:%d: the server on port %d does not answer after %lld ms", file, line, port,
              (long long)th_ms(timeout_ms));
}

long long th_numsub(int port, const char *channel)
{
    redisContext *r = th_redis(port);
    redisReply *rep = th_cmd(r, "PUBSUB NUMSUB %s", channel);
    long long n = 0;
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2) {
        n = rep->element[1]->integer;
    }
    freeReplyObject(rep);
    redisFree(r);
    return n;
}

void th__wait_numsub(const char *file, int line, int port, const char *channel, long long n,
                     int64_t timeout_ms)
{
    long long got = 0;
    bool ok = TH_POLL((got = th_numsub(port, channel)) >= n, timeout_ms);
    cr_assert(ok, "%s:%d: %lld subscriber(s) on %s after %lld ms, want %lld", file, line, got,
              channel, (long long)th_ms(timeout_ms), n);
}

void th__wait_waiters(const char *file, int line, int port, const char *name, long long n,
                      int64_t timeout_ms)
{
    char *ch = th_channel(name);
    th__wait_numsub(file, line, port, ch, n, timeout_ms);
    free(ch);
}

void th__wait_exists(const char *file, int line, redisContext *r, const char *key, long long want,
                     int64_t timeout_ms)
{
    long long got = -1;
    bool ok = TH_POLL((got = th_exists(r, key)) == want, timeout_ms);
    cr_assert(ok, "%s:%d: EXISTS %.200s is %lld after %lld ms, want %lld", file, line, key, got,
              (long long)th_ms(timeout_ms), want);
}

long long th__wait_renewal(const char *file, int line, redisContext *r, const char *key,
                           int64_t timeout_ms)
{
    long long last = th_pttl(r, key), now = last;
    bool ok = TH_POLL((now = th_pttl(r, key)) > last || ((last = now), false), timeout_ms);
    cr_assert(ok, "%s:%d: PTTL of %.200s never rose within %lld ms (now %lld)", file, line, key,
              (long long)th_ms(timeout_ms), now);
    return now;
}

static void *stall_main(void *arg)
{
    th_stall *s = arg;
    /* Its own connection, with a read timeout longer than the sleep. */
    struct timeval tv = {(time_t)(s->ms / 1000 + 30), 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", s->port, tv);
    if (r && !r->err) {
        redisSetTimeout(r, tv);
        redisReply *rep = redisCommand(r, "DEBUG SLEEP %.3f", (double)s->ms / 1000.0);
        if (rep) {
            freeReplyObject(rep);
        }
    }
    if (r) {
        redisFree(r);
    }
    return NULL;
}

void th__stall_start(const char *file, int line, th_stall *s, int port, int64_t ms)
{
    s->port = port ? port : th_port();
    s->ms = ms;
    cr_assert_eq(pthread_create(&s->th, NULL, stall_main, s), 0);
    th__wait_stalled(file, line, s->port, 1000);
}

void th_stall_end(th_stall *s)
{
    pthread_join(s->th, NULL);
}

pid_t th_gettid(void)
{
    return (pid_t)syscall(SYS_gettid);
}

/* Whether thread tid is in a futex wait right now: the first field of
 * /proc/self/task/<tid>/syscall is the number of the call it sleeps in
 * ("running" when on a CPU). */
static bool in_futex_wait(pid_t tid)
{
    char path[64], buf[64] = "";
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f) {
        return false;
    }
    bool got = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    return got && atol(buf) == SYS_futex && buf[0] != 'r';
}

void th__wait_blocked(const char *file, int line, pid_t tid, int64_t timeout_ms)
{
    int in_row = 0;
    bool ok = TH_POLL((in_row = in_futex_wait(tid) ? in_row + 1 : 0) >= 3, timeout_ms);
    cr_assert(ok, "%s:%d: thread %d is not asleep on a futex after %lld ms", file, line, (int)tid,
              (long long)th_ms(timeout_ms));
}

void th_count_lost(const char *name, uint64_t tid, void *arg)
{
    (void)name;
    (void)tid;
    th_lost_count *k = arg;
    pthread_mutex_lock(&k->mu);
    k->calls++;
    pthread_mutex_unlock(&k->mu);
}

int th_lost_calls(th_lost_count *k)
{
    pthread_mutex_lock(&k->mu);
    int n = k->calls;
    pthread_mutex_unlock(&k->mu);
    return n;
}

void *th_bg_main(void *arg)
{
    th_bg *b = arg;
    __atomic_store_n(&b->tid, th_gettid(), __ATOMIC_RELEASE);
    rlock *l;
    th_ok(rlock_new(b->c, b->name, &l));
    if (b->lock) {
        b->st = rlock_lock_ex(l, b->wait_ms, RLOCK_WATCHDOG, b->cancel, NULL);
        b->returned_at = th_now_ms();
        if (b->st == RLOCK_OK) {
            th_ok(rlock_unlock(l));
        }
    } else {
        b->st = rlock_wait_unlocked(l, b->wait_ms, b->cancel);
        b->returned_at = th_now_ms();
    }
    rlock_free(l);
    return NULL;
}

pid_t th_bg_tid(th_bg *b)
{
    pid_t tid = 0;
    cr_assert(TH_POLL((tid = __atomic_load_n(&b->tid, __ATOMIC_ACQUIRE)) != 0, 3000));
    return tid;
}

char *th_build_path(const char *rel)
{
    const char *b = getenv("RLOCK_TEST_BUILD");
    char *p = NULL;
    cr_assert(asprintf(&p, "%s/%s", b ? b : "build", rel) > 0);
    return p;
}
