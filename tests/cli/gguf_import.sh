#!/bin/bash
# gguf_import.sh — `cmf import-gguf` end to end on the fixture GGUFs: import,
# dry-run plan, --quant and --set (their effect read back with `cmf info`),
# tokenizer export (encoding as the imported file does), and refusals (not
# a GGUF, missing --output) with their messages. Exit 0 pass, 77 skip, else
# fail.
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
"$BIN" import-gguf "$FIX/gguf/qwen2-f32.gguf" --output "$T/qwen2-plain.cmf" --quiet || fail "import qwen2"
# the effects, read back from the files: --set lands in the header's arch,
# --quant q8 turns the matrices to q8_row (norms stay f32); the plain
# import keeps the GGUF's own values (its rope_theta was lost: 10000)
"$BIN" info "$T/qwen2.cmf" > "$T/info.txt" || fail "info qwen2"
"$BIN" info "$T/qwen2-plain.cmf" > "$T/info-plain.txt" || fail "info qwen2 plain"
grep -q "rope_theta=1000000," "$T/info.txt" || fail "--set rope_theta not in the header: $(grep rope_theta "$T/info.txt")"
grep -q "rope_theta=10000.0," "$T/info-plain.txt" || fail "plain import rope_theta: $(grep rope_theta "$T/info-plain.txt")"
grep -Eq "^  q8_row +22 tensors" "$T/info.txt" || fail "--quant q8: $(grep -A3 "quant mix" "$T/info.txt")"
grep -Eq "^  f32 +16 tensors" "$T/info.txt" || fail "--quant q8 kept norms f32: $(grep -A3 "quant mix" "$T/info.txt")"
grep -Eq "^  f32 +38 tensors" "$T/info-plain.txt" || fail "plain import: $(grep -A3 "quant mix" "$T/info-plain.txt")"
"$BIN" verify "$T/qwen2.cmf" > /dev/null || fail "verify qwen2 --quant q8"
"$BIN" import-gguf "$FIX/gguf/mistral_swa-f32.gguf" --dry-run --quant f16 --set sliding_window=8 | \
    grep -q "self_attn.q_proj.weight \[96, 96\] f16" || fail "--quant f16"

"$BIN" import-gguf "$FIX/gguf/llama-f32.gguf" --tokenizer-json "$T/tok.json" || fail "tokenizer export"
grep -q '"merges"' "$T/tok.json" || fail "tokenizer.json lacks merges"
# the exported tokenizer encodes as the one embedded in the imported file
a=$("$BIN" tokenize "$T/tok.json" "Hello world, 123" 2>&1) || fail "tokenize with the export: $a"
b=$("$BIN" tokenize "$T/llama.cmf" "Hello world, 123" 2>&1) || fail "tokenize with llama.cmf: $b"
[ -n "$a" ] && [ "$a" != "[]" ] && [ "$a" = "$b" ] || fail "exported tokenizer gives [$a], the imported file [$b]"

printf 'not a gguf at all' > "$T/bad.gguf"
out=$("$BIN" import-gguf "$T/bad.gguf" --output "$T/bad.cmf" 2>&1) && fail "accepted a non-GGUF"
echo "$out" | grep -q "bad.gguf: at 0x0: magic" || fail "message: $out"
[ ! -e "$T/bad.cmf" ] || fail "left a file behind"
out=$("$BIN" import-gguf "$FIX/gguf/llama-f32.gguf" 2>&1) && fail "accepted a missing --output"
echo "$out" | grep -q -- "--output" || fail "message: $out"
out=$("$BIN" import-gguf "$FIX/gguf/llama-f32.gguf" --output "$T/x.cmf" --set nonsense 2>&1) && fail "accepted --set without ="
echo "$out" | grep -q "KEY=JSON" || fail "message: $out"
echo "gguf_import: ok"
