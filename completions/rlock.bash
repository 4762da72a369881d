# SPDX-License-Identifier: BSD-3-Clause
# bash completion for rlock(1): installed as
# $(datadir)/bash-completion/completions/rlock by `make install`.
#
#   rlock [--url URL] [TLS OPTIONS] run [OPTIONS] NAME -- COMMAND [ARG...]
#   rlock [--url URL] hold [OPTIONS] NAME
#   rlock [--url URL] status [--json] NAME
#   rlock [--url URL] unlock --force NAME
#   rlock [--url URL] wait [-w MS] NAME
#
# Lock names live in Redis and are not completed; after `run NAME --` the
# command and its arguments complete as commands do. The options are those
# of docs/rlock.1 plus the flock(1)-like ones of issue 9 (-n, -E, -c, -s as
# --shared, --verbose, hold); --signal keeps its long form.

_rlock()
{
    local cur prev words cword
    if declare -F _init_completion >/dev/null 2>&1; then
        _init_completion -n = || return
    else
        COMPREPLY=()
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD - 1]}
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
    fi

    # TLS (rediss://): the CA file or directory, a client certificate and
    # key (mutual TLS), the name to check, and verification off (tests).
    local tls_opts='--cacert --cacertdir --cert --key --tls-server-name --tls-insecure'
    local global_opts="--url --redis-timeout $tls_opts -h --help -V --version"
    local commands='run hold status unlock wait'

    # Find the sub-command and, for run, the NAME and the `--` after it.
    local i cmd='' cmd_at=0 name_at=0 dashdash_at=0
    for ((i = 1; i < cword; i++)); do
        local w=${words[i]}
        if [[ -z $cmd ]]; then
            case $w in
            --url | -u | --redis-timeout | --cacert | --cacertdir | --cert | --key | \
                --tls-server-name) ((i++)) ;;
            --url=*) ;;
            -*) ;;
            *) cmd=$w cmd_at=$i ;;
            esac
            continue
        fi
        if ((dashdash_at)); then
            break
        fi
        case $w in
        --) dashdash_at=$i ;;
        -w | --wait | -l | --lease | -k | --kill-after | --watchdog | \
            -E | --conflict-exit-code | -c | --command | --url | -u | --signal | \
            --redis-timeout | --cacert | --cacertdir | --cert | --key | --tls-server-name)
            ((i++)) ;;
        -*) ;;
        *) ((name_at)) || name_at=$i ;;
        esac
    done

    # After `run ... NAME --` (or NAME COMMAND): complete the command.
    if [[ $cmd == run ]] && { ((dashdash_at)) || { ((name_at)) && ((cword > name_at + 1)); }; }; then
        local start=$((dashdash_at ? dashdash_at + 1 : name_at + 1))
        if declare -F _command_offset >/dev/null 2>&1; then
            _command_offset "$start"
        else
            COMPREPLY=($(compgen -c -- "$cur"))
        fi
        return
    fi

    case $prev in
    --url | -u)
        COMPREPLY=($(compgen -W 'redis:// rediss:// unix://' -- "$cur"))
        compopt -o nospace 2>/dev/null
        return ;;
    -w | --wait | -l | --lease | -k | --kill-after | --watchdog | --redis-timeout)
        return ;; # a time: 1.5, 500ms, 2m
    --cacert | --cert | --key)
        COMPREPLY=($(compgen -f -- "$cur"))
        compopt -o filenames 2>/dev/null
        return ;;
    --cacertdir)
        COMPREPLY=($(compgen -d -- "$cur"))
        compopt -o filenames 2>/dev/null
        return ;;
    --tls-server-name)
        COMPREPLY=($(compgen -A hostname -- "$cur"))
        return ;;
    --pid)
        COMPREPLY=($(compgen -W "$PPID" -- "$cur"))
        return ;;
    -c | --command)
        return ;; # a shell command line, as flock(1)'s -c
    -E | --conflict-exit-code)
        COMPREPLY=($(compgen -W '75 0 1' -- "$cur"))
        return ;;
    --signal)
        COMPREPLY=($(compgen -W 'TERM INT HUP QUIT KILL USR1 USR2 ALRM ABRT' -- "$cur"))
        return ;;
    esac

    if [[ -z $cmd ]]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "$global_opts" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "$commands" -- "$cur"))
        fi
        return
    fi

    local opts
    case $cmd in
    run)
        opts='-w --wait -n --nonblock -q --quiet -l --lease --signal -k --kill-after --watchdog
              -E --conflict-exit-code -c --command --fair -s --shared --read --write --fenced --spin --verbose --url
              --redis-timeout -h --help' ;;
    hold)
        opts='-w --wait -n --nonblock -q --quiet -l --lease --watchdog -E --conflict-exit-code
              --pid --fair -s --shared --read --write --fenced --spin --verbose --url --redis-timeout -h --help' ;;
    status) opts='--json --verbose --url --redis-timeout -h --help' ;;
    unlock) opts='--force --fair -s --shared --read --write --fenced --spin --verbose --url --redis-timeout -h --help' ;;
    wait) opts='-w --wait -n --nonblock -q --quiet -E --conflict-exit-code --fair -s --shared --read --write --fenced --spin
              --verbose --url --redis-timeout -h --help' ;;
    *) return ;;
    esac
    opts="$opts $tls_opts"
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    elif [[ $cmd == run ]] && ((name_at)) && ((cword == name_at + 1)); then
        COMPREPLY=($(compgen -W '--' -- "$cur"))
    fi
} &&
    complete -F _rlock rlock
