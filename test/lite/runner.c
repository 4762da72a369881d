/* SPDX-License-Identifier: BSD-3-Clause */
/* The runner behind test/lite/criterion/criterion.h: registers the tests the
 * constructors announce, runs each in a fork()ed child, at most --jobs at a
 * time, kills one that outlives its timeout, and ends with Criterion's
 * "Synthesis" line. Options: --jobs N, --timeout SECONDS, --filter GLOB
 * (matched against "suite/name"), --list (Criterion's tree of suites and
 * tests), --tap[=FILE] (Criterion's TAP report; none or "-": stderr);
 * others are ignored. scripts/run-tests.sh reads the TAP report of either
 * runner, and scripts/check-test-lists.sh compares their --list. */
#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "criterion/criterion.h"

enum { MAX_SUITES = 64, MAX_TESTS = 512, EXIT_SKIP = 77 };

typedef struct {
    const char *name;
    const struct crl_opts *o;
} suite;

typedef struct {
    const char *suite, *name;
    void (*fn)(void);
    const struct crl_opts *o;
    pid_t pid;
    double started, timeout;
} test;

static suite suites[MAX_SUITES];
static int nsuites;
static test tests[MAX_TESTS];
static int ntests;

/* State of the child running one test. */
static const test *current;
static pid_t test_pid;
static pthread_t test_thread;
static sigjmp_buf leave;
static bool in_fini;
static bool failed;

void crl_register_suite(const char *name, const struct crl_opts *o)
{
    if (nsuites == MAX_SUITES) {
        fprintf(stderr, "criterion-lite: more than %d suites\n", MAX_SUITES);
        abort();
    }
    suites[nsuites++] = (suite){name, o};
}

void crl_register_test(const char *s, const char *name, void (*fn)(void), const struct crl_opts *o)
{
    if (ntests == MAX_TESTS) {
        fprintf(stderr, "criterion-lite: more than %d tests\n", MAX_TESTS);
        abort();
    }
    tests[ntests++] = (test){s, name, fn, o, 0, 0, 0};
}

static const struct crl_opts *suite_opts(const char *name)
{
    for (int i = 0; i < nsuites; i++) {
        if (strcmp(suites[i].name, name) == 0) {
            return suites[i].o;
        }
    }
    return NULL;
}

static void vreport(const char *tag, const char *file, int line, const char *what, const char *fmt,
                    va_list ap)
{
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    const char *m = msg[0] == ' ' ? msg + 1 : msg;
    flockfile(stderr);
    fprintf(stderr, "[%s] %s::%s: ", tag, current ? current->suite : "?",
            current ? current->name : "?");
    if (file) {
        fprintf(stderr, "%s:%d: ", file, line);
    }
    fprintf(stderr, "%s%s%s\n", what, m[0] ? ": " : "", m);
    funlockfile(stderr);
}

/* Leaves the test: back to run_child() when the test's own thread, in the
 * test's own process, is outside fini; otherwise (a thread or a process the
 * test started, which must not run fini) by exiting with status. */
static _Noreturn void unwind(int how, int status)
{
    if (getpid() != test_pid || !pthread_equal(pthread_self(), test_thread) || in_fini) {
        fflush(NULL);
        _exit(status);
    }
    siglongjmp(leave, how);
}

void crl_fail(bool fatal, const char *file, int line, const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport("FAIL", file, line, what, fmt, ap);
    va_end(ap);
    failed = true;
    if (!fatal) {
        return;
    }
    unwind(1, 1);
}

void crl_skip(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport("SKIP", NULL, 0, "skipped", fmt, ap);
    va_end(ap);
    unwind(2, EXIT_SKIP);
}

void crl_log(const char *tag, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[%s] %s\n", tag, msg);
}

static _Noreturn void run_child(const test *t)
{
    current = t;
    test_pid = getpid();
    test_thread = pthread_self();
    setpgid(0, 0); /* a timeout kills the test and whatever it started */
    const struct crl_opts *so = suite_opts(t->suite);
    void (*volatile init)(void) = t->o->init ? t->o->init : so ? so->init : NULL;
    void (*volatile fini)(void) = t->o->fini ? t->o->fini : so ? so->fini : NULL;
    int how = sigsetjmp(leave, 0);
    if (how == 0) {
        if (init) {
            init();
        }
        t->fn();
    }
    in_fini = true;
    if (fini) {
        fini();
    }
    fflush(NULL);
    exit(how == 2 ? EXIT_SKIP : failed ? 1 : 0);
}

static int by_suite_and_name(const void *a, const void *b)
{
    const test *x = a, *y = b;
    int c = strcmp(x->suite, y->suite);
    return c ? c : strcmp(x->name, y->name);
}

/* Criterion's --list: "suite: N tests", then one "├── name" per test
 * ("└── " for the last, " (skipped)" after a disabled one), in name order. */
static void list_tests(void)
{
    test *sorted = malloc((size_t)(ntests ? ntests : 1) * sizeof *sorted);
    if (!sorted) {
        abort();
    }
    memcpy(sorted, tests, (size_t)ntests * sizeof *sorted);
    qsort(sorted, (size_t)ntests, sizeof *sorted, by_suite_and_name);
    for (int i = 0; i < ntests; i++) {
        if (i == 0 || strcmp(sorted[i].suite, sorted[i - 1].suite) != 0) {
            int n = 0;
            while (i + n < ntests && strcmp(sorted[i + n].suite, sorted[i].suite) == 0) {
                n++;
            }
            printf("%s: %d test%s\n", sorted[i].suite, n, n == 1 ? "" : "s");
        }
        bool last = i + 1 == ntests || strcmp(sorted[i + 1].suite, sorted[i].suite) != 0;
        printf("%s %s%s\n", last ? "\u2514\u2500\u2500" : "\u251c\u2500\u2500", sorted[i].name,
               sorted[i].o->disabled ? " (skipped)" : "");
    }
    free(sorted);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    int jobs = 1;
    double timeout = 0;
    const char *filter = NULL;
    const char *tap_path = NULL;
    bool list = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--jobs") == 0 && i + 1 < argc) {
            jobs = atoi(argv[++i]);
        } else if (strncmp(argv[i], "--jobs=", 7) == 0) {
            jobs = atoi(argv[i] + 7);
        } else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
            timeout = atof(argv[++i]);
        } else if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc) {
            filter = argv[++i];
        } else if (strncmp(argv[i], "--filter=", 9) == 0) {
            filter = argv[i] + 9;
        } else if (strcmp(argv[i], "--list") == 0 || strcmp(argv[i], "-l") == 0) {
            list = true;
        } else if (strcmp(argv[i], "--tap") == 0) {
            tap_path = "-";
        } else if (strncmp(argv[i], "--tap=", 6) == 0) {
            tap_path = argv[i] + 6;
        }
    }
    if (list) {
        list_tests();
        return 0;
    }
    FILE *tap = NULL;
    if (tap_path) {
        tap = strcmp(tap_path, "-") == 0 ? stderr : fopen(tap_path, "w");
        if (!tap) {
            perror(tap_path);
            return 2;
        }
        fprintf(tap, "TAP version 13\n1..%d\n# criterion-lite\n#\n", ntests);
    }
    if (jobs < 1) {
        jobs = 1;
    }
    int tested = 0, passing = 0, failing = 0, crashing = 0, skipped = 0;
    int next = 0, running = 0;
    fflush(NULL);
    while (next < ntests || running > 0) {
        while (running < jobs && next < ntests) {
            test *t = &tests[next++];
            char full[512];
            snprintf(full, sizeof full, "%s/%s", t->suite, t->name);
            if (t->o->disabled || (filter && fnmatch(filter, full, 0) != 0)) {
                if (tap) {
                    fprintf(tap, "ok - %s::%s  # SKIP test was skipped\n", t->suite, t->name);
                }
                continue;
            }
            const struct crl_opts *so = suite_opts(t->suite);
            t->timeout = t->o->timeout > 0       ? t->o->timeout
                         : so && so->timeout > 0 ? so->timeout
                                                 : timeout;
            t->started = now();
            fflush(NULL); /* a child must not write the runner's buffers again */
            pid_t pid = fork();
            if (pid < 0) {
                perror("criterion-lite: fork");
                return 2;
            }
            if (pid == 0) {
                run_child(t);
            }
            setpgid(pid, pid);
            t->pid = pid;
            running++;
            tested++;
        }
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid < 0 && errno == ECHILD) {
            break;
        }
        test *done = NULL;
        for (int i = 0; i < next && pid > 0; i++) {
            if (tests[i].pid == pid) {
                done = &tests[i];
            }
        }
        if (!done) {
            double t = now();
            for (int i = 0; i < next; i++) {
                test *x = &tests[i];
                if (x->pid > 0 && x->timeout > 0 && t - x->started > x->timeout) {
                    fprintf(stderr, "[FAIL] %s::%s: Timed out. (%.2fs)\n", x->suite, x->name,
                            t - x->started);
                    if (tap) {
                        fprintf(tap, "not ok - %s::%s timed out (%.2fs)\n", x->suite, x->name,
                                t - x->started);
                    }
                    kill(-x->pid, SIGKILL);
                    kill(x->pid, SIGKILL);
                    x->timeout = 0; /* reported once; reaped below as a failure */
                    x->started = -1;
                }
            }
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        /* Whatever the test left in its process group goes with it. */
        kill(-pid, SIGKILL);
        done->pid = 0;
        running--;
        double took = now() - done->started;
        const char *s = done->suite, *n = done->name;
        if (done->started < 0) {
            failing++; /* timed out: reported when killed */
        } else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
            passing++;
            if (tap) {
                fprintf(tap, "ok - %s::%s  (%.2fs)\n", s, n, took);
            }
        } else if (WIFEXITED(st) && WEXITSTATUS(st) == EXIT_SKIP) {
            skipped++;
            if (tap) {
                fprintf(tap, "ok - %s::%s  # SKIP test was skipped\n", s, n);
            }
        } else if (WIFEXITED(st)) {
            failing++;
            fprintf(stderr, "[FAIL] %s::%s: exit status %d\n", s, n, WEXITSTATUS(st));
            if (tap) {
                fprintf(tap, "not ok - %s::%s  (%.2fs)\n", s, n, took);
            }
        } else {
            crashing++;
            fprintf(stderr, "[----] %s::%s: CRASH! (signal %d)\n", s, n, WTERMSIG(st));
            if (tap) {
                fprintf(tap, "not ok - %s::%s unexpected signal %d\n", s, n, WTERMSIG(st));
            }
        }
        if (tap) {
            fflush(tap);
        }
    }
    if (tap && tap != stderr) {
        fclose(tap);
    }
    printf("[====] Synthesis: Tested: %d | Skipped: %d | Passing: %d | Failing: %d | "
           "Crashing: %d \n",
           tested, skipped, passing, failing, crashing);
    return failing + crashing > 0;
}
