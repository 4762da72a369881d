/* rlock run: take a lock, run a command as a child, release the lock when
 * the child exits, and exit with the child's status.
 *
 * Everything happens on the main thread, in one loop around a self-pipe:
 * signal handlers and the library's lock-lost callback (which runs on the
 * watchdog thread) only write one byte to the pipe, and the main thread
 * reads it and does the work. That keeps the handlers async-signal-safe, and
 * it keeps lock and unlock on the same thread, which rlock requires because
 * ownership is per thread (rlock_thread_id()).
 *
 * Lock loss is detected two ways. With the watchdog (the default), the
 * library calls on_lock_lost when a renewal finds the hold gone. With an
 * explicit lease (-l), nothing renews the lock and nothing tells us it
 * expired, so the loop wakes at the lease deadline, measured from just
 * before the acquiring call was sent (so never later than Redis expires the
 * key), and treats the lease as over. Either way the child gets -s SIGNAL
 * (SIGTERM by default), optionally SIGKILL -k MS later, and rlock exits 79. */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Pipe bytes: a signal number, with TTY_FLAG when the kernel sent it (a
 * terminal's ^C or hang-up, which the child in our process group receives
 * anyway), or LOST_BYTE from the lock-lost callback. */
#define TTY_FLAG 0x80
#define LOST_BYTE 0x7f

static int g_pipe[2] = {-1, -1};
static atomic_bool g_lost;
static uint64_t g_tid;

/* The signals forwarded to the child; SIGCHLD just wakes the loop. */
static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

static void on_signal(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    if (si != NULL && si->si_code == SI_KERNEL) {
        b |= TTY_FLAG;
    }
    /* A full pipe already holds a wake-up: dropping the byte is harmless. */
    if (write(g_pipe[1], &b, 1) < 0) {
        /* nothing to do */
    }
    errno = saved;
}

static void on_lost(const char *name, uint64_t tid, void *arg)
{
    (void)name;
    (void)arg;
    if (tid == g_tid) {
        atomic_store(&g_lost, true);
        unsigned char b = LOST_BYTE;
        if (write(g_pipe[1], &b, 1) < 0) {
            /* g_lost is set; the next wake-up sees it */
        }
    }
}

static int parse_signal(const char *s)
{
    static const struct {
        const char *name;
        int sig;
    } names[] = {{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},
                 {"KILL", SIGKILL}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
                 {"ALRM", SIGALRM}, {"TERM", SIGTERM}, {"ABRT", SIGABRT}};
    if (strspn(s, "0123456789") == strlen(s) && *s != '\0' && strlen(s) < 4) {
        int n = atoi(s);
        return n > 0 && n < NSIG ? n : -1;
    }
    if (strncasecmp(s, "SIG", 3) == 0) {
        s += 3;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcasecmp(s, names[i].name) == 0) {
            return names[i].sig;
        }
    }
    return -1;
}

/* Descriptors rlock inherited stay inherited by the child (a caller may
 * hand it one on purpose, as with flock's "9>file"); descriptors the
 * library and hiredis opened (Redis sockets, the self-pipe) must not leak
 * into it, where they would keep a subscription alive after rlock exits.
 * hiredis 0.14 does not open its sockets with SOCK_CLOEXEC, so rlock marks
 * every descriptor that appeared since start-up. */
#define FD_BITS 4096
static unsigned char g_inherited[FD_BITS / 8];

static void each_fd(void (*fn)(int))
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL) {
        return;
    }
    int self = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.' && atoi(e->d_name) != self) {
            fn(atoi(e->d_name));
        }
    }
    closedir(d);
}

static void note_inherited(int fd)
{
    if (fd >= 0 && fd < FD_BITS) {
        g_inherited[fd / 8] |= (unsigned char)(1u << (fd % 8));
    }
}

static void cloexec_if_new(int fd)
{
    bool inherited = fd >= FD_BITS || (g_inherited[fd / 8] & (1u << (fd % 8)));
    if (fd > 2 && !inherited) {
        int fl = fcntl(fd, F_GETFD);
        if (fl >= 0) {
            fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
        }
    }
}

/* The file execvp() would run for name: name itself if it has a '/',
 * else the first executable regular file of that name on PATH. Returns
 * name, or buf holding the path, or NULL. */
static const char *find_in_path(const char *name, char *buf, size_t size)
{
    if (strchr(name, '/')) {
        return name;
    }
    const char *p = getenv("PATH");
    for (p = p ? p : "/bin:/usr/bin";; p++) {
        size_t n = strcspn(p, ":"); /* an empty entry is the current directory */
        int len = snprintf(buf, size, "%.*s%s%s", (int)n, p, n ? "/" : "", name);
        struct stat st;
        if (len > 0 && (size_t)len < size && stat(buf, &st) == 0 && S_ISREG(st.st_mode) &&
            access(buf, X_OK) == 0) {
            return buf;
        }
        p += n;
        if (!*p) {
            break;
        }
    }
    return NULL;
}

/* Starts the child with default dispositions and an empty mask: ignored
 * signals (SIGPIPE here) and the mask would otherwise be inherited. Returns
 * 0 or an errno value (glibc's posix_spawnp reports exec failures). An
 * executable file without a "#!" line (ENOEXEC) is run by /bin/sh, as
 * execvp() and so flock(1) do; glibc's posix_spawnp() no longer does. */
static int spawn(char **cmd, pid_t *pid)
{
    each_fd(cloexec_if_new);
    posix_spawnattr_t at;
    sigset_t def, none;
    sigemptyset(&none);
    sigemptyset(&def);
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++) {
        sigaddset(&def, forwarded[i]);
    }
    sigaddset(&def, SIGCHLD);
    sigaddset(&def, SIGPIPE);
    int err = posix_spawnattr_init(&at);
    if (err != 0) {
        return err;
    }
    posix_spawnattr_setsigdefault(&at, &def);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    err = posix_spawnp(pid, cmd[0], NULL, &at, cmd, environ);
    if (err == ENOEXEC) {
        char buf[PATH_MAX];
        const char *file = find_in_path(cmd[0], buf, sizeof buf);
        size_t n = 0;
        while (cmd[n]) {
            n++;
        }
        char **sh = file ? calloc(n + 2, sizeof *sh) : NULL;
        if (sh) {
            sh[0] = "sh";
            sh[1] = (char *)file;
            memcpy(sh + 2, cmd + 1, n * sizeof *sh); /* cmd[1..n-1] and its NULL */
            err = posix_spawn(pid, "/bin/sh", NULL, &at, sh, environ);
            free(sh);
        }
    }
    posix_spawnattr_destroy(&at);
    return err;
}

typedef struct run_args {
    int64_t wait_ms;
    int64_t lease_ms;      /* RLOCK_WATCHDOG or > 0 */
    int64_t kill_after_ms; /* -1: never */
    int sig;
    const char *name;
    char **cmd;
} run_args;

static int parse_run(cli_opts *o, int argc, char **argv, run_args *a)
{
    static const struct option longs[] = {
        {"wait", required_argument, NULL, 'w'},     {"lease", required_argument, NULL, 'l'},
        {"signal", required_argument, NULL, 's'},   {"kill-after", required_argument, NULL, 'k'},
        {"watchdog", required_argument, NULL, 'W'}, {"url", required_argument, NULL, 'u'},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0}};
    *a = (run_args){RLOCK_WAIT_FOREVER, RLOCK_WATCHDOG, -1, SIGTERM, NULL, NULL};
    optind = 0;
    int ch;
    /* '+': options end at NAME, so COMMAND's own options are never ours
     * even when the "--" is left out. */
    while ((ch = getopt_long(argc, argv, "+w:l:s:k:h", longs, NULL)) != -1) {
        bool ok = true;
        if (ch == 'w') {
            ok = cli_parse_ms(optarg, &a->wait_ms);
        } else if (ch == 'l') {
            ok = cli_parse_ms(optarg, &a->lease_ms) && a->lease_ms > 0;
        } else if (ch == 'k') {
            ok = cli_parse_ms(optarg, &a->kill_after_ms);
        } else if (ch == 'W') {
            ok = cli_parse_ms(optarg, &o->watchdog_ms) && o->watchdog_ms > 0;
        } else if (ch == 's') {
            ok = (a->sig = parse_signal(optarg)) > 0;
        } else if (ch == 'u') {
            o->url = optarg;
        } else if (ch == 'h') {
            fputs("usage: rlock run [-w MS] [-l MS] [-s SIG] [-k MS] NAME -- "
                  "COMMAND [ARG...]\n(see rlock --help)\n",
                  stdout);
            return CLI_EXIT_OK;
        } else {
            ok = false;
            optarg = NULL;
        }
        if (!ok) {
            if (optarg != NULL && ch == 'W') {
                cli_error("run: bad value '%s' for --watchdog", optarg);
            } else if (optarg != NULL) {
                cli_error("run: bad value '%s' for -%c", optarg, ch);
            } else {
                cli_error("run: bad option (see rlock --help)");
            }
            return CLI_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        a->name = argv[optind++];
    }
    if (optind < argc && strcmp(argv[optind], "--") == 0) {
        optind++;
    }
    if (a->name == NULL || a->name[0] == '\0' || optind >= argc) {
        cli_error("run: expected NAME -- COMMAND [ARG...] (see rlock --help)");
        return CLI_EXIT_USAGE;
    }
    a->cmd = argv + optind;
    return -1;
}

/* The probe of the acquire loop: one attempt without waiting, then the
 * holder's TTL to know how long to sleep. */
typedef struct lock_probe {
    rlock *l;
    int64_t lease_ms;
    int64_t acquired_at;
} lock_probe;

static rlock_status probe_lock(void *arg, bool *done, int64_t *ttl)
{
    lock_probe *p = arg;
    int64_t t = cli_now_ms();
    rlock_status s = rlock_try_lock(p->l, 0, p->lease_ms);
    if (s == RLOCK_OK) {
        p->acquired_at = t;
        *done = true;
        return RLOCK_OK;
    }
    if (s != RLOCK_EBUSY) {
        return s;
    }
    return rlock_remain_ttl(p->l, ttl);
}

/* Reads every pending byte; returns the first terminating signal among them
 * (0 if none), so the acquire loop knows whether to give up. */
static int drain_for_signal(void)
{
    unsigned char buf[64];
    int sig = 0;
    ssize_t n;
    while ((n = read(g_pipe[0], buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            int s = buf[i] & ~TTY_FLAG;
            if (sig == 0 && buf[i] != LOST_BYTE && s != SIGCHLD) {
                sig = s;
            }
        }
    }
    return sig;
}

/* Supervises the child until it exits; returns its exit code (128+N for a
 * signal) and sets *lost if the lock was lost meanwhile. */
static int supervise(const run_args *a, pid_t child, int64_t acquired_at, bool *lost)
{
    int64_t lease_end = a->lease_ms > 0 ? acquired_at + a->lease_ms : -1;
    int64_t kill_at = -1;
    for (;;) {
        int st;
        pid_t w = waitpid(child, &st, WNOHANG);
        if (w == child) {
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        int64_t now = cli_now_ms();
        const char *why = NULL;
        if (!*lost && atomic_load(&g_lost)) {
            why = "the watchdog found it gone";
        } else if (!*lost && lease_end >= 0 && now >= lease_end) {
            why = "its lease ran out";
        }
        if (why != NULL) {
            *lost = true;
            cli_error("%s: lock lost (%s): sending signal %d (%s) to %s", a->name, why, a->sig,
                      strsignal(a->sig), a->cmd[0]);
            kill(child, a->sig);
            kill_at = a->kill_after_ms >= 0 ? now + a->kill_after_ms : -1;
        }
        if (kill_at >= 0 && now >= kill_at) {
            kill(child, SIGKILL);
            kill_at = -1;
        }
        int64_t next = *lost ? kill_at : lease_end;
        int timeout = next < 0 ? -1 : (int)(next - now > INT_MAX ? INT_MAX : next - now);
        struct pollfd p = {g_pipe[0], POLLIN, 0};
        if (poll(&p, 1, timeout) <= 0) {
            continue; /* timeout or EINTR: the checks above run again */
        }
        unsigned char buf[64];
        ssize_t n;
        while ((n = read(g_pipe[0], buf, sizeof buf)) > 0) {
            for (ssize_t i = 0; i < n; i++) {
                int sig = buf[i] & ~TTY_FLAG;
                /* A terminal's signals already reached the child, which
                 * shares our process group: sending them again would make
                 * one ^C count twice. */
                if (buf[i] != LOST_BYTE && sig != SIGCHLD && !(buf[i] & TTY_FLAG)) {
                    kill(child, sig);
                }
            }
        }
    }
}

/* Installs the handlers with every handled signal blocked: the caller
 * creates the client (and its threads, which inherit the mask) before
 * unblocking, so handlers only ever run on the main thread. */
static bool setup_signals(sigset_t *handled)
{
    if (pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        return false;
    }
    sigemptyset(handled);
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++) {
        sigaddset(handled, forwarded[i]);
    }
    sigaddset(handled, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, handled, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_NOCLDSTOP;
    sigfillset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++) {
        sigaction(forwarded[i], &sa, NULL);
    }
    sigaction(SIGCHLD, &sa, NULL);
    /* A broken Redis connection must be an error status, not our death
     * with the child still running. */
    signal(SIGPIPE, SIG_IGN);
    return true;
}

/* Dies of sig, as the shell expects of a program interrupted by it. */
static int die_of(int sig)
{
    signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
    return 128 + sig;
}

int cli_run(cli_opts *o, int argc, char **argv)
{
    run_args a;
    int rc = parse_run(o, argc, argv, &a);
    if (rc >= 0) {
        return rc;
    }
    each_fd(note_inherited);
    sigset_t handled;
    if (!setup_signals(&handled)) {
        cli_error("run: pipe: %s", strerror(errno));
        return CLI_EXIT_SOFTWARE;
    }
    g_tid = rlock_thread_id();
    rlock_client *c = NULL;
    rlock *l = NULL;
    rlock_status s = cli_client(o, on_lost, NULL, &c);
    if (s != RLOCK_OK) {
        return cli_fail(s, o->url);
    }
    s = rlock_new(c, a.name, &l);
    if (s != RLOCK_OK) {
        rlock_client_free(c);
        return cli_fail(s, a.name);
    }
    pthread_sigmask(SIG_UNBLOCK, &handled, NULL);

    lock_probe probe = {l, a.lease_ms, 0};
    int64_t deadline = a.wait_ms < 0 ? -1 : cli_now_ms() + a.wait_ms;
    cli_wait_result wr;
    int sig = 0;
    for (;;) {
        int64_t left = deadline < 0 ? -1 : deadline - cli_now_ms();
        wr = cli_wait_free(o->url, a.name, left < 0 && deadline >= 0 ? 0 : left, g_pipe[0],
                           probe_lock, &probe, &s);
        /* Only a terminating signal ends the wait; a stray SIGCHLD (from a
         * child rlock inherited) just restarts it. */
        if (wr != CLI_WAIT_SIGNAL || (sig = drain_for_signal()) != 0) {
            break;
        }
    }
    if (wr != CLI_WAIT_DONE) {
        rlock_free(l);
        rlock_client_free(c);
        if (wr == CLI_WAIT_SIGNAL) {
            return die_of(sig);
        }
        if (wr == CLI_WAIT_TIMEOUT) {
            cli_error("%s: not acquired within %lld ms", a.name, (long long)a.wait_ms);
            return CLI_EXIT_TIMEOUT;
        }
        return cli_fail(s, a.name);
    }

    pid_t child = -1;
    int err = spawn(a.cmd, &child);
    bool lost = false;
    int code;
    if (err != 0) {
        cli_error("%s: %s", a.cmd[0], strerror(err));
        code = err == ENOENT ? CLI_EXIT_NOTFOUND : CLI_EXIT_NOEXEC;
    } else {
        code = supervise(&a, child, probe.acquired_at, &lost);
    }

    /* Signals that arrive from here on are not forwarded (the child is
     * gone) and, being handled, cannot stop the release below. */
    s = rlock_unlock(l);
    if ((s == RLOCK_ELOST || s == RLOCK_ENOTOWNER) && !lost) {
        /* The child finished, but for part of its run it did not hold the
         * lock (force-unlocked, or expired before a renewal saw it). */
        lost = true;
        cli_error("%s: the lock was lost while %s ran: %s", a.name, a.cmd[0], rlock_strerror(s));
    } else if (s != RLOCK_OK && !lost) {
        cli_error("%s: could not release the lock (%s); it expires with its lease", a.name,
                  rlock_strerror(s));
    }
    rlock_free(l);
    rlock_client_free(c);
    return lost ? CLI_EXIT_LOST : code;
}
