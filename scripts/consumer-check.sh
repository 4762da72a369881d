#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Builds a program against an installed rlock the ways a user would, and
# runs each build against a throwaway redis-server:
#   1. pkg-config, shared library (rpath into the tree)
#   2. pkg-config --static, rlock/hiredis/libuuid linked statically
#   3. pkg-config --static and -static: no shared library at all
#   4. CMake, find_package(rlock CONFIG) -> rlock::rlock
#   5. CMake, rlock::rlock_static
# after checking that `pkg-config --cflags rlock` names only rlock's include
# directory. The tree is installed with `make install PREFIX=$tmp/a`, then
# moved to $tmp/b before the builds, so the relocatable .pc
# (--define-prefix) and CMake package are what is tested.
#   scripts/consumer-check.sh [EXAMPLE.c]   (default examples/port_basic.c)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
src=${1:-$root/examples/port_basic.c}
case $src in /*) ;; *) src=$(pwd)/$src ;; esac
tmp=$(mktemp -d /tmp/rlock-consumer.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
fail() { echo "consumer-check: FAIL: $*" >&2; exit 1; }

echo "=== make install PREFIX=$tmp/a"
make -C "$root" -s install PREFIX="$tmp/a" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "make install"; }
mv "$tmp/a" "$tmp/b"
p=$tmp/b
pc() { PKG_CONFIG_PATH="$p/lib/pkgconfig" pkg-config --define-prefix "$@"; }

cflags=$(pc --cflags rlock | sed "s/ *$//")
[ "$cflags" = "-I$p/include" ] || fail "pkg-config --cflags rlock gives '$cflags', want '-I$p/include'"
echo "pkg-config --cflags rlock: $cflags"
echo "pkg-config --libs rlock: $(pc --libs rlock)"
echo "pkg-config --static --libs rlock: $(pc --static --libs rlock)"
[ "$(pc --modversion rlock)" = "$(sed -n 's/^Version: //p' "$p/lib/pkgconfig/rlock.pc")" ] || fail "modversion"

echo "=== man pages, version"
v=$(pc --modversion rlock)
MANPATH=$p/share/man man -w rlock_lock >/dev/null || fail "man rlock_lock: not found under $p/share/man"
for f in rlock_unlock rlock_try_lock rlock_config_init rlock_version; do
    MANPATH=$p/share/man MANWIDTH=80 man "$f" 2>/dev/null | head -n 1 | grep -q '^RLOCK_' ||
        fail "man $f does not show its page"
done
foot=$(MANPATH=$p/share/man MANWIDTH=80 man rlock_unlock 2>/dev/null | tail -n 1)
case $foot in "rlock $v "*) ;; *) fail "man rlock_unlock footer '$foot' lacks 'rlock $v'" ;; esac
MANPATH=$p/share/man MANWIDTH=80 man 1 rlock 2>/dev/null | tail -n 1 | grep -q "rlock $v " || fail "rlock(1) version"
echo "man rlock_unlock: $(MANPATH=$p/share/man MANWIDTH=80 man rlock_unlock 2>/dev/null | sed -n 4p | sed 's/^ *//')"
# rlock -V: the command's version first, then the library's and hiredis's.
vv=$("$p/bin/rlock" -V)
[ "$(echo "$vv" | sed -n 1p)" = "rlock $v" ] || fail "rlock -V says '$vv', not 'rlock $v' first"
[ "$(echo "$vv" | sed -n 2p)" = "librlock $v" ] || fail "rlock -V says '$vv', not 'librlock $v' second"
soname=$(readelf -d "$p/lib/librlock.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ -f "$p/lib/librlock.so.$v" ] && [ -e "$p/lib/$soname" ] || fail "librlock.so.$v / $soname missing"
grep -q "PACKAGE_VERSION \"$v\"" "$p/lib/cmake/rlock/rlock-config-version.cmake" || fail "CMake package version"
echo "version $v everywhere: rlock.pc, rlock -V, man pages, librlock.so.$v ($soname), CMake"

mkdir -p "$tmp/bin"
# No warnings allowed: a user builds with -Wall -Werror too.
CFLAGS_U="-std=c11 -O2 -Wall -Wextra -Werror"
# shellcheck disable=SC2046,SC2086
cc $CFLAGS_U $(pc --cflags rlock) -o "$tmp/bin/shared" "$src" \
    $(pc --libs rlock) -Wl,-rpath,"$p/lib" || fail "pkg-config shared build"
# shellcheck disable=SC2046,SC2086
cc $CFLAGS_U $(pc --cflags rlock) -o "$tmp/bin/static-rlock" "$src" \
    -Wl,-Bstatic $(pc --static --libs rlock) -Wl,-Bdynamic || fail "pkg-config --static build"
# glibc warns that getaddrinfo in a static program needs its NSS modules at
# run time; numeric addresses such as 127.0.0.1 do not.
# shellcheck disable=SC2046,SC2086
cc $CFLAGS_U -static $(pc --cflags rlock) -o "$tmp/bin/static-all" "$src" \
    $(pc --static --libs rlock) 2>"$tmp/static.log" || { cat "$tmp/static.log"; fail "-static build"; }

needed() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' '; }
n=$(needed "$tmp/bin/shared")
case $n in *librlock.so.*) ;; *) fail "shared build does not need librlock: $n" ;; esac
n=$(needed "$tmp/bin/static-rlock")
case $n in *librlock* | *libhiredis* | *libuuid*) fail "static build still needs: $n" ;; esac
echo "static-rlock needs only: $n"
if readelf -d "$tmp/bin/static-all" 2>/dev/null | grep -q NEEDED; then
    fail "-static build has NEEDED entries: $(needed "$tmp/bin/static-all")"
fi
echo "static-all: $(ldd "$tmp/bin/static-all" 2>&1 | head -n 1 | sed 's/^[[:space:]]*//')"

echo "=== CMake find_package(rlock CONFIG)"
mkdir -p "$tmp/cm"
cat > "$tmp/cm/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.13)
project(rlock_consumer C)
find_package(rlock 0.2 CONFIG REQUIRED)
message(STATUS "rlock \${rlock_VERSION} from \${rlock_DIR}")
add_executable(cmake-shared "$src")
target_link_libraries(cmake-shared PRIVATE rlock::rlock)
add_executable(cmake-static "$src")
target_link_libraries(cmake-static PRIVATE rlock::rlock_static)
set_target_properties(cmake-shared cmake-static PROPERTIES C_STANDARD 11)
target_compile_options(cmake-shared PRIVATE -Wall -Wextra -Werror)
target_compile_options(cmake-static PRIVATE -Wall -Wextra -Werror)
CMAKE
cmake -S "$tmp/cm" -B "$tmp/cm/build" -DCMAKE_PREFIX_PATH="$p" -DCMAKE_BUILD_TYPE=Release \
    >"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; fail "cmake configure"; }
grep 'rlock .* from' "$tmp/cmake.log" | sed 's/^-- //'
cmake --build "$tmp/cm/build" >"$tmp/cmake-build.log" 2>&1 || { cat "$tmp/cmake-build.log"; fail "cmake build"; }
cp "$tmp/cm/build/cmake-shared" "$tmp/cm/build/cmake-static" "$tmp/bin/"
case $(needed "$tmp/bin/cmake-shared") in *librlock.so.*) ;; *) fail "cmake-shared does not need librlock" ;; esac
case $(needed "$tmp/bin/cmake-static") in *librlock*) fail "cmake-static needs librlock" ;; esac
# A request for an incompatible version must be refused.
sed -i 's/find_package(rlock 0.2 CONFIG REQUIRED)/find_package(rlock 9.0 CONFIG QUIET)\nif(rlock_FOUND)\n  message(FATAL_ERROR "rlock 9.0 accepted")\nendif()\nfind_package(rlock 0.2 CONFIG REQUIRED)/' "$tmp/cm/CMakeLists.txt"
cmake -S "$tmp/cm" -B "$tmp/cm/build2" -DCMAKE_PREFIX_PATH="$p" >"$tmp/cmake2.log" 2>&1 ||
    { cat "$tmp/cmake2.log"; fail "version check of the CMake package"; }

echo "=== run each build against a throwaway redis-server"
sh "$root/scripts/with-redis.sh" sh -c '
    set -e
    for b in "$1"/*; do
        printf "%-14s" "$(basename "$b")"
        "$b" "$RLOCK_URL" >"$1.out" 2>&1 || { echo FAILED; cat "$1.out"; exit 1; }
        echo ok
    done' sh "$tmp/bin" || fail "a build did not run"
echo "consumer-check: 5 passed, 0 failed"
