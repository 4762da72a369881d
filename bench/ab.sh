#!/bin/sh
# Interleaved A/B of the uncontended pair of two rlock-bench builds (before
# and after a change to src/) against the floor of the same rounds: the
# same scripts and arguments sent by a bare loop (bench/floor.c, run in
# NEW's process: NEW's scripts). Both builds run as --slices processes
# driven from here, so every round alternates short slices of the three
# (floor, A, B in a rotating order): a slow moment of this shared machine
# hits all of them alike. Per round: pairs/s of each, A and B as ratios to
# the floor, B/A; medians and ranges over the rounds at the end.
# Needs RLOCK_URL:
#   sh scripts/with-redis.sh sh bench/ab.sh OLD/rlock-bench NEW/rlock-bench [ROUNDS=9] [PAIRS=5000]
# PAIRS is per side and round, in SLICES (env, default 10) slices.
# PIN (env): where A and B measure, against the server's main thread pinned
# to CPU 0 (a local server of this user, found by its port). On these VMs a
# round trip to a server on the other CPU costs ~75 us of wake-up latency
# (idle vCPUs), on the same CPU ~10 us, so the two placements measure
# different things and an unpinned run mixes them at random:
#   same  (default) the measuring threads on CPU 0: the client's CPU shows
#   other           on CPU 1: wake-up latency dominates
#   same-all, other-all  whole processes (rlock's own threads too) there
#   none            nothing pinned
# As make bench --pin does, same and other pin only the thread that runs
# the pairs: rlock's own threads (watchdog, pub/sub) run where the
# scheduler puts them, as in an application.
set -eu
a=$1
b=$2
rounds=${3:-9}
pairs=${4:-5000}
slices=${SLICES:-10}
per=$((pairs / slices))
d=$(mktemp -d /tmp/rlock-ab.XXXXXX)
pa=
pb=
cleanup() {
    exec 3>&- 5>&- 4<&- 6<&- 2>/dev/null || true
    [ -z "$pa" ] || wait "$pa" 2>/dev/null || true
    [ -z "$pb" ] || wait "$pb" 2>/dev/null || true
    rm -rf "$d"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
pin=${PIN:-same}
cpu=
set --
if [ "$pin" != none ]; then
    port=${RLOCK_URL##*:}
    port=${port%%/*}
    spid=$(redis-cli -p "$port" INFO server | tr -d '\r' | awk -F: '$1 == "process_id" { print $2 }')
    taskset -apc 0 "$spid" >/dev/null
    case $pin in
    same) cpu="--cpu 0" ;;
    other) cpu="--cpu 1" ;;
    same-all) set -- taskset -c 0 ;;
    other-all) set -- taskset -c 1 ;;
    *) echo "ab.sh: PIN is same, other, same-all, other-all or none" >&2; exit 2 ;;
    esac
fi
mkfifo "$d/a.in" "$d/a.out" "$d/b.in" "$d/b.out"
# shellcheck disable=SC2086 # $cpu is empty or two words
"$@" "$a" --slices $cpu <"$d/a.in" >"$d/a.out" &
pa=$!
# shellcheck disable=SC2086
"$@" "$b" --slices $cpu <"$d/b.in" >"$d/b.out" &
pb=$!
exec 3>"$d/a.in" 4<"$d/a.out" 5>"$d/b.in" 6<"$d/b.out"
read -r ready <&4
read -r ready <&6
# One slice: side F (the floor, in B's process), A or B; its seconds go to
# the round's file.
run() {
    case $1 in
    A) echo "lock $per" >&3 && read -r t <&4 ;;
    B) echo "lock $per" >&5 && read -r t <&6 ;;
    F) echo "floor $per" >&5 && read -r t <&6 ;;
    esac
    echo "$1 $t" >>"$d/round"
}
out=$d/rounds
echo "round floor_pairs/s A_pairs/s B_pairs/s A_ratio B_ratio B/A load" >&2
i=1
while [ "$i" -le "$rounds" ]; do
    : >"$d/round"
    k=0
    while [ "$k" -lt "$slices" ]; do
        case $(((k + i) % 4)) in
        0) run F; run A; run B ;;
        1) run B; run A; run F ;;
        2) run F; run B; run A ;;
        3) run A; run B; run F ;;
        esac
        k=$((k + 1))
    done
    load=$(cut -d' ' -f1 /proc/loadavg)
    awk -v i="$i" -v n="$((per * slices))" -v load="$load" '{ s[$1] += $2 } END {
        f = n / s["F"]; x = n / s["A"]; y = n / s["B"];
        printf "%d %.0f %.0f %.0f %.3f %.3f %.3f %s\n", i, f, x, y, x / f, y / f, y / x, load }' \
        "$d/round" | tee -a "$out" >&2
    i=$((i + 1))
done
median() {
    sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2];
        else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
range() {
    sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "[%s - %s]", lo, hi }'
}
col() { awk -v c="$1" '{ print $c }' "$out"; }
echo "median over $rounds rounds of $slices x $per pairs per side, PIN=$pin:" \
    "floor $(col 2 | median) pairs/s $(col 2 | range)," \
    "A ratio $(col 5 | median) $(col 5 | range), B ratio $(col 6 | median) $(col 6 | range)," \
    "B/A $(col 7 | median) $(col 7 | range), B faster in $(awk '$7 > 1' "$out" | wc -l)" \
    "of $rounds rounds; load $(col 8 | range)"
