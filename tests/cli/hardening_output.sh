#!/usr/bin/env bash
# hardening_output.sh — output failures are errors. With stdout on
# /dev/full, run, info, bench, ppl, convert --dry-run, logits --out - and
# tokenize must exit non-zero and say on stderr that writing stdout failed
# (the same commands on a pipe succeed and print, so the check is the
# device, not the command). Writers under a file-size limit (ulimit -f,
# SIGXFSZ ignored: writes fail with EFBIG as on a full disk) must fail and
# leave neither the output nor a temporary: logits --out, convert,
# requant.
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
FIX=${CMF_FIXTURES:-}
S=$FIX/shakespeare
[ -n "$FIX" ] && [ -f "$S/model.safetensors" ] || { echo "SKIP: fixtures absent (CMF_FIXTURES)"; exit 77; }
[ -c /dev/full ] || { echo "SKIP: /dev/full absent"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

"$BIN" convert --model "$S" --output "$T/m.cmf" --quant q8 --quiet 2>"$T/err" || { fail "convert: $(cat "$T/err")"; exit 1; }
head -c 3000 "$S/val.txt" >"$T/text.txt"

# NAME -- CMD...: prints on a pipe; fails on /dev/full naming stdout
check() {
    local name=$1
    shift 2
    local n
    n=$("$@" 2>"$T/err" | wc -c)
    [ "$n" -gt 0 ] || fail "$name printed nothing on a pipe: $(cat "$T/err")"
    "$@" >/dev/full 2>"$T/err"
    local rc=$?
    [ $rc -ne 0 ] || fail "$name exited 0 with stdout on /dev/full"
    grep -q "stdout.*No space left on device\|writing standard output failed" "$T/err" ||
        fail "$name: stderr does not say that writing stdout failed and why: $(cat "$T/err")"
    [ "$(wc -l <"$T/err")" -le 2 ] || fail "$name: more than one complaint: $(cat "$T/err")"
}
check run -- "$BIN" run "$T/m.cmf" --prompt "ROMEO:" -n 8 --greedy --quiet
check run-ids -- "$BIN" run "$T/m.cmf" --tokens 1,2,3 --ids -n 4 --greedy --quiet
check info -- "$BIN" info "$T/m.cmf"
check info-json -- "$BIN" info "$T/m.cmf" --json
check bench -- "$BIN" bench "$T/m.cmf" -p 8 -n 4 -r 1
check ppl -- "$BIN" ppl "$T/m.cmf" --file "$T/text.txt" --ctx 64
check convert-dry-run -- "$BIN" convert --model "$S" --dry-run
check logits-stdout -- "$BIN" logits "$T/m.cmf" --tokens 1,2,3 --out -
check tokenize -- "$BIN" tokenize "$T/m.cmf" "to be or not to be"
check help -- "$BIN" --help

# a failed write leaves nothing: file size limited to 8 KiB
limited() { (trap '' XFSZ; ulimit -f 8; exec "$@"); }
limited "$BIN" logits "$T/m.cmf" --tokens 1,2,3,4,5,6,7,8 --out "$T/l.f32" >"$T/out" 2>"$T/err" && fail "logits past the size limit succeeded"
grep -q "l.f32" "$T/err" || fail "logits error does not name the output: $(cat "$T/err")"
[ -e "$T/l.f32" ] && fail "logits left a partial file"
limited "$BIN" convert --model "$S" --output "$T/c.cmf" --quiet 2>"$T/err" && fail "convert past the size limit succeeded"
grep -q "c.cmf" "$T/err" || fail "convert error does not name the output: $(cat "$T/err")"
[ -e "$T/c.cmf" ] && fail "convert left a partial file"
limited "$BIN" requant "$T/m.cmf" --output "$T/r.cmf" --quant q4 --quiet 2>"$T/err" && fail "requant past the size limit succeeded"
[ -e "$T/r.cmf" ] && fail "requant left a partial file"
left=$(find "$T" -name '*.tmp.*' | head -3)
[ -z "$left" ] || fail "temporaries left after failed writes: $left"
# the same commands without the limit write their outputs
"$BIN" logits "$T/m.cmf" --tokens 1,2,3,4,5,6,7,8 --out "$T/l.f32" 2>"$T/err" || fail "logits: $(cat "$T/err")"
[ "$(stat -c %s "$T/l.f32" 2>/dev/null)" = $((8 * 1024 * 4)) ] || fail "logits wrote $(stat -c %s "$T/l.f32" 2>/dev/null) bytes, expected 32768"

[ $fails -eq 0 ] && echo "hardening_output: all passed"
exit $((fails > 0))
