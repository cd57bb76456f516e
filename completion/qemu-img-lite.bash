# SPDX-License-Identifier: GPL-2.0-or-later
# bash completion for qemu-img-lite and qemu-nbd-lite (installed into
# share/bash-completion/completions/). Commands and their options come
# from the program's own --help, and -o names from "create -f FMT -o help"
# (the FMT given by -f/-O on the line, else every format): what completes
# is always what the installed binary takes.

_qemu_img_lite_opts_of()   # the --long and -s options a --help text lists
{
    "$@" --help 2>/dev/null |
        grep -oE '(^|[ ,])--?[A-Za-z][A-Za-z0-9-]*' | tr -d ' ,' | sort -u
}

_qemu_img_lite_o_names()   # FMT: its creation option names, "name="
{
    local prog=$1 fmt=$2 f
    for f in ${fmt:-raw luks qcow2}; do
        "$prog" create -f "$f" -o help 2>/dev/null |
            sed -n 's/^  \([A-Za-z0-9_.-]*\)=.*/\1=/p'
    done | sort -u
}

_qemu_img_lite()
{
    local cur prev prog=${COMP_WORDS[0]} cmd="" fmt="" i
    COMPREPLY=()
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
        -f|-O) fmt=${COMP_WORDS[i+1]} ;;
        -*) ;;
        *) [ -z "$cmd" ] && cmd=${COMP_WORDS[i]} ;;
        esac
    done
    if [ -z "$cmd" ]; then
        COMPREPLY=($(compgen -W "$("$prog" --help 2>/dev/null |
            awk '/^Commands:/ {on = 1; next} on && /^  [a-z]/ {print $1}')
            --help --version" -- "$cur"))
        return
    fi
    case $prev in
    -f|-F|-O|--format|--target-format|--backing-format)
        COMPREPLY=($(compgen -W "raw luks qcow2" -- "$cur")); return ;;
    -t|-T|--cache|--source-cache)
        COMPREPLY=($(compgen -W "none writeback writethrough directsync unsafe" \
            -- "$cur")); return ;;
    --output)
        COMPREPLY=($(compgen -W "human json" -- "$cur")); return ;;
    -o|--options)
        local opt=${cur##*,} done=${cur%"${cur##*,}"}
        COMPREPLY=($(compgen -P "$done" -W "$(_qemu_img_lite_o_names \
            "$prog" "$fmt")" -- "$opt"))
        compopt -o nospace 2>/dev/null
        return ;;
    --object)
        COMPREPLY=($(compgen -W "secret,id= tls-creds-x509,id= \
            tls-creds-psk,id=" -- "$cur"))
        compopt -o nospace 2>/dev/null
        return ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_qemu_img_lite_opts_of "$prog" "$cmd")" \
            -- "$cur"))
        return
    fi
    COMPREPLY=($(compgen -f -- "$cur"))
}

_qemu_nbd_lite()
{
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    COMPREPLY=()
    case $prev in
    -f|--format) COMPREPLY=($(compgen -W "raw luks qcow2" -- "$cur")); return ;;
    --cache) COMPREPLY=($(compgen -W "none writeback writethrough directsync \
        unsafe" -- "$cur")); return ;;
    --discard) COMPREPLY=($(compgen -W "ignore unmap" -- "$cur")); return ;;
    --detect-zeroes) COMPREPLY=($(compgen -W "off on unmap" -- "$cur")); return ;;
    -k|--socket|--pid-file) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_qemu_img_lite_opts_of \
            "${COMP_WORDS[0]}")" -- "$cur"))
        return
    fi
    COMPREPLY=($(compgen -f -- "$cur"))
}

complete -F _qemu_img_lite -o filenames qemu-img-lite
complete -F _qemu_nbd_lite -o filenames qemu-nbd-lite
