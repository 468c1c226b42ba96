#!/usr/bin/env bash
# gpu_check.sh BUILD — the GPU suites on a machine with a Vulkan device:
# the op suite (every op against naive loops, every weight dtype and KV
# type; on NVIDIA, where the cooperative-matrix GEMM is the default, also
# with its other tile, CMF_VK_COOP=2, and without it, CMF_VK_COOP=0), the
# fused-op suites (MoE, gated DeltaNet, Gemma-4 per-layer ops
# against the per-token CPU forms), the batch suite (GPU logits against the
# CPU's on every fixture family, f32, f16 and q8 caches), device selection
# (info --gpu, --gpu auto taking the device), the demo model's
# greedy text on the GPU against the CPU's (byte for byte), and
# `cmf bench --gpu on`. BUILD holds the built cmf and test programs;
# fixtures come from CMF_FIXTURES. GPU_BENCH_SHAPES (default
# "qwen2.5-0.5b"; "qwen2.5-0.5b llama-3.1-8b" for both issue shapes)
# adds random-weight shapes at f16, q8 and q4. Prints one line per check
# and "gpu_check: N passed, M failed".
set -u
B=${1:?usage: gpu_check.sh BUILD}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export CMF_BIN="$B/cmf" CMF_SOURCE_DIR="$ROOT"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { echo "PASS $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
step() { local name=$1; shift; if "$@" >"$T/log" 2>&1; then ok "$name"; else bad "$name"; fi; tail -n 40 "$T/log"; }

step "op suite (test_engine_ops)" "$B/test_engine_ops"
grep -q "^vulkan: " "$T/log" || bad "op suite ran without a Vulkan device"
# on NVIDIA, the op suite again with the second cooperative-matrix tile (CMF_VK_COOP=2, which must be
# taken, as the default must) and with the f32 tiled GEMM instead (CMF_VK_COOP=0)
if grep -q "^vulkan: NVIDIA" "$T/log"; then
    grep -q "cooperative-matrix GEMM on" "$T/log" || bad "the cooperative-matrix GEMM is not the default on NVIDIA"
    step "op suite, NV cooperative-matrix GEMM, 128-token tiles (CMF_VK_COOP=2)" env CMF_VK_COOP=2 "$B/test_engine_ops"
    grep -q "cooperative-matrix GEMM on" "$T/log" || bad "CMF_VK_COOP=2 did not take the cooperative-matrix GEMM"
    step "op suite, f32 tiled GEMM (CMF_VK_COOP=0)" env CMF_VK_COOP=0 "$B/test_engine_ops"
fi
for t in test_engine_moe test_engine_deltanet test_engine_archs_ops; do
    step "fused ops ($t)" "$B/$t"
    grep -q "vulkan: " "$T/log" || bad "$t ran without a Vulkan device"
done
step "GPU vs CPU logits (test_engine_batch)" "$B/test_engine_batch"
step "device selection: info --gpu, --gpu auto (gpu_select.sh)" bash "$ROOT/tests/cli/gpu_select.sh"

"$B/cmf" convert --quiet --model "$ROOT/models/shakespeare" --output "$T/shk.cmf" --quant f16 || bad "convert demo model"
for kv in f32 f16 q8; do
    "$B/cmf" run "$T/shk.cmf" --raw --prompt $'ROMEO:\n' -n 64 --greedy --kv-type $kv --gpu off >"$T/cpu" 2>/dev/null
    "$B/cmf" run "$T/shk.cmf" --raw --prompt $'ROMEO:\n' -n 64 --greedy --kv-type $kv --gpu on >"$T/gpu" 2>"$T/err"
    if [ -s "$T/gpu" ] && cmp -s "$T/cpu" "$T/gpu"; then ok "demo model greedy text, GPU = CPU (kv $kv)"; else
        bad "demo model greedy text (kv $kv): $(head -c 300 "$T/err")"; diff "$T/cpu" "$T/gpu" | head -5; fi
done
cat "$T/gpu"
step "bench --gpu on (demo model)" "$B/cmf" bench "$T/shk.cmf" -p 128 -n 32 -r 2 --gpu on
for shape in ${GPU_BENCH_SHAPES-qwen2.5-0.5b}; do # random-weight shapes from bench/make_shape.py
    python3 "$ROOT/bench/make_shape.py" "$shape" "$T/$shape" >/dev/null || { bad "make_shape $shape"; continue; }
    for q in f16 q8 q4; do
        "$B/cmf" convert --quiet --model "$T/$shape" --output "$T/$shape-$q.cmf" --quant $q || { bad "convert $shape $q"; continue; }
        step "bench --gpu on $shape $q" "$B/cmf" bench "$T/$shape-$q.cmf" -p 512 -n 128 -r 1 --gpu on
        rm -f "$T/$shape-$q.cmf"
    done
    rm -rf "${T:?}/$shape"
done
echo "gpu_check: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
