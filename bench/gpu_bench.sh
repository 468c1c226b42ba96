#!/usr/bin/env bash
# gpu_bench.sh OUT_JSON — the Vulkan backend's speed on this machine's GPU,
# in one run: random-weight shapes from bench/make_shape.py converted at
# each quant, `cmf bench --gpu on --json` for pp512, tg128 and tg128 with
# several sequences decoded together, one table printed, and every figure
# written to OUT_JSON as an array of records (OUT_JSON.jsonl: one a line,
# as they are measured) {device, model, quant, test
# (pp512, tg128, tg128_batch<N>), tok_s, gb_s, build}. gb_s: weight bytes
# one decode step reads (every tensor once, one row of an untied input
# embedding) times steps per second (null for pp). Environment:
#   CMF       the cmf to measure (default build/cmf), build "after"
#   CMF_BASE  another cmf measured in the same run (build "before"; unset: none)
#   SHAPES    make_shape.py shapes (default "qwen2.5-0.5b llama-3.1-8b"); SHAPE:Q1,Q2
#             gives one shape its own quants (llama-3.1-8b:f16,q4: each 8B convert takes 1-2 minutes)
#   QUANTS    convert --quant values of the shapes without their own (default "f16 q8 q4")
#   SEQS      sequence counts for tg128_batch<N> (default "8 64"; q8 only, see BATCH_QUANTS)
#   BATCH_QUANTS  quants that get the batch runs (default "q8")
#   REPS (2), PP (512), TG (128), BATCH_CTX (512: -c of the batch runs), WORK (a temporary folder; needs ~35 GB for the 8B shape)
set -uo pipefail
OUT_JSON=${1:?usage: gpu_bench.sh OUT_JSON}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CMF=${CMF:-$ROOT/build/cmf}
CMF_BASE=${CMF_BASE:-}
SHAPES=${SHAPES:-qwen2.5-0.5b llama-3.1-8b}
QUANTS=${QUANTS:-f16 q8 q4}
SEQS=${SEQS:-8 64}
BATCH_QUANTS=${BATCH_QUANTS:-q8}
REPS=${REPS:-2} PP=${PP:-512} TG=${TG:-128}
BATCH_CTX=${BATCH_CTX:-512} # context per sequence of the batch runs (the model's own would not fit 64 caches)
WORK=${WORK:-$(mktemp -d)}
mkdir -p "$WORK"
REC=$OUT_JSON.jsonl # records as they come (kept if the run is cut short)
: >"$REC"
die() { echo "gpu_bench: $*" >&2; exit 1; }
[ -x "$CMF" ] || die "$CMF: no cmf binary"
command -v python3 >/dev/null || die "python3 is needed"
DEVICE=$("$CMF" info --gpu 2>&1 | grep -m1 -o 'vulkan: .*' || echo "unknown")
echo "== device: $DEVICE"

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

# run BIN BUILD SHAPE QUANT FILE WB ARGS...: one cmf bench, its records appended
run() {
    local bin=$1 build=$2 shape=$3 q=$4 f=$5 wb=$6
    shift 6
    "$bin" bench "$f" "$@" -r "$REPS" --gpu on --json >"$WORK/b.json" 2>"$WORK/b.err" ||
        { echo "FAIL $build $shape $q $*: $(tail -c 300 "$WORK/b.err")"; return 1; }
    python3 - "$WORK/b.json" "$DEVICE" "$shape" "$q" "$build" "$wb" >>"$REC" <<'EOF'
import json, sys
recs, dev, shape, q, build, wb = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6])
for r in recs:
    seqs = r.get("n_seqs", 1) or 1
    if r["n_prompt"] > 0:
        test, gb = "pp%d" % r["n_prompt"], None
    else:
        test = "tg%d" % r["n_gen"] + ("_batch%d" % seqs if seqs > 1 else "")
        gb = round(wb * r["avg_ts"] / seqs / 1e9, 1)
    print(json.dumps({"device": dev, "model": shape, "quant": q, "test": test, "tok_s": round(r["avg_ts"], 1),
                      "gb_s": gb, "build": build}))
EOF
}

for entry in $SHAPES; do
    shape=${entry%%:*} quants=$QUANTS
    [ "$shape" != "$entry" ] && quants=${entry#*:} && quants=${quants//,/ }
    hf=$WORK/hf-$shape
    [ -f "$hf/config.json" ] || python3 "$ROOT/bench/make_shape.py" "$shape" "$hf" >/dev/null || die "make_shape $shape"
    for q in $quants; do
        f=$WORK/$shape-$q.cmf
        "$CMF" convert --quiet --model "$hf" --output "$f" --quant "$q" || { echo "FAIL convert $shape $q"; continue; }
        wb=$(weight_bytes "$f") || { echo "FAIL info $f"; continue; }
        builds=("after:$CMF")
        [ -n "$CMF_BASE" ] && builds=("before:$CMF_BASE" "after:$CMF")
        for bb in "${builds[@]}"; do
            b=${bb%%:*} bin=${bb#*:}
            run "$bin" "$b" "$shape" "$q" "$f" "$wb" -p "$PP" -n "$TG"
            case " $BATCH_QUANTS " in *" $q "*)
                for s in $SEQS; do run "$bin" "$b" "$shape" "$q" "$f" "$wb" -p 0 -n "$TG" --seqs "$s" -c "$BATCH_CTX"; done ;;
            esac
        done
        rm -f "$f"
    done
    rm -rf "$hf"
done

python3 - "$REC" "$OUT_JSON" <<'EOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
json.dump(recs, open(sys.argv[2], "w"), indent=1)
key = lambda r: (r["model"], r["quant"], r["test"])
rows, seen = {}, []
for r in recs:
    if key(r) not in rows: rows[key(r)] = {}; seen.append(key(r))
    rows[key(r)][r["build"]] = r
print("%-14s %-5s %-14s %12s %12s %8s %8s" % ("model", "quant", "test", "before t/s", "after t/s", "ratio", "GB/s"))
for k in seen:
    b, a = rows[k].get("before"), rows[k].get("after")
    ratio = "%.2fx" % (a["tok_s"] / b["tok_s"]) if a and b and b["tok_s"] else "-"
    print("%-14s %-5s %-14s %12s %12s %8s %8s" % (k[0], k[1], k[2], b["tok_s"] if b else "-", a["tok_s"] if a else "-",
                                                 ratio, a["gb_s"] if a and a["gb_s"] is not None else "-"))
EOF
