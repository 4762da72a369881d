#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Runs a command with a throwaway redis-server: exports RLOCK_URL and
# RLOCK_TEST_PORT, and always stops the server afterwards.
#   scripts/with-redis.sh [--tls] COMMAND...
# --tls: the server also listens for TLS (certificates made by
# make-tls-certs.sh in the server's temporary directory, removed with it);
# exports RLOCK_TLS_URL (rediss://127.0.0.1:PORT) and RLOCK_TLS_CACERT.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tls=
if [ "${1:-}" = --tls ]; then
    shift
    if command -v openssl >/dev/null; then
        tls=1
    else
        echo "with-redis.sh: no openssl command to make certificates: no TLS port" >&2
    fi
fi
dir=$(mktemp -d /tmp/rlock-redis.XXXXXX)
cleanup() { sh "$here/redis-server.sh" stop "$dir"; rm -rf "$dir"; }
trap cleanup EXIT INT TERM
if [ -n "$tls" ]; then
    sh "$here/make-tls-certs.sh" "$dir/tls"
    port=$(sh "$here/redis-server.sh" start "$dir" "$dir/tls")
    export RLOCK_TLS_URL="rediss://127.0.0.1:$(cat "$dir/tls_port")"
    export RLOCK_TLS_CACERT="$dir/tls/ca.crt"
else
    port=$(sh "$here/redis-server.sh" start "$dir")
fi
export RLOCK_URL="redis://127.0.0.1:$port"
export RLOCK_TEST_PORT="$port"
echo "redis-server $(redis-server --version | awk '{print $3}') on 127.0.0.1:$port" \
    "${RLOCK_TLS_URL:+(TLS: $RLOCK_TLS_URL)}" >&2
"$@"
