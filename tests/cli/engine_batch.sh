#!/usr/bin/env bash
# engine_batch.sh — the batch and KV-cache flags end to end: `cmf logits`
# with several --tokens writes each sequence's logits, one after another,
# equal (within 1e-5 relative: f32 summation order) to each sequence run
# alone; --kv-type changes the cache (f16/q8 logits near f32, not equal;
# bad names refused); `cmf bench --seqs 3` reports an aggregate tgNx3 row
# and the KV bytes per token of each cache type.
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
FIX=${CMF_FIXTURES:-}
[ -n "$FIX" ] && [ -d "$FIX/hf-models/llama" ] || { echo "SKIP: fixtures absent (CMF_FIXTURES)"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 needed to compare logits"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
"$BIN" convert --model "$FIX/hf-models/llama" --output "$T/m.cmf" --quant f32 --quiet || fail "convert"

A=5,17,99,3,250 B=42,7 C=300,301,302,303,304,305,306,307
for s in A B C; do
    "$BIN" logits "$T/m.cmf" --tokens "${!s}" --out "$T/$s.f32" || fail "logits alone $s"
done
"$BIN" logits "$T/m.cmf" --tokens "$A" --tokens "$B" --tokens "$C" --out "$T/abc.f32" --batch 6 || fail "logits batched"
"$BIN" logits "$T/m.cmf" --tokens "$A" --kv-type f16 --out "$T/A16.f32" || fail "logits f16"
"$BIN" logits "$T/m.cmf" --tokens "$A" --kv-type q8 --out "$T/A8.f32" || fail "logits q8"

# compare: worst |a-b| / max|b| per row; NaN, Inf, empty or size mismatch fail
python3 - "$T" <<'PY' || fail "logits comparison"
import math, struct, sys
d = sys.argv[1]
def load(name):
    b = open(f"{d}/{name}", "rb").read()
    return struct.unpack(f"<{len(b)//4}f", b)
def rel(a, b):
    if not a or len(a) != len(b): return math.inf
    if any(not math.isfinite(x) for x in a + b): return math.inf
    m = max(abs(x) for x in b)
    return max(abs(x - y) for x, y in zip(a, b)) / m if m > 0 else math.inf
alone = load("A.f32") + load("B.f32") + load("C.f32")
r = rel(load("abc.f32"), alone)
print(f"batched vs alone: rel {r:.2e}")
ok = r <= 1e-5
a32 = load("A.f32")
for t, lim in (("A16.f32", 5e-3), ("A8.f32", 6e-2)):
    e = rel(load(t), a32)
    print(f"{t} vs f32: rel {e:.2e}")
    ok &= 0 < e <= lim   # a different cache changes the logits a little, never a lot
sys.exit(0 if ok else 1)
PY

# errors: bad cache type, no --tokens
"$BIN" logits "$T/m.cmf" --tokens 1 --kv-type f8 --out "$T/x" >"$T/o" 2>&1 && fail "--kv-type f8 accepted"
grep -q "f16, f32, q8" "$T/o" || fail "--kv-type message: $(cat "$T/o")"
[ -e "$T/x" ] && fail "output written after a refused --kv-type"
"$BIN" run "$T/m.cmf" --tokens 1 --kv-type x >"$T/o" 2>&1 && fail "run --kv-type x accepted"
grep -q "kv-type" "$T/o" || fail "run --kv-type message: $(cat "$T/o")"

# bench: aggregate row for 3 sequences, KV bytes per cache type
"$BIN" bench "$T/m.cmf" -p 0 -n 4 -r 1 --seqs 3 --kv-type q8 >"$T/o" 2>&1 || fail "bench --seqs: $(cat "$T/o")"
grep -q "tg4x3" "$T/o" || fail "bench --seqs row: $(cat "$T/o")"
grep -q "KV cache: q8" "$T/o" || fail "bench KV line: $(cat "$T/o")"
"$BIN" bench "$T/m.cmf" -p 0 -n 2 -r 1 --json --kv-type f32 >"$T/j32" 2>&1 || fail "bench json f32"
"$BIN" bench "$T/m.cmf" -p 0 -n 2 -r 1 --json --kv-type f16 >"$T/j16" 2>&1 || fail "bench json f16"
python3 - "$T" <<'PY' || fail "bench kv_bytes_per_token: f32 must be twice f16"
import json, sys
d = sys.argv[1]
a = json.load(open(f"{d}/j32"))[0]["kv_bytes_per_token"]
b = json.load(open(f"{d}/j16"))[0]["kv_bytes_per_token"]
print("kv bytes/token f32", a, "f16", b)
sys.exit(0 if a > 0 and a == 2 * b else 1)
PY
"$BIN" bench "$T/m.cmf" --seqs 0 >"$T/o" 2>&1 && fail "bench --seqs 0 accepted"

[ $fails -eq 0 ] && echo "engine_batch: all checks passed"
exit $((fails > 0))
