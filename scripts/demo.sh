#!/usr/bin/env bash
# demo.sh BUILD_DIR — `make demo`: converts the demo model shipped in
# models/shakespeare (a 5M-parameter Llama trained on tiny-shakespeare) with
# the built cmf into BUILD_DIR/demo/ (git-ignored with the build folder),
# then shows info, verify, greedy text checked against the shipped
# transformers reference, sampled text, one chat turn and a bench.
set -eu
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")/.." && pwd)
SRC=$HERE/models/shakespeare
CMF=$BUILD/cmf
[ -x "$CMF" ] || { echo "demo: $CMF not built (run: make build)" >&2; exit 1; }
[ -f "$SRC/model.safetensors" ] || { echo "demo: $SRC/model.safetensors missing: the demo model ships with the repository" >&2; exit 1; }
OUT=$BUILD/demo
mkdir -p "$OUT"
MODEL=$OUT/shakespeare.cmf
stale=
[ -f "$MODEL" ] || stale=1
for f in "$SRC"/*; do [ "$f" -nt "$MODEL" ] && stale=1; done
if [ -n "$stale" ]; then
    echo "== cmf convert --model models/shakespeare --output $MODEL (q8, the default)"
    "$CMF" convert --model "$SRC" --output "$MODEL" --quiet
fi
echo "== cmf info"
"$CMF" info "$MODEL"
echo
echo "== cmf verify"
"$CMF" verify "$MODEL"
echo
echo "== cmf run: greedy continuation of \"ROMEO:\\n\" (raw completion: a base model)"
"$CMF" run "$MODEL" --raw --prompt $'ROMEO:\n' -n 64 --greedy | tee "$OUT/greedy.txt"
if cmp -s "$OUT/greedy.txt" <(printf 'ROMEO:\n'; cat "$SRC/ref_greedy.txt"; printf '\n'); then
    echo "-- identical to the transformers reference (models/shakespeare/ref_greedy.txt)"
else
    echo "-- differs from the transformers reference (models/shakespeare/ref_greedy.txt)"
fi
echo
echo "== cmf run: sampled (temperature 0.8, top-p 0.95, seed 42)"
"$CMF" run "$MODEL" --raw --prompt $'JULIET:\n' -n 96 --temp 0.8 --top-p 0.95 --seed 42
echo
line="Good morrow, fair Juliet. How dost thou?"
echo "== cmf chat: one turn through the model's chat template (user = ROMEO, model = JULIET)"
echo "> $line"
printf '%s\n' "$line" | "$CMF" chat "$MODEL" -n 64 --temp 0.7 --seed 7 --stop $'\n\n'
echo
echo "== cmf bench (--gpu auto: a hardware GPU when one runs the model, else the CPU; its 'device:' line says which ran)"
"$CMF" bench "$MODEL" -p 256 -n 64 -r 3
