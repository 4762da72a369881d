#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Runs a command with a throwaway redis-server: exports RLOCK_URL and
# RLOCK_TEST_PORT, and always stops the server afterwards.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /tmp/rlock-redis.XXXXXX)
cleanup() { sh "$here/redis-server.sh" stop "$dir"; rm -rf "$dir"; }
trap cleanup EXIT INT TERM
port=$(sh "$here/redis-server.sh" start "$dir")
export RLOCK_URL="redis://127.0.0.1:$port"
export RLOCK_TEST_PORT="$port"
echo "redis-server $(redis-server --version | awk '{print $3}') on 127.0.0.1:$port" >&2
"$@"
