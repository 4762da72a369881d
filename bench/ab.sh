#!/bin/sh
# Interleaved A/B of the uncontended pair of two rlock-bench builds (before
# and after a change to src/) against the floor of the same rounds: the
# same scripts and arguments sent by a bare loop (rlock-bench --floor, of
# NEW's build unless FLOOR=path names another rlock-bench). Each round runs
# the floor, A, B (swapped every other round), the floor; medians over the
# rounds at the end. Needs RLOCK_URL:
#   sh scripts/with-redis.sh sh bench/ab.sh OLD/rlock-bench NEW/rlock-bench [ROUNDS=9] [PAIRS=5000]
set -eu
a=$1
b=$2
rounds=${3:-9}
pairs=${4:-5000}
floor_bin=${FLOOR:-$b}
floor() {
    "$floor_bin" --floor "$pairs" 2>&1 | awk '/pairs in/ { print $6 }'
}
loop() {
    "$1" --loop "$pairs" 2>&1 | awk '/pairs in/ { print $6 }'
}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "round floor_pairs/s A_pairs/s B_pairs/s A_ratio B_ratio B/A load" >&2
i=1
while [ "$i" -le "$rounds" ]; do
    f1=$(floor)
    if [ $((i % 2)) -eq 1 ]; then
        pa=$(loop "$a")
        pb=$(loop "$b")
    else
        pb=$(loop "$b")
        pa=$(loop "$a")
    fi
    f2=$(floor)
    load=$(cut -d' ' -f1 /proc/loadavg)
    echo "$i $f1 $f2 $pa $pb $load" | awk '{ f = ($2 + $3) / 2;
        printf "%d %.0f %s %s %.3f %.3f %.3f %s\n", $1, f, $4, $5, $4 / f, $5 / f, $5 / $4, $6 }' |
        tee -a "$out" >&2
    i=$((i + 1))
done
median() {
    sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2];
        else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
range() {
    sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "[%s - %s]", lo, hi }'
}
echo "median over $rounds rounds: A ratio $(awk '{ print $5 }' "$out" | median)" \
    "$(awk '{ print $5 }' "$out" | range), B ratio $(awk '{ print $6 }' "$out" | median)" \
    "$(awk '{ print $6 }' "$out" | range), B/A $(awk '{ print $7 }' "$out" | median)" \
    "$(awk '{ print $7 }' "$out" | range), B faster in $(awk '$7 > 1' "$out" | wc -l) of" \
    "$rounds rounds; load $(awk '{ print $8 }' "$out" | range)"
