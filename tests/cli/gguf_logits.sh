#!/usr/bin/env bash
# gguf_logits.sh — imported GGUFs run: each fixture GGUF (llama.cpp's own
# conversion of hf-models/<arch>) through `cmf import-gguf`, then
# `cmf logits` against transformers' ref_logits.f32 (worst row of
# max|Δ| / max|ref|; NaN, Inf or empty fail: tests/cli/lib/logits.sh).
# The fixture GGUFs lost rope_theta / sliding_window (see docs/GGUF.md,
# Gaps): they are set back with --set. Exit 0 pass, 77 skip, else fail.
set -u
BIN=${CMF_BIN:-}
FIX=${CMF_FIXTURES:-}
[ -x "$BIN" ] || { echo "SKIP: CMF_BIN not set"; exit 77; }
[ -f "$FIX/gguf/llama-f32.gguf" ] && [ -f "$FIX/hf-models/llama/ref.json" ] || { echo "SKIP: fixtures absent"; exit 77; }
. "${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}/tests/cli/lib/logits.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

set_for() {
    case $1 in
    qwen2 | mixtral) echo "--set rope_theta=1000000" ;;
    mistral_swa) echo "--set sliding_window=8" ;;
    *) echo "" ;;
    esac
}

for m in llama qwen2 mistral_swa mixtral; do
    d=$FIX/hf-models/$m
    ids=$(field "$d/ref.json" input_ids)
    vocab=$(field "$d/ref.json" logits_shape | cut -d, -f2)
    for q in f32 q8_0; do
        # f32: the GGUF holds the checkpoint's bf16 weights exactly, f32 math
        # on both sides: ~1e-6 is rounding, 1e-4 leaves room for summation
        # order. q8_0: llama.cpp's 8-bit blocks then cmf's q8_row: 0.05 of the
        # row's largest logit (measured ~1e-2; a wrong rope or window moves
        # logits by percents of that and more, see hf-models/README.md).
        tol=1e-4
        [ $q = q8_0 ] && tol=0.05
        # shellcheck disable=SC2046
        if ! "$BIN" import-gguf "$FIX/gguf/$m-$q.gguf" --output "$T/$m-$q.cmf" --quiet $(set_for $m) >"$T/log" 2>&1; then
            fail "$m-$q: import: $(cat "$T/log")"
            continue
        fi
        if ! "$BIN" logits "$T/$m-$q.cmf" --tokens "$ids" --out "$T/$m-$q.f32" >"$T/log" 2>&1; then
            fail "$m-$q: logits: $(cat "$T/log")"
            continue
        fi
        msg=$(logits_compare "$T/$m-$q.f32" "$d/ref_logits.f32" "$vocab" "$tol") || fail "$m-$q logits: $msg"
        echo "$m-$q: $msg"
    done
done
[ "$fails" = 0 ] && echo "gguf_logits: all imported GGUFs match" && exit 0
exit 1
