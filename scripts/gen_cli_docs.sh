#!/usr/bin/env bash
# gen_cli_docs.sh CMF OUTDIR — writes OUTDIR/cmf.bash (bash completion) and
# OUTDIR/cmf.1 (man page) from the built command's --help, which opts.c
# prints from each command's option table: both list exactly the options
# and aliases the parser accepts. Run by the build after `cmf` links.
set -eu
CMF=${1:?usage: gen_cli_docs.sh CMF OUTDIR}
OUT=${2:?usage: gen_cli_docs.sh CMF OUTDIR}
mkdir -p "$OUT"
commands=$("$CMF" --help | sed -n '/^commands:/,/^$/p' | awk 'NF && !/^commands:/ {print $1}')
# subcommands: "  name  help" lines of `cmf CMD --help` when it prints no usage of its own options
subs() { "$CMF" "$1" --help | sed -nE 's/^  ([a-z][a-z-]*) {2,}.*/\1/p'; }
# every option name and alias a help lists: "  -x, --name ARG  help", "  --name, --alias ARG"
options() { "$CMF" "$@" --help | sed -nE 's/^  (-[A-Za-z0-9], |--[a-z0-9-]+, )?(--[a-z0-9-]+)(, --[a-z0-9-]+)?([ ].*)?$/\1 \2 \3/p' |
    tr -d ',' | tr ' ' '\n' | grep -E '^-' | sort -u | tr '\n' ' '; }
has_subs() { "$CMF" "$1" --help | grep -q "<subcommand>"; }

{
    echo "# bash completion for cmf $("$CMF" --version | awk '{print $2}'), generated from its option tables"
    echo "_cmf() {"
    echo '    local cur=${COMP_WORDS[COMP_CWORD]} opts='
    echo '    if [ "$COMP_CWORD" = 1 ]; then'
    echo "        mapfile -t COMPREPLY < <(compgen -W \"$(echo $commands) --help --version\" -- \"\$cur\")"
    echo '        return'
    echo '    fi'
    echo '    case ${COMP_WORDS[1]} in'
    for c in $commands; do
        if has_subs "$c"; then
            s=$(subs "$c" | tr '\n' ' ')
            echo "    $c)"
            echo "        if [ \"\$COMP_CWORD\" = 2 ]; then mapfile -t COMPREPLY < <(compgen -W \"$s--help\" -- \"\$cur\"); return; fi"
            echo '        case ${COMP_WORDS[2]} in'
            for sc in $s; do echo "        $sc) opts=\"$(options "$c" "$sc")\" ;;"; done
            echo '        esac ;;'
        else
            echo "    $c) opts=\"$(options "$c")\" ;;"
        fi
    done
    echo '    esac'
    echo '    if [[ $cur == -* ]]; then'
    echo '        mapfile -t COMPREPLY < <(compgen -W "$opts --help --version" -- "$cur")'
    echo '    else'
    echo '        mapfile -t COMPREPLY < <(compgen -f -- "$cur")'
    echo '    fi'
    echo '}'
    echo 'complete -o filenames -o bashdefault -F _cmf cmf'
} >"$OUT/cmf.bash.tmp"
mv "$OUT/cmf.bash.tmp" "$OUT/cmf.bash"

# troff: backslashes escaped, a line starting with . or ' protected
esc() { sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/" -e 's/^-/\\-/'; }
{
    echo ".TH CMF 1 \"\" \"cmf $("$CMF" --version | awk '{print $2}')\" \"User Commands\""
    echo ".SH NAME"
    echo "cmf \\- inference runtime for CMF v2 model files"
    echo ".SH SYNOPSIS"
    echo ".B cmf"
    echo ".I command"
    echo "[options]"
    echo ".SH DESCRIPTION"
    echo ".nf"
    "$CMF" --help | esc
    echo ".fi"
    echo ".SH COMMANDS"
    for c in $commands; do
        echo ".SS cmf $c"
        echo ".nf"
        "$CMF" "$c" --help | esc
        echo ".fi"
        if has_subs "$c"; then
            for sc in $(subs "$c"); do
                echo ".SS cmf $c $sc"
                echo ".nf"
                "$CMF" "$c" "$sc" --help | esc
                echo ".fi"
            done
        fi
    done
    echo ".SH SEE ALSO"
    echo "The README and docs/ of the cmf source tree."
} >"$OUT/cmf.1.tmp"
mv "$OUT/cmf.1.tmp" "$OUT/cmf.1"
