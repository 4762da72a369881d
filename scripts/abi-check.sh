#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Compares the ABI of librlock at a git revision with the work tree's.
#   abi-check.sh REV    build REV (from `git archive`, in a temp dir) and the
#                       work tree, both with debug info, and run abidiff on
#                       the two librlock.so with include/ as headers dir.
#   abi-check.sh [--ci] REV is the newest tag v* whose SONAME is the work
#                       tree's; without one, say why and exit 0.
# Exit 1 when abidiff finds an incompatible change (its exit bit 8: a
# function or variable removed, ...) or fails; compatible changes (bit 4:
# additions, and type changes abidiff cannot prove harmful) are printed and
# exit 0. If the two SONAMEs differ, incompatible changes are expected and
# only reported.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

somajor_at() { # REV or "" for the work tree
    if [ -z "$1" ]; then cat Makefile; else git show "$1:Makefile"; fi |
        sed -n 's/^SOMAJOR *:= *\([0-9][0-9]*\).*/\1/p'
}
cur=$(somajor_at "")

if [ "${1:-}" = "--ci" ] || [ -z "${1:-}" ]; then
    base=""
    for t in $(git tag -l 'v*' --sort=-v:refname); do
        if [ "$(somajor_at "$t" 2>/dev/null)" = "$cur" ]; then
            base=$t
            break
        fi
    done
    if [ -z "$base" ]; then
        tags=$(git tag -l 'v*' --sort=-v:refname | tr '\n' ' ')
        if [ -z "$tags" ]; then
            echo "abi-check: skipped: no release tag v* yet, so no released ABI to stay compatible with"
        else
            echo "abi-check: skipped: no release tag v* has SONAME librlock.so.$cur" \
                "(tags: ${tags% }): the SONAME was bumped after the last release," \
                "so no release shares this build's ABI"
        fi
        exit 0
    fi
else
    base=$1
fi
rev=$(git rev-parse --verify --quiet "$base^{commit}") || {
    echo "abi-check: $base is not a revision of this repository" >&2
    exit 2
}
old_so=$(somajor_at "$rev")

tmp=$(mktemp -d /tmp/rlock-abi.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir -p "$tmp/base"
git archive "$rev" | tar -x -C "$tmp/base"
echo "abi-check: building $base ($(git rev-parse --short "$rev"), librlock.so.$old_so) and the work tree (librlock.so.$cur)"
# -Og -g: every type the ABI uses stays in the DWARF abidiff reads.
make -s -C "$tmp/base" B="$tmp/base-build" CFLAGS="-Og -g" "$tmp/base-build/librlock.so" \
    >"$tmp/base.log" 2>&1 || { cat "$tmp/base.log"; echo "abi-check: build of $base failed" >&2; exit 1; }
make -s -C "$root" B="$tmp/head-build" CFLAGS="-Og -g" "$tmp/head-build/librlock.so" \
    >"$tmp/head.log" 2>&1 || { cat "$tmp/head.log"; echo "abi-check: build of the work tree failed" >&2; exit 1; }

set +e
abidiff --headers-dir1 "$tmp/base/include" --headers-dir2 "$root/include" \
    "$tmp/base-build/librlock.so" "$tmp/head-build/librlock.so" >"$tmp/report" 2>&1
rc=$?
set -e
cat "$tmp/report"
if [ $((rc & 3)) -ne 0 ]; then
    echo "abi-check: abidiff failed (exit $rc)" >&2
    exit 1
fi
if [ $((rc & 8)) -ne 0 ]; then
    if [ "$old_so" != "$cur" ]; then
        echo "abi-check: incompatible ABI change since $base, as the SONAME bump" \
            "(librlock.so.$old_so -> librlock.so.$cur) announces"
        exit 0
    fi
    echo "abi-check: FAIL: incompatible ABI change since $base with the same SONAME" \
        "librlock.so.$cur: bump SOMAJOR in the Makefile (and debian/'s librlockN) or undo it" >&2
    exit 1
fi
if [ $((rc & 4)) -ne 0 ]; then
    echo "abi-check: compatible ABI change since $base (additions, or type changes" \
        "abidiff does not call incompatible: check the report above)"
    exit 0
fi
echo "abi-check: ABI unchanged since $base"
