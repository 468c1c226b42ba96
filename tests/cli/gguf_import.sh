#!/bin/bash
# gguf_import.sh — `cmf import-gguf` end to end on the fixture GGUFs: import,
# dry-run plan, --quant, --set, tokenizer export, and refusals (not a GGUF,
# missing --output) with their messages. Exit 0 pass, 77 skip, else fail.
set -u
BIN=${CMF_BIN:-}
FIX=${CMF_FIXTURES:-}
[ -x "$BIN" ] || { echo "SKIP: CMF_BIN not set"; exit 77; }
[ -f "$FIX/gguf/llama-f32.gguf" ] || { echo "SKIP: fixtures (CMF_FIXTURES) absent"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$BIN" import-gguf "$FIX/gguf/llama-f32.gguf" --output "$T/llama.cmf" --quiet || fail "import llama-f32"
[ -s "$T/llama.cmf" ] || fail "no output file"
head -c 4 "$T/llama.cmf" | od -c | grep -q "C   M   F" || fail "output lacks the CMF magic"

"$BIN" import-gguf "$FIX/gguf/mixtral-q8_0.gguf" --dry-run > "$T/plan.txt" || fail "dry run"
grep -q "^model.layers.2.mlp.experts.3.down_proj.weight \[96, 128\] q8_row" "$T/plan.txt" || fail "plan: expert split / q8 default"
grep -q "^model.layers.0.mlp.gate.weight \[4, 96\] f32" "$T/plan.txt" || fail "plan: router kept f32"
[ ! -e "$T/none.cmf" ] || fail "dry run wrote a file"

"$BIN" import-gguf "$FIX/gguf/qwen2-f32.gguf" --output "$T/qwen2.cmf" --quant q8 --set rope_theta=1000000 --quiet \
    || fail "import qwen2 --quant q8 --set"
"$BIN" import-gguf "$FIX/gguf/mistral_swa-f32.gguf" --dry-run --quant f16 --set sliding_window=8 | \
    grep -q "self_attn.q_proj.weight \[96, 96\] f16" || fail "--quant f16"

"$BIN" import-gguf "$FIX/gguf/llama-f32.gguf" --tokenizer-json "$T/tok.json" || fail "tokenizer export"
grep -q '"merges"' "$T/tok.json" || fail "tokenizer.json lacks merges"

printf 'not a gguf at all' > "$T/bad.gguf"
out=$("$BIN" import-gguf "$T/bad.gguf" --output "$T/bad.cmf" 2>&1) && fail "accepted a non-GGUF"
echo "$out" | grep -q "bad.gguf: at 0x0: magic" || fail "message: $out"
[ ! -e "$T/bad.cmf" ] || fail "left a file behind"
out=$("$BIN" import-gguf "$FIX/gguf/llama-f32.gguf" 2>&1) && fail "accepted a missing --output"
echo "$out" | grep -q -- "--output" || fail "message: $out"
out=$("$BIN" import-gguf "$FIX/gguf/llama-f32.gguf" --output "$T/x.cmf" --set nonsense 2>&1) && fail "accepted --set without ="
echo "$out" | grep -q "KEY=JSON" || fail "message: $out"
echo "gguf_import: ok"
