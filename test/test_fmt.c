/* The hot path's integer formatting (src/core/fmt.c) against snprintf(),
 * over the edges of each type and a spread of values between, and the
 * owner string every script receives ("<client uuid>:<thread id>"), which
 * Redisson and the other side of every shared lock must read alike. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

/* Internal (src/core/core.h), resolved by linking librlock.a. */
size_t rlock__fmt_u64(char *buf, uint64_t v);
size_t rlock__fmt_i64(char *buf, int64_t v);
void rlock__fmt_hex16(char *buf, uint64_t v);

TestSuite(fmt, .timeout = 60);

Test(fmt, integers_match_snprintf)
{
    const int64_t edges[] = {0, 1, -1, 9, 10, -10, 99, 100, 30000, -30000, INT32_MAX, INT32_MIN,
                             INT64_MAX, INT64_MIN, INT64_MAX - 1, INT64_MIN + 1};
    char got[32], want[32];
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        size_t n = rlock__fmt_i64(got, edges[i]);
        snprintf(want, sizeof want, "%" PRId64, edges[i]);
        cr_assert_str_eq(got, want);
        cr_assert_eq(n, strlen(want), "length of %s", want);
    }
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 10000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint64_t v = x >> (i % 64);
        size_t n = rlock__fmt_u64(got, v);
        snprintf(want, sizeof want, "%" PRIu64, v);
        cr_assert_str_eq(got, want);
        cr_assert_eq(n, strlen(want));
        rlock__fmt_hex16(got, v);
        snprintf(want, sizeof want, "%016" PRIx64, v);
        cr_assert_str_eq(got, want);
    }
    rlock__fmt_u64(got, UINT64_MAX);
    cr_assert_str_eq(got, "18446744073709551615");
}

/* The field rlock writes in Redis is the client id, ':' and the thread id
 * in decimal, whatever the thread id's size. */
Test(fmt, owner_field_in_redis_is_uuid_colon_decimal_thread_id)
{
    rlock_client *c = th_client(NULL, 0);
    redisContext *r = th_redis(0);
    char *name = th_name("fmt-owner");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, 10000));
    char want[96];
    snprintf(want, sizeof want, "%s:%" PRIu64, rlock_client_id(c), rlock_thread_id());
    cr_assert_eq(th_hget_int(r, name, want), 1, "no field %s", want);
    th_ok(rlock_unlock(l));
    rlock_free(l);
    rlock_client_free(c);
    redisFree(r);
    free(name);
}
