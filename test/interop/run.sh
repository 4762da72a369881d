#!/bin/sh
# make interop: rlock against real Redisson, one throwaway redis-server.
#   test/interop/run.sh BUILD_DIR VERSION[:agent-only]...
#                                                  build and run every version
#   test/interop/run.sh --check-tools              only say what is missing
# For each Redisson VERSION, Maven builds the Java agent (test/interop/pom.xml)
# into BUILD_DIR/interop/VERSION (skipped when up to date); ":agent-only"
# leaves out the porting guide's snippets (for Redisson older than their
# API). Then
# BUILD_DIR/interop/interop plays the C side against it. Maven's downloads
# are cached in ~/.m2 (or MAVEN_REPO). Extra arguments for the driver (test
# names) come from INTEROP_TESTS.
set -eu
cd "$(dirname "$0")/../.."

need_tools() {
    missing=""
    if ! command -v java >/dev/null 2>&1; then
        missing="$missing java"
    elif ! java -version 2>&1 | awk -F'"' '/version/ { split($2, v, "."); exit !(v[1] >= 17) }'; then
        missing="$missing java>=17(found: $(java -version 2>&1 | head -1))"
    fi
    command -v mvn >/dev/null 2>&1 || missing="$missing mvn"
    command -v python3 >/dev/null 2>&1 || missing="$missing python3"
    if [ -n "$missing" ]; then
        cat >&2 <<MSG
make interop: missing:$missing
make interop needs a Java 17+ JDK (java, javac) and Apache Maven 3.6+ (mvn)
on the PATH, python3, and access to Maven Central (https://repo.maven.apache.org)
for org.redisson:redisson and its dependencies (about 20 MB, cached in ~/.m2).
On Debian: apt-get install openjdk-17-jdk-headless maven python3
make check does not need any of these and does not run the interop tests.
MSG
        exit 1
    fi
}

if [ "${1:-}" = "--check-tools" ]; then
    need_tools
    exit 0
fi
[ $# -ge 2 ] || { echo "usage: $0 BUILD_DIR VERSION..." >&2; exit 2; }
need_tools
B=$1
shift
start=$(date +%s)

python3 test/interop/check-java-excerpts.py

repo_opt=""
[ -n "${MAVEN_REPO:-}" ] && repo_opt="-Dmaven.repo.local=$MAVEN_REPO"
for spec in "$@"; do
    v=${spec%%:*}
    mode=""
    [ "$spec" = "$v:agent-only" ] && mode="-DagentOnly"
    out=$(cd "$B" && pwd)/interop/$v
    if [ -f "$out/classpath.txt" ] && [ -z "$(find test/interop/pom.xml test/interop/src -newer "$out/classpath.txt" | head -1)" ]; then
        echo "interop: Java agent for Redisson $v is up to date"
        continue
    fi
    echo "interop: building the Java agent for Redisson $v (mvn)"
    t0=$(date +%s)
    # shellcheck disable=SC2086
    rm -rf "$out/classes"
    mvn -B -q -f test/interop/pom.xml $repo_opt $mode -Dredisson.version="$v" -Dinterop.dir="$out" \
        compile dependency:build-classpath -Dmdep.outputFile="$out/classpath.txt.tmp"
    mv "$out/classpath.txt.tmp" "$out/classpath.txt"
    echo "interop: built for Redisson $v in $(( $(date +%s) - t0 )) s"
done

dir=$(mktemp -d "${TMPDIR:-/tmp}/rlock-interop.XXXXXX")
status=1
# The server's directory (its log, the agents' stderr) stays after a failure.
cleanup() {
    sh scripts/redis-server.sh stop "$dir"
    if [ "$status" -eq 0 ]; then rm -rf "$dir"; else echo "interop: logs in $dir"; fi
}
trap cleanup EXIT INT TERM
port=$(sh scripts/redis-server.sh start "$dir")
echo "interop: redis-server on 127.0.0.1:$port"

failed=0
for spec in "$@"; do
    v=${spec%%:*}
    agent_only=""
    [ "$spec" = "$v:agent-only" ] && agent_only=1
    out=$(cd "$B" && pwd)/interop/$v
    redis-cli -h 127.0.0.1 -p "$port" flushall >/dev/null
    # shellcheck disable=SC2086
    INTEROP_AGENT_ONLY=$agent_only INTEROP_AGENT_LOG="$dir/agent-$v.log" "$B/interop/interop" "redis://127.0.0.1:$port" \
        "$out/classes:$(cat "$out/classpath.txt")" "$v" ${INTEROP_TESTS:-} || failed=1
done
status=$failed
echo "interop: $(( $(date +%s) - start )) s, Redisson $*: $([ $status -eq 0 ] && echo all passed || echo FAILED)"
exit $status
