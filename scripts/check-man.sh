#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Checks the built man pages: every public function of the header (and every
# function-like rlock_ macro) has a page, real or .so link, every page
# renders without a warning from man/groff and carries the header's version,
# and the rlock(3) overview links every other page.
#   check-man.sh include/rlock.h BUILD/man
set -eu
header=$1
man=$(cd "$2" && pwd)
fail=0

funcs=$( (grep -h 'RLOCK_API' "$header" | grep -o 'rlock_[a-z0-9_]*(' ;
          grep -h '^#define rlock_[a-z0-9_]*(' "$header" | grep -o 'rlock_[a-z0-9_]*(') |
        tr -d '(' | sort -u)
for f in $funcs; do
    if [ ! -f "$man/man3/$f.3" ]; then
        echo "man-check: $f has no man page: add it to the NAME line of a page in docs/man3"
        fail=1
    fi
done

# The version the build wrote on each page's .TH line is the header's.
version=$(sed -n 's/^#define RLOCK_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9][0-9]*\).*/\2/p' "$header" |
          paste -sd. -)
for p in "$man"/man1/*.1 "$man"/man3/*.3; do
    if ! grep -q '^\.so ' "$p" && ! grep -m1 '^\.TH ' "$p" | grep -qF "\"rlock $version\""; then
        echo "man-check: $p: its .TH line does not say \"rlock $version\""
        fail=1
    fi
    err=$(cd "$man" && LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l "$p" 2>&1 >/dev/null || echo "man failed")
    if [ -n "$err" ]; then
        echo "man-check: $p:"
        echo "$err"
        fail=1
    fi
done

# rlock(3), the overview, links every other section-3 page of the tree.
if [ ! -f "$man/man3/rlock.3" ]; then
    echo "man-check: no rlock(3) overview page (docs/man3/rlock.3)"
    fail=1
else
    for p in "$man"/man3/*.3; do
        grep -q '^\.so ' "$p" && continue
        page=$(basename "$p" .3)
        [ "$page" = rlock ] && continue
        if ! grep -q "^\.BR $page (3)" "$man/man3/rlock.3"; then
            echo "man-check: rlock(3) does not link $page(3)"
            fail=1
        fi
    done
fi

n=$(echo "$funcs" | wc -w)
pages=$(ls "$man"/man3 | wc -l)
if [ $fail -ne 0 ]; then
    exit 1
fi
echo "man-check: $n public functions, each on one of $pages section-3 pages; all pages render cleanly"
