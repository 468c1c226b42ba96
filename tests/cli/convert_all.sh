#!/usr/bin/env bash
# convert_all.sh — every fixture checkpoint converts with `cmf convert`
# (q8 default and bf16), `cmf verify` passes on the result, `cmf info --json`
# shows the arch fields the engine needs; --dry-run writes nothing; requant
# and compact produce verifiable files (compact: a tight file unchanged,
# dead bytes dropped, a corrupt payload refused); bad arguments and a bad
# checkpoint fail with a message (never a crash).
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
FIX=${CMF_FIXTURES:-}
[ -n "$FIX" ] && [ -d "$FIX/hf-models" ] || { echo "SKIP: fixtures absent (CMF_FIXTURES)"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
has() { grep -q -- "$2" "$1" || fail "$1 lacks $2"; }

models=""
for d in "$FIX"/hf-models/*/; do models="$models $(basename "$d")"; done
for m in $models shakespeare; do
    if [ "$m" = shakespeare ]; then src=$FIX/shakespeare; else src=$FIX/hf-models/$m; fi
    for q in q8 bf16; do
        out=$T/$m.$q.cmf
        "$BIN" convert --model "$src" --output "$out" --quant "$q" --quiet >"$T/log" 2>&1 \
            || { fail "convert $m $q: $(cat "$T/log")"; continue; }
        "$BIN" verify "$out" >"$T/log" 2>&1 || fail "verify $m $q: $(cat "$T/log")"
    done
    "$BIN" info --json "$T/$m.q8.cmf" >"$T/info.json" 2>&1 || { fail "info $m"; continue; }
    for k in arch_name hidden_size num_layers num_attention_heads num_kv_heads head_dim vocab_size \
             rms_norm_eps norm_style norm_placement activation layer_types rope_theta attention_scale \
             embedding_multiplier; do
        has "$T/info.json" "\"$k\""
    done
    has "$T/info.json" '"quant_type": "Q8_ROW"'
done
# family specifics visible through info --json
"$BIN" info --json "$T/gemma2.q8.cmf" >"$T/g2.json"
has "$T/g2.json" '"attn_logit_softcapping": 50'
has "$T/g2.json" '"norm_style": "gemma"'
"$BIN" info --json "$T/qwen3_moe.q8.cmf" >"$T/moe.json"
has "$T/moe.json" '"num_experts": 8'
"$BIN" info --json "$T/gpt_oss.q8.cmf" >"$T/oss.json"
has "$T/oss.json" '"swiglu_oss"'
has "$T/oss.json" '"rope_type": "yarn"'

# dry run: a plan on stdout, no file
"$BIN" convert --model "$FIX/shakespeare" --output "$T/dry.cmf" --quant q4 --dry-run >"$T/plan" 2>&1 \
    || fail "dry run: $(cat "$T/plan")"
[ -e "$T/dry.cmf" ] && fail "dry run wrote a file"
has "$T/plan" "model.layers.5.mlp.down_proj.weight"
has "$T/plan" "q4_block"
has "$T/plan" "total: 56 tensors"

# requant and compact
"$BIN" requant "$T/shakespeare.bf16.cmf" --output "$T/rq.cmf" --quant q4t --quant-embed q8 --quiet \
    || fail "requant"
"$BIN" verify "$T/rq.cmf" >/dev/null 2>&1 || fail "verify requant"
"$BIN" info --json "$T/rq.cmf" >"$T/rq.json"
has "$T/rq.json" '"quant_type": "Q4_TILED"'
has "$T/rq.json" '"q4_tiled"'
"$BIN" compact "$T/rq.cmf" --output "$T/c.cmf" --quiet || fail "compact"
"$BIN" verify "$T/c.cmf" >/dev/null 2>&1 || fail "verify compact"
# compact's effect: a tight file comes back byte for byte (the writer is
# deterministic); 8 KiB of dead bytes past the end are dropped; a corrupt
# payload is refused (a plain copy would pass none of these)
cmp -s "$T/rq.cmf" "$T/c.cmf" || fail "compact of a tight file changed it"
cp "$T/rq.cmf" "$T/pad.cmf"
head -c 8192 /dev/zero >>"$T/pad.cmf"
"$BIN" compact "$T/pad.cmf" --output "$T/pc.cmf" --quiet || fail "compact of a padded file"
cmp -s "$T/rq.cmf" "$T/pc.cmf" || fail "compact kept dead bytes: $(stat -c %s "$T/pad.cmf") -> $(stat -c %s "$T/pc.cmf"), tight $(stat -c %s "$T/rq.cmf")"
cp "$T/rq.cmf" "$T/bad.cmf"
printf '\x5a' | dd of="$T/bad.cmf" bs=1 seek=$((0x2000)) conv=notrunc 2>/dev/null
cmp -s "$T/rq.cmf" "$T/bad.cmf" && fail "the corruption did not change a byte"
out=$("$BIN" compact "$T/bad.cmf" --output "$T/bc.cmf" --quiet 2>&1) && fail "compact accepted a corrupt payload"
echo "$out" | grep -q "not compacting a corrupt file" || fail "compact of a corrupt file: $out"
[ -e "$T/bc.cmf" ] && fail "compact of a corrupt file left $T/bc.cmf"

# errors: exit non-zero with a message, no crash (status < 128)
expect_fail() {
    local pat=$1
    shift
    local out rc
    out=$("$@" 2>&1)
    rc=$?
    { [ $rc -ne 0 ] && [ $rc -lt 128 ]; } || fail "'$*' exited $rc"
    echo "$out" | grep -q -- "$pat" || fail "'$*' message lacks '$pat': $out"
}
expect_fail "is not a quantization" "$BIN" convert --model "$FIX/shakespeare" --output "$T/x.cmf" --quant q3
expect_fail "--model DIR is required" "$BIN" convert --output "$T/x.cmf"
expect_fail "config.json" "$BIN" convert --model "$T" --output "$T/x.cmf"
mkdir -p "$T/bad"
cp "$FIX/shakespeare/config.json" "$FIX/shakespeare/tokenizer.json" "$T/bad/"
head -c 20000 "$FIX/shakespeare/model.safetensors" >"$T/bad/model.safetensors"
expect_fail "run past the end of the file" "$BIN" convert --model "$T/bad" --output "$T/x.cmf"
[ -e "$T/x.cmf" ] && fail "a failed convert left $T/x.cmf"
expect_fail "--quant Q is required" "$BIN" requant "$T/rq.cmf" --output "$T/y.cmf"
expect_fail "usage" "$BIN" compact "$T/rq.cmf"

[ $fails -eq 0 ] && echo "convert_all: all passed" || echo "convert_all: $fails failed"
[ $fails -eq 0 ]
