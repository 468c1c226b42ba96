#!/usr/bin/env bash
# small_ones.sh — `ppl --file nosuch` gives the reason (as run does) and
# exits 1; `ppl` on a terminal shows its progress with the total of
# windows; `run --ids` and `tokenize` print ids in one format ("[a, b]");
# the writers' rule for an existing output (README): a regular file is
# replaced, an input or a folder refused, keygen refuses without --force;
# CMF_VK_DEVICE naming no device says the index and how many exist.
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
"$BIN" ppl "$T/m.cmf" --file "$T/nosuch.txt" >/dev/null 2>"$T/err"
rc=$?
[ $rc = 1 ] || fail "ppl --file nosuch exited $rc"
grep -qF "cmf ppl: --file $T/nosuch.txt: cannot open: No such file or directory" "$T/err" || fail "ppl --file nosuch: $(cat "$T/err")"
# progress with the total (a terminal through script(1))
if command -v script >/dev/null; then
    script -qec "'$BIN' ppl '$T/m.cmf' --file '$M/val.txt' --ctx 64 --limit 256" "$T/typescript" >/dev/null 2>&1 </dev/null
    # --limit 256 at ctx 64 (stride 64): four windows, and the total says so
    grep -aqE '\[window 1/4: running ppl' "$T/typescript" || fail "ppl progress lacks the total of 4: $(tr '\r' '\n' <"$T/typescript" | head -3)"
    grep -aqE '\(4 windows' "$T/typescript" || fail "ppl ran other than 4 windows: $(tr '\r' '\n' <"$T/typescript" | tail -2)"
else
    echo "note: script(1) absent, progress not checked"
fi
tok=$("$BIN" tokenize "$T/m.cmf" "Good morrow" 2>&1) || fail "tokenize: $tok"
ids=$("$BIN" run "$T/m.cmf" --raw -p "Good morrow" -n 3 --greedy --ids -q 2>&1) || fail "run --ids: $ids"
re='^\[[0-9]+(, [0-9]+)*\]$'
[[ $tok =~ $re ]] || fail "tokenize prints '$tok', not [a, b, ...]"
[[ $ids =~ $re ]] || fail "run --ids prints '$ids', not [a, b, ...]"
# CMF_VK_DEVICE past the devices there are: the message names the index and how many exist
if "$BIN" info --gpu 2>/dev/null | grep -q '^gpu: vulkan:'; then
    CMF_VK_DEVICE=99 "$BIN" info --gpu >"$T/gpu" 2>&1
    grep -qE "CMF_VK_DEVICE=99: no such device index; [0-9]+ Vulkan devices? exists? \((index 0|indices 0\.\.[0-9]+)\)" "$T/gpu" ||
        fail "CMF_VK_DEVICE=99: $(cat "$T/gpu")"
else
    echo "note: no Vulkan device, CMF_VK_DEVICE message not checked"
fi
echo old >"$T/out.cmf"
"$BIN" requant "$T/m.cmf" --output "$T/out.cmf" --quant q4 -q 2>"$T/err" || fail "requant over an existing file: $(cat "$T/err")"
"$BIN" verify "$T/out.cmf" >/dev/null 2>&1 || fail "the replaced output does not verify"
"$BIN" compact "$T/m.cmf" --output "$T/m.cmf" 2>"$T/err" && fail "compact onto its input accepted"
grep -q "not replacing it" "$T/err" || fail "compact onto its input: $(cat "$T/err")"
mkdir "$T/dir.cmf"
"$BIN" requant "$T/m.cmf" --output "$T/dir.cmf" --quant q4 -q 2>"$T/err" && fail "an output folder accepted"
echo secret >"$T/k.key"
"$BIN" keygen --out "$T/k.key" 2>"$T/err" && fail "keygen replaced a key without --force"
[ "$(cat "$T/k.key")" = secret ] || fail "keygen touched the existing key"
[ $fails = 0 ] && echo "small_ones: ok" || { echo "$fails failure(s)"; exit 1; }
