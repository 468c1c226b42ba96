#!/usr/bin/env bash
# skill_auto.sh — --skill auto and --blend T of the generation commands:
# a file with two skills made by `cmf skill add --prompts` (as
# skill_route.sh: prose and code prompt sets, donors with one tensor
# perturbed each). For a held-out prompt of each set, `cmf logits --skill
# auto` reports the scores, picks what `cmf skill route` picks, and its
# logits equal `--skill <that id>` byte for byte; two --tokens lists are
# routed each to its own skill in one batch; --blend 0.5 reports weights
# summing to 1 and gives logits unlike either skill alone; run and ppl
# route too; --blend without auto and auto on bench are usage errors.
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
BUILD=${CMF_BUILD_DIR:?CMF_BUILD_DIR not set}
FIX=${CMF_FIXTURES:-}
GEN=$BUILD/test_convert_skill
[ -n "$FIX" ] && [ -f "$FIX/hf-models/llama/config.json" ] || { echo "SKIP: hf-models fixtures absent"; exit 77; }
[ -x "$GEN" ] || { echo "SKIP: $GEN not built"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
LL=$FIX/hf-models/llama

. "$(dirname "$0")/lib/skill_prompts.sh"
skill_prompt_sets "$T"
skill_donors "$GEN" "$LL" "$T" || { echo "FAIL: donors"; exit 1; }
"$BIN" convert -q --quant f32 -m "$LL" -o "$T/m.cmf" 2>"$T/err" || { echo "FAIL: convert: $(cat "$T/err")"; exit 1; }
"$BIN" skill add "$T/m.cmf" --from "$T/donA" --id prose --prompts "$T/prose.txt" -q 2>"$T/err" || fail "add prose: $(cat "$T/err")"
"$BIN" skill add "$T/m.cmf" --from "$T/donB" --id code --prompts "$T/code.txt" -q 2>"$T/err" || fail "add code: $(cat "$T/err")"

ids() { "$BIN" tokenize "$T/m.cmf" "$1" | tr -d '[] '; }
PROSE=$(ids "the old man walked to the village by the sea")
CODE=$(ids "if (n > 0) { return f(n - 1) + 2; }")
for case in "prose:$PROSE" "code:$CODE"; do
    want=${case%%:*} toks=${case#*:}
    chosen=$("$BIN" skill route "$T/m.cmf" --tokens "$toks" | sed -n 's/^chosen: //p')
    [ "$chosen" = "$want" ] || fail "skill route chose '$chosen' for the $want prompt"
    "$BIN" logits "$T/m.cmf" --tokens "$toks" --skill auto --out "$T/auto.f32" 2>"$T/e" || fail "logits auto: $(cat "$T/e")"
    grep -q "skill auto: $want (prose E=[0-9.]*, code E=[0-9.]*)" "$T/e" || fail "logits auto report: $(cat "$T/e")"
    "$BIN" logits "$T/m.cmf" --tokens "$toks" --skill "$want" --out "$T/one.f32" 2>"$T/e" || fail "logits $want: $(cat "$T/e")"
    [ -s "$T/one.f32" ] && cmp -s "$T/auto.f32" "$T/one.f32" || fail "--skill auto differs from --skill $want"
    cp "$T/one.f32" "$T/$want.f32"
done
cmp -s "$T/prose.f32" "$T/code.f32" && fail "the two skills give the same logits"
# two requests in one batch: each list routed to its own skill
"$BIN" logits "$T/m.cmf" --tokens "$PROSE" --tokens "$CODE" --skill auto --out "$T/two.f32" 2>"$T/e" ||
    fail "logits auto, two lists: $(cat "$T/e")"
[ "$(grep -c "skill auto: " "$T/e")" = 2 ] || fail "two lists: expected two reports: $(cat "$T/e")"
[ "$(cat "$T/prose.f32" "$T/code.f32" | wc -c)" = "$(wc -c <"$T/two.f32")" ] || fail "two lists: output size"
# the batch's rows: the prose list, then the code list (f32 summation order may differ: compare with a bound)
. "$(dirname "$0")/lib/logits.sh"
cat "$T/prose.f32" "$T/code.f32" >"$T/both.f32"
logits_compare "$T/two.f32" "$T/both.f32" 384 1e-5 || fail "two lists routed in one batch differ from each alone"
# --blend: weights summing to 1, logits unlike either skill's
"$BIN" logits "$T/m.cmf" --tokens "$CODE" --skill auto --blend 0.5 --out "$T/blend.f32" 2>"$T/e" ||
    fail "logits --blend: $(cat "$T/e")"
grep -q "skill auto: blend led by code" "$T/e" || fail "blend report: $(cat "$T/e")"
awk '{ n = 0; s = 0; for (i = 1; i <= NF; i++) if ($i ~ /^w=/) { sub(/^w=/, "", $i); sub(/[,)]$/, "", $i); s += $i; n++ }
       d = s - 1; if (d < 0) d = -d; exit !(n == 2 && d < 1e-3) }' "$T/e" || fail "blend weights do not sum to 1: $(cat "$T/e")"
cmp -s "$T/blend.f32" "$T/code.f32" && fail "--blend gave the code skill's logits"
cmp -s "$T/blend.f32" "$T/prose.f32" && fail "--blend gave the prose skill's logits"
# run and ppl route too
"$BIN" run "$T/m.cmf" --tokens "$CODE" -n 2 --greedy --ids --skill auto >"$T/o" 2>"$T/e" || fail "run auto: $(cat "$T/e")"
grep -q "skill auto: code" "$T/e" || fail "run auto report: $(cat "$T/e")"
grep -qE '^\[[0-9]+, [0-9]+\]$' "$T/o" || fail "run auto output: $(cat "$T/o")"
for i in 1 2 3; do cat "$T/prose.txt"; done >"$T/text.txt"
"$BIN" ppl "$T/m.cmf" --file "$T/text.txt" --ctx 32 --json --skill auto >"$T/o" 2>"$T/e" || fail "ppl auto: $(cat "$T/e")"
grep -q "skill auto: " "$T/e" && grep -q '"ppl"' "$T/o" || fail "ppl auto: $(cat "$T/e") $(cat "$T/o")"
# usage errors
"$BIN" logits "$T/m.cmf" --tokens "$CODE" --blend 0.5 --out "$T/x.f32" 2>"$T/e"
[ $? = 2 ] && grep -q "needs --skill auto" "$T/e" || fail "--blend without auto: $(cat "$T/e")"
"$BIN" bench "$T/m.cmf" --skill auto 2>"$T/e"
[ $? = 2 ] || fail "bench --skill auto: not a usage error: $(cat "$T/e")"
# a file without routing blocks: auto fails saying how to make one
"$BIN" convert -q --quant f32 -m "$LL" -o "$T/plain.cmf" 2>/dev/null
"$BIN" logits "$T/plain.cmf" --tokens "$CODE" --skill auto --out "$T/x.f32" 2>"$T/e"
[ $? = 1 ] && grep -q "no skills to route to" "$T/e" || fail "auto without skills: $(cat "$T/e")"

[ $fails = 0 ] && echo "skill_auto: ok"
exit $((fails > 0))
