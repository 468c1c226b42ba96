#!/usr/bin/env bash
# engine_archs.sh — the engine on the MoE / linear-attention / per-layer-input
# families (qwen2_moe, qwen3_moe, mixtral, gpt_oss, gemma4, qwen3_next):
# `cmf convert --quant f32`, then `cmf logits` against transformers'
# ref_logits.f32 (max |Δ| over a row / the row's max |logit|; NaN, Inf or
# empty output fail: tests/cli/lib/logits.sh), the same
# prompt fed one token at a time and in chunks of 5 (same logits to 1e-5),
# and `cmf run --greedy --ids` against the reference continuation.
# `cmf info` shows each family's MoE block and layer schedule (values from
# the fixture's config.json).
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
FIX=${CMF_FIXTURES:-}
[ -n "$FIX" ] && [ -f "$FIX/hf-models/gpt_oss/ref.json" ] || { echo "SKIP: hf-models fixtures absent"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# logits_compare (fails on NaN, Inf, empty output), field (ref.json arrays)
. "${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}/tests/cli/lib/logits.sh"



for m in qwen2_moe qwen3_moe mixtral gpt_oss gemma4 qwen3_next; do
    d=$FIX/hf-models/$m
    ids=$(field "$d/ref.json" input_ids)
    want=$(field "$d/ref.json" greedy)
    vocab=$(field "$d/ref.json" logits_shape | cut -d, -f2)
    if ! "$BIN" convert --quiet --quant f32 --model "$d" --output "$T/$m.cmf" >"$T/log" 2>&1; then
        fail "$m: convert: $(cat "$T/log")"
        continue
    fi
    case $m in
    qwen2_moe) pats=("moe:         8 experts, top-2, expert ffn 32, router softmax, shared expert ffn 64"
                     "0-2        FullAttention     heads 4/2 x 24" "moe 8 experts top-2 x 32 + shared 64 (gated)") ;;
    qwen3_moe) pats=("8 experts, top-2, expert ffn 32, router softmax, top-k renormalised" "0-2        FullAttention") ;;
    mixtral) pats=("moe:         4 experts, top-2, expert ffn 128" "rope 1000000 | moe 4 experts top-2 x 128") ;;
    gpt_oss) pats=("0          SlidingAttention  heads 4/2 x 24, window 8, rope 150000 yarn"
                   "1          FullAttention" "2          SlidingAttention") ;;
    gemma4) pats=("0-2        SlidingAttention  heads 4/2 x 24, window 8, rope 10000"
                  "3          FullAttention     heads 4/2 x 32, rope 1000000 proportional on 25%" "per-layer input") ;;
    qwen3_next) pats=("0-2        LinearAttention   deltanet qk 2x16, v 4x16, conv 4 | moe 4 experts top-2 x 32 + shared 32"
                      "3          FullAttention     heads 4/2 x 24, rope 10000 on 25%") ;;
    esac
    "$BIN" info "$T/$m.cmf" >"$T/info" 2>&1 || fail "$m: info: $(cat "$T/info")"
    for p in "${pats[@]}"; do grep -qF -- "$p" "$T/info" || fail "$m: info lacks '$p': $(cat "$T/info")"; done
    "$BIN" info "$T/$m.cmf" --json | grep -q '"layer_schedule"' || fail "$m: info --json lacks layer_schedule"
    if ! "$BIN" logits "$T/$m.cmf" --tokens "$ids" --out "$T/$m.f32" >"$T/log" 2>&1; then
        fail "$m: logits: $(cat "$T/log")"
        continue
    fi
    # f32 weights, f32 math and an f32 KV cache (cmf logits' default) on both
    # sides: measured <= 7.7e-7 (qwen3_next), rounding only; 1e-5 leaves room
    # for summation order and is far under what a wrong variant (rope,
    # window, routing) moves (percents, see the fixture README).
    msg=$(logits_compare "$T/$m.f32" "$d/ref_logits.f32" "$vocab" 1e-5) || fail "$m: logits: $msg"
    echo "$m: $msg"
    # Decode (one token per forward) and chunks of 5 against the one-chunk
    # prefill: the extension operators sum in the same order whatever the
    # chunk, so any difference is the backend matmul's batched kernels
    # (f32 reassociation, ~1e-7); 1e-5 catches a state or routing bug.
    for b in 1 5; do
        if ! "$BIN" logits "$T/$m.cmf" --tokens "$ids" --out "$T/$m.b$b.f32" --batch "$b" >"$T/log" 2>&1; then
            fail "$m: logits --batch $b: $(cat "$T/log")"
            continue
        fi
        msg=$(logits_compare "$T/$m.b$b.f32" "$T/$m.f32" "$vocab" 1e-5) || fail "$m: --batch $b against the one-chunk prefill: $msg"
        cmp -s "$T/$m.f32" "$T/$m.b$b.f32" && msg="$msg, bit-identical"
        echo "$m: --batch $b vs one chunk: $msg"
    done
    got=$("$BIN" run "$T/$m.cmf" --tokens "$ids" -n 12 --greedy --ignore-eos --ids --quiet 2>&1 | tr -d ' []')
    [ "$got" = "$want" ] || fail "$m: greedy [$got], expected [$want]"
done
[ "$fails" = 0 ] && echo "engine_archs: all families match" && exit 0
exit 1
