#!/usr/bin/env bash
# template_stdin.sh — `cmf template --messages` takes a file, "-" (stdin) or
# the JSON itself; the three give the same render. Bad JSON from stdin is
# named "(stdin)" with line and column, exit 1.
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
SRC=${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}
M=$SRC/models/shakespeare
[ -f "$M/chat_template.jinja" ] || { echo "SKIP: $M absent"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
msgs='[{"role": "user", "content": "Good morrow"}, {"role": "assistant", "content": "And to you"}]'
printf '%s' "$msgs" >"$T/m.json"
"$BIN" template "$M" --messages "$T/m.json" --gen >"$T/file" 2>"$T/err" || fail "from a file: $(cat "$T/err")"
[ -s "$T/file" ] || fail "empty render"
grep -q "Good morrow" "$T/file" || fail "render lacks the message: $(cat "$T/file")"
printf '%s' "$msgs" | "$BIN" template "$M" --messages - --gen >"$T/stdin" 2>"$T/err" || fail "--messages -: $(cat "$T/err")"
cmp -s "$T/file" "$T/stdin" || fail "stdin render differs: $(cat "$T/stdin")"
"$BIN" template "$M" --messages "$msgs" --gen >"$T/inline" 2>"$T/err" </dev/null || fail "inline: $(cat "$T/err")"
cmp -s "$T/file" "$T/inline" || fail "inline render differs: $(cat "$T/inline")"
echo '[{"role": "user",' | "$BIN" template "$M" --messages - >"$T/out" 2>"$T/err"
rc=$?
[ $rc = 1 ] || fail "bad stdin JSON exited $rc"
grep -q "messages (stdin): line [0-9]* column [0-9]*" "$T/err" || fail "bad stdin JSON: $(cat "$T/err")"
[ $fails = 0 ] && echo "template_stdin: ok" || { echo "$fails failure(s)"; exit 1; }
