/* rlock hold's watch: what ends a hold besides a signal (the process it
 * serves, its standard input and output), and the loop that keeps the
 * lock until one of them or a loss. Called by run.c, which takes the lock
 * and owns the signal pipe; calls proc.c (signals) and cli.c. */
#include "cli.h"
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static bool is_pipe_or_socket(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}

/* Whether pid has exited: gone, or a zombie. */
static bool pid_gone(pid_t pid)
{
    if (kill(pid, 0) != 0 && errno == ESRCH) {
        return true;
    }
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return false;
    }
    ssize_t k = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[k > 0 ? k : 0] = '\0';
    const char *rp = strrchr(buf, ')');
    return rp != NULL && (rp[2] == 'Z' || rp[2] == 'X');
}

static int open_pidfd(pid_t pid)
{
#ifdef SYS_pidfd_open
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd >= 0) {
        fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    return fd;
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

/* Sets up what hold follows, before the lock is taken; returns -1, or an
 * exit code when there is nothing to follow: --pid names no process (or a
 * zombie), or the parent has already exited. */
int cli_hold_watch_init(const cli_args *a, cli_hold_watch *hw)
{
    memset(hw, 0, sizeof *hw);
    hw->pidfd = -1;
    hw->in = is_pipe_or_socket(0);
    hw->out = is_pipe_or_socket(1);
    if (a->follow_pid > 0) {
        hw->pid = a->follow_pid;
        hw->pidfd = open_pidfd(hw->pid);
        /* pidfd_open() accepts a zombie: it has exited all the same. */
        if ((hw->pidfd < 0 && errno == ESRCH) || pid_gone(hw->pid)) {
            if (hw->pidfd >= 0) {
                close(hw->pidfd);
            }
            cli_error("hold: --pid %d: no such process", (int)hw->pid);
            return CLI_EXIT_USAGE;
        }
        return -1;
    }
    /* The parent is followed by a pidfd, readable once the whole process
     * has exited. Not PR_SET_PDEATHSIG: that comes when the *thread* that
     * forked hold ends, and a threaded caller would lose its lock while it
     * runs. A parent that died before this point cannot be recognised
     * unless hold was adopted by init (getppid() is 1); a subreaper that
     * adopts it looks like a parent (the manual page says so, and
     * recommends --pid "$$"). Without pidfds (Linux < 5.3), getppid() is
     * compared every 100 ms. */
    hw->parent = getppid();
    if (hw->parent == 1) {
        cli_error("hold: its parent has exited (it was adopted by init): nothing taken "
                  "(use --pid to follow a process)");
        return CLI_EXIT_USAGE;
    }
    if (hw->parent > 1) {
        hw->pidfd = open_pidfd(hw->parent);
        if (getppid() != hw->parent) {
            cli_error("hold: its parent has exited: nothing taken");
            return CLI_EXIT_USAGE;
        }
    }
    /* pid 0: hold is the namespace's init (a container's entrypoint); it
     * has no parent to follow and holds until a signal. */
    return -1;
}

/* Holds the lock until a signal that ends a process, the followed process
 * ends, stdin reaches EOF or stdout loses its reader; returns 0 then, or
 * CLI_EXIT_LOST at once when the lock is lost. */
int cli_hold_loop(const cli_opts *o, const cli_args *a, cli_hold_watch *hw, int64_t acquired_at,
                  int sig_fd, atomic_bool *lost_flag, bool *lost)
{
    int64_t lease_end = a->lease_ms > 0 ? acquired_at + a->lease_ms : -1;
    for (;;) {
        int64_t now = cli_now_ms();
        const char *why = NULL;
        if (atomic_load(lost_flag)) {
            why = "the watchdog found it gone";
        } else if (lease_end >= 0 && now >= lease_end) {
            why = "its lease ran out";
        }
        if (why != NULL) {
            *lost = true;
            cli_error("%s: lock lost (%s)", a->name, why);
            return CLI_EXIT_LOST;
        }
        const char *end = NULL;
        if (hw->parent > 0 && getppid() != hw->parent) {
            end = "its parent exited";
        } else if (hw->pid > 0 && hw->pidfd < 0 && pid_gone(hw->pid)) {
            end = "the --pid process exited";
        }
        if (end != NULL) {
            cli_verbose(o, "%s: %s", a->name, end);
            return CLI_EXIT_OK;
        }
        int64_t next = lease_end;
        bool look = (hw->pid > 0 || hw->parent > 0) && hw->pidfd < 0;
        if (look && (next < 0 || next > now + 100)) {
            next = now + 100; /* no pidfd (Linux < 5.3): look every 100 ms */
        }
        int timeout = next < 0 ? -1 : (int)(next - now > INT_MAX ? INT_MAX : next - now);
        struct pollfd p[4] = {{sig_fd, POLLIN, 0}};
        nfds_t n = 1;
        int in_at = -1, out_at = -1, pid_at = -1;
        if (hw->in) {
            in_at = (int)n;
            p[n++] = (struct pollfd){0, POLLIN, 0};
        }
        if (hw->out) {
            out_at = (int)n;
            p[n++] = (struct pollfd){1, 0, 0}; /* POLLERR: no reader left */
        }
        if (hw->pidfd >= 0) {
            pid_at = (int)n;
            p[n++] = (struct pollfd){hw->pidfd, POLLIN, 0};
        }
        if (poll(p, n, timeout) <= 0) {
            continue;
        }
        if (pid_at >= 0 && p[pid_at].revents != 0) {
            cli_verbose(o, "%s: %s exited", a->name,
                        hw->pid > 0 ? "the --pid process" : "its parent");
            return CLI_EXIT_OK;
        }
        if (out_at >= 0 && p[out_at].revents & (POLLERR | POLLHUP)) {
            cli_verbose(o, "%s: standard output has no reader", a->name);
            return CLI_EXIT_OK;
        }
        if (in_at >= 0 && p[in_at].revents != 0) {
            /* Bytes are read and ignored; EOF or an error ends the hold. */
            char buf[512];
            ssize_t k = read(0, buf, sizeof buf);
            if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN)) {
                cli_verbose(o, "%s: standard input closed", a->name);
                return CLI_EXIT_OK;
            }
        }
        unsigned char buf[64];
        ssize_t k;
        while ((k = read(sig_fd, buf, sizeof buf)) > 0) {
            for (ssize_t i = 0; i < k; i++) {
                if (buf[i] != CLI_WAKE_LOST && cli_sig_terminates(buf[i])) {
                    cli_verbose(o, "%s: signal %d (%s)", a->name, buf[i], strsignal(buf[i]));
                    return CLI_EXIT_OK;
                }
            }
        }
    }
}
