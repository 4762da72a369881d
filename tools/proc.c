/* rlock run's processes: COMMAND in a process group of its own, led by a
 * sentinel that takes the group down with rlock, whatever kills rlock.
 *
 * Why a sentinel: PR_SET_PDEATHSIG in COMMAND's process reaches that one
 * process only, not what it started (`sh -c 'a & b'`), and nothing runs in
 * rlock once it is SIGKILLed. The kernel does one thing for a SIGKILLed
 * process: it closes its descriptors. The sentinel blocks reading a pipe
 * whose only write end rlock holds (close-on-exec, so COMMAND never has
 * it), and kills its group when the read returns. COMMAND also gets
 * PR_SET_PDEATHSIG(SIGKILL), with the fork-to-prctl race closed by
 * comparing getppid() with the pid rlock had before fork(), so that even a
 * COMMAND that left the group dies with rlock.
 *
 * Everything between fork() and exec() below calls async-signal-safe
 * functions only (the parent has threads): no malloc, no stdio, no locks.
 * The parent blocks every signal around fork(), so that no handler of
 * rlock's runs in a child (it would write to rlock's self-pipe). */
#include "proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

/* Real-time signals below SIGRTMIN (32 and 33 with glibc) belong to
 * glibc's threads implementation; sigaction() refuses them. */
bool cli_sig_catchable(int sig)
{
    if (sig <= 0 || sig >= NSIG || sig == SIGKILL || sig == SIGSTOP) {
        return false;
    }
    return sig < 32 || (sig >= SIGRTMIN && sig <= SIGRTMAX);
}

bool cli_sig_terminates(int sig)
{
    switch (sig) {
    case SIGCHLD:
    case SIGCONT:
    case SIGURG:
    case SIGWINCH:
    case SIGTSTP:
    case SIGTTIN:
    case SIGTTOU:
        return false;
    default:
        return cli_sig_catchable(sig);
    }
}

bool cli_sig_is_fault(int sig)
{
    return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGTRAP ||
           sig == SIGSYS || sig == SIGABRT;
}

static sigset_t g_ignored;

void cli_sig_record_inherited(void)
{
    sigemptyset(&g_ignored);
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction old;
        if (cli_sig_catchable(sig) && sigaction(sig, NULL, &old) == 0 &&
            !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN) {
            sigaddset(&g_ignored, sig);
        }
    }
}

bool cli_sig_inherited_ignored(int sig)
{
    return sigismember(&g_ignored, sig) == 1;
}

/* In a child: every catchable signal back to what rlock inherited (default,
 * or ignored), then an empty mask. */
static void child_signals(bool ignore_all)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    for (int sig = 1; sig < NSIG; sig++) {
        if (cli_sig_catchable(sig)) {
            bool ign = ignore_all || sigismember(&g_ignored, sig) == 1;
            sa.sa_handler = ign ? SIG_IGN : SIG_DFL;
            sigaction(sig, &sa, NULL);
        }
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

/* What the child needs to exec, prepared before fork(). */
typedef struct exec_plan {
    char **argv;
    char **sh; /* "sh", <file>, argv[1..]: for a file without "#!" */
    char **envp;
    const char *path; /* PATH, or the default */
} exec_plan;

/* execve(), and /bin/sh for ENOEXEC as execvp() does. Returns the errno of
 * the first failure (that of the file, not of /bin/sh). */
static int try_exec(const exec_plan *x, const char *file)
{
    execve(file, x->argv, x->envp);
    int err = errno;
    if (err == ENOEXEC) {
        x->sh[1] = (char *)file;
        execve("/bin/sh", x->sh, x->envp);
    }
    return err;
}

/* execvp() without its malloc: the candidates are built in a stack
 * buffer. EACCES wins over "not found", as with execvp(). */
static int child_exec(const exec_plan *x)
{
    const char *name = x->argv[0];
    if (strchr(name, '/') != NULL) {
        return try_exec(x, name);
    }
    size_t nlen = strlen(name);
    char buf[PATH_MAX];
    bool denied = false;
    int err = ENOENT;
    for (const char *p = x->path;; p++) {
        const char *end = strchr(p, ':');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n + 1 + nlen < sizeof buf) {
            memcpy(buf, p, n);
            size_t k = n;
            if (n > 0) {
                buf[k++] = '/';
            }
            memcpy(buf + k, name, nlen + 1);
            err = try_exec(x, buf);
            denied = denied || err == EACCES;
        }
        if (end == NULL) {
            break;
        }
        p = end;
    }
    return denied ? EACCES : err;
}

static void write_errno(int fd, int err)
{
    while (write(fd, &err, sizeof err) < 0 && errno == EINTR) {
    }
}

/* The sentinel's life: alone in its group until COMMAND joins, ignoring
 * every signal, holding no descriptor but the pipe and /dev/null. */
static _Noreturn void sentinel(int rd, int wr)
{
    setpgid(0, 0);
    prctl(PR_SET_NAME, "rlock-guard", 0, 0, 0);
    child_signals(true);
    close(wr);
    if (rd != 3) {
        dup2(rd, 3);
        close(rd);
    }
    int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3; fd++) {
        if (null >= 0 && null != fd) {
            dup2(null, fd);
        }
    }
    if (null > 3) {
        close(null);
    }
#ifdef SYS_close_range
    if (syscall(SYS_close_range, 4u, ~0u, 0u) != 0)
#endif
    {
        for (int fd = 4; fd < 65536; fd++) {
            close(fd);
        }
    }
    char b;
    while (read(3, &b, 1) < 0 && errno == EINTR) {
    }
    kill(0, SIGKILL);
    _exit(0);
}

/* The descriptor of rlock's terminal if rlock is its foreground job
 * (an interactive `rlock run`), else -1. */
static int foreground_tty(void)
{
    for (int fd = 0; fd < 3; fd++) {
        if (isatty(fd) && tcgetpgrp(fd) == getpgrp()) {
            return fcntl(fd, F_DUPFD_CLOEXEC, 3);
        }
    }
    return -1;
}

/* tcsetpgrp() from a background process raises SIGTTOU unless the calling
 * thread blocks it. */
static void set_foreground(int tty, pid_t pgrp)
{
    sigset_t ttou, old;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    pthread_sigmask(SIG_BLOCK, &ttou, &old);
    tcsetpgrp(tty, pgrp);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void reap(pid_t pid)
{
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
}

int cli_group_start(cli_group *g, char **cmd, char **envp)
{
    memset(g, 0, sizeof *g);
    g->guard = -1;
    g->tty = -1;
    size_t n = 0;
    while (cmd[n] != NULL) {
        n++;
    }
    exec_plan x = {cmd, calloc(n + 2, sizeof(char *)), envp, getenv("PATH")};
    if (x.sh == NULL) {
        return ENOMEM;
    }
    x.sh[0] = "sh";
    memcpy(x.sh + 2, cmd + 1, n * sizeof(char *)); /* cmd[1..n-1] and its NULL */
    if (x.path == NULL) {
        x.path = "/bin:/usr/bin";
    }
    int guard[2], ep[2];
    if (pipe2(guard, O_CLOEXEC) != 0) {
        free(x.sh);
        return errno;
    }
    if (pipe2(ep, O_CLOEXEC) != 0) {
        int err = errno;
        close(guard[0]);
        close(guard[1]);
        free(x.sh);
        return err;
    }
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t self = getpid();
    int err = 0;
    pid_t s = fork();
    if (s == 0) {
        close(ep[0]);
        close(ep[1]);
        sentinel(guard[0], guard[1]);
    }
    if (s < 0) {
        err = errno;
        goto out;
    }
    /* Both sides set the group, so that it exists whichever runs first. */
    setpgid(s, s);
    g->pgid = s;
    g->guard = guard[1];
    g->tty = foreground_tty();
    if (g->tty >= 0) {
        set_foreground(g->tty, s);
    }
    pid_t c = fork();
    if (c == 0) {
        close(guard[0]);
        close(ep[0]);
        int e = 0;
        if (setpgid(0, s) != 0) {
            e = errno; /* the sentinel is gone already: run unguarded, never */
        } else if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) {
            e = errno;
        } else if (getppid() != self) {
            _exit(127); /* rlock died before prctl(): nobody to report to */
        }
        if (e == 0) {
            child_signals(false);
            e = child_exec(&x);
        }
        write_errno(ep[1], e);
        _exit(127);
    }
    if (c < 0) {
        err = errno;
    } else {
        setpgid(c, s);
        g->child = c;
    }
    close(ep[1]);
    ep[1] = -1;
    if (c > 0) {
        /* EOF: the exec worked (the pipe is close-on-exec); else errno. */
        int e = 0;
        ssize_t r;
        while ((r = read(ep[0], &e, sizeof e)) < 0 && errno == EINTR) {
        }
        if (r == (ssize_t)sizeof e) {
            err = e != 0 ? e : EIO;
            reap(c);
            g->child = 0;
        }
    }
out:
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(guard[0]);
    close(ep[0]);
    if (ep[1] >= 0) {
        close(ep[1]);
    }
    free(x.sh);
    if (err != 0) {
        if (g->pgid > 0) {
            kill(-g->pgid, SIGKILL);
            reap(g->pgid);
        }
        if (g->tty >= 0) {
            set_foreground(g->tty, getpgrp());
            close(g->tty);
        }
        if (g->guard >= 0) {
            close(g->guard);
        } else {
            close(guard[1]);
        }
        memset(g, 0, sizeof *g);
        g->guard = -1;
        g->tty = -1;
    }
    return err;
}

void cli_group_kill(cli_group *g, int sig)
{
    if (g->pgid > 0) {
        kill(-g->pgid, sig);
        /* A stopped process keeps a signal pending until it continues, as
         * a shell's kill does for its stopped jobs. */
        if (g->stopped && cli_sig_terminates(sig)) {
            kill(-g->pgid, SIGCONT);
        }
    }
}

int cli_group_live(const cli_group *g)
{
    DIR *d = opendir("/proc");
    if (d == NULL) {
        /* Without /proc, any member that exists counts. */
        return kill(-g->pgid, 0) == 0 ? 1 : 0;
    }
    int live = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end != '\0' || pid <= 0 || pid == g->pgid) {
            continue;
        }
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            continue;
        }
        ssize_t k = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (k <= 0) {
            continue;
        }
        buf[k] = '\0';
        /* "pid (comm) S ppid pgrp ...": comm may hold anything but the
         * last ')'. */
        char *rp = strrchr(buf, ')');
        char state;
        int ppid, pgrp;
        if (rp != NULL && sscanf(rp + 1, " %c %d %d", &state, &ppid, &pgrp) == 3 &&
            pgrp == g->pgid && state != 'Z' && state != 'X') {
            live++;
        }
    }
    closedir(d);
    return live;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void cli_group_finish(cli_group *g, int64_t grace_ms)
{
    if (g->pgid <= 0) {
        return;
    }
    if (cli_group_live(g) > 0) {
        kill(-g->pgid, SIGTERM);
        kill(-g->pgid, SIGCONT);
        int64_t end = now_ms() + grace_ms;
        while (cli_group_live(g) > 0 && now_ms() < end) {
            sleep_ms(10);
        }
    }
    /* The sentinel's own SIGKILL would do, but it may be stopped (SIGSTOP
     * cannot be ignored): rlock sends it, and the sentinel dies with it. */
    kill(-g->pgid, SIGKILL);
    reap(g->pgid);
    close(g->guard);
    g->guard = -1;
    /* SIGKILLed processes run no more code; they leave once the kernel
     * has torn them down (a process in uninterruptible sleep waits). */
    int64_t end = now_ms() + 2000;
    while (cli_group_live(g) > 0 && now_ms() < end) {
        sleep_ms(5);
    }
    if (g->tty >= 0) {
        if (tcgetpgrp(g->tty) == g->pgid) {
            set_foreground(g->tty, getpgrp());
        }
        close(g->tty);
        g->tty = -1;
    }
    g->pgid = 0;
}

void cli_group_stop_with(cli_group *g)
{
    if (g->tty < 0) {
        return;
    }
    if (tcgetpgrp(g->tty) == g->pgid) {
        set_foreground(g->tty, getpgrp());
    }
    struct sigaction dfl, old;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGTSTP, &dfl, &old);
    sigset_t tstp, mask;
    sigemptyset(&tstp);
    sigaddset(&tstp, SIGTSTP);
    pthread_sigmask(SIG_UNBLOCK, &tstp, &mask);
    raise(SIGTSTP); /* returns once continued */
    pthread_sigmask(SIG_SETMASK, &mask, NULL);
    sigaction(SIGTSTP, &old, NULL);
}

void cli_group_resume(cli_group *g)
{
    if (g->tty >= 0 && tcgetpgrp(g->tty) == getpgrp()) {
        set_foreground(g->tty, g->pgid);
    }
    kill(-g->pgid, SIGCONT);
    g->stopped = false;
}
