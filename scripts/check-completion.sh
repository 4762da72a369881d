#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Checks the shell completions of the rlock command: the bash one answers a
# few command lines as expected (with and without the bash-completion
# package's helpers), the zsh one loads and compiles.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)

bash -s "$here/completions/rlock.bash" <<'BASH'
set -u
fail=0
# complete_line WANT WORD... : completes the last WORD and checks that every
# word of WANT is offered.
check() {
    local want=$1
    shift
    COMP_WORDS=("$@")
    COMP_CWORD=$(($# - 1))
    COMP_LINE="$*"
    COMP_POINT=${#COMP_LINE}
    COMPREPLY=()
    _rlock rlock "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}" 2>/dev/null
    local w
    for w in $want; do
        case " ${COMPREPLY[*]-} " in
        *" $w "*) ;;
        *) echo "completion: '$*' should offer '$w', got: ${COMPREPLY[*]-}"; fail=1 ;;
        esac
    done
}
for mode in plain bash-completion; do
    if [ $mode = bash-completion ]; then
        [ -f /usr/share/bash-completion/bash_completion ] || continue
        . /usr/share/bash-completion/bash_completion
    fi
    . "$1"
    check "run hold status unlock wait" rlock ''
    check "status" rlock --url redis://h st
    check "--url --version" rlock --
    check "--wait --lease --watchdog --shared --nonblock --conflict-exit-code" rlock run --
    check "--json" rlock status --j
    check "--force" rlock unlock --f
    check "TERM KILL" rlock run --signal ''
    check "--" rlock run -w 100 jobs ''
    check "--wait" rlock wait --w
    check "--quiet --redis-timeout" rlock run --
    check "--quiet" rlock wait --q
    check "--redis-timeout" rlock --r
    check "status" rlock --redis-timeout 2s st
    check "redis:// rediss:// unix://" rlock --url ''
    check "--cacert --cacertdir --cert --key --tls-server-name --tls-insecure" rlock --
    check "--cacert --tls-insecure" rlock wait --
    check "--tls-server-name" rlock status --tls
    check "status" rlock --url rediss://h --cacert ca.pem st
    check "--" rlock run --cacert ca.pem --cert c.pem --key c.key jobs ''
    check "sleep" rlock run -w 5 jobs -- slee
done
[ $fail -eq 0 ] && echo "completion: bash completion answers as expected"
exit $fail
BASH

# zsh: an interactive zsh in a pseudo-terminal is sent three command lines
# with a TAB each; the listings must show what _rlock offers.
if ! command -v zsh >/dev/null; then
    echo "completion: zsh not installed, zsh completion not checked"
    exit 0
fi
zsh -n "$here/completions/_rlock"
out=$(timeout 60 zsh -f -s "$here/completions" <<'ZSH' | sed 's/\x1b\[[0-9;?]*[a-zA-Z]//g' | tr -d '\r'
zmodload zsh/zpty
zpty z "zsh -f -i"
zpty -w z "PS1='> '; fpath=($1 \$fpath); autoload -Uz compinit; compinit -u -D"
for l in "rlock " "rlock run --" "rlock run --signal " "rlock --tls"; do
    zpty -w z "$l"$'\t'
    sleep 1
    zpty -w -n z $'\C-u'
done
zpty -w z "exit"
sleep 0.5
while zpty -r -t z line 2>/dev/null; do print -rn -- "$line"; done
zpty -d z
ZSH
)
zfail=0
for w in status hold --shared --watchdog --nonblock KILL --tls-server-name --tls-insecure; do
    case $out in
    *"$w"*) ;;
    *) echo "completion: zsh did not offer '$w'"; zfail=1 ;;
    esac
done
[ $zfail -eq 0 ] && echo "completion: zsh completion answers as expected"
exit $zfail
