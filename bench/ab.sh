#!/bin/sh
# Interleaved A/B of the uncontended pair of two rlock-bench builds (before
# and after a change to src/) against the limit of the same rounds: each
# round runs redis-benchmark, A, B (swapped every other round),
# redis-benchmark; medians over the rounds at the end. Needs RLOCK_URL:
#   sh scripts/with-redis.sh sh bench/ab.sh OLD/rlock-bench NEW/rlock-bench [ROUNDS=9] [PAIRS=5000]
set -eu
a=$1
b=$2
rounds=${3:-9}
pairs=${4:-5000}
port=${RLOCK_URL##*:}
port=${port%%/*}
sha=$(redis-cli -p "$port" SCRIPT LOAD "redis.call('HINCRBY', KEYS[1], ARGV[1], 1); redis.call('PEXPIRE', KEYS[1], 30000); return 1")
limit() {
    redis-benchmark -p "$port" -c 1 -P 1 -n $((2 * pairs)) --csv evalsha "$sha" 1 rlock-bench:ab f |
        awk -F'","' '/^"evalsha/ { print $2 }'
}
loop() {
    "$1" --loop "$pairs" 2>&1 | awk '/pairs in/ { print $6 }'
}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "round EVALSHA/s A_pairs/s B_pairs/s A_ratio B_ratio B/A" >&2
i=1
while [ "$i" -le "$rounds" ]; do
    l1=$(limit)
    if [ $((i % 2)) -eq 1 ]; then
        pa=$(loop "$a")
        pb=$(loop "$b")
    else
        pb=$(loop "$b")
        pa=$(loop "$a")
    fi
    l2=$(limit)
    echo "$i $l1 $l2 $pa $pb" | awk '{ l = ($2 + $3) / 2; half = l / 2;
        printf "%d %.0f %s %s %.3f %.3f %.3f\n", $1, l, $4, $5, $4 / half, $5 / half, $5 / $4 }' |
        tee -a "$out" >&2
    i=$((i + 1))
done
median() {
    sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2];
        else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
echo "median over $rounds rounds: A ratio $(awk '{ print $5 }' "$out" | median)," \
    "B ratio $(awk '{ print $6 }' "$out" | median), B/A $(awk '{ print $7 }' "$out" | median)," \
    "B faster in $(awk '$7 > 1' "$out" | wc -l) of $rounds rounds"
