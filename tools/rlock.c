/* rlock: the command-line face of the library, flock(1) across machines.
 *
 *   rlock [--url URL] run [-w MS] [-l MS] [-s SIG] [-k MS] NAME -- CMD [ARG...]
 *   rlock [--url URL] status [--json] NAME
 *   rlock [--url URL] unlock --force NAME
 *   rlock [--url URL] wait [-w MS] NAME
 *
 * This file parses the command line, maps library statuses to exit codes
 * and runs the small sub-commands; run.c runs a command under a lock. The
 * exit codes are documented in docs/rlock.1 and in usage() below. */
#include "cli.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_URL "redis://127.0.0.1:6379"

static const char usage_text[] =
    "usage: rlock [--url URL] COMMAND [OPTIONS] NAME ...\n"
    "\n"
    "Redisson-compatible distributed locks from the shell.\n"
    "\n"
    "commands:\n"
    "  run [-w MS] [-l MS] [-s SIG] [-k MS] NAME -- COMMAND [ARG...]\n"
    "        take NAME, run COMMAND, release NAME when it exits\n"
    "        -w, --wait MS      give up after MS ms (default: wait forever)\n"
    "        -l, --lease MS     hold for at most MS ms, no renewal (default:\n"
    "                           renewed by the watchdog while COMMAND runs)\n"
    "        -s, --signal SIG   signal for COMMAND if the lock is lost (TERM)\n"
    "        -k, --kill-after MS  then SIGKILL it if still running after MS ms\n"
    "        --watchdog MS      watchdog lease (default RLOCK_WATCHDOG_MS or 30000)\n"
    "  status [--json] NAME   show whether NAME is locked, its holders and TTL\n"
    "  unlock --force NAME    delete NAME whoever holds it and wake its waiters\n"
    "  wait [-w MS] NAME      block until NAME is free (pub/sub, no polling)\n"
    "\n"
    "options:\n"
    "  --url URL      redis://[[user]:pass@]host[:port][/db] or\n"
    "                 unix:///path[?db=N]; default $RLOCK_URL, $REDIS_URL, or\n"
    "                 " DEFAULT_URL "\n"
    "  -h, --help     show this help\n"
    "  -V, --version  show the version\n"
    "\n"
    "exit status:\n"
    "  0    success (run: COMMAND exited 0; status: NAME is locked)\n"
    "  1    status: NAME is not locked\n"
    "  2    bad usage or configuration (e.g. a malformed URL)\n"
    "  69   cannot reach Redis (connect, AUTH or timeout)\n"
    "  70   any other error (Redis error reply, wrong key type, ...)\n"
    "  75   run: not acquired within -w; wait: still locked after -w\n"
    "  79   run: the lock was lost while COMMAND ran (COMMAND was signalled)\n"
    "  126  run: COMMAND is not executable\n"
    "  127  run: COMMAND was not found\n"
    "  128+N  run: COMMAND (or rlock, while waiting) was killed by signal N\n"
    "  other  run: COMMAND's own exit status\n";

static void usage(FILE *f)
{
    fputs(usage_text, f);
}

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("rlock: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cli_exit_code(rlock_status s)
{
    switch (s) {
    case RLOCK_OK:
        return CLI_EXIT_OK;
    case RLOCK_EINVAL:
        return CLI_EXIT_USAGE;
    case RLOCK_EBUSY:
        return CLI_EXIT_TIMEOUT;
    case RLOCK_ELOST:
        return CLI_EXIT_LOST;
    case RLOCK_EIO:
    case RLOCK_ETIMEDOUT:
        return CLI_EXIT_UNAVAILABLE;
    default:
        return CLI_EXIT_SOFTWARE;
    }
}

int cli_fail(rlock_status s, const char *what)
{
    cli_error("%s: %s", what, rlock_strerror(s));
    return cli_exit_code(s);
}

bool cli_parse_ms(const char *s, int64_t *out)
{
    if (s == NULL || *s == '\0' || strspn(s, "0123456789") != strlen(s) || strlen(s) > 13) {
        return false;
    }
    int64_t v = strtoll(s, NULL, 10);
    if (v > RLOCK_MAX_TIME_MS) {
        return false;
    }
    *out = v;
    return true;
}

int64_t cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

rlock_status cli_client(const cli_opts *o, void (*on_lost)(const char *, uint64_t, void *),
                        void *arg, rlock_client **out)
{
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = o->url;
    cfg.watchdog_timeout_ms = o->watchdog_ms;
    cfg.on_lock_lost = on_lost;
    cfg.on_lock_lost_arg = arg;
    /* The command holds at most one lock: a big pool would only open
     * connections that are never used. */
    cfg.pool_size = 2;
    return rlock_client_new(&cfg, out);
}

/* A client and a handle on name, or an exit code. */
static int open_lock(const cli_opts *o, const char *name, rlock_client **c, rlock **l)
{
    rlock_status s = cli_client(o, NULL, NULL, c);
    if (s != RLOCK_OK) {
        return cli_fail(s, o->url);
    }
    s = rlock_new(*c, name, l);
    if (s != RLOCK_OK) {
        rlock_client_free(*c);
        return cli_fail(s, name);
    }
    return -1;
}

/* Options and the one NAME of status, unlock and wait. GNU argument
 * permutation lets the options follow NAME ("status NAME --json"). */
typedef struct simple_args {
    bool json;
    bool force;
    int64_t wait_ms;
    const char *name;
} simple_args;

static int parse_simple(cli_opts *o, int argc, char **argv, const char *flags, simple_args *a)
{
    static const struct option longs[] = {
        {"json", no_argument, NULL, 'j'},       {"force", no_argument, NULL, 'f'},
        {"wait", required_argument, NULL, 'w'}, {"url", required_argument, NULL, 'u'},
        {"help", no_argument, NULL, 'h'},       {NULL, 0, NULL, 0}};
    a->json = a->force = false;
    a->wait_ms = RLOCK_WAIT_FOREVER;
    a->name = NULL;
    optind = 0; /* glibc: re-initialise, argv[0] is the sub-command */
    int ch;
    while ((ch = getopt_long(argc, argv, "w:h", longs, NULL)) != -1) {
        if (ch == 'h') {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        if (ch == 'u') {
            o->url = optarg;
            continue;
        }
        if (ch == '?' || strchr(flags, ch) == NULL) {
            cli_error("%s: unexpected option (see rlock --help)", argv[0]);
            return CLI_EXIT_USAGE;
        }
        if (ch == 'j') {
            a->json = true;
        } else if (ch == 'f') {
            a->force = true;
        } else if (!cli_parse_ms(optarg, &a->wait_ms)) {
            cli_error("%s: -w wants milliseconds, got '%s'", argv[0], optarg);
            return CLI_EXIT_USAGE;
        }
    }
    if (optind != argc - 1 || argv[optind][0] == '\0') {
        cli_error("%s: expected exactly one lock NAME (see rlock --help)", argv[0]);
        return CLI_EXIT_USAGE;
    }
    a->name = argv[optind];
    return -1;
}

static int cmd_status(cli_opts *o, int argc, char **argv)
{
    simple_args a;
    int rc = parse_simple(o, argc, argv, "j", &a);
    if (rc >= 0) {
        return rc;
    }
    bool locked = false;
    rlock_status s = cli_print_status(o->url, a.name, a.json, &locked);
    if (s != RLOCK_OK) {
        return cli_fail(s, a.name);
    }
    return locked ? CLI_EXIT_OK : CLI_EXIT_FREE;
}

static int cmd_unlock(cli_opts *o, int argc, char **argv)
{
    simple_args a;
    int rc = parse_simple(o, argc, argv, "f", &a);
    if (rc >= 0) {
        return rc;
    }
    /* Only the holder can release a lock normally, and the holder of a lock
     * taken by `rlock run` is that process: from outside, unlocking always
     * means breaking someone's lock, so it has to be asked for. */
    if (!a.force) {
        cli_error("unlock: only --force is supported: it deletes the lock "
                  "whoever holds it");
        return CLI_EXIT_USAGE;
    }
    rlock_client *c = NULL;
    rlock *l = NULL;
    rc = open_lock(o, a.name, &c, &l);
    if (rc >= 0) {
        return rc;
    }
    bool was = false;
    rlock_status s = rlock_force_unlock(l, &was);
    if (s == RLOCK_OK) {
        printf(was ? "%s: unlocked\n" : "%s: was not locked\n", a.name);
    }
    rlock_free(l);
    rlock_client_free(c);
    return s == RLOCK_OK ? CLI_EXIT_OK : cli_fail(s, a.name);
}

/* The probe of `rlock wait`: one PTTL, -2 meaning free. */
static rlock_status probe_free(void *arg, bool *done, int64_t *ttl)
{
    int64_t t = -2;
    rlock_status s = rlock_remain_ttl(arg, &t);
    if (s == RLOCK_OK) {
        *done = t == -2;
        *ttl = t;
    }
    return s;
}

static int cmd_wait(cli_opts *o, int argc, char **argv)
{
    simple_args a;
    int rc = parse_simple(o, argc, argv, "w", &a);
    if (rc >= 0) {
        return rc;
    }
    rlock_client *c = NULL;
    rlock *l = NULL;
    rc = open_lock(o, a.name, &c, &l);
    if (rc >= 0) {
        return rc;
    }
    rlock_status err = RLOCK_OK;
    cli_wait_result r = cli_wait_free(o->url, a.name, a.wait_ms, -1, probe_free, l, &err);
    rlock_free(l);
    rlock_client_free(c);
    switch (r) {
    case CLI_WAIT_DONE:
        return CLI_EXIT_OK;
    case CLI_WAIT_TIMEOUT:
        cli_error("%s: still locked after %lld ms", a.name, (long long)a.wait_ms);
        return CLI_EXIT_TIMEOUT;
    default:
        return cli_fail(err, a.name);
    }
}

int main(int argc, char **argv)
{
    static const struct option longs[] = {{"url", required_argument, NULL, 'u'},
                                          {"help", no_argument, NULL, 'h'},
                                          {"version", no_argument, NULL, 'V'},
                                          {NULL, 0, NULL, 0}};
    cli_opts o = {NULL, 0};
    int ch;
    /* '+': stop at the sub-command, whose options are its own. */
    while ((ch = getopt_long(argc, argv, "+hV", longs, NULL)) != -1) {
        if (ch == 'u') {
            o.url = optarg;
        } else if (ch == 'h') {
            usage(stdout);
            return CLI_EXIT_OK;
        } else if (ch == 'V') {
            printf("rlock %s\n", rlock_version());
            return CLI_EXIT_OK;
        } else {
            usage(stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (o.url == NULL) {
        o.url = getenv("RLOCK_URL");
    }
    if (o.url == NULL || *o.url == '\0') {
        o.url = getenv("REDIS_URL");
    }
    if (o.url == NULL || *o.url == '\0') {
        o.url = DEFAULT_URL;
    }
    const char *wd = getenv("RLOCK_WATCHDOG_MS");
    if (wd != NULL && *wd != '\0' && (!cli_parse_ms(wd, &o.watchdog_ms) || o.watchdog_ms == 0)) {
        cli_error("RLOCK_WATCHDOG_MS wants a positive number of ms, got '%s'", wd);
        return CLI_EXIT_USAGE;
    }
    const char *cmd = argv[optind];
    int sub_argc = argc - optind;
    char **sub_argv = argv + optind;
    if (strcmp(cmd, "run") == 0) {
        return cli_run(&o, sub_argc, sub_argv);
    }
    if (strcmp(cmd, "status") == 0) {
        return cmd_status(&o, sub_argc, sub_argv);
    }
    if (strcmp(cmd, "unlock") == 0) {
        return cmd_unlock(&o, sub_argc, sub_argv);
    }
    if (strcmp(cmd, "wait") == 0) {
        return cmd_wait(&o, sub_argc, sub_argv);
    }
    if (strcmp(cmd, "help") == 0) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(cmd, "version") == 0) {
        printf("rlock %s\n", rlock_version());
        return CLI_EXIT_OK;
    }
    cli_error("unknown command '%s' (see rlock --help)", cmd);
    return CLI_EXIT_USAGE;
}
