#!/bin/sh
# Both test runners must know the same tests: for every test program, the
# Criterion build (BIN) and the test/lite build (LITE_DIR/<same name>) list
# the same suite::name entries. The Criterion build is listed twice, under
# LC_ALL=C (its ASCII tree) and LC_ALL=C.UTF-8 (its UTF-8 tree), so that
# list-tests.sh is shown to read both forms whatever the caller's locale.
# Prints each program's count and any difference; exits 1 on a difference
# or on a list that cannot be read. Usage:
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
    # list-tests.sh says on stderr why it could not read a list; an empty
    # or unreadable list is its error, never "no tests".
    ok=1
    LC_ALL=C sh "$here/list-tests.sh" "$t" >"$tmp/criterion" || ok=0
    LC_ALL=C.UTF-8 sh "$here/list-tests.sh" "$t" >"$tmp/criterion-utf8" || ok=0
    sh "$here/list-tests.sh" "$lite/$n" >"$tmp/lite" || ok=0
    for f in criterion criterion-utf8 lite; do LC_ALL=C sort -o "$tmp/$f" "$tmp/$f"; done
    c=$(wc -l <"$tmp/criterion")
    if [ "$ok" -eq 0 ]; then
        echo "test lists: $n: a test list could not be read (see above)"
        bad=1
    elif ! cmp -s "$tmp/criterion" "$tmp/criterion-utf8"; then
        echo "test lists: $n: Criterion's ASCII and UTF-8 trees read differently:"
        diff -u --label "LC_ALL=C" --label "LC_ALL=C.UTF-8" "$tmp/criterion" "$tmp/criterion-utf8"
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
