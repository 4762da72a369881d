#!/bin/sh
# Prints the tests of one test binary, one "suite::name" a line (" (skipped)"
# after a disabled one), from its --list: Criterion's tree, which the
# test/lite runner prints too. Usage: list-tests.sh BINARY
set -eu
"$1" --list </dev/null 2>/dev/null | awk '
    /^[^ ]+: [0-9]+ tests?$/ { suite = substr($1, 1, length($1) - 1); next }
    /^(├──|└──) / { sub(/^(├──|└──) /, ""); print suite "::" $0 }
'
