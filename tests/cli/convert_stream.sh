#!/usr/bin/env bash
# convert_stream.sh — streaming bound (slow; skipped unless CMF_SLOW_TESTS=1):
# generates a ~2.9 GB bf16 llama checkpoint (20 layers, hidden 2048, inter
# 8192, vocab 32000), converts it to q8 under /usr/bin/time -v and checks the
# peak RSS stays under the documented bound: the largest tensor as f32 plus
# its encoded payload plus its source pages plus 64 MiB of fixed overhead
# (docs/CONVERT.md) — far below the 2.9 GB a whole-model load would need.
set -u
[ "${CMF_SLOW_TESTS:-0}" = 1 ] || { echo "SKIP: set CMF_SLOW_TESTS=1 to run"; exit 77; }
BIN=${CMF_BIN:?CMF_BIN not set}
command -v python3 >/dev/null || { echo "SKIP: python3 needed to generate the checkpoint"; exit 77; }
[ -x /usr/bin/time ] || { echo "SKIP: /usr/bin/time needed"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/cmf-stream.XXXXXX")
trap 'rm -rf "$T"' EXIT
python3 "${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}/bench/make_shape.py" llama-stream-test "$T" || { echo "FAIL: generate"; exit 1; }
/usr/bin/time -v "$BIN" convert --model "$T" --output "$T/out.cmf" --quant q8 --quiet 2>"$T/time" \
    || { cat "$T/time"; echo "FAIL: convert"; exit 1; }
rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$T/time")
secs=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$T/time")
# largest tensor: embed_tokens 32000 x 2048 = 65.5M elements: f32 copy
# 262 MB + q8 payload 66 MB + bf16 source pages 131 MB + 64 MiB overhead
bound_kb=$(( (65536000 * 4 + 65536000 + 32000 * 2 + 65536000 * 2) / 1024 + 65536 ))
echo "peak RSS ${rss_kb} kB (bound ${bound_kb} kB), wall ${secs}, out $(stat -c %s "$T/out.cmf") bytes"
"$BIN" verify "$T/out.cmf" >/dev/null || { echo "FAIL: verify"; exit 1; }
[ "$rss_kb" -le "$bound_kb" ] || { echo "FAIL: peak RSS above the bound"; exit 1; }
echo "convert_stream: passed"
