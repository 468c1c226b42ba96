#!/usr/bin/env bash
# demo.sh BUILD_DIR — `make demo`: converts the Shakespeare fixture model
# (trained weights, its own tokenizer) with the built cmf into
# BUILD_DIR/demo/ (git-ignored with the build folder) and generates text
# from "ROMEO:\n". Fixtures: $CMF_FIXTURES, default ../shared/fixtures.
set -eu
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")/.." && pwd)
FIX=${CMF_FIXTURES:-$HERE/../shared/fixtures}
CMF=$BUILD/cmf
SRC=$FIX/shakespeare
if [ ! -x "$CMF" ]; then echo "demo: $CMF not built (run: make build)" >&2; exit 1; fi
if [ ! -f "$SRC/config.json" ]; then
    echo "demo: fixture model not found at $SRC (set CMF_FIXTURES to the fixtures folder)" >&2
    exit 1
fi
OUT=$BUILD/demo
mkdir -p "$OUT"
MODEL=$OUT/shakespeare.cmf
if [ ! -f "$MODEL" ] || [ "$SRC/model.safetensors" -nt "$MODEL" ]; then
    echo "== cmf convert $SRC -> $MODEL (q8)"
    "$CMF" convert --model "$SRC" --output "$MODEL" --quant q8
fi
echo "== cmf info"
"$CMF" info "$MODEL" | head -n 12
echo
echo "== cmf run: greedy continuation of \"ROMEO:\\n\""
"$CMF" run "$MODEL" --prompt $'ROMEO:\n' -n 64 --greedy
echo
echo "== cmf run: sampled (temperature 0.8, top-p 0.95, seed 42)"
"$CMF" run "$MODEL" --prompt $'JULIET:\n' -n 96 --temp 0.8 --top-p 0.95 --seed 42
echo
echo "== cmf bench"
"$CMF" bench "$MODEL" -p 256 -n 64 -r 3
