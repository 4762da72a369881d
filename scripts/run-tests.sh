#!/bin/sh
# Runs every test binary against one throwaway redis-server and prints a
# closing "N passed, N failed" line. Usage: run-tests.sh BUILD_DIR TEST...
# RLOCK_TEST_WRAPPER (e.g. valgrind ...) is put in front of each binary.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$1
shift
dir=$(mktemp -d /tmp/rlock-test.XXXXXX)
cleanup() { sh "$here/redis-server.sh" stop "$dir"; rm -rf "$dir"; }
trap cleanup EXIT INT TERM
port=$(sh "$here/redis-server.sh" start "$dir") || exit 1
export RLOCK_TEST_PORT="$port"
export RLOCK_TEST_URL="redis://127.0.0.1:$port"
export RLOCK_TEST_BUILD="$build"
echo "redis-server $(redis-server --version | awk '{print $3}') on 127.0.0.1:$port"

passed=0
failed=0
failed_names=""
for t in "$@"; do
    echo "=== $t"
    # shellcheck disable=SC2086
    if ${RLOCK_TEST_WRAPPER:-} "$t" --jobs 2 --timeout 120 </dev/null; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        failed_names="$failed_names $(basename "$t")"
    fi
done
echo "test binaries:$([ -n "$failed_names" ] && echo " failed:$failed_names")"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
