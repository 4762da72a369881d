/* The library client of the rlock command, and the diagnosis of a client
 * that could not be made, from the library's own account of it
 * (rlock_last_error()). Above diag.c; below the sub-commands. */
#include "cli.h"

#include <stdio.h>

int cli_client(const cli_opts *o, void (*on_lost)(const char *, uint64_t, void *), void *arg,
               rlock_client **out)
{
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = o->url;
    cfg.watchdog_timeout_ms = o->watchdog_ms;
    cfg.connect_timeout_ms = o->connect_timeout_ms;
    cfg.command_timeout_ms = o->command_timeout_ms;
    cfg.tls_ca_file = o->tls_ca_file;
    cfg.tls_ca_dir = o->tls_ca_dir;
    cfg.tls_cert_file = o->tls_cert;
    cfg.tls_key_file = o->tls_key;
    cfg.tls_server_name = o->tls_server_name;
    cfg.tls_insecure = o->tls_insecure;
    cfg.on_lock_lost = on_lost;
    cfg.on_lock_lost_arg = arg;
    /* The command holds at most one lock: a big pool would only open
     * connections that are never used. */
    cfg.pool_size = 2;
    cli_verbose(o, "connecting to %s", o->shown);
    rlock_status s = rlock_client_new(&cfg, out);
    return s == RLOCK_OK ? -1 : cli_fail_client(o, s);
}

int cli_fail_client(const cli_opts *o, rlock_status s)
{
    /* The library says which step failed and why (connect, TLS, AUTH,
     * SELECT, the server's own text); no second look is needed. */
    cli_detail_from_library();
    if (s == RLOCK_EINVAL && !cli_detail_names_cause()) {
        /* Not a refusal by the server (a database it refuses names its
         * cause): the configuration itself, URL, TLS files or timeouts. */
        cli_error("%s: %s", o->shown,
                  cli_detail_text()[0] ? cli_detail_text() : rlock_strerror(s));
        cli_detail_clear();
        return CLI_EXIT_USAGE;
    }
    return cli_fail(s, o->shown);
}
