#!/usr/bin/env bash
# engine_task.sh — `--task NAME` (spec §5 task masks) through the command:
# llama converted to f32, then test_engine_taskmask --write makes (a) the
# same weights plus a masks section (task "cut" clears FFN neurons, heads
# and one layer gate; task "full" is all ones, quality null, the default)
# and (b) the weights with what "cut" clears zeroed. `run --task cut` on (a)
# must continue like (b) and unlike (a) unmasked; `--task full` / `default`
# like (a) unmasked, with the unmeasured-mask warning; logits and ppl agree
# the same way; unknown names and files without masks fail naming them.
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
BUILD=${CMF_BUILD_DIR:?CMF_BUILD_DIR not set}
FIX=${CMF_FIXTURES:-}
GEN=$BUILD/test_engine_taskmask
[ -n "$FIX" ] && [ -f "$FIX/hf-models/llama/config.json" ] || { echo "SKIP: hf-models fixtures absent"; exit 77; }
[ -x "$GEN" ] || { echo "SKIP: $GEN not built"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# logits_compare: fails on NaN, Inf and empty output
. "${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}/tests/cli/lib/logits.sh"

"$BIN" convert --quiet --quant f32 --model "$FIX/hf-models/llama" --output "$T/src.cmf" >"$T/log" 2>&1 ||
    { echo "FAIL: convert: $(cat "$T/log")"; exit 1; }
"$GEN" --write "$T/src.cmf" "$T/masked.cmf" "$T/zeroed.cmf" >"$T/log" 2>&1 ||
    { echo "FAIL: writing the masked and zeroed files: $(cat "$T/log")"; exit 1; }

IDS=26,147,292,286,233,112,54,301,7,88,190,240
run() { "$BIN" run "$@" --tokens "$IDS" --greedy --ids -n 12 --quiet 2>"$T/err"; }
plain=$(run "$T/masked.cmf") || fail "run unmasked: $(cat "$T/err")"
zeroed=$(run "$T/zeroed.cmf") || fail "run zeroed: $(cat "$T/err")"
cut=$(run "$T/masked.cmf" --task cut) || fail "run --task cut: $(cat "$T/err")"
grep -q "not measured" "$T/err" && fail "task cut has a quality but warned: $(cat "$T/err")"
echo "unmasked: $plain"
echo "--task cut: $cut"
echo "zeroed weights: $zeroed"
[ "$cut" = "$zeroed" ] || fail "--task cut continues $cut, the zeroed weights $zeroed"
[ "$cut" != "$plain" ] || fail "--task cut did not change the greedy output ($cut)"
for t in full default; do
    got=$(run "$T/masked.cmf" --task $t) || fail "run --task $t: $(cat "$T/err")"
    [ "$got" = "$plain" ] || fail "--task $t (all ones) continues $got, unmasked $plain"
    grep -q "warning: .*task 'full' is not measured" "$T/err" || fail "--task $t: no unmeasured-mask warning: $(cat "$T/err")"
done

# chat takes the flag too (run's options)
printf 'hello\n' | "$BIN" chat "$T/masked.cmf" --task cut --greedy -n 4 >"$T/out" 2>"$T/err" ||
    fail "chat --task cut: $(cat "$T/err")"

# errors: exit 1, the message names the task and the file
for i in $(seq 40); do echo "To be, or not to be, that is the question $i"; done >"$T/text"
bad() {
    "$@" </dev/null >/dev/null 2>"$T/err"
    local rc=$?
    [ $rc = 1 ] || fail "'$*' exited $rc"
    grep -q "no task 'nosuch'" "$T/err" && grep -qF "$T/masked.cmf" "$T/err" ||
        fail "'$*': the message lacks the task or the file: $(cat "$T/err")"
}
bad "$BIN" run "$T/masked.cmf" --task nosuch --tokens 1,2
bad "$BIN" chat "$T/masked.cmf" --task nosuch
bad "$BIN" logits "$T/masked.cmf" --task nosuch --tokens 1,2 --out "$T/x.f32"
bad "$BIN" ppl "$T/masked.cmf" --task nosuch --file "$T/text"
"$BIN" run "$T/src.cmf" --task cut --tokens 1,2 >/dev/null 2>"$T/err"
rc=$?
[ $rc = 1 ] || fail "--task on a file without masks exited $rc"
grep -q "task 'cut': the file has no masks section" "$T/err" || fail "no-masks message: $(cat "$T/err")"
"$BIN" run "$T/src.cmf" --task default --tokens 1,2 >/dev/null 2>"$T/err" && fail "--task default without masks accepted"
grep -q "src.cmf: --task default: the file has no masks section" "$T/err" || fail "default message: $(cat "$T/err")"

# logits: (a) under cut == (b), as in test_engine_taskmask (f32, same math: 1e-5)
"$BIN" logits "$T/zeroed.cmf" --tokens "$IDS" --out "$T/zeroed.f32" 2>"$T/err" || fail "logits zeroed: $(cat "$T/err")"
"$BIN" logits "$T/masked.cmf" --task cut --tokens "$IDS" --out "$T/cut.f32" 2>"$T/err" ||
    fail "logits --task cut: $(cat "$T/err")"
msg=$(logits_compare "$T/cut.f32" "$T/zeroed.f32" 384 1e-5) || fail "logits --task cut against the zeroed weights: $msg"
echo "logits --task cut vs zeroed weights: $msg"

# ppl: the same text, (a) under cut and (b), the same perplexity
p_cut=$("$BIN" ppl "$T/masked.cmf" --task cut --file "$T/text" --ctx 32 --json 2>"$T/err") || fail "ppl --task cut: $(cat "$T/err")"
p_zero=$("$BIN" ppl "$T/zeroed.cmf" --file "$T/text" --ctx 32 --json 2>"$T/err") || fail "ppl zeroed: $(cat "$T/err")"
p_plain=$("$BIN" ppl "$T/masked.cmf" --file "$T/text" --ctx 32 --json 2>"$T/err") || fail "ppl: $(cat "$T/err")"
ppl() { sed -n 's/.*"ppl": *\([0-9.]*\).*/\1/p' <<<"$1"; }
echo "ppl: --task cut $(ppl "$p_cut"), zeroed $(ppl "$p_zero"), unmasked $(ppl "$p_plain")"
[ -n "$(ppl "$p_cut")" ] && [ "$(ppl "$p_cut")" = "$(ppl "$p_zero")" ] || fail "ppl --task cut $p_cut != zeroed $p_zero"
[ "$(ppl "$p_cut")" != "$(ppl "$p_plain")" ] || fail "ppl --task cut equals unmasked"

for cmd in run chat logits ppl; do
    "$BIN" $cmd --help | grep -q -- "--task NAME" || fail "$cmd --help lacks --task"
done

[ "$fails" = 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "engine_task: all passed"
