#!/usr/bin/env bash
# cpu_bench.sh HF_DIR WORK_DIR — CPU speed at every default weight width:
# converts the Hugging Face checkpoint HF_DIR (e.g. from bench/make_shape.py)
# to WORK_DIR/<dtype>.cmf for f16, q8_row, q4_block, q4_tiled and q4tp (kept
# for the next run), runs `cmf bench -p 512 -n 128 -t T -r 5` on each at 2 and
# 1 threads, and prints the weight bandwidth decode achieved (weight bytes
# read per token x tokens/s) beside the machine's read bandwidth from
# bench/membw.c. Environment: CMF (default build/cmf), MEMBW (build/cmf-membw),
# THREADS ("2 1"), DTYPES ("f16 q8 q4 q4t q4tp"), REPS (5), PP (512), TG (128).
set -euo pipefail
if [ $# -ne 2 ]; then
    sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
HF=$1 WORK=$2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CMF=${CMF:-$ROOT/build/cmf}
MEMBW=${MEMBW:-$ROOT/build/cmf-membw}
THREADS=${THREADS:-2 1}
DTYPES=${DTYPES:-f16 q8 q4 q4t q4tp}
REPS=${REPS:-5} PP=${PP:-512} TG=${TG:-128}
die() { echo "cpu_bench: $*" >&2; exit 1; }
[ -x "$CMF" ] || die "$CMF: no cmf binary (make build, or set CMF)"
[ -x "$MEMBW" ] || die "$MEMBW: no bandwidth probe (make build builds cmf-membw, or set MEMBW)"
[ -f "$HF/config.json" ] || die "$HF: no config.json (make one: python3 bench/make_shape.py qwen2.5-0.5b DIR)"
command -v python3 >/dev/null || die "python3 is needed to read cmf's JSON output"
mkdir -p "$WORK"

echo "== machine: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
echo "== read bandwidth (bench/membw.c)"
# shellcheck disable=SC2086
bw=$("$MEMBW" $THREADS) || die "$MEMBW failed"
echo "$bw"

# weight bytes one decoded token reads: every tensor once, except the input
# embedding, of which one row is read (unless tied: then it is the output
# projection and read whole)
weight_bytes() {
    "$CMF" info "$1" --json --tensors | python3 -c '
import json, sys
d = json.load(sys.stdin)
t = {x["name"]: x for x in d["tensors"]}
total = sum(x["bytes"] for x in d["tensors"])
e = t.get("model.embed_tokens.weight")
if e and "lm_head.weight" in t:
    total -= e["bytes"] - e["bytes"] // e["shape"][0]
print(total)'
}

rows=()
for q in $DTYPES; do
    f=$WORK/$q.cmf
    if [ ! -s "$f" ]; then
        echo "== convert --quant $q -> $f"
        "$CMF" convert --model "$HF" --output "$f" --quant "$q" --quiet || die "convert --quant $q failed"
    fi
    wb=$(weight_bytes "$f") || die "$f: cmf info failed"
    dtype=$("$CMF" info "$f" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["quant_type"])')
    for t in $THREADS; do
        echo "== $dtype: cmf bench -p $PP -n $TG -t $t -r $REPS"
        js=$("$CMF" bench "$f" -p "$PP" -n "$TG" -t "$t" -r "$REPS" --json) || die "cmf bench failed on $f"
        rows+=("$(python3 -c '
import json, sys
recs, dtype, t, wb = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
pp = [r for r in recs if r["n_prompt"] > 0 and r["n_gen"] == 0]
tg = [r for r in recs if r["n_gen"] > 0 and r["n_prompt"] == 0]
if not pp or not tg:
    sys.exit("cpu_bench: cmf bench gave no pp or tg record")
p, g = pp[0], tg[0]
print("| %s | %s | %.1f ± %.1f | %.2f ± %.2f | %.1f | %.2f |" % (dtype, t, p["avg_ts"], p["stddev_ts"],
      g["avg_ts"], g["stddev_ts"], wb / 1e6, wb * g["avg_ts"] / 1e9))
' "$js" "$dtype" "$t" "$wb")") || die "cannot read cmf bench's JSON"
        echo "${rows[-1]}"
    done
done

echo
echo "== summary: $(basename "$HF"), pp$PP / tg$TG tokens/s (mean ± sd of $REPS), decode weight bandwidth"
echo "| weights | threads | pp$PP | tg$TG | weight MB / token | decode GB/s |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo "read bandwidth (GB/s):"
echo "$bw" | grep '^membw ' | sed 's/^membw /  /'
