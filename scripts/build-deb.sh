#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Builds the Debian packages from a copy of the tree (the committed files
# plus uncommitted changes, without build output) with
# `dpkg-buildpackage -us -uc -b`, puts the .deb files in OUTDIR and runs
# lintian on them; exits 1 if lintian reports an error.
#   scripts/build-deb.sh OUTDIR
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
out=$1
case $out in /*) ;; *) out=$root/$out ;; esac
cd "$root"

version=$(make -s --no-print-directory print-version)
somajor=$(make -s --no-print-directory print-somajor)
debver=$(dpkg-parsechangelog -l debian/changelog -S Version)
if [ "${debver%%-*}" != "$version" ]; then
    echo "build-deb: debian/changelog is at $debver but include/rlock.h says $version:" \
        "add a debian/changelog entry (dch -v $version)" >&2
    exit 1
fi
if ! grep -q "^Package: librlock$somajor\$" debian/control; then
    echo "build-deb: the runtime package must be named after the SONAME: librlock$somajor" \
        "(rename it in debian/control and debian/*.install)" >&2
    exit 1
fi

tmp=$(mktemp -d /tmp/rlock-deb.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
src=$tmp/rlock-$version
mkdir -p "$src"
git ls-files -z --cached --others --exclude-standard | grep -zv '^build' |
    tar --null -T - -cf - | tar -xf - -C "$src"

echo "build-deb: dpkg-buildpackage -us -uc -b in $src"
(cd "$src" && dpkg-buildpackage -us -uc -b) >"$tmp/build.log" 2>&1 || {
    tail -n 60 "$tmp/build.log"
    echo "build-deb: dpkg-buildpackage failed (log above)" >&2
    exit 1
}
rm -rf "$out"
mkdir -p "$out"
cp "$tmp"/*.deb "$tmp"/*.changes "$tmp"/*.buildinfo "$out"/
cp "$tmp/build.log" "$out/build.log"
for d in "$out"/*.deb; do
    echo "--- $(basename "$d")"
    dpkg-deb -c "$d" | awk '{print "    " $6 ($7 ? " " $7 " " $8 : "")}'
done

echo "build-deb: lintian"
lintian --info --display-info --pedantic --tag-display-limit 0 "$out"/*.changes >"$out/lintian.txt" 2>&1 || true
cat "$out/lintian.txt"
errors=$(grep -c '^E: ' "$out/lintian.txt" || true)
warnings=$(grep -c '^W: ' "$out/lintian.txt" || true)
echo "build-deb: lintian: $errors errors, $warnings warnings ($out/lintian.txt)"
[ "$errors" -eq 0 ]
