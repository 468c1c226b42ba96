#!/usr/bin/env bash
# skill_route.sh — recon-argmin routing (spec §9) through `cmf skill`: two
# skills made with `skill add --prompts` from two prompt sets of different
# character (English prose; code, numbers and symbols), tokenized by the
# llama fixture's tokenizer. Every held-out prompt of each set must route
# to its own skill, and `route` prints one finite E per skill; explain
# shows the selection parameters; a file whose skills have no routing
# block fails `route` saying how to make one.
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
# held out: never seen by `skill add`
HELD_PROSE=("the old man walked to the village by the sea"
            "an owl looked down from the tall tree at night"
            "children played in the snow until their mothers called them home"
            "he wrote a long letter to his sister in the city")
HELD_CODE=("z = (8 - 3) * 4 / 2; // 10"
           "[5, 6, 7] + {8: 9} == 0x10"
           "if (n > 0) { return f(n - 1) + 2; }"
           "2023-12-31 23:59:59 WARN 404 /v2/items/981")

skill_donors "$GEN" "$LL" "$T" || { echo "FAIL: donors"; exit 1; }
"$BIN" convert -q --quant f32 -m "$LL" -o "$T/m.cmf" 2>"$T/err" || { echo "FAIL: convert: $(cat "$T/err")"; exit 1; }
cp "$T/m.cmf" "$T/plain.cmf"
"$BIN" skill add "$T/m.cmf" --from "$T/donA" --id prose --prompts "$T/prose.txt" >"$T/out" 2>&1 ||
    fail "add prose: $(cat "$T/out")"
grep -q "routing block from the prompts" "$T/out" || fail "add prose summary: $(cat "$T/out")"
"$BIN" skill add "$T/m.cmf" --from "$T/donB" --id code --prompts "$T/code.txt" -q 2>"$T/err" ||
    fail "add code: $(cat "$T/err")"
"$BIN" skill list "$T/m.cmf" | grep -qE '^code .* yes +code$' || fail "list: code has no routing block"

route() { # EXPECTED PROMPT
    local out
    out=$("$BIN" skill route "$T/m.cmf" -p "$2" 2>&1) || { fail "route '$2': $out"; return; }
    grep -qE '^prose +E=[0-9]+\.[0-9]+$' <<<"$out" && grep -qE '^code +E=[0-9]+\.[0-9]+$' <<<"$out" ||
        fail "route '$2': no finite E per skill: $out"
    grep -qx "chosen: $1" <<<"$out" || fail "'$2' routed to $(sed -n 's/^chosen: //p' <<<"$out"), expected $1: $out"
    echo "$1 <- '$2': $(tr '\n' ' ' <<<"$out")"
}
for p in "${HELD_PROSE[@]}"; do route prose "$p"; done
for p in "${HELD_CODE[@]}"; do route code "$p"; done

# --blend T: weights softmax(-E/T), summing to 1, the chosen skill heaviest
out=$("$BIN" skill route "$T/m.cmf" -p "${HELD_CODE[0]}" --blend 0.5 2>&1) || fail "route --blend: $out"
echo "$out"
awk '/ w=/ { split($2, e, "="); split($3, w, "="); E[$1] = e[2]; W[$1] = w[2]; s += w[2]; n++ }
     END { if (n != 2) exit 1; d = s - 1; if (d < 0) d = -d; if (d > 2e-6) exit 1
           x = exp(-(E["prose"] - E["code"]) / 0.5); want = 1 / (1 + x)
           d = W["code"] - want; if (d < 0) d = -d; exit !(d < 2e-6 && W["code"] > W["prose"]) }' <<<"$out" ||
    fail "route --blend 0.5: weights are not softmax(-E/T): $out"

# explain: the record, the tensors, the routing parameters
"$BIN" skill explain "$T/m.cmf" --id code >"$T/out" 2>&1 || fail "explain: $(cat "$T/out")"
grep -q '"phi_layer": 1' "$T/out" && grep -q '"basis": "<96 x 4 f16>"' "$T/out" &&
    grep -q 'skill.code.model.layers.2.self_attn.v_proj.weight' "$T/out" && grep -q 'entering layer 1' "$T/out" ||
    fail "explain output: $(cat "$T/out")"
# --phi-layer and --rank reach the block
cp "$T/plain.cmf" "$T/p2.cmf"
"$BIN" skill add "$T/p2.cmf" --from "$T/donA" --id a --prompts "$T/prose.txt" --phi-layer 3 --rank 2 -q 2>"$T/err" ||
    fail "add --phi-layer 3 --rank 2: $(cat "$T/err")"
"$BIN" skill explain "$T/p2.cmf" --id a | grep -q '"basis": "<96 x 2 f16>"' || fail "--rank 2 not in the block"
"$BIN" skill explain "$T/p2.cmf" --id a | grep -q '"phi_layer": 3' || fail "--phi-layer 3 not in the block"
out=$("$BIN" skill add "$T/p2.cmf" --from "$T/donB" --id b --prompts "$T/prose.txt" --phi-layer 4 2>&1)
[ $? = 1 ] && grep -q "phi-layer 4" <<<"$out" || fail "--phi-layer past the layers: $out"
# no routing block anywhere: route says how to get one
"$BIN" skill add "$T/plain.cmf" --from "$T/donA" --id a -q 2>/dev/null
out=$("$BIN" skill route "$T/plain.cmf" -p "hello" 2>&1)
[ $? = 1 ] && grep -q "cmf skill add --prompts" <<<"$out" || fail "route without blocks: $out"

[ $fails = 0 ] && echo "PASS" || { echo "$fails failure(s)"; exit 1; }
