#!/usr/bin/env bash
# lib_logits.sh — the shared comparison of tests/cli/lib/logits.sh can
# fail: logits_compare on generated f32 files passes equal and close rows,
# measures the worst row, and fails on NaN, Inf, empty, missing, mismatched
# or all-zero-reference input, saying why; field reads ref.json arrays.
set -u
. "${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}/tests/cli/lib/logits.sh"
command -v python3 >/dev/null || { echo "SKIP: python3 absent"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
f32() { python3 -c 'import struct, sys; sys.stdout.buffer.write(struct.pack("<%df" % (len(sys.argv) - 1), *map(float, sys.argv[1:])))' "$@"; }

f32 1 -2 4 8 >"$T/ref"
f32 1 -2 4 8 >"$T/same"
f32 1 -2 4.4 8 >"$T/near"    # row 1: |Δ| 0.4 over max 8 = 0.05
f32 nan nan nan nan >"$T/nan"
f32 1 -2 inf 8 >"$T/inf"
f32 1 -2 >"$T/short"
: >"$T/empty"
f32 0 0 4 8 >"$T/zrow"
msg=$(logits_compare "$T/same" "$T/ref" 2 0) || fail "identical files: $msg"
msg=$(logits_compare "$T/near" "$T/ref" 2 0.0501) || fail "0.05 within 0.0501: $msg"
case $msg in *"error 0.05 "*) ;; *) fail "worst row should measure 0.05: $msg" ;; esac
msg=$(logits_compare "$T/near" "$T/ref" 2 0.049) && fail "0.05 accepted within 0.049: $msg"
for bad in nan inf short empty missing; do
    msg=$(logits_compare "$T/$bad" "$T/ref" 2 1e30) && fail "$bad output accepted: $msg"
    [ -n "$msg" ] || fail "$bad output: no reason given"
done
msg=$(logits_compare "$T/ref" "$T/nan" 2 1e30) && fail "NaN reference accepted: $msg"
msg=$(logits_compare "$T/ref" "$T/ref" 3 1e30) && fail "4 floats taken as rows of 3: $msg"
msg=$(logits_compare "$T/zrow" "$T/zrow" 2 1e30) && fail "an all-zero reference row accepted: $msg"
printf '{"input_ids": [1, 2, 3], "greedy": []}\n' >"$T/ref.json"
[ "$(field "$T/ref.json" input_ids)" = "1,2,3" ] || fail "field input_ids: $(field "$T/ref.json" input_ids)"
[ -z "$(field "$T/ref.json" greedy)" ] && [ -z "$(field "$T/ref.json" nosuch)" ] || fail "field of an empty / absent array"
[ "$fails" = 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "lib_logits: logits_compare fails on NaN, Inf, empty and mismatched input"
