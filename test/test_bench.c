/* The benchmark's scenarios run (make bench is not part of make check):
 * rlock-bench --check finds each kind's floor sending what the library
 * sends, and rlock-bench --smoke runs every scenario of the report once,
 * briefly, against the test server, each kind appearing with figures in
 * each of its tables. Figures are not judged here: this machine's speed
 * is not a test's business. */
#include "cli_helpers.h"

#include <ctype.h>

static void setup(void)
{
    cli_setup();
    free(g_bin);
    g_bin = th_build_path("rlock-bench");
}

TestSuite(bench, .init = setup, .fini = cli_teardown, .timeout = 180);

static const char *const kinds[] = {"reentrant", "nonreentrant", "fair", "fair-nonreentrant",
                                    "fenced",    "spin",         "read", "write"};
#define NKINDS (sizeof kinds / sizeof kinds[0])

/* The number of table rows in out that start "| <kind> | <a digit>". */
static int rows_of(const char *out, const char *kind)
{
    char head[64];
    snprintf(head, sizeof head, "\n| %s | ", kind);
    int n = 0;
    for (const char *p = strstr(out, head); p; p = strstr(p + 1, head)) {
        n += isdigit((unsigned char)p[strlen(head)]) != 0;
    }
    return n;
}

/* Every floor matches the library's commands under MONITOR, and the check
 * says so kind by kind. */
Test(bench, floors_send_what_the_library_sends)
{
    char *out = NULL;
    int code = RUN(&out, "--check", "--quiet", "--url", th_url());
    cr_assert_eq(code, 0, "rlock-bench --check exited %d:\n%s", code, out);
    for (size_t k = 0; k < NKINDS; k++) {
        char line[64];
        snprintf(line, sizeof line, "%-18s same: 2 commands", kinds[k]);
        cr_assert(strstr(out, line) != NULL, "no '%s' in:\n%s", line, out);
    }
    cr_assert(strstr(out, "0 of 8 floors differ") != NULL, "%s", out);
    free(out);
}

/* A kind that does not exist is refused before anything runs. */
Test(bench, unknown_kind_and_scenario_are_refused)
{
    char *out = NULL;
    cr_assert_eq(RUN(&out, "--loop", "1", "--kind", "recursive", "--url", th_url()), 1);
    free(out);
    cr_assert_eq(RUN(&out, "--only", "kinds,everything", "--url", th_url()), 1);
    free(out);
}

/* --smoke: one short round of every scenario; each kind has its row of
 * figures in the uncontended table (against its floor) and the contended
 * one, the readers' table and the processes' table are there, and the
 * exclusive kinds lost no counter update. */
Test(bench, smoke_runs_every_scenario)
{
    char *out = NULL;
    int code = RUN(&out, "--smoke", "--url", th_url());
    cr_assert_eq(code, 0, "rlock-bench --smoke exited %d:\n%s", code, out);
    cr_assert(strstr(out, "(smoke: not a measurement)") != NULL, "%s", out);
    for (size_t k = 0; k < NKINDS; k++) {
        /* uncontended and contended; the fair and reentrant locks also
         * across processes */
        int want = strcmp(kinds[k], "fair") == 0 || strcmp(kinds[k], "reentrant") == 0 ? 3 : 2;
        cr_assert_eq(rows_of(out, kinds[k]), want, "rows of %s:\n%s", kinds[k], out);
    }
    cr_assert(strstr(out, "**8 readers ÷ parallel limit** | **") != NULL, "%s", out);
    cr_assert(strstr(out, "NOT EXCLUSIVE") == NULL, "%s", out);
    cr_assert(strstr(out, "**NO**") == NULL, "a counter across processes: %s", out);
    cr_assert(strstr(out, "nested: first lock") != NULL, "%s", out);
    cr_assert(strstr(out, "watchdog: sampled locks alive") != NULL, "%s", out);
    free(out);
}
