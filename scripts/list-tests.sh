#!/bin/sh
# Prints the tests of one test binary, one "suite::name" a line (" (skipped)"
# after a disabled one), from its --list: Criterion's tree, which the
# test/lite runner prints too. Usage: list-tests.sh BINARY
#
# Criterion draws the tree in the locale's encoding: "├── name" and
# "└── name" under UTF-8, "|-- name" and "`-- name" otherwise (LANG unset,
# LANG=C), and 2.4 has no machine-readable listing, so both forms are read.
# A listing this script cannot read is an error that says so, never an
# empty list: run-tests.sh finds the tests that died without an outcome
# from it, and an empty list would make that check pass on nothing.
set -u
bin=$1
if ! out=$("$bin" --list </dev/null 2>/dev/null); then
    echo "list-tests.sh: '$bin --list' failed; its output:" >&2
    "$bin" --list </dev/null 2>&1 | head -n 5 >&2
    exit 1
fi
# Bytes, not characters: the tree's UTF-8 glyphs are matched byte for byte
# whatever the locale this script runs under.
tests=$(printf '%s\n' "$out" | LC_ALL=C awk '
    /^[^ ]+: [0-9]+ tests?$/ { suite = substr($1, 1, length($1) - 1); want += $2; next }
    /^(├──|└──|\|--|`--) / && suite != "" { sub(/^[^ ]+ /, ""); print suite "::" $0; got++ }
    END { if (want != got) { print "COUNT " want + 0 " " got + 0; exit 3 } }
')
rc=$?
if [ "$rc" -ne 0 ] || [ -z "$tests" ]; then
    {
        echo "list-tests.sh: cannot read the test list of $bin:"
        if [ "$rc" -eq 3 ]; then
            printf '%s\n' "$tests" | sed -n 's/^COUNT \([0-9]*\) \([0-9]*\)$/  its suite lines announce \1 tests, \2 test lines could be read/p'
        else
            echo "  no test in its --list"
        fi
        echo "  (LANG=${LANG-unset} LC_ALL=${LC_ALL-unset}); the first lines of '$bin --list':"
        printf '%s\n' "$out" | head -n 3 | sed 's/^/    /'
        echo "  A tree in a form this script does not know is a fault of the script, not of the tests."
    } >&2
    exit 1
fi
printf '%s\n' "$tests"
