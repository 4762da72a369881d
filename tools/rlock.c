/* rlock: the command-line face of the library, flock(1) across machines.
 *
 *   rlock [OPTIONS] run [-w TIME|-n] [-q] [-E N] [-l TIME] [-S SIG] [-k TIME]
 *                       NAME {-- COMMAND [ARG...] | -c COMMAND-LINE}
 *   rlock [OPTIONS] hold [-w TIME|-n] [-q] [-E N] [-l TIME] [--pid PID] NAME
 *   rlock [OPTIONS] status [--json] NAME
 *   rlock [OPTIONS] unlock --force NAME
 *   rlock [OPTIONS] wait [-w TIME|-n] [-q] [-E N] NAME
 *
 * This file parses the command line, finds the server URL and its password,
 * and runs the small sub-commands; run.c runs a command under a lock (or
 * holds one), status.c prints a lock's state. This file is the top of the
 * command: the others never call into it (cli.h lists the order). The exit
 * codes are in cli.h, docs/rlock.1 and usage() below. */
#include "cli.h"
#include "proc.h" /* cli_proc_init() */
#include "tool.h" /* rlock__hiredis_version(), for --version */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_URL "redis://127.0.0.1:6379"
#ifndef CLI_VERSION
#define CLI_VERSION RLOCK_VERSION_STRING
#endif

static const char usage_text[] =
    "usage: rlock [OPTIONS] COMMAND [COMMAND OPTIONS] NAME ...\n"
    "\n"
    "Redisson-compatible distributed locks from the shell.\n"
    "\n"
    "commands:\n"
    "  run [-w TIME|-n] [-q] [-E N] [-l TIME] [-S SIG] [-k TIME] NAME -- COMMAND [ARG...]\n"
    "  run ... NAME -c COMMAND-LINE\n"
    "        take NAME, run COMMAND, release NAME when it exits\n"
    "  hold [-w TIME|-n] [-q] [-E N] [-l TIME] [--pid PID] NAME\n"
    "        take NAME, print the holder id, keep NAME until a signal, until\n"
    "        its parent (or PID) exits, or its stdin/stdout pipe closes\n"
    "  status [--json] NAME   show whether NAME is locked, its holders, their\n"
    "                         connections (host, pid) and the TTL\n"
    "  unlock --force NAME    delete NAME whoever holds it and wake its waiters\n"
    "  wait [-w TIME|-n] [-q] [-E N] NAME   block until NAME is free (pub/sub, no polling)\n"
    "\n"
    "command options (before NAME):\n"
    "  -w, --wait, --timeout TIME  give up after TIME (default: wait forever),\n"
    "                         as flock -w (--redis-timeout bounds each Redis call)\n"
    "  -n, --nonblock         one attempt, do not wait (-w 0)\n"
    "  -q, --quiet            say nothing when NAME is busy (the exit code says it)\n"
    "  -E, --conflict-exit-code N  exit code when not acquired (default 75)\n"
    "  -l, --lease TIME       hold for at most TIME, no renewal (default: the\n"
    "                         watchdog renews the lock while it is held); run:\n"
    "                         COMMAND gets -S at TIME - M - K and SIGKILL at\n"
    "                         TIME - M (M: TIME/10, at most 1s; K: -k, or\n"
    "                         TIME/4, at most 2s), before the key can expire\n"
    "  -S, --signal SIG       signal for COMMAND if the lock is lost (TERM)\n"
    "  -k, --kill-after TIME  then SIGKILL it if still running after TIME\n"
    "  -c, --command LINE     run LINE with $SHELL -c (after NAME, as flock -c)\n"
    "  --watchdog TIME        watchdog lease (default RLOCK_WATCHDOG_MS or 30s)\n"
    "  --fair                 a fair lock: first come, first served across\n"
    "                         processes (Redisson getFairLock)\n"
    "  -s, --shared, --read   the read (shared) half of a read/write lock\n"
    "  --write                its write (exclusive) half: pairs with --read\n"
    "  --fenced               a fenced lock: COMMAND gets the acquisition's\n"
    "                         token in RLOCK_FENCE_TOKEN\n"
    "  --spin                 a spin lock: waiters retry, no pub/sub\n"
    "  -x, -e, --exclusive    the reentrant lock (the default); never mix\n"
    "                         kinds on one NAME\n"
    "  --json                 status: print JSON (exit 0 whenever answered)\n"
    "  --force                unlock: required\n"
    "  TIME is seconds, fractions allowed (1.5), or a number with a unit:\n"
    "  500ms, 30s, 2m, 1h.\n"
    "\n"
    "options (before or after COMMAND):\n"
    "  --url URL      redis://[[user]:password@]host[:port][/db],\n"
    "                 rediss://... (TLS) or\n"
    "                 unix:///path[?db=N][&user=U][&password=P]; default\n"
    "                 $RLOCK_URL, $REDIS_URL, or " DEFAULT_URL "\n"
    "  --cacert FILE, --cacertdir DIR  CAs that sign the server's certificate\n"
    "                 (default: the system's, or $SSL_CERT_FILE)\n"
    "  --cert FILE, --key FILE  client certificate and key (mutual TLS)\n"
    "  --tls-server-name NAME  name the certificate must carry (default: host)\n"
    "  --tls-insecure  do not verify the server's certificate (tests only)\n"
    "  --redis-timeout TIME  give up on connecting, and on each reply, after TIME\n"
    "                 (default: 2s to connect, 3s per reply)\n"
    "  --askpass      read the password from standard input (no echo on a tty)\n"
    "  --password-file FILE  read the password from the first line of FILE\n"
    "                 (RLOCK_AUTH in the environment also gives a password;\n"
    "                 it is removed from COMMAND's environment)\n"
    "  -v, --verbose  say what is happening on stderr\n"
    "  -h, --help     show this help\n"
    "  -V, --version  show the versions of rlock, the library and hiredis\n"
    "\n"
    "exit status:\n"
    "  0    success (run: COMMAND exited 0; status: NAME is locked, or any\n"
    "       answer with --json; hold: released after a signal)\n"
    "  1    status: NAME is not locked (Redis answered; an error is never 0 or 1)\n"
    "  2    bad usage: command line, URL (the message names the part), password\n"
    "  69   cannot reach Redis (connect refused, timeout, link lost), or\n"
    "       no secure connection (TLS: certificate not verified or refused)\n"
    "  70   other errors (Redis error reply, e.g. the key holds another type)\n"
    "  75   not acquired within -w (run, hold), still locked after -w (wait);\n"
    "       -E changes it\n"
    "  77   the server refused the password or user, wants one, or its ACL\n"
    "       forbids a command\n"
    "  78   the server refused the URL's database\n"
    "  79   the lock was lost while COMMAND ran (COMMAND was signalled), or\n"
    "       while it was held; or a guard died (COMMAND was killed)\n"
    "  126  run: COMMAND is not executable\n"
    "  127  run: COMMAND was not found\n"
    "  128+N  run: COMMAND (or rlock, while waiting) was killed by signal N\n"
    "  other  run: COMMAND's own exit status\n";

static void usage(FILE *f)
{
    fputs(usage_text, f);
}

static void version(void)
{
    printf("rlock %s\nlibrlock %s\nhiredis %s\n", CLI_VERSION, rlock_version(),
           rlock__hiredis_version());
}

/* A client and a handle on name, or an exit code. */
static int open_lock(const cli_opts *o, const cli_args *a, rlock_client **c, rlock **l)
{
    const char *name = a->name;
    int rc = cli_client(o, NULL, NULL, c);
    if (rc >= 0) {
        return rc;
    }
    rlock_status s = cli_new_lock(*c, a, l);
    if (s != RLOCK_OK) {
        rlock_client_free(*c);
        return cli_fail_lib(s, name);
    }
    return -1;
}

/* ---- the command line ----------------------------------------------------- */

enum {
    OPT_URL = 0x100,
    OPT_ASKPASS,
    OPT_PASSWORD_FILE,
    OPT_WATCHDOG,
    OPT_JSON,
    OPT_FORCE,
    OPT_PID,
    OPT_REDIS_TIMEOUT,
    OPT_CACERT,
    OPT_CACERTDIR,
    OPT_CERT,
    OPT_KEY,
    OPT_TLS_SERVER_NAME,
    OPT_TLS_INSECURE,
    OPT_FAIR,
    OPT_READ,
    OPT_WRITE,
    OPT_FENCED,
    OPT_SPIN,
};

static const struct option long_opts[] = {
    {"url", required_argument, NULL, OPT_URL},
    {"askpass", no_argument, NULL, OPT_ASKPASS},
    {"password-file", required_argument, NULL, OPT_PASSWORD_FILE},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {"wait", required_argument, NULL, 'w'},
    {"timeout", required_argument, NULL, 'w'},
    {"nonblock", no_argument, NULL, 'n'},
    {"nb", no_argument, NULL, 'n'},
    {"conflict-exit-code", required_argument, NULL, 'E'},
    {"lease", required_argument, NULL, 'l'},
    {"signal", required_argument, NULL, 'S'},
    {"kill-after", required_argument, NULL, 'k'},
    {"watchdog", required_argument, NULL, OPT_WATCHDOG},
    {"shared", no_argument, NULL, 's'},
    {"read", no_argument, NULL, OPT_READ},
    {"write", no_argument, NULL, OPT_WRITE},
    {"fair", no_argument, NULL, OPT_FAIR},
    {"fenced", no_argument, NULL, OPT_FENCED},
    {"spin", no_argument, NULL, OPT_SPIN},
    {"exclusive", no_argument, NULL, 'x'},
    {"command", required_argument, NULL, 'c'},
    {"json", no_argument, NULL, OPT_JSON},
    {"force", no_argument, NULL, OPT_FORCE},
    {"pid", required_argument, NULL, OPT_PID},
    {"quiet", no_argument, NULL, 'q'},
    {"silent", no_argument, NULL, 'q'},
    {"redis-timeout", required_argument, NULL, OPT_REDIS_TIMEOUT},
    {"cacert", required_argument, NULL, OPT_CACERT},
    {"cacertdir", required_argument, NULL, OPT_CACERTDIR},
    {"cert", required_argument, NULL, OPT_CERT},
    {"key", required_argument, NULL, OPT_KEY},
    {"tls-server-name", required_argument, NULL, OPT_TLS_SERVER_NAME},
    {"tls-insecure", no_argument, NULL, OPT_TLS_INSECURE},
    {NULL, 0, NULL, 0},
};

/* The option letters each sub-command takes, besides the shared ones. */
static const char *allowed_for(const char *cmd)
{
    if (strcmp(cmd, "run") == 0) {
        return "wnqElSkWsxcK";
    }
    if (strcmp(cmd, "hold") == 0) {
        return "wnqElWsxPK";
    }
    if (strcmp(cmd, "wait") == 0) {
        return "wnqEsxK";
    }
    if (strcmp(cmd, "status") == 0) {
        return "j";
    }
    if (strcmp(cmd, "unlock") == 0) {
        return "fsxK";
    }
    return NULL;
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

/* The option as the user wrote it, for messages: "--wait", "-w". */
static const char *opt_name(int ch, char *buf, size_t size)
{
    for (const struct option *lo = long_opts; lo->name != NULL; lo++) {
        if (lo->val == ch && ch >= 0x100) {
            snprintf(buf, size, "--%s", lo->name);
            return buf;
        }
    }
    snprintf(buf, size, "-%c", ch);
    return buf;
}

/* A usage error: one line, and where to look. */
static int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(const char *cmd, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (cmd != NULL) {
        cli_error("%s: %s; see rlock --help", cmd, msg);
    } else {
        cli_error("%s; see rlock --help", msg);
    }
    return CLI_EXIT_USAGE;
}

/* What getopt_long() refused ('?' unknown, ':' value missing), as one
 * line; getopt's own message is off (opterr = 0). */
static int refused(const char *cmd, int ch, char **argv)
{
    char buf[64];
    const char *arg = argv[optind - 1];
    if (ch == ':') {
        if (optopt != 0 && optopt < 0x100) {
            return usage_error(cmd, "option -%c wants a value", optopt);
        }
        return usage_error(cmd, "option %.*s wants a value", (int)strcspn(arg, "="), arg);
    }
    (void)buf;
    if (optopt != 0 && strncmp(arg, "--", 2) != 0) {
        return usage_error(cmd, "unknown option -%c", optopt);
    }
    return usage_error(cmd, "unknown option %.*s", (int)strcspn(arg, "="), arg);
}

/* Options shared by every position: the URL, password sources, verbosity,
 * Redis timeouts. Returns true if ch was one of them (*rc then set to an
 * exit code on a bad value, else left alone). */
static bool common_option(cli_opts *o, int ch, int *rc)
{
    switch (ch) {
    case OPT_CACERT:
        o->tls_ca_file = optarg;
        return true;
    case OPT_CACERTDIR:
        o->tls_ca_dir = optarg;
        return true;
    case OPT_CERT:
        o->tls_cert = optarg;
        return true;
    case OPT_KEY:
        o->tls_key = optarg;
        return true;
    case OPT_TLS_SERVER_NAME:
        o->tls_server_name = optarg;
        return true;
    case OPT_TLS_INSECURE:
        o->tls_insecure = true;
        return true;
    case OPT_REDIS_TIMEOUT: {
        int64_t ms = 0;
        if (!cli_parse_duration(optarg, &ms) || ms < 1) {
            *rc = usage_error(NULL, "--redis-timeout wants a positive time (500ms, 2s), got '%s'",
                              optarg);
        } else {
            o->connect_timeout_ms = ms;
            o->command_timeout_ms = ms;
        }
        return true;
    }
    case OPT_URL:
        o->url_arg = optarg;
        o->url_src = "--url";
        return true;
    case OPT_ASKPASS:
        o->askpass = true;
        return true;
    case OPT_PASSWORD_FILE:
        o->password_file = optarg;
        return true;
    case 'v':
        o->verbose = true;
        return true;
    default:
        return false;
    }
}

static int bad_value(const char *cmd, int ch, const char *what)
{
    char buf[64];
    return usage_error(cmd, "%s wants %s, got '%s'", opt_name(ch, buf, sizeof buf), what, optarg);
}

/* One option of a sub-command; returns an exit code, or -1 to go on. */
static int sub_option(cli_opts *o, const char *cmd, int ch, cli_args *a)
{
    static const char *const duration = "a time (1.5, 500ms, 2m)";
    switch (ch) {
    case 'w':
        return cli_parse_duration(optarg, &a->wait_ms) ? -1 : bad_value(cmd, ch, duration);
    case 'n':
        a->wait_ms = 0;
        return -1;
    case 'q':
        a->quiet = true;
        return -1;
    case 'E': {
        char *end = NULL;
        long v = strtol(optarg, &end, 10);
        if (*optarg == '\0' || *end != '\0' || v < 0 || v > 255) {
            return bad_value(cmd, ch, "an exit code from 0 to 255");
        }
        a->conflict_code = (int)v;
        return -1;
    }
    case 'l':
        return cli_parse_duration(optarg, &a->lease_ms) && a->lease_ms > 0
                   ? -1
                   : bad_value(cmd, ch, "a positive time (30s, 1.5m)");
    case 'S':
        return (a->sig = parse_signal(optarg)) > 0 ? -1 : bad_value(cmd, ch, "a signal name");
    case 'k':
        return cli_parse_duration(optarg, &a->kill_after_ms) ? -1 : bad_value(cmd, ch, duration);
    case OPT_WATCHDOG:
        return cli_parse_duration(optarg, &o->watchdog_ms) && o->watchdog_ms >= 3
                   ? -1
                   : bad_value(cmd, ch, "a time of at least 3 ms");
    case 's':
    case OPT_READ:
    case OPT_WRITE:
    case OPT_FAIR:
    case OPT_FENCED:
    case OPT_SPIN:
    case 'x': {
        const char *kind = ch == 's' || ch == OPT_READ ? "read"
                           : ch == OPT_WRITE           ? "write"
                           : ch == OPT_FAIR            ? "fair"
                           : ch == OPT_FENCED          ? "fenced"
                           : ch == OPT_SPIN            ? "spin"
                                                       : NULL;
        if (a->kind_set && !(kind == NULL ? a->kind == NULL
                                          : a->kind != NULL && strcmp(a->kind, kind) == 0)) {
            return usage_error(cmd, "choose one kind of lock (--fair, --read/-s, --write, "
                                    "--fenced, --spin or the default -x)");
        }
        a->kind = kind;
        a->kind_set = true;
        return -1;
    }
    case 'c':
        a->shell_cmd = optarg;
        return -1;
    case OPT_JSON:
        a->json = true;
        return -1;
    case OPT_FORCE:
        a->force = true;
        return -1;
    case OPT_PID: {
        char *end = NULL;
        long v = strtol(optarg, &end, 10);
        if (*optarg == '\0' || *end != '\0' || v <= 0 || v > INT_MAX) {
            return usage_error(cmd, "--pid wants a process id, got '%s'", optarg);
        }
        a->follow_pid = (int)v;
        return -1;
    }
    default:
        return usage_error(cmd, "unexpected option");
    }
}

/* The letter an option is filed under in allowed_for(). */
static int letter(int ch)
{
    switch (ch) {
    case OPT_WATCHDOG:
        return 'W';
    case OPT_JSON:
        return 'j';
    case OPT_FORCE:
        return 'f';
    case OPT_PID:
        return 'P';
    case 'e':
        return 'x';
    case OPT_READ:
    case OPT_WRITE:
    case OPT_FAIR:
    case OPT_FENCED:
    case OPT_SPIN:
        return 'K';
    default:
        return ch;
    }
}

/* Parses a sub-command's options, NAME and (run) COMMAND. run and hold
 * stop at NAME, so COMMAND's own options are never ours; the others let
 * options follow NAME ("status NAME --json"). */
static int parse_sub(cli_opts *o, int argc, char **argv, cli_args *a)
{
    const char *cmd = argv[0];
    const char *allowed = allowed_for(cmd);
    bool runs = strcmp(cmd, "run") == 0 || strcmp(cmd, "hold") == 0;
    optind = 0; /* glibc: re-initialise; argv[0] is the sub-command */
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, runs ? "+:w:nqE:l:S:k:sxec:vh" : ":w:nqE:l:S:k:sxec:vh",
                             long_opts, NULL)) != -1) {
        int rc = -1;
        if (common_option(o, ch, &rc)) {
            if (rc >= 0) {
                return rc;
            }
            continue;
        }
        if (ch == 'h') {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        if (ch == '?' || ch == ':') {
            return refused(cmd, ch, argv);
        }
        if (strchr(allowed, letter(ch)) == NULL) {
            char buf[64];
            return usage_error(cmd, "option %s is not for %s", opt_name(ch, buf, sizeof buf),
                               cmd);
        }
        rc = sub_option(o, cmd, ch == 'e' ? 'x' : ch, a);
        if (rc >= 0) {
            return rc;
        }
    }
    if (optind >= argc || argv[optind][0] == '\0') {
        return usage_error(cmd, "expected a lock NAME");
    }
    a->name = argv[optind++];
    if (strlen(a->name) > RLOCK_NAME_MAX) {
        return usage_error(cmd, "the lock NAME is longer than %d bytes", RLOCK_NAME_MAX);
    }
    if (runs && optind < argc && argv[optind][0] == '-' && argv[optind][1] != '\0' &&
        strcmp(argv[optind], "--") != 0 &&
        !(strcmp(cmd, "run") == 0 &&
          (strcmp(argv[optind], "-c") == 0 || strcmp(argv[optind], "--command") == 0))) {
        /* run and hold stop at NAME so that COMMAND's options stay its
         * own: an option here was meant for rlock, and running it as
         * COMMAND (or ignoring it) would surprise. */
        return usage_error(cmd,
                           "%s after the lock NAME: options go before the name "
                           "(rlock %s [OPTIONS] NAME%s)",
                           argv[optind], cmd, strcmp(cmd, "run") == 0 ? " -- COMMAND" : "");
    }
    if (strcmp(cmd, "run") == 0) {
        /* flock(1)'s form: NAME -c COMMAND-LINE, nothing after it. */
        if (optind < argc &&
            (strcmp(argv[optind], "-c") == 0 || strcmp(argv[optind], "--command") == 0)) {
            if (optind + 2 != argc) {
                return usage_error(cmd, "-c wants exactly one command line after it");
            }
            a->shell_cmd = argv[optind + 1];
            return -1;
        }
        if (optind < argc && strcmp(argv[optind], "--") == 0) {
            optind++;
        }
        if (a->shell_cmd != NULL && optind < argc) {
            return usage_error(cmd, "give either -c COMMAND-LINE or -- COMMAND [ARG...], not "
                                    "both");
        }
        if (a->shell_cmd == NULL && optind >= argc) {
            return usage_error(cmd, "expected NAME -- COMMAND [ARG...] or NAME -c COMMAND-LINE "
                                    "(rlock hold NAME holds without a command)");
        }
        a->cmd = optind < argc ? argv + optind : NULL;
        return -1;
    }
    if (optind != argc) {
        return usage_error(cmd, "expected exactly one lock NAME");
    }
    return -1;
}

/* ---- the server URL and its password -------------------------------------- */

static int resolve_url(cli_opts *o)
{
    if (o->url_arg == NULL) {
        const char *srcs[] = {"RLOCK_URL", "REDIS_URL"};
        for (size_t i = 0; i < 2 && o->url_arg == NULL; i++) {
            const char *v = getenv(srcs[i]);
            if (v != NULL && *v != '\0') {
                o->url_arg = v;
                o->url_src = srcs[i];
            }
        }
    }
    if (o->url_arg == NULL) {
        o->url_arg = DEFAULT_URL;
        o->url_src = "the default";
    }
    if (strcmp(o->url_src, "--url") == 0) {
        /* Mask the password in our argv: ps(1) shows it no longer (it
         * did until now: prefer RLOCK_AUTH and the other sources). */
        if ((o->url_copy = strdup(o->url_arg)) == NULL) {
            cli_error("out of memory");
            return CLI_EXIT_SOFTWARE;
        }
        cli_url_scrub((char *)o->url_arg);
        o->url_arg = o->url_copy;
    }
    /* The library's check and redaction: one parser for the command and
     * the library, and messages that name the wrong part. */
    size_t cap = 2 * strlen(o->url_arg) + 8;
    if ((o->shown = malloc(cap)) == NULL) {
        cli_error("out of memory");
        return CLI_EXIT_SOFTWARE;
    }
    rlock_url_redact(o->url_arg, o->shown, cap);
    /* The form first, before a password is read from anywhere: a stand-in
     * takes the place of a password that may come from elsewhere. */
    char *probe = cli_url_with_password(o->url_arg, "x", false);
    rlock_status s = probe ? rlock_url_redact(probe, NULL, 0) : RLOCK_ENOMEM;
    free(probe);
    if (s != RLOCK_OK) {
        cli_error("URL %s (from %s): %s", o->shown, o->url_src,
                  s == RLOCK_EINVAL ? rlock_last_error() : rlock_strerror(s));
        return s == RLOCK_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_SOFTWARE;
    }
    /* As redis-cli: --askpass (and --password-file) win over the URL's
     * password, which wins over the environment's. */
    char *pw = NULL;
    bool replace = true;
    if (o->askpass && o->password_file != NULL) {
        cli_error("--askpass and --password-file: give one of them");
        return CLI_EXIT_USAGE;
    }
    if (o->askpass) {
        if ((pw = cli_askpass()) == NULL) {
            return CLI_EXIT_USAGE;
        }
    } else if (o->password_file != NULL) {
        if ((pw = cli_password_file(o->password_file)) == NULL) {
            return CLI_EXIT_USAGE;
        }
    } else if (o->env_auth != NULL) {
        pw = strdup(o->env_auth);
        replace = false;
    }
    o->url = pw != NULL ? cli_url_with_password(o->url_arg, pw, replace) : strdup(o->url_arg);
    if (pw != NULL) {
        cli_secure_free(pw, strlen(pw));
    }
    if (o->url == NULL) {
        cli_error("out of memory");
        return CLI_EXIT_SOFTWARE;
    }
    /* The form passed: only a user's missing password is left to find. */
    if ((s = rlock_url_redact(o->url, NULL, 0)) != RLOCK_OK) {
        cli_error("URL %s (from %s): %s: add it to the URL, or give it with RLOCK_AUTH, "
                  "--askpass or --password-file",
                  o->shown, o->url_src, rlock_last_error());
        return CLI_EXIT_USAGE;
    }
    return -1;
}

/* ---- the small sub-commands ------------------------------------------------ */

static int cmd_unlock(const cli_opts *o, const cli_args *a)
{
    /* Only the holder can release a lock normally, and the holder of a lock
     * taken by `rlock run` is that process: from outside, unlocking always
     * means breaking someone's lock, so it has to be asked for. */
    if (!a->force) {
        cli_error("unlock: only --force is supported: it deletes the lock "
                  "whoever holds it");
        return CLI_EXIT_USAGE;
    }
    rlock_client *c = NULL;
    rlock *l = NULL;
    int rc = open_lock(o, a, &c, &l);
    if (rc >= 0) {
        return rc;
    }
    bool was = false;
    rlock_status s = rlock_force_unlock(l, &was);
    if (s == RLOCK_OK) {
        printf(was ? "%s: unlocked\n" : "%s: was not locked\n", a->name);
    } else {
        rc = cli_fail_lib(s, a->name);
    }
    rlock_free(l);
    rlock_client_free(c);
    return s == RLOCK_OK ? CLI_EXIT_OK : rc;
}

/* rlock wait: the library's wait for the lock to be free, which runs over
 * whatever the client speaks (TLS included), wakes on the release message
 * and at the latest when the holder's lease runs out. Its signals keep
 * their default actions: one that ends a process ends the wait at once,
 * and nothing needs undoing, as nothing was taken. */
static int cmd_wait(const cli_opts *o, const cli_args *a)
{
    rlock_client *c = NULL;
    rlock *l = NULL;
    int rc = open_lock(o, a, &c, &l);
    if (rc >= 0) {
        return rc;
    }
    rlock_status s = rlock_wait_unlocked(l, a->wait_ms, NULL);
    switch (s) {
    case RLOCK_OK:
        cli_verbose(o, "%s: free", a->name);
        rc = CLI_EXIT_OK;
        break;
    case RLOCK_EBUSY:
        if (a->quiet) {
            /* -q: the exit code says it */
        } else if (a->wait_ms == 0) {
            cli_error("%s: locked (one check: -n or -w 0)", a->name);
        } else {
            cli_error("%s: still locked after %.3f s", a->name, (double)a->wait_ms / 1000);
        }
        rc = a->conflict_code;
        break;
    default:
        rc = cli_fail_lib(s, a->name);
        break;
    }
    rlock_free(l);
    rlock_client_free(c);
    return rc;
}

/* Descriptors 0, 1 and 2 that the caller closed (`<&-`, `>&-`, `2>&-`)
 * are opened on /dev/null before anything else opens a descriptor: else
 * the next one opened (the signal pipe, a Redis socket) takes the number,
 * and stderr messages land in it, or a pipe read end passes for stdin.
 * open() returns the lowest free number, which is the closed one. */
static void open_std_fds(void)
{
    for (int fd = 0; fd < 3; fd++) {
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            int got = open("/dev/null", O_RDWR);
            if (got < 0) {
                _exit(CLI_EXIT_SOFTWARE); /* no stderr to say it on */
            }
        }
    }
}

int main(int argc, char **argv)
{
    open_std_fds();
    cli_proc_init(argc, argv);
    cli_opts o;
    memset(&o, 0, sizeof o);
    /* First, while there is no other thread: nothing started later, and
     * no COMMAND, may see it. */
    o.env_auth = cli_take_env_auth();
    int ch;
    /* '+': stop at the sub-command, whose options are its own. */
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "+:vhV", long_opts, NULL)) != -1) {
        int rc = -1;
        if (common_option(&o, ch, &rc)) {
            if (rc >= 0) {
                return rc;
            }
            continue;
        }
        if (ch == 'h') {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        if (ch == 'V') {
            version();
            return CLI_EXIT_OK;
        }
        if (ch == '?' || ch == ':') {
            return refused(NULL, ch, argv);
        }
        char buf[64];
        opt_name(ch, buf, sizeof buf);
        return usage_error(NULL, "option %s goes after the command (rlock COMMAND %s ...)", buf,
                           buf);
    }
    if (optind >= argc) {
        return usage_error(NULL, "missing command");
    }
    const char *cmd = argv[optind];
    if (strcmp(cmd, "help") == 0) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(cmd, "version") == 0) {
        version();
        return CLI_EXIT_OK;
    }
    if (allowed_for(cmd) == NULL) {
        return usage_error(NULL, "unknown command '%s'", cmd);
    }
    cli_args a = {cmd,   NULL,  NULL, NULL, RLOCK_WAIT_FOREVER, RLOCK_WATCHDOG, -1, SIGTERM, CLI_EXIT_CONFLICT,
                  false, false, 0,    false, NULL, false};
    const char *wd = getenv("RLOCK_WATCHDOG_MS");
    if (wd != NULL && *wd != '\0') {
        char *end = NULL;
        long long v = strtoll(wd, &end, 10);
        if (*end != '\0' || v < 3 || v > RLOCK_MAX_TIME_MS) {
            return usage_error(NULL, "RLOCK_WATCHDOG_MS wants a number of ms of at least 3, "
                                     "got '%s'",
                               wd);
        }
        o.watchdog_ms = v;
    }
    int rc = parse_sub(&o, argc - optind, argv + optind, &a);
    if (rc < 0) {
        rc = resolve_url(&o);
    }
    if (rc < 0) {
        if (strcmp(cmd, "run") == 0 || strcmp(cmd, "hold") == 0) {
            rc = cli_run(&o, &a);
        } else if (strcmp(cmd, "status") == 0) {
            rc = cli_status(&o, a.name, a.json);
        } else if (strcmp(cmd, "unlock") == 0) {
            rc = cmd_unlock(&o, &a);
        } else {
            rc = cmd_wait(&o, &a);
        }
    }
    if (o.url != NULL) {
        cli_secure_free(o.url, strlen(o.url));
    }
    if (o.env_auth != NULL) {
        cli_secure_free(o.env_auth, strlen(o.env_auth));
    }
    free(o.shown);
    if (o.url_copy != NULL) {
        cli_secure_free(o.url_copy, strlen(o.url_copy));
    }
    return rc;
}
