#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Calls between the engine's layers only point down (docs/engine.md):
#   core (0) -> net (1) -> sync (2) -> kinds (3) -> lock.c, client.c (4)
# For every object file, each rlock__ symbol it uses but does not define
# must be defined in its own layer or a lower one. The embedded scripts
# (lua_scripts.o) are data of the net layer. Usage: check-layers.sh BUILD_DIR
set -eu
b=$1
layer() {
    case $1 in
        */obj/core/*) echo 0 ;;
        */obj/net/*|*/obj/lua_scripts.o) echo 1 ;;
        */obj/sync/*) echo 2 ;;
        */obj/kinds/*) echo 3 ;;
        *) echo 4 ;;
    esac
}
defs=$(mktemp)
trap 'rm -f "$defs"' EXIT
for o in $(find "$b/obj" -name '*.o'); do
    l=$(layer "$o")
    nm "$o" | awk -v l="$l" '$2 ~ /^[TDBR]$/ && $3 ~ /^rlock__/ { print $3, l }'
done | sort >"$defs"
bad=0
for o in $(find "$b/obj" -name '*.o'); do
    l=$(layer "$o")
    for s in $(nm -u "$o" | awk '$2 ~ /^rlock__/ { print $2 }'); do
        d=$(awk -v s="$s" '$1 == s { print $2; exit }' "$defs")
        if [ -n "$d" ] && [ "$d" -gt "$l" ]; then
            echo "layers: ${o#$b/obj/} (layer $l) calls $s of layer $d" >&2
            bad=1
        fi
    done
done
[ "$bad" = 0 ] && echo "layers: every call points down (core -> net -> sync -> kinds -> lock.c, client.c)"
exit "$bad"
