/* Passwords from outside the URL, so that none needs to appear in ps(1)
 * (the command line) or in the environment COMMAND inherits: RLOCK_AUTH
 * (as redis-cli's REDISCLI_AUTH), --askpass (as redis-cli's), and
 * --password-file. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

char *cli_take_env_auth(void)
{
    char *v = getenv("RLOCK_AUTH");
    if (v == NULL) {
        return NULL;
    }
    char *copy = strdup(v);
    /* unsetenv() only drops the pointer: the text stays in the initial
     * environment block, which ps e and /proc/PID/environ read. Wipe the
     * whole "RLOCK_AUTH=..." entry there (getenv() points into it). */
    char *entry = v - strlen("RLOCK_AUTH=");
    size_t n = strlen(entry);
    unsetenv("RLOCK_AUTH");
    explicit_bzero(entry, n);
    return copy;
}

/* Reads one line from fd a byte at a time, so that nothing past the line
 * is consumed (the rest of standard input belongs to COMMAND). */
static char *read_line(int fd, bool *eof)
{
    size_t cap = 128, n = 0;
    char *buf = malloc(cap);
    *eof = false;
    while (buf != NULL) {
        char c;
        ssize_t r = read(fd, &c, 1);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            *eof = n == 0;
            break;
        }
        if (c == '\n') {
            break;
        }
        if (n + 1 == cap) {
            char *bigger = malloc(cap * 2);
            if (bigger != NULL) {
                memcpy(bigger, buf, n);
            }
            cli_secure_free(buf, cap);
            buf = bigger;
            cap *= 2;
            if (buf == NULL) {
                break;
            }
        }
        buf[n++] = c;
    }
    if (buf != NULL) {
        if (n > 0 && buf[n - 1] == '\r') {
            n--;
        }
        buf[n] = '\0';
    }
    return buf;
}

char *cli_askpass(void)
{
    struct termios saved, quiet;
    bool tty = tcgetattr(0, &saved) == 0;
    if (tty) {
        /* Echo off before the prompt, as getpass(3) does: what is typed
         * once the prompt shows is neither echoed nor flushed away. */
        quiet = saved;
        quiet.c_lflag &= ~(tcflag_t)(ECHO | ECHONL);
        tcsetattr(0, TCSAFLUSH, &quiet);
        fputs("Redis password: ", stderr);
        fflush(stderr);
    }
    bool eof = false;
    char *pw = read_line(0, &eof);
    if (tty) {
        tcsetattr(0, TCSAFLUSH, &saved);
        fputc('\n', stderr);
    }
    if (pw != NULL && eof) {
        cli_secure_free(pw, 1);
        cli_error("--askpass: no password on standard input");
        return NULL;
    }
    if (pw == NULL) {
        cli_error("--askpass: out of memory");
    }
    return pw;
}

char *cli_password_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        cli_error("--password-file %s: %s", path, strerror(errno));
        return NULL;
    }
    bool eof = false;
    char *pw = read_line(fd, &eof);
    close(fd);
    if (pw == NULL) {
        cli_error("--password-file %s: out of memory", path);
    }
    /* An empty file is an empty password, which sends no AUTH. */
    return pw;
}
