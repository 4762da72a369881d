/* rlock run's processes: COMMAND in a process group of its own, with two
 * guards in it that take the group down with rlock, whatever kills rlock,
 * and when rlock stops renewing (stopped, hung) before the lease runs out.
 *
 * Why guards: PR_SET_PDEATHSIG in COMMAND's process reaches that one
 * process only, not what it started (`sh -c 'a & b'`), and nothing runs in
 * rlock once it is SIGKILLed. The kernel does one thing for a SIGKILLed
 * process: it closes its descriptors. Each guard polls a pipe whose only
 * write end rlock holds (close-on-exec, so COMMAND never has it), and
 * kills its group when the pipe reaches EOF, or when the deadline rlock
 * last wrote to a page they share passes. Two of them, because rlock can notice a
 * guard's death (SIGCHLD) only while it lives: with one guard, killing
 * it and rlock together left the group to run on. COMMAND also gets
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
#include <poll.h>
#include <stdatomic.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

/* The area of rlock's argv strings (cli_proc_init()), which a guard
 * overwrites so that its /proc/PID/cmdline is "rlock-guard" alone: a fork
 * keeps its parent's command line, and `pkill -f 'rlock run ... NAME'`
 * would otherwise kill the guards with rlock, leaving COMMAND's children
 * nobody to end them. */
static char *g_args;
static size_t g_args_len;

void cli_proc_init(int argc, char **argv)
{
    if (argc <= 0 || argv == NULL || argv[0] == NULL) {
        return;
    }
    /* The strings are contiguous (the kernel lays them out so); stop at
     * the first that is not, should a caller have replaced one. */
    char *end = argv[0] + strlen(argv[0]) + 1;
    for (int i = 1; i < argc && argv[i] == end; i++) {
        end = argv[i] + strlen(argv[i]) + 1;
    }
    g_args = argv[0];
    g_args_len = (size_t)(end - argv[0]);
}

static void guard_title(void)
{
    static const char title[] = "rlock-guard";
    prctl(PR_SET_NAME, title, 0, 0, 0);
    if (g_args_len > 0) {
        size_t n = sizeof title < g_args_len ? sizeof title : g_args_len;
        memset(g_args, 0, g_args_len); /* the last byte stays NUL: no setproctitle mode */
        memcpy(g_args, title, n - 1);
    }
}

/* The guards' deadline lives in a MAP_SHARED anonymous page made before
 * they fork, not in their pipes: rlock overwrites it, and a guard reads it
 * afresh every time it wakes, so the newest deadline wins whatever
 * happened meanwhile. Sent through a pipe, deadlines queued up while a
 * guard was stopped with the group (kill -STOP of the group, a long
 * pause): after 64 KiB the pipe was full, newer ones were dropped, and on
 * SIGCONT the guard acted on a stale, past one and killed a COMMAND whose
 * lock was held (test_revcli2.c). The pipes now carry only EOF (rlock
 * died) and wake-up bytes (the deadline moved earlier); a full pipe
 * already holds a wake-up, so a dropped byte loses nothing. The fields
 * are lock-free atomics: a guard is a fork of a threaded process and may
 * call nothing that takes a lock. */
#if ATOMIC_LLONG_LOCK_FREE != 2 || ATOMIC_INT_LOCK_FREE != 2
#error "the guards' shared page needs lock-free 64-bit atomics"
#endif
struct cli_guard_page {
    _Atomic long long fire_at; /* CLOCK_MONOTONIC ms; -1: no deadline */
    _Atomic long long cmd;     /* COMMAND's pid, 0 before it exists or once reaped */
    _Atomic int fired;         /* why a guard fired (CLI_GUARD_*), first one wins */
};

static int64_t guard_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A guard's life: in COMMAND's group (pgid, its own pid for the first),
 * ignoring every signal, holding no descriptor but its pipe (as 3) and
 * /dev/null. It fires when the pipe reaches EOF (rlock died, whatever
 * killed it) or when the deadline in the shared page passes (rlock stopped
 * or hung while the lock's lease runs out): it records why in the page,
 * then SIGKILL to COMMAND (which may have left the group) and to the
 * group, itself included. Only async-signal-safe calls: it is a fork of a
 * threaded process. */
static _Noreturn void guard(int rd, pid_t pgid, struct cli_guard_page *pg)
{
    if (setpgid(0, pgid) != 0) {
        _exit(1); /* never fire into rlock's own group: rlock sees the exit */
    }
    if (pgid == 0) {
        pgid = getpid();
    }
    guard_title();
    child_signals(true);
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
    int why;
    for (;;) {
        /* Read afresh at every wake-up: after a stop (the group's ^Z, or
         * kill -STOP of the group) rlock has kept the page current, or,
         * stopped with the group, wrote a fresh deadline before it
         * continued it; either way that one counts. */
        int64_t fire_at = (int64_t)atomic_load(&pg->fire_at);
        int64_t now = guard_now();
        if (fire_at >= 0 && now >= fire_at) {
            why = CLI_GUARD_DEADLINE;
            break;
        }
        int64_t left = fire_at - now;
        int timeout = fire_at < 0 ? -1 : left > INT_MAX ? INT_MAX : (int)left;
        struct pollfd p = {3, POLLIN, 0};
        poll(&p, 1, timeout);
        char buf[256];
        ssize_t k;
        while ((k = read(3, buf, sizeof buf)) > 0 || (k < 0 && errno == EINTR)) {
        }
        if (k == 0) {
            why = CLI_GUARD_EOF;
            break;
        }
    }
    int none = 0;
    atomic_compare_exchange_strong(&pg->fired, &none, why);
    pid_t cmd = (pid_t)atomic_load(&pg->cmd);
    if (cmd > 0) {
        kill(cmd, SIGKILL);
    }
    kill(-pgid, SIGKILL);
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

/* Wakes each live guard so that it reads the page again: needed only when
 * the deadline moved earlier than the one it sleeps towards. The pipes are
 * non-blocking, and a full one already holds a wake-up. */
static void guard_wake(cli_group *g)
{
    char b = 0;
    for (int i = 0; i < 2; i++) {
        if (g->guard_fd[i] >= 0) {
            while (write(g->guard_fd[i], &b, 1) < 0 && errno == EINTR) {
            }
        }
    }
}

static void group_clear(cli_group *g)
{
    memset(g, 0, sizeof *g);
    g->guard_fd[0] = g->guard_fd[1] = -1;
    g->tty = -1;
    g->fire_at = -1;
    g->guard_status[0] = g->guard_status[1] = -1;
}

int cli_group_start(cli_group *g, char **cmd, char **envp, int64_t fire_at)
{
    group_clear(g);
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
    int gp[2][2] = {{-1, -1}, {-1, -1}}, ep[2] = {-1, -1};
    int err = 0;
    void *page = mmap(NULL, sizeof *g->page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                      -1, 0);
    if (page == MAP_FAILED) {
        free(x.sh);
        return errno;
    }
    g->page = page;
    atomic_init(&g->page->fire_at, -1);
    atomic_init(&g->page->cmd, 0);
    atomic_init(&g->page->fired, 0);
    for (int i = 0; i < 2 && err == 0; i++) {
        if (pipe2(gp[i], O_CLOEXEC | O_NONBLOCK) != 0) {
            err = errno;
        }
    }
    if (err == 0 && pipe2(ep, O_CLOEXEC) != 0) {
        err = errno;
    }
    if (err != 0) {
        for (int i = 0; i < 2; i++) {
            if (gp[i][0] >= 0) {
                close(gp[i][0]);
                close(gp[i][1]);
            }
        }
        free(x.sh);
        cli_group_close(g);
        return err;
    }
    g->guard_fd[0] = gp[0][1];
    g->guard_fd[1] = gp[1][1];
    /* The first deadline is in the page before a guard runs. */
    g->fire_at = fire_at;
    atomic_store(&g->page->fire_at, (long long)fire_at);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t self = getpid();
    pid_t c = -1;
    /* Two guards, so that killing one of them and rlock together (a
     * pkill whose pattern matches both) still leaves one to fire: rlock
     * notices a guard's death itself while it lives (SIGCHLD). */
    for (int i = 0; i < 2 && err == 0; i++) {
        pid_t s = fork();
        if (s == 0) {
            guard(gp[i][0], i == 0 ? 0 : g->pgid, g->page);
        }
        if (s < 0) {
            err = errno;
            break;
        }
        g->guards[i] = s;
        /* Both sides set the group, so that it exists whichever runs
         * first; a second guard that could not join it is an error. */
        setpgid(s, i == 0 ? s : g->pgid);
        if (i == 0) {
            g->pgid = s;
        } else if (getpgid(s) != g->pgid) {
            err = ESRCH;
        }
    }
    if (err != 0) {
        goto out;
    }
    g->tty = foreground_tty();
    if (g->tty >= 0) {
        set_foreground(g->tty, g->pgid);
    }
    c = fork();
    if (c == 0) {
        close(ep[0]);
        int e = 0;
        if (setpgid(0, g->pgid) != 0) {
            e = errno; /* the guard is gone already: run unguarded, never */
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
        setpgid(c, g->pgid);
        g->child = c;
        atomic_store(&g->page->cmd, (long long)c);
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
    for (int i = 0; i < 2; i++) {
        close(gp[i][0]);
    }
    close(ep[0]);
    if (ep[1] >= 0) {
        close(ep[1]);
    }
    free(x.sh);
    if (err != 0) {
        cli_group_end(g);
        cli_group_close(g);
    }
    return err;
}

void cli_group_arm(cli_group *g, int64_t fire_at)
{
    if (fire_at != g->fire_at && g->page != NULL) {
        bool earlier = fire_at >= 0 && (g->fire_at < 0 || fire_at < g->fire_at);
        g->fire_at = fire_at;
        atomic_store(&g->page->fire_at, (long long)fire_at);
        if (earlier) {
            guard_wake(g);
        }
    }
}

void cli_group_reaped(cli_group *g)
{
    g->child = 0;
    if (g->page != NULL) {
        atomic_store(&g->page->cmd, 0);
    }
}

int cli_group_fired(const cli_group *g)
{
    return g->page != NULL ? atomic_load(&g->page->fired) : 0;
}

void cli_group_reap_guards(cli_group *g)
{
    for (int i = 0; i < 2; i++) {
        if (g->guards[i] > 0) {
            int st = 0;
            while (waitpid(g->guards[i], &st, 0) < 0 && errno == EINTR) {
            }
            g->guard_status[i] = st;
            g->guards[i] = 0;
            close(g->guard_fd[i]);
            g->guard_fd[i] = -1;
        }
    }
}

pid_t cli_group_guard_gone(cli_group *g)
{
    for (int i = 0; i < 2; i++) {
        int st = 0;
        if (g->guards[i] > 0 && waitpid(g->guards[i], &st, WNOHANG) == g->guards[i]) {
            pid_t gone = g->guards[i];
            g->guard_status[i] = st;
            g->guards[i] = 0;
            close(g->guard_fd[i]);
            g->guard_fd[i] = -1;
            return gone;
        }
    }
    return 0;
}

/* The group, then COMMAND's own pid if it is no longer in it (setsid,
 * setpgid): in that order, a COMMAND that leaves between the two still
 * gets the signal once, and one that stayed does not get it twice. */
void cli_group_kill(cli_group *g, int sig)
{
    if (g->pgid <= 0) {
        return;
    }
    kill(-g->pgid, sig);
    bool apart = g->child > 0 && getpgid(g->child) != g->pgid;
    if (apart) {
        kill(g->child, sig);
    }
    /* A stopped process keeps a signal pending until it continues, as
     * a shell's kill does for its stopped jobs. */
    if (g->stopped && cli_sig_terminates(sig)) {
        kill(-g->pgid, SIGCONT);
        if (apart) {
            kill(g->child, SIGCONT);
        }
    }
}

int cli_group_live(const cli_group *g)
{
    if (g->pgid <= 0) {
        return 0;
    }
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
        if (*end != '\0' || pid <= 0 || pid == g->guards[0] || pid == g->guards[1] ||
            pid == g->pgid) {
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

void cli_group_end(cli_group *g)
{
    /* Closing the pipes fires the guards; rlock's own SIGKILL reaches a
     * stopped guard too (SIGSTOP cannot be ignored), and COMMAND if it
     * left the group. */
    for (int i = 0; i < 2; i++) {
        if (g->guard_fd[i] >= 0) {
            close(g->guard_fd[i]);
            g->guard_fd[i] = -1;
        }
    }
    if (g->pgid > 0) {
        cli_group_kill(g, SIGKILL);
    }
    for (int i = 0; i < 2; i++) {
        if (g->guards[i] > 0) {
            reap(g->guards[i]);
        }
    }
}

void cli_group_close(cli_group *g)
{
    if (g->tty >= 0) {
        if (tcgetpgrp(g->tty) == g->pgid) {
            set_foreground(g->tty, getpgrp());
        }
        close(g->tty);
    }
    if (g->page != NULL) {
        munmap(g->page, sizeof *g->page);
    }
    group_clear(g);
}

void cli_group_stop_with(cli_group *g)
{
    if (g->tty < 0) {
        return;
    }
    /* Members that ignore or handle SIGTSTP, and COMMAND's pid if it left
     * the group, stop too (SIGSTOP cannot be ignored): nothing of COMMAND
     * runs while nothing renews the lock. The guards stop with them, and
     * get a fresh deadline before they are continued. */
    cli_group_kill(g, SIGSTOP);
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
    cli_group_kill(g, SIGCONT);
    g->stopped = false;
}
