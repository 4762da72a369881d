/* SPDX-License-Identifier: BSD-3-Clause */
/* A small stand-in for the part of Criterion's API that the rlock tests use,
 * for builds Criterion cannot run under: Criterion's test sandbox (BoxFort)
 * maps its shared arena at random addresses that ThreadSanitizer reserves,
 * so a -fsanitize=thread test binary dies before its first test. With
 * CRIT=lite the tests compile against this header and link runner.c, which
 * runs each test in a fork()ed child (init, test, fini), enforces timeouts,
 * and prints Criterion's summary line so scripts/run-tests.sh reads it the
 * same way. Only the plain and ASan builds use the real Criterion. */
#ifndef RLOCK_CRITERION_LITE_H
#define RLOCK_CRITERION_LITE_H

#include <stdbool.h>
#include <string.h>

struct crl_opts {
    void (*init)(void);
    void (*fini)(void);
    double timeout; /* seconds; 0: the runner's --timeout */
    bool disabled;
    const char *description;
};

void crl_register_suite(const char *suite, const struct crl_opts *o);
void crl_register_test(const char *suite, const char *name, void (*fn)(void),
                       const struct crl_opts *o);
/* fatal: leave the test (fini still runs); otherwise mark it failed. The
 * message format always starts with one space (see CRL_MSG). */
void crl_fail(bool fatal, const char *file, int line, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
_Noreturn void crl_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void crl_log(const char *tag, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define TestSuite(suite, ...)                                            \
    static const struct crl_opts crl_suite_opts_##suite = {__VA_ARGS__}; \
    __attribute__((constructor)) static void crl_suite_reg_##suite(void) \
    {                                                                    \
        crl_register_suite(#suite, &crl_suite_opts_##suite);             \
    }                                                                    \
    struct crl_unused_##suite

#define Test(suite, name, ...)                                                   \
    static void crl_test_##suite##_##name(void);                                 \
    static const struct crl_opts crl_test_opts_##suite##_##name = {__VA_ARGS__}; \
    __attribute__((constructor)) static void crl_test_reg_##suite##_##name(void) \
    {                                                                            \
        crl_register_test(#suite, #name, crl_test_##suite##_##name,              \
                          &crl_test_opts_##suite##_##name);                      \
    }                                                                            \
    static void crl_test_##suite##_##name(void)

/* " " __VA_ARGS__ joins an optional literal message format onto a space. */
#define CRL_CHECK(fatal, cond, what, ...)                                   \
    do {                                                                    \
        if (!(cond)) {                                                      \
            crl_fail((fatal), __FILE__, __LINE__, (what), " " __VA_ARGS__); \
        }                                                                   \
    } while (0)

#define cr_assert(cond, ...) CRL_CHECK(true, cond, #cond, __VA_ARGS__)
#define cr_expect(cond, ...) CRL_CHECK(false, cond, #cond, __VA_ARGS__)
#define cr_assert_eq(a, b, ...) CRL_CHECK(true, (a) == (b), #a " == " #b, __VA_ARGS__)
#define cr_expect_eq(a, b, ...) CRL_CHECK(false, (a) == (b), #a " == " #b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) CRL_CHECK(true, (a) != (b), #a " != " #b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...) CRL_CHECK(true, (a) > (b), #a " > " #b, __VA_ARGS__)
#define cr_expect_lt(a, b, ...) CRL_CHECK(false, (a) < (b), #a " < " #b, __VA_ARGS__)
#define cr_expect_geq(a, b, ...) CRL_CHECK(false, (a) >= (b), #a " >= " #b, __VA_ARGS__)
#define cr_assert_null(p, ...) CRL_CHECK(true, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_expect_null(p, ...) CRL_CHECK(false, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_assert_not_null(p, ...) CRL_CHECK(true, (p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) \
    CRL_CHECK(true, strcmp((a), (b)) == 0, #a " equals " #b, __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...) \
    CRL_CHECK(true, strcmp((a), (b)) != 0, #a " differs from " #b, __VA_ARGS__)
#define cr_assert_fail(...) crl_fail(true, __FILE__, __LINE__, "failure", " " __VA_ARGS__)
#define cr_skip_test(...) crl_skip(" " __VA_ARGS__)
#define cr_log_info(...) crl_log("----", __VA_ARGS__)
#define cr_log_error(...) crl_log("ERR ", __VA_ARGS__)

#endif
