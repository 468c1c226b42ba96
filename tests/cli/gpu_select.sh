#!/usr/bin/env bash
# gpu_select.sh — device selection end to end: `cmf info --gpu` names the
# device (or says why there is none), text and JSON; --gpu auto stays on
# the CPU for a software device and says why (CMF_LOG=info); with
# CMF_VK_SOFTWARE=1 it takes the device (lavapipe here), after its warm-up
# step, and the greedy text is the CPU's byte for byte; CMF_VK_PROFILE=1
# prints the GPU time per pipeline.
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
FIX=${CMF_FIXTURES:-}
[ -n "$FIX" ] && [ -d "$FIX/shakespeare" ] || { echo "SKIP: fixtures absent (CMF_FIXTURES)"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
has() { grep -q -- "$2" "$1" || fail "$3: $(basename "$1") lacks '$2': $(head -c 400 "$1")"; }

"$BIN" info --gpu >"$T/i" 2>&1 || fail "info --gpu exit"
grep -Eq "^gpu: (vulkan: .*device memory\)|none \(.+\))" "$T/i" || fail "info --gpu: $(cat "$T/i")"
"$BIN" info --gpu --json >"$T/j" 2>&1 || fail "info --gpu --json exit"
python3 -c 'import json,sys; g=json.load(open(sys.argv[1]))["gpu"]; assert ("device" in g and g["memory_bytes"] > 0) or g["error"]' "$T/j" ||
    fail "info --gpu --json: $(cat "$T/j")"
if ! grep -q "^gpu: vulkan: " "$T/i"; then
    echo "SKIP: no Vulkan device ($(cat "$T/i"))"
    [ "$fails" -eq 0 ] && exit 77 || exit 1
fi

"$BIN" convert --model "$FIX/shakespeare" --output "$T/shk.cmf" --quant f16 --quiet || fail "convert"
"$BIN" info "$T/shk.cmf" --gpu >"$T/if" 2>&1 || fail "info FILE --gpu exit"
has "$T/if" "^gpu: vulkan: " "info FILE --gpu"
has "$T/if" "architecture\|arch" "info FILE --gpu keeps the summary"

run() { "$BIN" run "$T/shk.cmf" --raw --prompt $'ROMEO:\n' -n 24 --greedy "$@"; }
run --gpu off >"$T/cpu" 2>/dev/null || fail "run --gpu off"
[ -s "$T/cpu" ] || fail "run --gpu off: no text"
if grep -q "software device" "$T/i"; then
    CMF_LOG=info run >"$T/auto" 2>"$T/e" || fail "run auto"
    has "$T/e" "gpu auto: the CPU: .* is a software device" "auto on a software device"
    cmp -s "$T/cpu" "$T/auto" || fail "auto (CPU) text differs from --gpu off"
fi
CMF_VK_SOFTWARE=1 CMF_LOG=info run >"$T/gpu" 2>"$T/e" || fail "run auto, software allowed: $(cat "$T/e")"
has "$T/e" "gpu auto: the GPU, vulkan: " "auto takes the device"
cmp -s "$T/cpu" "$T/gpu" || { fail "auto (GPU) text differs from the CPU's"; diff "$T/cpu" "$T/gpu" | head -5; }

# CMF_VK_PROFILE=1: GPU time per pipeline when the backend is freed; the
# text unchanged (timestamps are written beside the dispatches)
CMF_VK_PROFILE=1 run --gpu on >"$T/prof" 2>"$T/e" || fail "run with CMF_VK_PROFILE=1: $(cat "$T/e")"
has "$T/e" "^vulkan profile (GPU time per pipeline, [0-9.]* ms in all):" "CMF_VK_PROFILE=1"
grep -Eq "^  (matvec|matmul[a-z_]*) +[1-9][0-9]* calls +[0-9.]+ ms" "$T/e" || fail "CMF_VK_PROFILE=1 has no matmul line: $(cat "$T/e")"
grep -Eq "^  attn +[1-9][0-9]* calls" "$T/e" || fail "CMF_VK_PROFILE=1 has no attention line: $(cat "$T/e")"
cmp -s "$T/cpu" "$T/prof" || fail "CMF_VK_PROFILE=1 text differs from the CPU's"

[ "$fails" -eq 0 ] && echo "gpu_select: ok" || exit 1
