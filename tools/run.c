/* rlock run: take a lock, run a command as a child, release the lock when
 * the child exits, and exit with the child's status. rlock hold: take a
 * lock, print the holder id, and keep it until a signal, as `etcdctl lock
 * NAME` does without a command.
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
 * expired, so run ends COMMAND before the lease's end, measured from just
 * before the acquiring call was sent (so never later than Redis expires the
 * key): -S, then SIGKILL (see lease_plan()). With the watchdog the child
 * gets -S SIGNAL (SIGTERM by default), optionally SIGKILL -k TIME later;
 * either way rlock exits 79. `hold` releases nothing (there is nothing
 * left) and exits 79 at once when its lease (-l) runs out.
 *
 * COMMAND runs in a process group of its own with a guard that kills the
 * group if rlock dies (proc.c); every signal rlock gets goes to the whole
 * group, and the lock is released only once nothing of the group runs.
 * hold also ends when the process it serves (its parent, or --pid) exits,
 * or its stdin or stdout pipe closes.
 *
 * COMMAND's environment is rlock's, without RLOCK_AUTH (main() took it out
 * before any thread started), with RLOCK_NAME (the lock name), RLOCK_HELD=1
 * and RLOCK_OWNER (the holder field, "<client-id>:<thread>", with ":write"
 * for --write), and for --fenced RLOCK_FENCE_TOKEN (the acquisition's
 * token; an inherited one is removed otherwise). */
#include "cli.h"
#include "proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Pipe bytes: a signal number, or LOST_BYTE (CLI_WAKE_LOST) from the
 * lock-lost callback. */
#define LOST_BYTE CLI_WAKE_LOST

static int g_pipe[2] = {-1, -1};
static atomic_bool g_lost;
static uint64_t g_tid;
/* hold: the pidfd of the process it follows (parent or --pid), or -1; its
 * exit also ends the wait for the lock (g_follow_gone). */
static int g_follow_fd = -1;
static atomic_bool g_follow_gone;

/* Every catchable signal comes here (see setup_signals()). Two kinds are
 * not meant for COMMAND: a fault of rlock's own (SIGSEGV, ..., abort())
 * takes its default action, killing rlock, and the guards then kill
 * COMMAND's group; a SIGPIPE of rlock's own writes is nothing (the kernel
 * sends that one with rlock's own pid as the sender). */
static void on_signal(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    int saved = errno;
    bool own = si != NULL && si->si_pid == getpid();
    if (cli_sig_is_fault(sig) && si != NULL && (si->si_code > 0 || own)) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigaction(sig, &dfl, NULL);
        if (si->si_code <= 0) {
            raise(sig); /* pending until the handler returns, then fatal */
        }
        errno = saved;
        return; /* a real fault happens again, now fatal */
    }
    if (sig == SIGPIPE && own) {
        errno = saved;
        return;
    }
    unsigned char b = (unsigned char)sig;
    /* A full pipe already holds a wake-up: dropping the byte is harmless. */
    if (write(g_pipe[1], &b, 1) < 0) {
        /* nothing to do */
    }
    errno = saved;
}

/* Why the lock was lost, when rlock's own TTL check found it (arg); NULL:
 * the watchdog did. Written before g_lost is set. */
static _Atomic(const char *) g_lost_why;

static void on_lost(const char *name, uint64_t tid, void *arg)
{
    (void)name;
    if (tid == g_tid) {
        if (arg != NULL) {
            atomic_store(&g_lost_why, (const char *)arg);
        }
        atomic_store(&g_lost, true);
        unsigned char b = LOST_BYTE;
        if (write(g_pipe[1], &b, 1) < 0) {
            /* g_lost is set; the next wake-up sees it */
        }
    }
}

/* Descriptors rlock inherited stay inherited by the child (a caller may
 * hand it one on purpose, as with flock's "9>file"); descriptors the
 * library and rlock opened (Redis sockets, the self-pipe) must not leak
 * into it, where they would keep a subscription alive after rlock exits.
 * The library opens its own close-on-exec; rlock still marks every
 * descriptor that appeared since start-up, whoever opened it (a resolver,
 * OpenSSL), rather than rely on each. */
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

static bool is_var(const char *entry, const char *var)
{
    size_t n = strlen(var);
    return strncmp(entry, var, n) == 0 && entry[n] == '=';
}

/* COMMAND's environment: ours (RLOCK_AUTH is already gone) with the lock's
 * variables set. Built as an array rather than with setenv(), which is not
 * safe while the library's threads run. The caller frees the array and
 * its three added strings (the last three entries). */
static char **child_env(const char *name, const char *owner, int64_t token)
{
    static const char *const ours[] = {"RLOCK_NAME", "RLOCK_HELD", "RLOCK_OWNER",
                                       "RLOCK_FENCE_TOKEN"};
    size_t n = 0;
    while (environ[n] != NULL) {
        n++;
    }
    char **env = calloc(n + 5, sizeof *env);
    if (env == NULL) {
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool skip = false;
        for (size_t j = 0; j < 4; j++) {
            skip = skip || is_var(environ[i], ours[j]);
        }
        if (!skip) {
            env[k++] = environ[i];
        }
    }
    if (asprintf(&env[k], "RLOCK_NAME=%s", name) < 0) {
        env[k] = NULL;
    } else if ((env[k + 1] = strdup("RLOCK_HELD=1")) == NULL ||
               asprintf(&env[k + 2], "RLOCK_OWNER=%s", owner) < 0) {
        env[k + 2] = NULL;
    }
    if (env[k] != NULL && env[k + 1] != NULL && env[k + 2] != NULL && token >= 0 &&
        asprintf(&env[k + 3], "RLOCK_FENCE_TOKEN=%lld", (long long)token) < 0) {
        env[k + 3] = NULL;
        free(env[k + 2]);
        env[k + 2] = NULL;
    }
    if (env[k] == NULL || env[k + 1] == NULL || env[k + 2] == NULL) {
        free(env[k]);
        free(env[k + 1]);
        free(env);
        return NULL;
    }
    return env;
}

/* added: the entries child_env() added at the end (3, or 4 with a
 * token). */
static void free_env(char **env, size_t added)
{
    if (env != NULL) {
        size_t n = 0;
        while (env[n] != NULL) {
            n++;
        }
        for (size_t i = n - added; i < n; i++) {
            free(env[i]);
        }
        free(env);
    }
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
            if (sig == 0 && buf[i] != LOST_BYTE && cli_sig_terminates(buf[i])) {
                sig = buf[i];
            }
        }
    }
    return sig;
}

/* How the guards enforce the lease while rlock is stopped or hung.
 *
 * With the watchdog (lease L, renewed every L/3 by the library's thread),
 * rlock asks Redis for the key's TTL every L/6 (PTTL, timed from before
 * the request, so that the key lives at least until then + TTL) and sets
 * the guards' deadline MARGIN before that: they kill COMMAND while the key
 * still exists. A renewed key has at least 2L/3 left, so a refresh may be
 * late by 2L/3 - L/6 - MARGIN (400 ms for L = 1 s, 14 s for the default
 * 30 s) before the guards fire on a healthy lock: the slack a busy machine
 * needs. MARGIN is L/10, at most 1 s: the time a guard may need to be
 * scheduled and its SIGKILL delivered. The same check is how rlock learns
 * early that the key is gone or has another holder (deleted, force-
 * unlocked): a loss, at once, rather than at the next renewal.
 *
 * With an explicit lease (-l L) the guards fire at the lease's end minus
 * MARGIN (L/10, at most 1 s), like with the watchdog, so a stopped rlock
 * cannot leave COMMAND running once the key may expire. rlock itself acts
 * earlier: -S SIG at that point minus K, SIGKILL at that point, where K
 * is -k TIME, or without -k the smaller of 2 s and L/4 (-S no earlier than
 * the acquisition). After a loss under the watchdog, the guards fire
 * GRACE after -k's SIGKILL was due, if rlock has not acted by then. */
#define GUARD_GRACE_MS 1000
#define GUARD_MARGIN_MAX_MS 1000
#define LEASE_TERM_MAX_MS 2000

/* One rlock run: what supervise() and the end of the group share. */
typedef struct run_state {
    const cli_args *a;
    rlock *l;
    cli_group *g;
    const char *what;   /* COMMAND's name, in messages */
    int64_t lease_end;  /* -l: when the lease runs out, else -1 */
    int64_t term_at;    /* -l: when -S goes to COMMAND */
    int64_t kill_line;  /* -l: when SIGKILL goes (rlock's and the guards') */
    int64_t wd_lease;   /* with the watchdog: its lease, else 0 */
    int64_t next_check; /* with the watchdog: the next TTL refresh */
    int64_t kill_at;    /* -k's SIGKILL after a loss, or -1 */
    bool lost;          /* the lock was lost (or a guard died) */
    bool guard_gone;    /* a guard died: COMMAND's group was SIGKILLed */
} run_state;

static int64_t wd_margin(int64_t lease)
{
    int64_t m = lease / 10;
    return m > GUARD_MARGIN_MAX_MS ? GUARD_MARGIN_MAX_MS : m;
}

/* -l: the times of -S and of SIGKILL (see above). */
static void lease_plan(run_state *s, int64_t acquired_at, int64_t lease, int64_t kill_after)
{
    s->lease_end = acquired_at + lease;
    s->kill_line = s->lease_end - wd_margin(lease);
    int64_t k = kill_after >= 0 ? kill_after : lease / 4;
    if (kill_after < 0 && k > LEASE_TERM_MAX_MS) {
        k = LEASE_TERM_MAX_MS;
    }
    s->term_at = s->kill_line - k < acquired_at ? acquired_at : s->kill_line - k;
}

/* The guards' deadline as of now. force: ask Redis now (after a stop). */
static void guard_deadline(run_state *s, bool force)
{
    if (s->lease_end >= 0) {
        cli_group_arm(s->g, s->kill_line);
        return;
    }
    if (s->lost) {
        cli_group_arm(s->g, s->kill_at >= 0 ? s->kill_at + GUARD_GRACE_MS : -1);
        return;
    }
    int64_t now = cli_now_ms();
    if (!force && now < s->next_check) {
        return;
    }
    s->next_check = now + s->wd_lease / 6;
    int64_t ttl = -1;
    bool held = true;
    /* A failed query changes nothing: the last deadline stands, and the
     * guards fire at it unless Redis answers again in time. */
    rlock_status st = rlock_remain_ttl(s->l, &ttl);
    if (st == RLOCK_OK && ttl > 0 &&
        rlock_is_held_by_current_thread(s->l, &held) == RLOCK_OK && held) {
        cli_group_arm(s->g, now + ttl - wd_margin(s->wd_lease));
    } else if (st == RLOCK_OK && (ttl == -2 || !held)) {
        /* Gone, or another's: the watchdog's path, now rather than at
         * its next renewal. */
        on_lost(s->a->name, g_tid,
                ttl == -2 ? "it is gone from Redis" : "another client holds it");
    }
}

/* Reads the self-pipe; forwards the signals in it to COMMAND unless
 * !forward. */
static void drain_signals(cli_group *g, bool forward)
{
    unsigned char buf[64];
    ssize_t n;
    while ((n = read(g_pipe[0], buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            if (forward && buf[i] != LOST_BYTE && buf[i] != SIGCHLD) {
                cli_group_kill(g, buf[i]);
            }
        }
    }
}

/* Waits for a signal byte, at most ms (-1: no bound). */
static void wait_pipe(int64_t ms)
{
    int timeout = ms < 0 ? -1 : ms > INT_MAX ? INT_MAX : (int)ms;
    struct pollfd p = {g_pipe[0], POLLIN, 0};
    poll(&p, 1, timeout);
}

/* A guard died while COMMAND ran: killed by someone, or it fired because
 * rlock was stopped past the lease. COMMAND is not protected any more:
 * SIGKILL it and its group, and report the run as a lost lock (79). */
static void guard_died(run_state *s, pid_t gone)
{
    if (s->lost) {
        /* said already */
    } else if (cli_group_fired(s->g) == CLI_GUARD_DEADLINE) {
        cli_error("%s: the lease could not be confirmed in time: the guards killed %s and its "
                  "process group",
                  s->a->name, s->what);
    } else {
        cli_error("%s: its guard process (pid %d) is gone: killing %s and its process group",
                  s->a->name, (int)gone, s->what);
    }
    s->lost = true;
    s->guard_gone = true;
    cli_group_kill(s->g, SIGKILL);
}

/* Supervises COMMAND until it exits; returns its exit code (128+N for a
 * signal) and sets s->lost if the lock was lost meanwhile. Every signal
 * rlock gets goes to COMMAND's whole group, and to COMMAND's pid if it
 * left the group. */
static int supervise(run_state *s)
{
    const cli_args *a = s->a;
    cli_group *g = s->g;
    for (;;) {
        int st;
        bool resume = false;
        pid_t w;
        while ((w = waitpid(g->child, &st, WNOHANG | WUNTRACED | WCONTINUED)) == g->child) {
            if (WIFCONTINUED(st)) {
                g->stopped = false;
                continue;
            }
            if (!WIFSTOPPED(st)) {
                cli_group_reaped(g);
                /* A guard records that it fired before it kills anything:
                 * a COMMAND that died of it is seen so here, even before
                 * the guard itself has died (and it is dying: wait). */
                pid_t gone = 0;
                if (cli_group_fired(g) != 0) {
                    gone = g->guards[0];
                    cli_group_reap_guards(g);
                } else {
                    gone = cli_group_guard_gone(g);
                }
                if (gone > 0 || cli_group_fired(g) != 0) {
                    guard_died(s, gone);
                }
                return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            }
            g->stopped = true;
            if (g->tty >= 0) {
                /* ^Z on the terminal stopped COMMAND: the whole group
                 * stops, and so does rlock, so that the shell sees its job
                 * stopped. Nothing renews the lock meanwhile; before
                 * COMMAND runs again, ask Redis, and give the guards a
                 * fresh deadline. */
                cli_group_stop_with(g);
                bool held = true;
                if (!s->lost && s->lease_end < 0 &&
                    rlock_is_held_by_current_thread(s->l, &held) == RLOCK_OK && !held) {
                    atomic_store(&g_lost, true);
                }
                resume = true;
            }
        }
        pid_t gone = cli_group_guard_gone(g);
        if (gone > 0) {
            guard_died(s, gone);
            resume = false; /* COMMAND dies of the SIGKILL; the loop collects it */
        }
        int64_t now = cli_now_ms();
        const char *why = NULL;
        if (!s->lost && atomic_load(&g_lost)) {
            why = atomic_load(&g_lost_why);
            why = why != NULL ? why : "the watchdog found it gone";
        } else if (!s->lost && s->lease_end >= 0 && now >= s->term_at) {
            why = "its lease runs out";
        }
        if (why != NULL) {
            s->lost = true;
            cli_error("%s: lock lost (%s): sending signal %d (%s) to %s", a->name, why, a->sig,
                      strsignal(a->sig), s->what);
            cli_group_kill(g, a->sig);
            if (s->lease_end >= 0) {
                s->kill_at = s->kill_line;
            } else {
                s->kill_at = a->kill_after_ms >= 0 ? now + a->kill_after_ms : -1;
            }
        }
        guard_deadline(s, resume);
        if (resume) {
            cli_group_resume(g);
        }
        if (s->kill_at >= 0 && now >= s->kill_at) {
            cli_group_kill(g, SIGKILL);
            s->kill_at = -1;
        }
        int64_t next = s->lost ? s->kill_at : s->term_at;
        if (!s->lost && s->wd_lease > 0) {
            next = s->next_check;
        }
        wait_pipe(next < 0 ? -1 : next > now ? next - now : 0);
        drain_signals(g, true);
    }
}

/* Ends what COMMAND left in its group once COMMAND has exited: SIGTERM,
 * SIGKILL grace_ms later (at once if at_once), then waits until nothing of
 * the group runs. A member that outlives SIGKILL (another user's process,
 * or one in uninterruptible sleep) keeps the lock held, renewed by the
 * watchdog, for as long as it runs: the lock is never released while
 * anything of the group may still run. Only a lost lock ends that wait,
 * there being nothing left to keep (lost before, it waits 2 s at most). */
static void finish(const cli_opts *o, run_state *s, int64_t grace_ms, bool at_once)
{
    cli_group *g = s->g;
    int live = cli_group_live(g);
    if (live > 0 && !at_once) {
        cli_verbose(o, "%s: ending %d process%s %s left in its group", s->a->name, live,
                    live == 1 ? "" : "es", s->what);
        cli_group_kill(g, SIGTERM);
        cli_group_kill(g, SIGCONT);
        int64_t end = cli_now_ms() + grace_ms;
        while (cli_group_live(g) > 0 && cli_now_ms() < end) {
            guard_deadline(s, false);
            wait_pipe(10);
            drain_signals(g, false);
        }
    }
    if (!s->lost && cli_group_fired(g) == CLI_GUARD_DEADLINE) {
        guard_died(s, 0); /* what COMMAND left ran past the deadline */
    }
    cli_group_end(g);
    /* SIGKILLed processes run no more code; they leave once the kernel
     * has torn them down. */
    int64_t start = cli_now_ms(), next_kill = start + 500;
    bool said = false, was_lost = s->lost;
    while ((live = cli_group_live(g)) > 0) {
        int64_t now = cli_now_ms();
        if (was_lost) {
            /* Nothing left to keep: a bounded wait for the SIGKILL. */
            if (now - start >= 2000) {
                break;
            }
        } else if (atomic_load(&g_lost) || (s->lease_end >= 0 && now >= s->lease_end)) {
            cli_error("%s: lock lost while %d process%s of %s's group still ran", s->a->name,
                      live, live == 1 ? "" : "es", s->what);
            s->lost = true;
            break;
        }
        if (!said && !was_lost && now - start >= 1000) {
            said = true;
            cli_error("%s: %d process%s of %s's group still run%s after SIGKILL (not rlock's to "
                      "kill, or in uninterruptible sleep): keeping the lock until %s",
                      s->a->name, live, live == 1 ? "" : "es", s->what, live == 1 ? "s" : "",
                      live == 1 ? "it ends" : "they end");
        }
        if (now >= next_kill) {
            cli_group_kill(g, SIGKILL);
            next_kill = now + 500;
        }
        wait_pipe(said ? 100 : 5);
        drain_signals(g, false);
    }
    cli_group_close(g);
}

/* Installs the handlers with every handled signal blocked: the caller
 * creates the client (and its threads, which inherit the mask) before
 * unblocking, so handlers only ever run on the main thread. Every
 * catchable signal is handled, except those rlock inherited as ignored
 * (nohup, a shell's background job), which stay ignored for rlock and
 * COMMAND alike; hold handles SIGTERM in any case (the way a caller ends
 * it). SIGCHLD is handled in any case: it says that COMMAND exited or
 * stopped (job control), or that a guard died; an inherited SIG_IGN would
 * have the kernel reap them unseen. */
static bool setup_signals(sigset_t *handled, bool hold)
{
    if (pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        return false;
    }
    cli_sig_record_inherited();
    sigemptyset(handled);
    for (int sig = 1; sig < NSIG; sig++) {
        if (cli_sig_catchable(sig) &&
            (!cli_sig_inherited_ignored(sig) || (hold && sig == SIGTERM) || sig == SIGCHLD)) {
            sigaddset(handled, sig);
        }
    }
    pthread_sigmask(SIG_BLOCK, handled, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&sa.sa_mask);
    for (int sig = 1; sig < NSIG; sig++) {
        if (sigismember(handled, sig) == 1) {
            sigaction(sig, &sa, NULL);
        }
    }
    /* A broken Redis connection must be an error status, not our death:
     * on_signal() drops a SIGPIPE of rlock's own, and an inherited
     * SIG_IGN stays. */
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

/* The library's wait is interrupted by a cancellation token; a signal
 * only writes a byte to g_pipe (a handler may not call rlock), so this
 * thread watches the pipe and cancels the wait. It reads nothing: the
 * waiting thread drains the pipe afterwards to see which signal came. */
typedef struct sig_watch {
    rlock_cancel *cancel;
    int stop[2];
    pthread_t th;
} sig_watch;

static void *watch_signals(void *arg)
{
    sig_watch *w = arg;
    struct pollfd p[3] = {
        {g_pipe[0], POLLIN, 0}, {w->stop[0], POLLIN, 0}, {g_follow_fd, POLLIN, 0}};
    nfds_t n = g_follow_fd >= 0 ? 3 : 2;
    while (poll(p, n, -1) < 0 && errno == EINTR) {
    }
    if (n == 3 && p[2].revents != 0) {
        atomic_store(&g_follow_gone, true);
    }
    if ((p[0].revents & POLLIN) || atomic_load(&g_follow_gone)) {
        rlock_cancel_fire(w->cancel);
    }
    return NULL;
}

static bool watch_start(sig_watch *w)
{
    if (pipe2(w->stop, O_CLOEXEC) != 0) {
        return false;
    }
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    bool ok = pthread_create(&w->th, NULL, watch_signals, w) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!ok) {
        close(w->stop[0]);
        close(w->stop[1]);
    }
    return ok;
}

static void watch_stop(sig_watch *w)
{
    char b = 1;
    if (write(w->stop[1], &b, 1) < 0) {
        /* the thread may have ended already; join regardless */
    }
    pthread_join(w->th, NULL);
    close(w->stop[0]);
    close(w->stop[1]);
}

/* Takes the lock with the library's own wait (pub/sub, the holder's lease,
 * over whatever the client speaks, TLS included), as -w allows, cancelled
 * by a signal; returns -1 once held, with *acquired_at the time just
 * before the acquiring call was sent, else the exit code (having freed
 * nothing: the caller does). */
static int acquire(const cli_opts *o, const cli_args *a, rlock *l, int64_t *acquired_at)
{
    int64_t start = cli_now_ms();
    int64_t deadline = a->wait_ms < 0 ? -1 : start + a->wait_ms;
    rlock_status s;
    int sig = 0;
    int64_t ttl = -1;
    /* One attempt first: --verbose says who holds it before the wait. */
    int64_t t = cli_now_ms();
    s = rlock_lock_ex(l, 0, a->lease_ms, NULL, &ttl);
    if (s == RLOCK_EBUSY && a->wait_ms != 0) {
        cli_verbose(o, "%s: held elsewhere (TTL %lld ms); waiting (see rlock status)", a->name,
                    (long long)ttl);
        sig_watch w;
        if (rlock_cancel_new(&w.cancel) != RLOCK_OK) {
            return cli_fail(RLOCK_ENOMEM, a->name);
        }
        for (;;) {
            int64_t left = RLOCK_WAIT_FOREVER;
            if (deadline >= 0) {
                left = deadline > cli_now_ms() ? deadline - cli_now_ms() : 0;
            }
            if (!watch_start(&w)) {
                rlock_cancel_free(w.cancel);
                cli_error("%s: cannot start a thread: %s", a->cmd_name, strerror(errno));
                return CLI_EXIT_SOFTWARE;
            }
            t = cli_now_ms();
            s = rlock_lock_ex(l, left, a->lease_ms, w.cancel, NULL);
            watch_stop(&w);
            /* Only a terminating signal ends the wait; a stray SIGCHLD (from
             * a child rlock inherited) just restarts it. */
            if (s != RLOCK_ECANCELED || (sig = drain_for_signal()) != 0 ||
                atomic_load(&g_follow_gone)) {
                break;
            }
            rlock_cancel_reset(w.cancel);
        }
        rlock_cancel_free(w.cancel);
    }
    switch (s) {
    case RLOCK_OK:
        *acquired_at = t;
        cli_verbose(o, "%s: acquired in %.3f s", a->name, (double)(cli_now_ms() - start) / 1000);
        return -1;
    case RLOCK_ECANCELED:
        if (sig == 0) {
            /* hold: the process it follows exited while it waited */
            cli_verbose(o, "%s: %s exited while waiting: nothing taken", a->name,
                        a->follow_pid > 0 ? "the --pid process" : "its parent");
            return CLI_EXIT_OK;
        }
        return die_of(sig);
    case RLOCK_EBUSY:
        if (a->quiet) {
            /* -q: the exit code says it */
        } else if (a->wait_ms == 0) {
            cli_error("%s: held elsewhere, not acquired (one attempt: -n or -w 0)", a->name);
        } else {
            cli_error("%s: not acquired within %.3f s", a->name, (double)a->wait_ms / 1000);
        }
        return a->conflict_code;
    default:
        cli_detail_from_library();
        return cli_fail(s, a->name);
    }
}

int cli_run(const cli_opts *o, const cli_args *a)
{
    /* -c LINE: the shell flock(1) uses, $SHELL or /bin/sh. */
    const char *shell = getenv("SHELL");
    char *shell_argv[] = {(char *)(shell && *shell ? shell : "/bin/sh"), "-c", (char *)a->shell_cmd,
                          NULL};
    char **cmd = a->shell_cmd ? shell_argv : a->cmd;
    bool hold = cmd == NULL;

    each_fd(note_inherited);
    sigset_t handled;
    if (!setup_signals(&handled, hold)) {
        cli_error("%s: pipe: %s", a->cmd_name, strerror(errno));
        return CLI_EXIT_SOFTWARE;
    }
    cli_hold_watch hw;
    int rc = hold ? cli_hold_watch_init(a, &hw) : -1;
    if (rc >= 0) {
        return rc;
    }
    if (hold) {
        g_follow_fd = hw.pidfd;
    }
    g_tid = rlock_thread_id();
    rlock_client *c = NULL;
    rlock *l = NULL;
    rc = cli_client(o, on_lost, NULL, &c);
    if (rc >= 0) {
        return rc;
    }
    rlock_status s = cli_new_lock(c, a, &l);
    if (s != RLOCK_OK) {
        rlock_client_free(c);
        return cli_fail_lib(s, a->name);
    }
    pthread_sigmask(SIG_UNBLOCK, &handled, NULL);

    int64_t acquired_at = 0;
    if ((rc = acquire(o, a, l, &acquired_at)) >= 0) {
        rlock_free(l);
        rlock_client_free(c);
        return rc;
    }
    char owner[80];
    snprintf(owner, sizeof owner, "%s:%llu%s", rlock_client_id(c), (unsigned long long)g_tid,
             a->kind != NULL && strcmp(a->kind, "write") == 0 ? ":write" : "");
    int64_t token = -1;
    if (a->kind != NULL && strcmp(a->kind, "fenced") == 0 &&
        (s = rlock_fence_token(l, &token)) != RLOCK_OK) {
        /* Taken, but without its token COMMAND cannot fence its writes:
         * give the lock back rather than run it unprotected. */
        int code = cli_fail_lib(s, a->name);
        rlock_unlock(l);
        rlock_free(l);
        rlock_client_free(c);
        return code;
    }

    bool lost = false;
    int code;
    if (hold) {
        /* One line, flushed, so that a script reading it knows the lock
         * is held: the holder field, as rlock status shows it. */
        if (token >= 0) {
            printf("%s %lld\n", owner, (long long)token); /* --fenced: the token too */
        } else {
            printf("%s\n", owner);
        }
        if (fflush(stdout) != 0) {
            cli_verbose(o, "%s: standard output is gone", a->name);
            code = CLI_EXIT_OK;
        } else {
            code = cli_hold_loop(o, a, &hw, acquired_at, g_pipe[0], &g_lost, &lost);
        }
        if (hw.pidfd >= 0) {
            close(hw.pidfd);
        }
    } else {
        char **env = child_env(a->name, owner, token);
        cli_group g;
        run_state rs = {a, l, &g, cmd[0], -1, -1, -1, 0, 0, -1, false, false};
        int64_t fire_at;
        if (a->lease_ms > 0) {
            lease_plan(&rs, acquired_at, a->lease_ms, a->kill_after_ms);
            fire_at = rs.kill_line;
        } else {
            /* The key lives at least the watchdog's lease from just
             * before the acquiring call. */
            rs.wd_lease = o->watchdog_ms > 0 ? o->watchdog_ms : 30000; /* rlock.h's default */
            fire_at = acquired_at + rs.wd_lease - wd_margin(rs.wd_lease);
            rs.next_check = cli_now_ms() + rs.wd_lease / 6;
        }
        each_fd(cloexec_if_new);
        int err = env ? cli_group_start(&g, cmd, env, fire_at) : ENOMEM;
        free_env(env, token >= 0 ? 4 : 3);
        if (err != 0) {
            cli_error("%s: %s", cmd[0], strerror(err));
            code = err == ENOENT ? CLI_EXIT_NOTFOUND : CLI_EXIT_NOEXEC;
        } else {
            cli_verbose(o, "%s: running %s (pid %d, process group %d)", a->name, cmd[0],
                        (int)g.child, (int)g.pgid);
            code = supervise(&rs);
            /* What COMMAND left running in its group goes before the
             * lock: SIGTERM, then SIGKILL after -k TIME (default 2 s). */
            finish(o, &rs, a->kill_after_ms >= 0 ? a->kill_after_ms : 2000, rs.guard_gone);
            lost = rs.lost;
        }
    }

    /* COMMAND and its group are gone: nothing that was protected by the
     * lock runs any more. Signals that arrive from here on are not
     * forwarded and, being handled, cannot stop the release below. */
    s = rlock_unlock(l);
    if ((s == RLOCK_ELOST || s == RLOCK_ENOTOWNER) && !lost) {
        /* The child finished, but for part of its run it did not hold the
         * lock (force-unlocked, or expired before a renewal saw it). */
        lost = true;
        cli_error("%s: the lock was lost while %s: %s", a->name,
                  hold ? "it was held" : "COMMAND ran", rlock_strerror(s));
    } else if (s != RLOCK_OK && !lost) {
        cli_detail_from_library();
        cli_error("%s: could not release the lock (%s%s%s); it expires with its lease", a->name,
                  rlock_strerror(s), cli_detail_text()[0] ? ": " : "", cli_detail_text());
        cli_detail_clear();
    } else if (s == RLOCK_OK && !lost) {
        cli_verbose(o, "%s: released", a->name);
    }
    rlock_free(l);
    rlock_client_free(c);
    return lost ? CLI_EXIT_LOST : code;
}
