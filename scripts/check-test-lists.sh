#!/bin/sh
# Both test runners must know the same tests: for every test program, the
# Criterion build (BIN) and the test/lite build (LITE_DIR/<same name>) list
# the same suite::name entries. Prints each program's count and any
# difference; exits 1 on a difference. Usage:
#   check-test-lists.sh LITE_DIR BIN...
set -u
here=$(cd "$(dirname "$0")" && pwd)
lite=$1
shift
tmp=$(mktemp -d /tmp/rlock-lists.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
bad=0
total=0
for t in "$@"; do
    n=$(basename "$t")
    sh "$here/list-tests.sh" "$t" | sort >"$tmp/criterion" || true
    sh "$here/list-tests.sh" "$lite/$n" | sort >"$tmp/lite" || true
    c=$(wc -l <"$tmp/criterion")
    if [ "$c" -eq 0 ]; then
        echo "test lists: $n: Criterion build lists no test"
        bad=1
    elif ! diff -u --label "criterion $t" --label "lite $lite/$n" "$tmp/criterion" "$tmp/lite" \
        >"$tmp/diff"; then
        echo "test lists: $n differs between the runners:"
        cat "$tmp/diff"
        bad=1
    else
        echo "test lists: $n: $c tests, same in both runners"
    fi
    total=$((total + c))
done
if [ "$bad" -ne 0 ]; then
    echo "test lists: the Criterion and test/lite builds disagree"
    exit 1
fi
echo "test lists: $total tests in $# programs, the same under Criterion and test/lite"
