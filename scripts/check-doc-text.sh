#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Text the docs must not carry (make docs-check):
# - the man pages in the tree (docs/rlock.1, docs/man3/*.3) name no version:
#   their .TH line says "rlock" and scripts/build-man.sh writes the version
#   of include/rlock.h there; no @VERSION@ placeholder either (a page read
#   from the tree would show it raw). "Since rlock X.Y.Z" history is fine.
# - docs/api.md describes behaviour, not the tests that check it: no
#   "suite::test_name" (docs/operations.md's failure table names tests on
#   purpose).
# Usage: check-doc-text.sh [DOCS_DIR]
set -u
docs=${1:-docs}
bad=0
for p in "$docs"/rlock.1 "$docs"/man3/*.3; do
    th=$(grep -m1 '^\.TH ' "$p")
    case $th in
    *' "rlock" '*) ;;
    *)
        echo "doc-text: $p: its .TH line must say \"rlock\" (the build adds the version): $th"
        bad=1
        ;;
    esac
    if grep -nH '@VERSION@' "$p"; then
        echo "doc-text: $p: a raw @VERSION@ (the lines above)"
        bad=1
    fi
done
if grep -nHE '\b[a-z][a-z0-9_]*::[a-z][a-z0-9_]*\b' "$docs/api.md"; then
    echo "doc-text: $docs/api.md names tests (the lines above): say the behaviour instead"
    bad=1
fi
[ "$bad" -eq 0 ] || exit 1
echo "doc-text: the man pages in the tree carry no version; api.md names no test"
