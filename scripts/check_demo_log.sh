#!/usr/bin/env bash
# check_demo_log.sh BUILD LOG — what `make demo` promises, read from its
# output LOG (stdout and stderr, as CI captures them) and the BUILD folder
# it built: a quiet build (at most MAX_LINES lines in all, no make
# "Entering directory" chatter, the progress lines of scripts/build_quiet.sh),
# only the command built (no test programs, no fuzz replays), and a bench
# banner whose `device:` line is true: the CPU when `cmf info --gpu` finds
# no hardware GPU, else the GPU it names or the CPU. Prints one line; exits
# 1 naming what failed.
set -u
BUILD=${1:?usage: check_demo_log.sh BUILD LOG}
LOG=${2:?usage: check_demo_log.sh BUILD LOG}
MAX_LINES=${MAX_LINES:-150}
fails=0
fail() { echo "make demo: $*" >&2; fails=$((fails + 1)); }
lines=$(wc -l <"$LOG")
[ "$lines" -le "$MAX_LINES" ] || fail "$lines lines of output, more than $MAX_LINES"
n=$(grep -c "Entering directory" "$LOG")
[ "$n" = 0 ] || fail "$n 'Entering directory' lines: the build is not quiet"
grep -qE '^build: cmf in .*, [0-9]+ jobs' "$LOG" || fail "no 'build: cmf in ...' line (scripts/build_quiet.sh)"
grep -qE '^build: [0-9]+% \(' "$LOG" || fail "no progress line ('build: N% (...)')"
grep -qE '^build: done in [0-9]+ s$' "$LOG" || fail "no 'build: done in N s' line"
built=$(cd "$BUILD" && ls -d test_* fuzz_*_replay 2>/dev/null | tr '\n' ' ')
[ -z "$built" ] || fail "built more than the command: $built"
[ -x "$BUILD/cmf" ] || fail "$BUILD/cmf not built"
grep -qF "== cmf bench (--gpu auto: " "$LOG" || fail "no bench banner ('== cmf bench (--gpu auto: ...')"
dev=$(sed -n 's/^device: //p' "$LOG" | tail -1)
if [ -z "$dev" ]; then
    fail "the bench printed no 'device:' line"
else
    gpu=$("$BUILD/cmf" info --gpu --json 2>/dev/null |
        python3 -c 'import json,sys; g=json.load(sys.stdin).get("gpu",{}); print("" if g.get("software") else g.get("device",""))' 2>/dev/null)
    case $dev in
    "cpu ("*) ;;
    *) [ -n "$gpu" ] && [ "$dev" = "$gpu" ] ||
        fail "the bench ran on '$dev', but cmf info --gpu finds ${gpu:-no hardware GPU}" ;;
    esac
fi
[ $fails = 0 ] || exit 1
echo "make demo: $lines lines, no make chatter, only $BUILD/cmf built, bench device: $dev"
