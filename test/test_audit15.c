/* What an audit of issue 15 found said wrongly or not at all: the real
 * rlock binary in child processes against the test server. */
#include "cli_helpers.h"

TestSuite(audit15, .init = cli_setup, .fini = cli_teardown, .timeout = 90);

/* docs/rlock.1, HOLDER CONNECTIONS: every connection of rlock is the
 * library's, named rlock:client-id:host:pid, those of wait included (wait
 * listened on a connection of its own, rlock-cli:host:pid, until it used
 * rlock_wait_unlocked(); the page still said so). */
Test(audit15, wait_listens_on_a_connection_the_library_names)
{
    char *name = th_name("audit15-wait-conn");
    redisContext *r = th_redis(0);
    java_hold(r, name, th_ms(30000));
    pid_t p = START(NULL, "wait", "-w", "60", name);
    th_wait_waiters(0, name, 1, 10000); /* subscribed */
    char suffix[32];
    snprintf(suffix, sizeof suffix, ":%d", (int)p);
    redisReply *list = th_cmd(r, "CLIENT LIST");
    cr_assert_eq(list->type, REDIS_REPLY_STRING);
    int mine = 0, subscribed = 0;
    for (char *line = strtok(list->str, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        char *n = strstr(line, " name=");
        cr_assert(n != NULL, "%s", line);
        n += 6;
        size_t len = strcspn(n, " ");
        cr_assert(strncmp(n, "rlock-cli:", 10) != 0, "a connection of its own: %s", line);
        if (len > strlen(suffix) && strncmp(n + len - strlen(suffix), suffix, strlen(suffix)) == 0) {
            cr_assert(strncmp(n, "rlock:", 6) == 0, "not the library's name: %s", line);
            mine++;
            subscribed += strstr(line, " cmd=subscribe") != NULL || strstr(line, " sub=1") != NULL;
        }
    }
    freeReplyObject(list);
    cr_assert(mine >= 1, "no connection of wait (pid %d) is named rlock:...%s", (int)p, suffix);
    cr_assert(subscribed >= 1, "wait's subscription is not on a connection named rlock:...");
    cr_assert(still_running(p));
    cr_assert_eq(RUN(NULL, "unlock", "--force", name), 0);
    cr_assert_eq(wait_exit(p, 10000), 0, "the release woke wait");
    redisFree(r);
    free(name);
}
