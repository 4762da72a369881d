#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Prints the line and branch coverage of src/ from the gcov counters of a
# build made with --coverage (make coverage): one line per source file,
# then the totals. Usage: coverage.sh BUILD_DIR
# Plain gcov is enough: its summary ("Lines executed:89.12% of 331",
# "Taken at least once:74.00% of 200") is read per file and summed.
set -eu
build=${1:-build-cov}
command -v gcov >/dev/null || { echo "coverage: gcov not found" >&2; exit 1; }
out=$(mktemp /tmp/rlock-cov.XXXXXX)
trap 'rm -f "$out"' EXIT
for f in src/*.c src/*/*.c; do
    rel=${f#src/}
    obj="$build/obj/$(dirname "$rel")"
    [ -f "$obj/$(basename "$f" .c).gcno" ] || { echo "coverage: no $obj/$(basename "$f" .c).gcno" >&2; exit 1; }
    # -n: no .gcov files; only the summary of the file itself is kept
    # (gcov also reports the headers it inlined).
    gcov -b -n -o "$obj" "$f" 2>/dev/null | awk -v want="$f" '
        /^File / { cur = $2; gsub(/\047/, "", cur); next }
        cur == want && /^Lines executed:/ {
            split($0, a, /[:% ]+/); lp = a[3]; lt = a[5]; next }
        cur == want && /^No executable lines/ { lp = 0; lt = 0; next }
        cur == want && /^Taken at least once:/ {
            split($0, a, /[:% ]+/); bp = a[5]; bt = a[7]; next }
        cur == want && /^No branches/ { bp = 0; bt = 0; next }
        END { printf "%s %d %d %d %d\n", want, lt, lp * lt / 100 + 0.5, bt, bp * bt / 100 + 0.5 }
    ' >>"$out"
done
awk '
    function pct(a, b) { return b ? 100.0 * a / b : 100.0 }
    { printf "%-28s lines %6.2f%% of %5d   branches %6.2f%% of %5d\n", $1, pct($3, $2), $2, pct($5, $4), $4
      lt += $2; lh += $3; bt += $4; bh += $5 }
    END { printf "src/ total: lines %.2f%% (%d of %d), branches taken %.2f%% (%d of %d)\n",
                 pct(lh, lt), lh, lt, pct(bh, bt), bh, bt }
' "$out"
