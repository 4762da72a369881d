/* Helpers for the tests that drive the rlock command as a user does: the
 * built binary in child processes, its output in files of a temporary
 * directory, bounded waits. The same helpers as test/test_cli.c's own
 * (which keeps its copies until it moves to this header), header-only and
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
    setenv("RLOCK_URL", th_url(), 1);
    unsetenv("REDIS_URL");
    unsetenv("RLOCK_WATCHDOG_MS");
    snprintf(g_dir, sizeof g_dir, "/tmp/rlock-cli.XXXXXX");
    cr_assert(mkdtemp(g_dir) != NULL);
}

static inline void cli_teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0) {
        /* best effort */
    }
    free(g_bin);
}

/* A path inside this test's directory; the caller frees it. */
static inline char *tpath(const char *file)
{
    char *p = NULL;
    cr_assert(asprintf(&p, "%s/%s", g_dir, file) > 0);
    return p;
}

/* Starts rlock with args (NULL-terminated) in a child. Descriptors in_fd,
 * out_fd and err_fd (-1: the test's own) become its 0, 1 and 2; the child
 * closes every other descriptor the test opened (pipe ends included), so
 * that a pipe's EOF depends on the test alone. */
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
        execv(g_bin, (char **)argv);
        _exit(99);
    }
    return pid;
}

/* The same with paths: stdin from in, stdout to out (both may be NULL). */
static inline pid_t start_io(const char *in, const char *out, const char *const *args)
{
    int in_fd = in ? open(in, O_RDONLY) : -1;
    int out_fd = out ? open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644) : -1;
    pid_t p = start_fds(in_fd, out_fd, -1, args);
    if (in_fd >= 0) {
        close(in_fd);
    }
    if (out_fd >= 0) {
        close(out_fd);
    }
    return p;
}

#define START(out, ...) start_io(NULL, (out), (const char *const[]){__VA_ARGS__, NULL})

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
            cr_assert_fail("rlock did not exit within %lld ms", (long long)timeout_ms);
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
    int code = wait_exit(start_io(NULL, path, args), 60000);
    if (out != NULL) {
        *out = slurp(path);
    }
    unlink(path);
    free(path);
    return code;
}

#define RUN(out, ...) run((out), (const char *const[]){__VA_ARGS__, NULL})

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

/* Whether process pid still runs: it exists and is not a zombie (a
 * reparented process is reaped by whoever adopted it, when it gets to it). */
static inline bool pid_alive(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return false;
    }
    char buf[512];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')'); /* the name may hold spaces */
    return rp != NULL && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

#endif
