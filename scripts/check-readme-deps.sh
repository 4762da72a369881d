#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# README.md's list of the Debian packages scripts/deps.sh installs must be
# what deps.sh installs: the `need NAME` lines of deps.sh against the
# first backquoted list after "`scripts/deps.sh`, which installs these
# Debian packages" in README.md (line breaks allowed). Order does not matter. Usage:
#   check-readme-deps.sh [DEPS_SH README]
set -eu
deps=${1:-scripts/deps.sh}
readme=${2:-README.md}
tmp=$(mktemp -d /tmp/rlock-deps.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
awk '$1 == "need" && NF >= 2 { print $2 }' "$deps" | LC_ALL=C sort >"$tmp/deps"
tr '\n' ' ' <"$readme" |
    tr -s ' ' |
    sed -n 's/.*`scripts\/deps\.sh`, which installs these Debian packages[^`]*`\([^`]*\)`.*/\1/p' |
    tr -s ' ' '\n' | sed '/^$/d' | LC_ALL=C sort >"$tmp/readme"
if [ ! -s "$tmp/deps" ]; then
    echo "readme-deps: no 'need NAME' line in $deps" >&2
    exit 1
fi
if [ ! -s "$tmp/readme" ]; then
    echo "readme-deps: $readme has no \"\`scripts/deps.sh\`, which installs these Debian packages ... \`LIST\`\"" >&2
    exit 1
fi
if ! diff -u --label "$deps (need lines)" --label "$readme" "$tmp/deps" "$tmp/readme" >"$tmp/diff"; then
    echo "readme-deps: $readme and $deps name different packages:"
    cat "$tmp/diff"
    exit 1
fi
echo "readme-deps: $readme names the $(wc -l <"$tmp/deps") packages $deps installs"
