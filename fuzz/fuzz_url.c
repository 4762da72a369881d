/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: the URL parser (rlock__parse_url, internal to
 * src/client.c). Any input must either parse into a consistent endpoint or
 * be refused with RLOCK_EINVAL, leaving nothing allocated; the sanitizers
 * catch out-of-bounds reads, leaks and undefined behaviour.
 * Built from the sources directly (the library hides internal symbols):
 * see the fuzz target of the Makefile. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The URL is a C string: the parser sees the bytes up to the first NUL. */
    char *url = malloc(size + 1);
    if (!url) {
        return 0;
    }
    memcpy(url, data, size);
    url[size] = '\0';
    rlock__endpoint ep;
    rlock_status st = rlock__parse_url(url, &ep);
    if (st == RLOCK_OK) {
        if ((ep.host == NULL) == (ep.path == NULL)) {
            abort(); /* exactly one of host and socket path */
        }
        if (ep.host && (ep.host[0] == '\0' || ep.port < 1 || ep.port > 65535)) {
            abort();
        }
        if (ep.path && ep.path[0] != '/') {
            abort();
        }
        if (ep.db < 0 || (ep.user && !ep.password)) {
            abort();
        }
        bool tls = strncmp(url, "rediss://", 9) == 0;
        if (!tls && strncmp(url, "redis://", 8) != 0 && strncmp(url, "unix://", 7) != 0) {
            abort();
        }
        if (ep.tls != tls || (tls && !ep.host)) {
            abort(); /* TLS exactly for rediss://, and only over TCP */
        }
        rlock__endpoint_free(&ep);
    } else {
        if (st != RLOCK_EINVAL && st != RLOCK_ENOMEM) {
            abort();
        }
        if (ep.host || ep.path || ep.user || ep.password) {
            abort(); /* a refused URL leaves nothing behind */
        }
    }
    free(url);
    return 0;
}
