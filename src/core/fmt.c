/* Decimal and hex formatting for the hot path: every lock and unlock sends
 * a handful of integers (lease, hold count, latch TTL, the key count) and
 * a request id, and snprintf() with its locale and format parsing was the
 * largest user-space cost of an uncontended pair after the kernel's. */
#include "internal.h"

size_t rlock__fmt_u64(char *buf, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++) {
        buf[i] = tmp[n - 1 - i];
    }
    buf[n] = '\0';
    return n;
}

size_t rlock__fmt_i64(char *buf, int64_t v)
{
    if (v >= 0) {
        return rlock__fmt_u64(buf, (uint64_t)v);
    }
    buf[0] = '-';
    /* -(v + 1) + 1: no overflow for INT64_MIN. */
    return 1 + rlock__fmt_u64(buf + 1, (uint64_t)(-(v + 1)) + 1);
}

void rlock__fmt_hex16(char *buf, uint64_t v)
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 15; i >= 0; i--) {
        buf[i] = digits[v & 15];
        v >>= 4;
    }
    buf[16] = '\0';
}
