#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Throwaway redis-server for tests, the demo and benchmarks.
#   scripts/redis-server.sh start DIR [TLSDIR]
#                                       -> starts on a free 127.0.0.1 port,
#                                          writes DIR/port, DIR/redis.pid;
#                                          with TLSDIR (scripts/make-tls-certs.sh)
#                                          also a TLS port (DIR/tls_port, the
#                                          plain port + 1; clients need no
#                                          certificate)
#   scripts/redis-server.sh stop DIR    -> stops it (by its pid) and waits
# It never touches a system redis service; everything lives in DIR.
set -eu
cmd=$1
dir=$2
tlsdir=${3:-}

case "$cmd" in
start)
    mkdir -p "$dir"
    tries=0
    while :; do
        tries=$((tries + 1))
        # A port from the pid and the clock; collisions are detected below.
        port=$(awk -v p=$$ -v t=$tries 'BEGIN { srand(); print 20000 + int(rand() * 40000 + p * 7919 + t * 104729) % 40000 }')
        rm -f "$dir/redis.pid"
        set --
        if [ -n "$tlsdir" ]; then
            set -- --tls-port $((port + 1)) --tls-cert-file "$tlsdir/server.crt" \
                --tls-key-file "$tlsdir/server.key" --tls-ca-cert-file "$tlsdir/ca.crt" \
                --tls-auth-clients no
        fi
        redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
            --daemonize yes --pidfile "$dir/redis.pid" --dir "$dir" \
            --logfile "$dir/redis.log" --enable-debug-command yes "$@" >/dev/null 2>&1 || true
        i=0
        while [ $i -lt 50 ]; do
            if redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then
                if [ -f "$dir/redis.pid" ]; then
                    echo "$port" > "$dir/port"
                    if [ -n "$tlsdir" ]; then echo $((port + 1)) > "$dir/tls_port"; fi
                    echo "$port"
                    exit 0
                fi
            fi
            sleep 0.1
            i=$((i + 1))
        done
        if [ $tries -ge 10 ]; then
            echo "redis-server.sh: could not start redis-server" >&2
            cat "$dir/redis.log" >&2 2>/dev/null || true
            exit 1
        fi
    done
    ;;
stop)
    if [ -f "$dir/redis.pid" ]; then
        pid=$(cat "$dir/redis.pid")
        kill "$pid" 2>/dev/null || true
        i=0
        while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
        kill -9 "$pid" 2>/dev/null || true
    fi
    ;;
*)
    echo "usage: $0 start DIR [TLSDIR] | stop DIR" >&2
    exit 2
    ;;
esac
