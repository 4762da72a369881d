#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Runs every test binary against one throwaway redis-server. Usage:
#   run-tests.sh BUILD_DIR [NAME=VALUE...] TEST...
# NAME=VALUE words set environment variables for the TEST that follows
# them only, so that one program can run twice in another mode, e.g.
#   run-tests.sh build build/test/test_faults RLOCK_TEST_FAULTS_TLS=1 build/test/test_faults
# runs the fault suite over TCP, then over TLS; such a run is labelled with
# its settings ("=== ...", its outcome lines, its "---" line).
# RLOCK_TEST_WRAPPER (e.g. valgrind ...) is put in front of each binary;
# RLOCK_TEST_TIME_MULTIPLIER is passed on to the tests (test/harness.h).
#
# The binaries are built either with Criterion (make check, make asan) or
# with test/lite (make tsan, make valgrind); both write a TAP report, from
# which this script prints one line per test in one format, sorted:
#   PASS suite::name | FAIL suite::name | SKIP suite::name
#   MISSING suite::name (listed by --list but no outcome: the binary died)
# then "N passed, N failed, N skipped". The logs of two runners can be
# compared line by line.
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
echo "redis-server $(redis-server --version | awk '{print $3}') on 127.0.0.1:$port," \
    "time multiplier ${RLOCK_TEST_TIME_MULTIPLIER:-1}"

passed=0
failed=0
skipped=0
failed_names=""
out="$dir/out.txt"
tap="$dir/tap.txt"
run_env=""
for t in "$@"; do
    case $t in
    [A-Za-z_]*=*)
        run_env="${run_env:+$run_env }$t"
        continue
        ;;
    esac
    label=""
    [ -n "$run_env" ] && label=" ($run_env)"
    echo "=== ${run_env:+$run_env }$t"
    rm -f "$tap"
    start=$(date +%s)
    # shellcheck disable=SC2086
    env $run_env ${RLOCK_TEST_WRAPPER:-} "$t" --jobs 2 --timeout 180 --tap="$tap" </dev/null >"$out" 2>&1
    rc=$?
    took=$(($(date +%s) - start))
    cat "$out"
    # Outcomes from the TAP report: "ok - s::n  (0.01s)", "ok - s::n  # SKIP
    # why", "not ok - s::n ...". Tests --list names that have none died with
    # their runner.
    [ -f "$tap" ] || : >"$tap"
    # A list that cannot be read fails the program: an empty one would hide
    # every test that died (list-tests.sh says why it could not read it).
    listed=1
    if ! sh "$here/list-tests.sh" "$t" >"$dir/list.txt"; then
        echo "cannot list the tests of $t, so tests that died without an outcome cannot be found"
        listed=0
    fi
    grep -v ' (skipped)$' "$dir/list.txt" >"$dir/listed.txt"
    awk '
        /^ok - / && / # SKIP/ { print "SKIP " $3; next }
        /^ok - /              { print "PASS " $3; next }
        /^not ok - /          { print "FAIL " $4; next }
    ' "$tap" | sort -k2 >"$dir/outcomes.txt"
    awk '{print $2}' "$dir/outcomes.txt" | sort >"$dir/seen.txt"
    sort "$dir/listed.txt" | comm -23 - "$dir/seen.txt" | sed 's/^/MISSING /' >>"$dir/outcomes.txt"
    awk -v l="$label" '{ print $0 l }' "$dir/outcomes.txt"
    p=$(grep -c '^PASS ' "$dir/outcomes.txt")
    f=$(grep -c '^FAIL \|^MISSING ' "$dir/outcomes.txt")
    s=$(grep -c '^SKIP ' "$dir/outcomes.txt")
    # Sanitizer reports in test workers do not change the runner's verdict,
    # so they are counted here.
    if grep -q 'ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:\|WARNING: ThreadSanitizer' "$out"; then
        echo "sanitizer report in $(basename "$t")"
        rc=1
        f=$((f + 1))
    fi
    [ "$listed" -eq 0 ] && f=$((f + 1))
    # A binary that failed with every test passing (valgrind's exit code,
    # a crash after the last test) still counts as a failure.
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    [ "$f" -gt 0 ] && [ "$rc" -eq 0 ] && rc=1
    echo "--- $(basename "$t")$label: $p passed, $f failed, $s skipped in ${took}s"
    passed=$((passed + p))
    failed=$((failed + f))
    skipped=$((skipped + s))
    [ "$rc" -ne 0 ] && failed_names="$failed_names $(basename "$t")${run_env:+($(echo "$run_env" | tr ' ' ,))}"
    run_env=""
done
[ -n "$failed_names" ] && echo "failed test programs:$failed_names"
echo "$passed passed, $failed failed, $skipped skipped"
[ -z "$failed_names" ] && [ "$failed" -eq 0 ]
