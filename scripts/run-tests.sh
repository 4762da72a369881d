#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
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
out="$dir/out.txt"
for t in "$@"; do
    echo "=== $t"
    # shellcheck disable=SC2086
    ${RLOCK_TEST_WRAPPER:-} "$t" --jobs 2 --timeout 180 </dev/null >"$out" 2>&1
    rc=$?
    cat "$out"
    # Criterion's closing line: "Synthesis: Tested: N | Passing: P | Failing: F | Crashing: C"
    syn=$(grep 'Synthesis: Tested' "$out" | tail -n 1)
    p=$(echo "$syn" | sed -n 's/.*Passing: \([0-9]*\).*/\1/p')
    f=$(echo "$syn" | sed -n 's/.*Failing: \([0-9]*\).*/\1/p')
    x=$(echo "$syn" | sed -n 's/.*Crashing: \([0-9]*\).*/\1/p')
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-0} + ${x:-0}))
    # Sanitizer reports in test workers do not change Criterion's verdict,
    # so they are counted here.
    if grep -q 'ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:\|WARNING: ThreadSanitizer' "$out"; then
        echo "sanitizer report in $(basename "$t")"
        rc=1
        failed=$((failed + 1))
    fi
    if [ "$rc" -ne 0 ]; then
        failed_names="$failed_names $(basename "$t")"
        # A binary that died before its synthesis still counts as a failure.
        [ -z "$syn" ] && failed=$((failed + 1))
    fi
done
[ -n "$failed_names" ] && echo "failed test programs:$failed_names"
echo "$passed passed, $failed failed"
[ -z "$failed_names" ] && [ "$failed" -eq 0 ]
