/* Helpers for the tests that drive the rlock command as a user does: the
 * built binary in child processes, its output in files of a temporary
 * directory, bounded waits, what /proc says of a process. Every CLI test
 * file (test_cli*.c, test_revcli*.c) takes them from here. Header-only and
 * static inline so that a test file includes what it uses without a
 * Makefile rule of its own. Include it in one test file at a time: it
 * defines that file's g_bin and g_dir. */
#ifndef RLOCK_TEST_CLI_HELPERS_H
#define RLOCK_TEST_CLI_HELPERS_H

#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char *g_bin;
static char g_dir[64];

/* Suite init and fini: the binary, the shared server, a temp directory. */
static inline void cli_setup(void)
{
    g_bin = th_build_path("rlock");
    /* A signal ignored by whoever started the tests (nohup ignores HUP; a
     * CI runner may ignore others) stays ignored in rlock and in the
     * commands it runs, and a shell cannot trap it: the tests that send
     * signals would fail for want of them. Each is put back to its
     * default, as a user's terminal has it (but SIGPIPE: a test runner
     * may ignore it for its own writes). */
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction sa;
        if (sig != SIGKILL && sig != SIGSTOP && sig != SIGPIPE &&
            sigaction(sig, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN) {
            signal(sig, SIG_DFL);
        }
    }
    setenv("RLOCK_URL", th_url(), 1);
    unsetenv("REDIS_URL");
    unsetenv("RLOCK_WATCHDOG_MS");
    snprintf(g_dir, sizeof g_dir, "/tmp/rlock-cli.XXXXXX");
    cr_assert(mkdtemp(g_dir) != NULL);
}

/* Runs twice for a skipped test under test/lite (from a skip and as the
 * fini), hence the emptied name and pointer. */
static inline void cli_teardown(void)
{
    if (g_dir[0]) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
        if (system(cmd) != 0) {
            /* best effort */
        }
        g_dir[0] = '\0';
    }
    free(g_bin);
    g_bin = NULL;
}

/* Criterion's cr_skip_test() exits the test's process without running the
 * suite's fini, which would leave the test's directory behind in /tmp. In
 * a file that uses these helpers it removes the directory first (the same
 * calls as Criterion's and test/lite's cr_skip_test(), after the teardown). */
#undef cr_skip_test
#ifdef RLOCK_CRITERION_LITE_H
#define cr_skip_test(...)                                                                          \
    do {                                                                                           \
        cli_teardown();                                                                            \
        crl_skip(" " __VA_ARGS__);                                                                 \
    } while (0)
#else
#define cr_skip_test(...)                                                                          \
    do {                                                                                           \
        cli_teardown();                                                                            \
        criterion_skip_test("" __VA_ARGS__);                                                       \
    } while (0)
#endif

/* A path inside this test's directory; the caller frees it. */
static inline char *tpath(const char *file)
{
    char *p = NULL;
    cr_assert(asprintf(&p, "%s/%s", g_dir, file) > 0);
    return p;
}

/* A descriptor for spawn_fds() and start_fds(): closed in the child (as
 * `<&-`, `>&-`, `2>&-` do), where -1 leaves the test's own. */
#define CLI_CLOSED (-2)

/* Forks and execs the program at path argv[0] with argv (NULL-terminated).
 * Descriptors in_fd, out_fd and err_fd (-1: the test's own; CLI_CLOSED:
 * none) become its 0, 1 and 2; the child closes every other descriptor
 * the test opened (pipe ends included), so that a pipe's EOF depends on
 * the test alone. */
static inline pid_t spawn_fds(int in_fd, int out_fd, int err_fd, const char *const *argv)
{
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int fds[3] = {in_fd, out_fd, err_fd};
        for (int i = 0; i < 3; i++) {
            if (fds[i] >= 0 && fds[i] != i) {
                dup2(fds[i], i);
            }
        }
        for (int fd = 3; fd < 1024; fd++) {
            close(fd);
        }
        for (int i = 0; i < 3; i++) {
            if (fds[i] == CLI_CLOSED) {
                close(i);
            }
        }
        execv(argv[0], (char **)argv);
        _exit(99);
    }
    return pid;
}

/* A program with the test's descriptors, e.g. SPAWN("/bin/sleep", "60"). */
#define SPAWN(...) spawn_fds(-1, -1, -1, (const char *const[]){__VA_ARGS__, NULL})

/* Starts rlock with args (NULL-terminated) in a child, descriptors as
 * spawn_fds(). */
static inline pid_t start_fds(int in_fd, int out_fd, int err_fd, const char *const *args)
{
    const char *argv[40] = {g_bin};
    int n = 1;
    while (args[n - 1] != NULL) {
        cr_assert(n < 39);
        argv[n] = args[n - 1];
        n++;
    }
    argv[n] = NULL;
    return spawn_fds(in_fd, out_fd, err_fd, argv);
}

/* The same with paths: stdin from in, stdout to out, stderr to err (each
 * may be NULL: the test's own, so that failures explain themselves). */
static inline pid_t start_io(const char *in, const char *out, const char *err,
                             const char *const *args)
{
    int fds[3] = {-1, -1, -1};
    const char *paths[3] = {in, out, err};
    for (int i = 0; i < 3; i++) {
        if (paths[i] != NULL) {
            fds[i] = i == 0 ? open(paths[i], O_RDONLY)
                            : open(paths[i], O_WRONLY | O_CREAT | O_TRUNC, 0644);
            cr_assert(i == 0 || fds[i] >= 0, "%s: %s", paths[i], strerror(errno));
        }
    }
    pid_t p = start_fds(fds[0], fds[1], fds[2], args);
    for (int i = 0; i < 3; i++) {
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
    return p;
}

#define START(out, ...) start_io(NULL, (out), NULL, (const char *const[]){__VA_ARGS__, NULL})

/* Waits for pid for at most th_ms(timeout_ms) (a generous bound, never a
 * speed assertion); returns its exit code or 128+signal. */
static inline int wait_exit(pid_t pid, int64_t timeout_ms)
{
    timeout_ms = th_ms(timeout_ms);
    int64_t end = th_now_ms() + timeout_ms;
    int st;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (th_now_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            cr_assert_fail("pid %d did not exit within %lld ms", (int)pid, (long long)timeout_ms);
        }
        th_sleep_ms(10);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static inline bool still_running(pid_t pid)
{
    return waitpid(pid, NULL, WNOHANG) == 0;
}

static inline char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return strdup("");
    }
    char *buf = calloc(1, 65536);
    size_t n = fread(buf, 1, 65535, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Runs rlock to completion; *out (may be NULL) receives its stdout. */
static inline int run(char **out, const char *const *args)
{
    char *path = tpath("stdout");
    int code = wait_exit(start_io(NULL, path, NULL, args), 60000);
    if (out != NULL) {
        *out = slurp(path);
    }
    unlink(path);
    free(path);
    return code;
}

#define RUN(out, ...) run((out), (const char *const[]){__VA_ARGS__, NULL})

/* *dst = s when dst is not NULL (the caller wants s), else frees s. */
static inline void give(char **dst, char *s)
{
    if (dst != NULL) {
        *dst = s;
    } else {
        free(s);
    }
}

/* Runs rlock to completion with stdin from in (a path, or NULL); *out and
 * *err (may be NULL) receive its stdout and stderr; the stderr is also
 * copied to the test's, so that failures explain themselves. */
static inline int run_io(const char *in, char **out, char **err, const char *const *args)
{
    char *opath = tpath("stdout"), *epath = tpath("stderr");
    int code = wait_exit(start_io(in, opath, epath, args), 60000);
    char *o = slurp(opath), *e = slurp(epath);
    fputs(e, stderr);
    give(out, o);
    give(err, e);
    unlink(opath);
    unlink(epath);
    free(opath);
    free(epath);
    return code;
}

#define RUN_IO(in, out, err, ...) \
    run_io((in), (out), (err), (const char *const[]){__VA_ARGS__, NULL})

/* Writes text to a new file of this test's directory with the given
 * mode; returns its path, which the caller frees. */
static inline char *tfile(const char *file, const char *text, mode_t mode)
{
    char *p = tpath(file);
    FILE *f = fopen(p, "w");
    cr_assert(f != NULL);
    fputs(text, f);
    fclose(f);
    chmod(p, mode);
    return p;
}

/* A hold written by hand the way a Java Redisson client writes it. */
static inline void java_hold(redisContext *r, const char *name, long long ttl_ms)
{
    freeReplyObject(th_cmd(r, "HSET %s %s 1", name, "1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed:57"));
    freeReplyObject(th_cmd(r, "PEXPIRE %s %lld", name, ttl_ms));
}

static inline void wait_for_file(const char *path, int64_t timeout_ms)
{
    cr_assert(TH_POLL(access(path, F_OK) == 0, timeout_ms), "%s did not appear", path);
}

/* Reads the first line of path (rlock hold's holder field) once it is
 * there. */
static inline char *first_line(const char *path)
{
    int64_t end = th_now_ms() + th_ms(10000);
    for (;;) {
        char *text = slurp(path);
        char *nl = strchr(text, '\n');
        if (nl != NULL) {
            *nl = '\0';
            return text;
        }
        free(text);
        cr_assert(th_now_ms() < end, "%s: no line", path);
        th_sleep_ms(10);
    }
}

/* The state letter of /proc/PID/stat (R, S, D, T, Z, ...), or 0 when pid
 * does not exist. */
static inline char proc_state(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')'); /* the name may hold spaces */
    return rp != NULL && rp[1] == ' ' ? rp[2] : 0;
}

/* Whether process pid still runs: it exists and is not a zombie (a
 * reparented process is reaped by whoever adopted it, when it gets to it). */
static inline bool pid_alive(pid_t pid)
{
    char s = proc_state(pid);
    return s != 0 && s != 'Z' && s != 'X';
}

/* Whether child pid has exited, without reaping it (still_running()
 * reaps, and wait_exit() then finds no status). */
static inline bool has_exited(pid_t pid)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid;
}

/* Whether pid runs or may run: it exists, is not a zombie, is not stopped. */
static inline bool pid_running(pid_t pid)
{
    char s = proc_state(pid);
    return s != 0 && s != 'Z' && s != 'X' && s != 'T' && s != 't';
}

static inline long stat_field(pid_t pid, int n)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    size_t k = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[k] = '\0';
    char *p = strrchr(buf, ')');
    if (p == NULL) {
        return -1;
    }
    p += 2;
    for (int i = 1; i < n; i++) {
        p = strchr(p, ' ');
        if (p == NULL) {
            return -1;
        }
        p++;
    }
    return strtol(p, NULL, 10);
}

/* The pid in file path, or 0 (no file yet). */
static inline pid_t pid_in(const char *path)
{
    char *text = slurp(path);
    pid_t pid = (pid_t)atoi(text);
    free(text);
    return pid;
}

/* The pid written to path (atomically, by rename), once it is there. */
static inline pid_t read_pid(const char *path)
{
    pid_t pid = 0;
    bool ok = TH_POLL((pid = pid_in(path)) > 0, 10000);
    cr_assert(ok, "%s: no pid", path);
    return pid;
}

/* Starts sh -c line with stdout and stderr into files of the test's
 * directory (tag names them). */
static inline pid_t start_sh(const char *tag, const char *line)
{
    char o[128], e[128];
    snprintf(o, sizeof o, "%s/%s.out", g_dir, tag);
    snprintf(e, sizeof e, "%s/%s.err", g_dir, tag);
    int fo = open(o, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int fe = open(e, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = spawn_fds(-1, fo, fe, (const char *const[]){"/bin/sh", "-c", line, NULL});
    close(fo);
    close(fe);
    return pid;
}

/* Runs a shell line to completion; *out and *err (may be NULL) get what
 * it wrote; stderr is echoed so that failures explain themselves. */
static inline int sh(char **out, char **err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline int sh(char **out, char **err, const char *fmt, ...)
{
    char *line = NULL;
    va_list ap;
    va_start(ap, fmt);
    cr_assert(vasprintf(&line, fmt, ap) > 0);
    va_end(ap);
    int code = wait_exit(start_sh("sh", line), 60000);
    char o[128], e[128];
    snprintf(o, sizeof o, "%s/sh.out", g_dir);
    snprintf(e, sizeof e, "%s/sh.err", g_dir);
    char *so = slurp(o), *se = slurp(e);
    fprintf(stderr, "[%s] -> %d: %s", line, code, se);
    give(out, so);
    give(err, se);
    free(line);
    return code;
}

#endif
