#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Builds the installable man pages.
#   build-man.sh VERSION OUTDIR PAGE...  copies each PAGE.N to OUTDIR/manN/
#       with "rlock VERSION" on its .TH line (the pages in the tree say
#       "rlock" there and name no version of their own, which
#       scripts/check-doc-text.sh checks), and writes a ".so manN/PAGE.N" page for every other name on the page's
#       NAME line, so that `man rlock_unlock` finds rlock_lock(3).
#   build-man.sh --names PAGE            prints the names on PAGE's NAME line.
set -eu

# The names before "\-" on the line after ".SH NAME", one per line.
names() {
    sed -n '/^\.SH NAME/{n;p;q;}' "$1" | sed 's/ *\\-.*//; s/\\//g' | tr ',' '\n' |
        sed 's/^ *//; s/ *$//' | grep -v '^$'
}

if [ "$1" = "--names" ]; then
    names "$2"
    exit 0
fi

version=$1
out=$2
shift 2
for page in "$@"; do
    base=$(basename "$page")
    sec=${base##*.}
    stem=${base%.*}
    mkdir -p "$out/man$sec"
    sed -e "/^\.TH /s/\"rlock\( [^\"]*\)\{0,1\}\"/\"rlock $version\"/" "$page" >"$out/man$sec/$base"
    names "$page" | while read -r n; do
        [ "$n" = "$stem" ] && continue
        printf '.so man%s/%s\n' "$sec" "$base" > "$out/man$sec/$n.$sec"
    done
done
