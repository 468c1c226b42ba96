#!/usr/bin/env bash
# engine_lora.sh — --lora FILE[:S] on the generation commands: a PEFT
# adapter (written here with python3's standard library: random A, B on
# layer 0's q_proj and layer 1's down_proj, r 4, lora_alpha 8) changes
# `cmf logits`; scale 0 gives the base logits exactly; one adapter at
# scale 2 equals the same adapter twice at scale 1 (row-relative 1e-5:
# f32 summation order; measured 1.4e-7); run, ppl and bench accept it; a
# missing adapter, a missing adapter_config.json and a tensor the model
# lacks exit 1 naming the file and the tensor. `cmf lora merge` writes a
# file whose logits equal the run-time adapters' (a merge onto its own
# input and an unknown action are refused). Numerics against weights
# merged independently: tests/test_engine_skills.c.
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
SRC=${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}
FIX=${CMF_FIXTURES:-}
[ -n "$FIX" ] && [ -d "$FIX/hf-models/llama" ] || { echo "SKIP: fixtures absent (CMF_FIXTURES)"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 needed to write the adapter"; exit 77; }
. "$SRC/tests/cli/lib/logits.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
has() { grep -q -- "$2" "$1" || fail "$3: $(basename "$1") lacks '$2': $(head -c 400 "$1")"; }

"$BIN" convert --model "$FIX/hf-models/llama" --output "$T/llama.cmf" --quant f32 --quiet || fail "convert llama"
V=384
. "$SRC/tests/cli/lib/lora.sh" # write_adapter
write_adapter "$T/ad" model.layers.0.self_attn.q_proj:96:96 model.layers.1.mlp.down_proj:96:128 || fail "write adapter"
AD=$T/ad/adapter_model.safetensors
TOK="--tokens 5,17,33,2,90,11"
"$BIN" logits "$T/llama.cmf" $TOK --ctx 64 --out "$T/base.f32" 2>"$T/e" || fail "logits: $(cat "$T/e")"
"$BIN" logits "$T/llama.cmf" $TOK --ctx 64 --lora "$AD" --out "$T/l1.f32" 2>"$T/e" || fail "logits --lora: $(cat "$T/e")"
"$BIN" logits "$T/llama.cmf" $TOK --ctx 64 --lora "$AD:0" --out "$T/l0.f32" 2>"$T/e" || fail "logits --lora :0: $(cat "$T/e")"
"$BIN" logits "$T/llama.cmf" $TOK --ctx 64 --lora "$AD:2" --out "$T/l2.f32" 2>"$T/e" || fail "logits --lora :2: $(cat "$T/e")"
"$BIN" logits "$T/llama.cmf" $TOK --ctx 64 --lora "$AD" --lora "$AD:1" --out "$T/l11.f32" 2>"$T/e" ||
    fail "logits --lora twice: $(cat "$T/e")"
[ -s "$T/base.f32" ] || fail "no base logits"
cmp -s "$T/l0.f32" "$T/base.f32" || fail "--lora at scale 0 changed the logits"
cmp -s "$T/l1.f32" "$T/base.f32" && fail "--lora changed nothing"
logits_compare "$T/l1.f32" "$T/base.f32" $V 1e-4 >/dev/null && fail "--lora: logits within 1e-4 of the base"
logits_compare "$T/l11.f32" "$T/l2.f32" $V 1e-5 || fail "two adapters at scale 1 differ from one at scale 2"

# the other generation commands take it
"$BIN" run "$T/llama.cmf" --tokens 5,17,33 -n 4 --greedy --ids --quiet --lora "$AD" >"$T/o" 2>"$T/e" || fail "run --lora: $(cat "$T/e")"
grep -qE '^\[[0-9]+, [0-9]+, [0-9]+, [0-9]+\]$' "$T/o" || fail "run --lora --ids output: $(cat "$T/o")"
for i in 1 2 3 4; do printf 'the quick brown fox jumps over the lazy dog. '; done >"$T/text.txt"
"$BIN" ppl "$T/llama.cmf" --file "$T/text.txt" --ctx 16 --json --lora "$AD" >"$T/o" 2>"$T/e" || fail "ppl --lora: $(cat "$T/e")"
has "$T/o" '"ppl"' "ppl --lora"
"$BIN" bench "$T/llama.cmf" -p 8 -n 2 -r 1 --lora "$AD" --json >"$T/o" 2>"$T/e" || fail "bench --lora: $(cat "$T/e")"
has "$T/o" '"avg_ts"' "bench --lora"

# cmf lora merge: the merged file gives the run-time logits (f32 weights:
# W + s B A in f32 against s (x A^T) B^T beside W; bound 1e-5, measured 2.3e-7)
"$BIN" lora merge "$T/llama.cmf" --lora "$AD" --lora "$AD:0.5" --output "$T/merged.cmf" 2>"$T/e" ||
    fail "lora merge: $(cat "$T/e")"
has "$T/e" "2 adapters merged" "lora merge summary"
"$BIN" info "$T/merged.cmf" --json >"$T/o" 2>"$T/e" || fail "info merged: $(cat "$T/e")"
"$BIN" verify "$T/merged.cmf" >"$T/o" 2>"$T/e" || fail "verify merged: $(cat "$T/e")"
"$BIN" logits "$T/merged.cmf" $TOK --ctx 64 --out "$T/m.f32" 2>"$T/e" || fail "logits merged: $(cat "$T/e")"
"$BIN" logits "$T/llama.cmf" $TOK --ctx 64 --lora "$AD:1.5" --out "$T/l15.f32" 2>"$T/e" || fail "logits :1.5: $(cat "$T/e")"
logits_compare "$T/m.f32" "$T/l15.f32" $V 1e-5 || fail "merged file differs from --lora at run time"
"$BIN" lora merge "$T/llama.cmf" --lora "$AD" --output "$T/llama.cmf" 2>"$T/e"
[ $? = 1 ] || fail "merge onto its input: exit status"
"$BIN" lora frob "$T/llama.cmf" --lora "$AD" --output "$T/x.cmf" 2>"$T/e"
[ $? = 2 ] || fail "lora frob: exit status"
has "$T/e" "the only action is merge" "lora frob"

# errors: exit 1, naming the file and the tensor
"$BIN" logits "$T/llama.cmf" $TOK --lora "$T/none.safetensors" --out "$T/x.f32" 2>"$T/e"
[ $? = 1 ] || fail "missing adapter: exit status"
has "$T/e" "none.safetensors" "missing adapter message"
write_adapter "$T/ghost" model.layers.7.mlp.up_proj:128:96 || fail "write adapter"
"$BIN" logits "$T/llama.cmf" $TOK --lora "$T/ghost/adapter_model.safetensors" --out "$T/x.f32" 2>"$T/e"
[ $? = 1 ] || fail "unknown target: exit status"
has "$T/e" "ghost/adapter_model.safetensors: tensor 'base_model.model.model.layers.7.mlp.up_proj.lora_A.weight'" "unknown target"
has "$T/e" "has no tensor 'model.layers.7.mlp.up_proj.weight'" "unknown target"
rm "$T/ad/adapter_config.json"
"$BIN" logits "$T/llama.cmf" $TOK --lora "$AD" --out "$T/x.f32" 2>"$T/e"
[ $? = 1 ] || fail "no adapter_config.json: exit status"
has "$T/e" "adapter_config.json" "no adapter_config.json"

[ $fails = 0 ] && echo "engine_lora: ok"
exit $((fails > 0))
