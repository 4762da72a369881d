/* rlock: the command-line face of the library, flock(1) across machines.
 *
 *   rlock [OPTIONS] run [-w TIME|-n] [-E N] [-l TIME] [-S SIG] [-k TIME]
 *                       NAME {-- COMMAND [ARG...] | -c COMMAND-LINE}
 *   rlock [OPTIONS] hold [-w TIME|-n] [-E N] [-l TIME] NAME
 *   rlock [OPTIONS] status [--json] NAME
 *   rlock [OPTIONS] unlock --force NAME
 *   rlock [OPTIONS] wait [-w TIME|-n] [-E N] NAME
 *
 * This file parses the command line, finds the server URL and its password,
 * and runs the small sub-commands; run.c runs a command under a lock (or
 * holds one), status.c prints a lock's state. The exit codes are in cli.h,
 * docs/rlock.1 and usage() below. */
#include "cli.h"

#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    "  run [-w TIME|-n] [-E N] [-l TIME] [-S SIG] [-k TIME] NAME -- COMMAND [ARG...]\n"
    "  run ... NAME -c COMMAND-LINE\n"
    "        take NAME, run COMMAND, release NAME when it exits\n"
    "  hold [-w TIME|-n] [-E N] [-l TIME] NAME\n"
    "        take NAME, print the holder id, keep NAME until SIGINT/SIGTERM/SIGHUP\n"
    "  status [--json] NAME   show whether NAME is locked, its holders, their\n"
    "                         connections (host, pid) and the TTL\n"
    "  unlock --force NAME    delete NAME whoever holds it and wake its waiters\n"
    "  wait [-w TIME|-n] [-E N] NAME   block until NAME is free (pub/sub, no polling)\n"
    "\n"
    "command options:\n"
    "  -w, --wait, --timeout TIME  give up after TIME (default: wait forever)\n"
    "  -n, --nonblock         one attempt, do not wait (-w 0)\n"
    "  -E, --conflict-exit-code N  exit code when not acquired (default 75)\n"
    "  -l, --lease TIME       hold for at most TIME, no renewal (default: the\n"
    "                         watchdog renews the lock while it is held)\n"
    "  -S, --signal SIG       signal for COMMAND if the lock is lost (TERM)\n"
    "  -k, --kill-after TIME  then SIGKILL it if still running after TIME\n"
    "  -c, --command LINE     run LINE with $SHELL -c (after NAME, as flock -c)\n"
    "  --watchdog TIME        watchdog lease (default RLOCK_WATCHDOG_MS or 30s)\n"
    "  -s, --shared           a shared lock (not supported yet)\n"
    "  -x, -e, --exclusive    an exclusive lock (the default)\n"
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
    "  1    status: NAME is not locked\n"
    "  2    bad usage: command line, URL (the message names the part), password\n"
    "  69   cannot reach Redis (connect refused, timeout, link lost)\n"
    "  70   other errors (Redis error reply, e.g. the key holds another type)\n"
    "  75   not acquired within -w (run, hold), still locked after -w (wait);\n"
    "       -E changes it\n"
    "  77   the server refused the password or user, wants one, or its ACL\n"
    "       forbids a command\n"
    "  78   the server refused the URL's database\n"
    "  79   the lock was lost while COMMAND ran (COMMAND was signalled) or\n"
    "       while it was held\n"
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
    printf("rlock %s\nlibrlock %s\nhiredis %d.%d.%d\n", CLI_VERSION, rlock_version(), HIREDIS_MAJOR,
           HIREDIS_MINOR, HIREDIS_PATCH);
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

void cli_verbose(const cli_opts *o, const char *fmt, ...)
{
    if (!o->verbose) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    fputs("rlock: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

bool cli_parse_duration(const char *s, int64_t *out)
{
    /* Integer arithmetic only: no locale, no rounding surprises. */
    size_t ni = strspn(s, "0123456789");
    const char *p = s + ni;
    const char *frac = "";
    size_t nf = 0;
    if (*p == '.') {
        frac = p + 1;
        nf = strspn(frac, "0123456789");
        p = frac + nf;
    }
    if (ni + nf == 0 || ni > 13) {
        return false;
    }
    int64_t unit;
    if (*p == '\0' || strcmp(p, "s") == 0) {
        unit = 1000;
    } else if (strcmp(p, "ms") == 0) {
        unit = 1;
    } else if (strcmp(p, "m") == 0) {
        unit = 60 * 1000;
    } else if (strcmp(p, "h") == 0) {
        unit = 3600 * 1000;
    } else {
        return false;
    }
    int64_t whole = ni ? strtoll(s, NULL, 10) : 0;
    if (whole > RLOCK_MAX_TIME_MS / unit) {
        return false;
    }
    /* The fraction, to 9 digits, rounded up to a whole ms so that a
     * non-zero time never becomes 0 (one attempt). */
    int64_t num = 0, den = 1;
    for (size_t i = 0; i < nf && i < 9; i++) {
        num = num * 10 + (frac[i] - '0');
        den *= 10;
    }
    int64_t ms = whole * unit + (num * unit + den - 1) / den;
    if (ms > RLOCK_MAX_TIME_MS) {
        return false;
    }
    *out = ms;
    return true;
}

int64_t cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int cli_client(const cli_opts *o, void (*on_lost)(const char *, uint64_t, void *), void *arg,
               rlock_client **out)
{
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = o->url;
    cfg.watchdog_timeout_ms = o->watchdog_ms;
    cfg.on_lock_lost = on_lost;
    cfg.on_lock_lost_arg = arg;
    cfg.tls_ca_file = o->tls_ca_file;
    cfg.tls_ca_dir = o->tls_ca_dir;
    cfg.tls_cert_file = o->tls_cert;
    cfg.tls_key_file = o->tls_key;
    cfg.tls_server_name = o->tls_server_name;
    cfg.tls_insecure = o->tls_insecure;
    /* The command holds at most one lock: a big pool would only open
     * connections that are never used. */
    cfg.pool_size = 2;
    cli_verbose(o, "connecting to %s", o->shown);
    rlock_status s = rlock_client_new(&cfg, out);
    return s == RLOCK_OK ? -1 : cli_fail_client(o, s);
}

/* A client and a handle on name, or an exit code. */
static int open_lock(const cli_opts *o, const char *name, rlock_client **c, rlock **l)
{
    int rc = cli_client(o, NULL, NULL, c);
    if (rc >= 0) {
        return rc;
    }
    rlock_status s = rlock_new(*c, name, l);
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
    OPT_CACERT,
    OPT_CACERTDIR,
    OPT_CERT,
    OPT_KEY,
    OPT_TLS_SERVER_NAME,
    OPT_TLS_INSECURE,
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
    {"exclusive", no_argument, NULL, 'x'},
    {"command", required_argument, NULL, 'c'},
    {"json", no_argument, NULL, OPT_JSON},
    {"force", no_argument, NULL, OPT_FORCE},
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
        return "wnElSkWsxc";
    }
    if (strcmp(cmd, "hold") == 0) {
        return "wnElWsx";
    }
    if (strcmp(cmd, "wait") == 0) {
        return "wnE";
    }
    if (strcmp(cmd, "status") == 0) {
        return "j";
    }
    if (strcmp(cmd, "unlock") == 0) {
        return "f";
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

/* Options shared by every position: the URL, password sources, verbosity.
 * Returns true if ch was one of them. */
static bool common_option(cli_opts *o, int ch)
{
    switch (ch) {
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
    default:
        return false;
    }
}

static int bad_value(const char *cmd, int ch, const char *what)
{
    if (ch == OPT_WATCHDOG) {
        cli_error("%s: --watchdog wants %s, got '%s'", cmd, what, optarg);
    } else {
        cli_error("%s: -%c wants %s, got '%s'", cmd, ch, what, optarg);
    }
    return CLI_EXIT_USAGE;
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
        cli_error("%s: shared locks are not supported yet (-s is --shared, as in flock(1); "
                  "the signal for COMMAND is -S/--signal)",
                  cmd);
        return CLI_EXIT_USAGE;
    case 'x':
        return -1;
    case 'c':
        a->shell_cmd = optarg;
        return -1;
    case OPT_JSON:
        a->json = true;
        return -1;
    case OPT_FORCE:
        a->force = true;
        return -1;
    default:
        cli_error("%s: unexpected option (see rlock --help)", cmd);
        return CLI_EXIT_USAGE;
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
    case 'e':
        return 'x';
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
    int ch;
    while ((ch = getopt_long(argc, argv, runs ? "+w:nE:l:S:k:sxec:vh" : "w:nE:l:S:k:sxec:vh",
                             long_opts, NULL)) != -1) {
        if (common_option(o, ch)) {
            continue;
        }
        if (ch == 'h') {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        if (ch == '?' || strchr(allowed, letter(ch)) == NULL) {
            cli_error("%s: unexpected option (see rlock --help)", cmd);
            return CLI_EXIT_USAGE;
        }
        int rc = sub_option(o, cmd, ch == 'e' ? 'x' : ch, a);
        if (rc >= 0) {
            return rc;
        }
    }
    if (optind >= argc || argv[optind][0] == '\0') {
        cli_error("%s: expected a lock NAME (see rlock --help)", cmd);
        return CLI_EXIT_USAGE;
    }
    a->name = argv[optind++];
    if (strlen(a->name) > RLOCK_NAME_MAX) {
        cli_error("%s: the lock NAME is longer than %d bytes", cmd, RLOCK_NAME_MAX);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(cmd, "run") == 0) {
        /* flock(1)'s form: NAME -c COMMAND-LINE, nothing after it. */
        if (optind < argc &&
            (strcmp(argv[optind], "-c") == 0 || strcmp(argv[optind], "--command") == 0)) {
            if (optind + 2 != argc) {
                cli_error("run: -c wants exactly one command line after it");
                return CLI_EXIT_USAGE;
            }
            a->shell_cmd = argv[optind + 1];
            return -1;
        }
        if (optind < argc && strcmp(argv[optind], "--") == 0) {
            optind++;
        }
        if (a->shell_cmd != NULL && optind < argc) {
            cli_error("run: give either -c COMMAND-LINE or -- COMMAND [ARG...], not both");
            return CLI_EXIT_USAGE;
        }
        if (a->shell_cmd == NULL && optind >= argc) {
            cli_error("run: expected NAME -- COMMAND [ARG...] or NAME -c COMMAND-LINE "
                      "(see rlock --help; rlock hold NAME holds without a command)");
            return CLI_EXIT_USAGE;
        }
        a->cmd = optind < argc ? argv + optind : NULL;
        return -1;
    }
    if (optind != argc) {
        cli_error("%s: expected exactly one lock NAME (see rlock --help)", cmd);
        return CLI_EXIT_USAGE;
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
    if ((o->shown = cli_url_redact(o->url_arg)) == NULL) {
        cli_error("out of memory");
        return CLI_EXIT_SOFTWARE;
    }
    char why[160];
    if (!cli_url_parse(o->url_arg, &o->ep, why, sizeof why)) {
        cli_error("URL %s (from %s): %s", o->shown, o->url_src, why);
        return CLI_EXIT_USAGE;
    }
    /* As redis-cli: --askpass (and --password-file) win over the URL's
     * password, which wins over the environment's. */
    char *pw = NULL;
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
    } else if (o->ep.password == NULL && o->env_auth != NULL) {
        pw = strdup(o->env_auth);
    }
    if (pw != NULL) {
        if (o->ep.password != NULL) {
            cli_secure_free(o->ep.password, strlen(o->ep.password));
        }
        o->ep.password = pw;
    }
    if (o->ep.user != NULL && o->ep.password == NULL) {
        cli_error("URL %s (from %s): user '%s' has no password: add it to the URL, or give it "
                  "with RLOCK_AUTH, --askpass or --password-file",
                  o->shown, o->url_src, o->ep.user);
        return CLI_EXIT_USAGE;
    }
    if ((o->url = cli_url_compose(&o->ep)) == NULL) {
        cli_error("out of memory");
        return CLI_EXIT_SOFTWARE;
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
    int rc = open_lock(o, a->name, &c, &l);
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

static int cmd_wait(const cli_opts *o, const cli_args *a)
{
    rlock_client *c = NULL;
    rlock *l = NULL;
    int rc = open_lock(o, a->name, &c, &l);
    if (rc >= 0) {
        return rc;
    }
    rlock_status err = RLOCK_OK;
    cli_wait_result r = cli_wait_free(o, a->name, a->wait_ms, -1, probe_free, l, &err);
    rlock_free(l);
    rlock_client_free(c);
    switch (r) {
    case CLI_WAIT_DONE:
        cli_verbose(o, "%s: free", a->name);
        return CLI_EXIT_OK;
    case CLI_WAIT_TIMEOUT:
        if (a->wait_ms == 0) {
            cli_error("%s: locked (one check: -n or -w 0)", a->name);
        } else {
            cli_error("%s: still locked after %.3f s", a->name, (double)a->wait_ms / 1000);
        }
        return a->conflict_code;
    default:
        return cli_fail(err, a->name);
    }
}

int main(int argc, char **argv)
{
    cli_opts o;
    memset(&o, 0, sizeof o);
    /* First, while there is no other thread: nothing started later, and
     * no COMMAND, may see it. */
    o.env_auth = cli_take_env_auth();
    int ch;
    /* '+': stop at the sub-command, whose options are its own. */
    optind = 1;
    while ((ch = getopt_long(argc, argv, "+vhV", long_opts, NULL)) != -1) {
        if (common_option(&o, ch)) {
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
        cli_error("unexpected option before the command (see rlock --help)");
        return CLI_EXIT_USAGE;
    }
    if (optind >= argc) {
        usage(stderr);
        return CLI_EXIT_USAGE;
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
        cli_error("unknown command '%s' (see rlock --help)", cmd);
        return CLI_EXIT_USAGE;
    }
    cli_args a = {
        cmd,   NULL, NULL, NULL, RLOCK_WAIT_FOREVER, RLOCK_WATCHDOG, -1, SIGTERM, CLI_EXIT_CONFLICT,
        false, false};
    const char *wd = getenv("RLOCK_WATCHDOG_MS");
    if (wd != NULL && *wd != '\0') {
        char *end = NULL;
        long long v = strtoll(wd, &end, 10);
        if (*end != '\0' || v < 3 || v > RLOCK_MAX_TIME_MS) {
            cli_error("RLOCK_WATCHDOG_MS wants a number of ms of at least 3, got '%s'", wd);
            return CLI_EXIT_USAGE;
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
    cli_url_free(&o.ep);
    free(o.shown);
    if (o.url_copy != NULL) {
        cli_secure_free(o.url_copy, strlen(o.url_copy));
    }
    return rc;
}
