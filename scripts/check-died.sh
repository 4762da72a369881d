#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Shows that run-tests.sh finds the tests of a program that died without an
# outcome, whatever the locale: with LANG unset, LANG=C and LANG=C.UTF-8
# (LC_ALL and LC_CTYPE unset), it runs a stand-in for BIN that lists BIN's
# tests (BIN's own --list, so Criterion's ASCII or UTF-8 tree as the locale
# makes it), reports the first of them passed and is then killed. Every
# other test must come out MISSING, the program failed, and the exit code
# non-zero. BIN must have two tests or more. Usage:
#   check-died.sh BUILD_DIR BIN
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$1
bin=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
tmp=$(mktemp -d /tmp/rlock-died.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
stand_in=$tmp/$(basename "$bin")
cat >"$stand_in" <<EOF
#!/bin/sh
[ "\${1:-}" = --list ] && exec "$bin" --list
for a in "\$@"; do case \$a in --tap=*) tap=\${a#--tap=} ;; esac; done
first=\$(sh "$here/list-tests.sh" "$bin" | grep -v ' (skipped)\$' | head -n 1)
printf 'TAP version 13\nok - %s  (0.01s)\n' "\$first" >"\$tap"
kill -9 \$\$
EOF
chmod +x "$stand_in"
want=$(($(sh "$here/list-tests.sh" "$bin" | grep -vc ' (skipped)$') - 1))
if [ "$want" -lt 1 ]; then
    echo "check-died: $bin has fewer than two tests" >&2
    exit 1
fi
bad=0
for lang in unset C C.UTF-8; do
    if [ "$lang" = unset ]; then
        env -u LANG -u LC_ALL -u LC_CTYPE sh "$here/run-tests.sh" "$build" "$stand_in" >"$tmp/out" 2>&1
    else
        env -u LC_ALL -u LC_CTYPE LANG="$lang" sh "$here/run-tests.sh" "$build" "$stand_in" >"$tmp/out" 2>&1
    fi
    rc=$?
    got=$(grep -c '^MISSING ' "$tmp/out")
    if [ "$rc" -eq 0 ] || [ "$got" -ne "$want" ] || ! grep -q '^failed test programs:' "$tmp/out"; then
        echo "check-died: LANG=$lang: exit $rc, $got of $want tests MISSING; run-tests.sh said:"
        sed 's/^/    /' "$tmp/out"
        bad=1
    else
        echo "check-died: LANG=$lang: the $want tests after the program died are MISSING, exit $rc"
    fi
done
exit "$bad"
