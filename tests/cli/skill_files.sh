#!/usr/bin/env bash
# skill_files.sh — `cmf skill` end to end on the llama fixture. Two donors
# (the fixture with two tensors perturbed each, written by
# test_convert_skill --write-donor) become skills alpha and beta of one
# file, for backbones in f32, bf16 and q8: the bytes before the append keep
# their hash; `logits --skill alpha` equals the donor converted on its own,
# bit for bit (measured: identical in all three encodings, as the skill
# tensors are the donor's own encoded bytes); list, remove, compact, export,
# apply (equal logits again; another base refused without --force); a skill
# file refused by `run`; a donor of another architecture refused naming
# the first tensor, leaving the file untouched.
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
. "${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}/tests/cli/lib/logits.sh"
LL=$FIX/hf-models/llama
V=384
IDS=1,26,147,292,286,233,112,54,301,7

"$GEN" --write-donor "$LL" "$T/donA" 0.05 model.layers.1.mlp.down_proj.weight model.layers.2.mlp.up_proj.weight ||
    { echo "FAIL: writing donor A"; exit 1; }
"$GEN" --write-donor "$LL" "$T/donB" 0.05 model.layers.0.self_attn.o_proj.weight model.layers.2.self_attn.v_proj.weight ||
    { echo "FAIL: writing donor B"; exit 1; }

for q in f32 bf16 q8; do
    "$BIN" convert -q --quant $q -m "$LL" -o "$T/base.$q.cmf" 2>"$T/err" || { fail "convert base $q: $(cat "$T/err")"; continue; }
    "$BIN" convert -q --quant $q -m "$T/donA" -o "$T/donA.$q.cmf" 2>"$T/err" || { fail "convert donor $q: $(cat "$T/err")"; continue; }
    F=$T/m.$q.cmf
    cp "$T/base.$q.cmf" "$F"
    size=$(stat -c %s "$F")
    out=$("$BIN" skill add "$F" --from "$T/donA" --id alpha --name "Alpha skill" 2>&1) || fail "add alpha ($q): $out"
    echo "$q: $out"
    case $out in *"skill alpha: 2 of 30 tensors kept"*) ;; *) fail "add alpha ($q) summary: $out" ;; esac
    "$BIN" skill add "$F" --from "$T/donB" --id beta -q 2>"$T/err" || fail "add beta ($q): $(cat "$T/err")"
    # append-only: everything after the 128-byte envelope, up to the old end, is unchanged
    cmp -s -i 128 -n $((size - 128)) "$T/base.$q.cmf" "$F" || fail "$q: bytes before the append changed"
    [ "$(stat -c %s "$F")" -gt "$size" ] || fail "$q: the file did not grow"
    "$BIN" verify -q "$F" >/dev/null 2>"$T/err" || fail "$q: verify after add: $(cat "$T/err")"
    # the overlay equals the donor's own conversion
    "$BIN" logits "$F" --skill alpha --tokens $IDS --out "$T/ov.f32" 2>"$T/err" || fail "logits --skill alpha ($q): $(cat "$T/err")"
    "$BIN" logits "$T/donA.$q.cmf" --tokens $IDS --out "$T/don.f32" 2>"$T/err" || fail "logits donor ($q): $(cat "$T/err")"
    "$BIN" logits "$F" --tokens $IDS --out "$T/bb.f32" 2>"$T/err" || fail "logits backbone ($q): $(cat "$T/err")"
    r=$(logits_compare "$T/ov.f32" "$T/don.f32" $V 0) || fail "$q: --skill alpha vs the donor: $r"
    echo "$q: --skill alpha vs donor converted alone: $r"
    cmp -s "$T/ov.f32" "$T/don.f32" || fail "$q: --skill alpha logits are not bit-identical to the donor's"
    cmp -s "$T/bb.f32" "$T/don.f32" && fail "$q: the backbone's logits equal the donor's (the skill changed nothing)"
done

F=$T/m.f32.cmf
# list: id, layers, tensors, bytes
"$BIN" skill list "$F" >"$T/list" 2>&1 || fail "list: $(cat "$T/list")"
cat "$T/list"
grep -qE '^alpha +1,2 +2 +98304 +no +Alpha skill$' "$T/list" || fail "list: alpha line wrong: $(cat "$T/list")"
grep -qE '^beta +0,2 +2 +55296 +no +beta$' "$T/list" || fail "list: beta line wrong: $(cat "$T/list")"

# another architecture: refused naming the first tensor, nothing written
sum=$(md5sum <"$F")
out=$("$BIN" skill add "$F" --from "$FIX/hf-models/qwen2" --id q 2>&1)
[ $? = 1 ] || fail "qwen2 donor not refused: $out"
case $out in *"tensor 'model.layers.0.self_attn.k_proj.bias' is not in"*) ;; *) fail "qwen2 refusal: $out" ;; esac
[ "$(md5sum <"$F")" = "$sum" ] || fail "a refused add changed the file"
out=$("$BIN" skill add "$F" --from "$T/donA" --id alpha 2>&1)
case $out in *"skill 'alpha' already exists"*) ;; *) fail "a second alpha: $out" ;; esac
out=$("$BIN" skill add "$F" --from "$T/donA" --id "a.b" 2>&1)
[ $? = 2 ] || fail "bad id not a usage error: $out"

# export -> a skill file that does not run -> apply == the donor
"$BIN" skill export "$F" --id alpha -o "$T/alpha.skill.cmf" >"$T/out" 2>&1 || fail "export: $(cat "$T/out")"
grep -q "skill alpha, 2 tensors" "$T/out" || fail "export summary: $(cat "$T/out")"
out=$("$BIN" run "$T/alpha.skill.cmf" --tokens 1,2 -n 1 2>&1)
[ $? = 1 ] || fail "running a skill file did not fail: $out"
case $out in *"cmf skill apply BASE SKILL -o OUT.cmf"*) ;; *) fail "skill file refusal does not say what to do: $out" ;; esac
"$BIN" skill apply "$T/base.f32.cmf" "$T/alpha.skill.cmf" -o "$T/applied.cmf" >"$T/out" 2>&1 || fail "apply: $(cat "$T/out")"
grep -q "2 tensors replaced" "$T/out" || fail "apply summary: $(cat "$T/out")"
"$BIN" logits "$T/applied.cmf" --tokens $IDS --out "$T/ap.f32" 2>"$T/err" || fail "logits applied: $(cat "$T/err")"
"$BIN" logits "$T/donA.f32.cmf" --tokens $IDS --out "$T/don.f32" 2>/dev/null
cmp -s "$T/ap.f32" "$T/don.f32" || fail "applied file's logits differ from the donor's"
out=$("$BIN" skill apply "$T/base.q8.cmf" "$T/alpha.skill.cmf" -o "$T/bad.cmf" 2>&1)
[ $? = 1 ] || fail "apply onto another base not refused: $out"
case $out in *"was cut against base"*"--force"*) ;; *) fail "mismatched base message: $out" ;; esac
[ -e "$T/bad.cmf" ] && fail "a refused apply left $T/bad.cmf"
"$BIN" skill apply "$T/base.q8.cmf" "$T/alpha.skill.cmf" -o "$T/forced.cmf" --force >/dev/null 2>"$T/err" ||
    fail "apply --force: $(cat "$T/err")"
grep -q "warning" "$T/err" || fail "apply --force did not warn: $(cat "$T/err")"

# remove + compact
before=$(stat -c %s "$F")
"$BIN" skill remove "$F" --id beta >"$T/out" 2>&1 || fail "remove: $(cat "$T/out")"
grep -q "2 tensors (55296 bytes) no longer referenced" "$T/out" || fail "remove summary: $(cat "$T/out")"
"$BIN" skill list "$F" | grep -q '^beta ' && fail "beta still listed after remove"
out=$("$BIN" logits "$F" --skill beta --tokens 1,2 --out "$T/x.f32" 2>&1) && fail "--skill beta after remove ran: $out"
"$BIN" skill compact "$F" -o "$T/compact.cmf" 2>"$T/err" || fail "compact: $(cat "$T/err")"
after=$(stat -c %s "$T/compact.cmf")
[ $((after + 55296)) -le "$before" ] || fail "compact did not reclaim beta: $before -> $after bytes"
"$BIN" verify -q "$T/compact.cmf" >/dev/null 2>"$T/err" || fail "verify compacted: $(cat "$T/err")"
"$BIN" logits "$T/compact.cmf" --skill alpha --tokens $IDS --out "$T/c.f32" 2>/dev/null
"$BIN" logits "$T/donA.f32.cmf" --tokens $IDS --out "$T/don.f32" 2>/dev/null
cmp -s "$T/c.f32" "$T/don.f32" || fail "alpha after compact differs from the donor"
echo "compact: $before -> $after bytes"

# --quality: backbone vs overlaid perplexity, as `cmf ppl` measures them
for i in 1 2 3 4 5 6 7 8; do
    echo "the cat sat on the mat and looked at the door while rain fell on the old roof"
    echo "we walked along the river until the sun went down behind the green hills"
done >"$T/eval.txt"
cp "$T/base.f32.cmf" "$T/q.cmf"
"$BIN" skill add "$T/q.cmf" --from "$T/donA" --id alpha --quality "$T/eval.txt" >"$T/out" 2>&1 || fail "add --quality: $(cat "$T/out")"
line=$(grep "^quality on" "$T/out") || fail "add --quality printed no quality: $(cat "$T/out")"
pb=$("$BIN" ppl "$T/q.cmf" --file "$T/eval.txt" | sed -n 's/^ppl \([0-9.]*\) .*/\1/p')
po=$("$BIN" ppl "$T/q.cmf" --skill alpha --file "$T/eval.txt" | sed -n 's/^ppl \([0-9.]*\) .*/\1/p')
[ -n "$pb" ] && [ -n "$po" ] || fail "cmf ppl printed no perplexity"
case $line in *"perplexity $pb backbone, $po with skill alpha"*) ;; *) fail "quality '$line' is not ppl's $pb / $po" ;; esac
echo "$line (cmf ppl: $pb, $po)"
"$BIN" skill explain "$T/q.cmf" --id alpha | grep -q '"dataset_sha256": "'"$(sha256sum <"$T/eval.txt" | cut -c1-64)"'"' ||
    fail "quality.dataset_sha256 is not the eval text's"
echo short >"$T/short.txt"
cp "$T/base.f32.cmf" "$T/q2.cmf"
out=$("$BIN" skill add "$T/q2.cmf" --from "$T/donA" --id alpha --quality "$T/short.txt" 2>&1)
[ $? = 1 ] || fail "add with a too short eval text succeeded: $out"
case $out in *"too short"*"not added"*) ;; *) fail "short eval message: $out" ;; esac
"$BIN" skill list "$T/q2.cmf" | grep -q '^alpha ' && fail "a failed --quality left the skill registered"

[ $fails = 0 ] && echo "PASS" || { echo "$fails failure(s)"; exit 1; }
