#!/usr/bin/env bash
# chat_long_line.sh — a line far past what the context can hold is refused
# before it is tokenized: `cmf chat` reads a 100 MB line (never held whole),
# says "input line 2: N bytes, longer than the context can hold", answers
# the lines around it and exits 0, in well under the time and memory that
# tokenizing it would take (peak RSS below 256 MB).
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
SRC=${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}
M=$SRC/models/shakespeare
[ -f "$M/model.safetensors" ] || { echo "SKIP: $M absent"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
"$BIN" convert --model "$M" --output "$T/m.cmf" --quiet 2>"$T/err" || { fail "convert: $(cat "$T/err")"; exit 1; }
{ echo "Good morrow"; head -c 100000000 /dev/zero | tr '\0' 'a'; echo; echo "And to you"; } >"$T/in"
TIME=
[ -x /usr/bin/time ] && TIME="/usr/bin/time -f %M -o $T/rss"
timeout 120 $TIME "$BIN" chat "$T/m.cmf" -n 4 --greedy <"$T/in" >"$T/out" 2>"$T/err"
rc=$?
[ $rc = 0 ] || fail "chat exited $rc: $(head -c 600 "$T/err")"
grep -q "cmf chat: input line 2: 100000000 bytes, longer than the context can hold (at most [0-9]* bytes); not sent" \
    "$T/err" || fail "no refusal of line 2: $(head -c 600 "$T/err")"
[ "$(grep -c 'finish:' "$T/err")" = 2 ] || fail "expected answers to lines 1 and 3: $(head -c 600 "$T/err")"
if [ -s "$T/rss" ]; then
    kb=$(tail -1 "$T/rss")
    [ "$kb" -lt 262144 ] || fail "peak RSS $kb KB for a refused line"
else
    echo "note: /usr/bin/time absent, RSS not checked"
fi
[ $fails = 0 ] && echo "chat_long_line: ok" || { echo "$fails failure(s)"; exit 1; }
