#!/usr/bin/env bash
# peer_bench.sh HF_DIR WORK_DIR — cmf beside llama.cpp (or a fork of it,
# such as ik_llama.cpp) on one model shape, in one sitting: writes the
# checkpoint HF_DIR (e.g. from bench/make_shape.py) as WORK_DIR/F16.gguf
# (bench/gguf_shape.py) and quantizes it to Q8_0 and Q4_0 with the peer's
# llama-quantize; converts it to WORK_DIR/{f16,q8,q4}.cmf; then, ROUNDS
# times, runs the peer's llama-bench and `cmf bench` alternately on each
# pair (F16/f16, Q8_0/q8_row, Q4_0/q4_block) and prints every round and the
# medians with the ratio cmf / peer. Files are kept for the next run.
# Environment: LLAMA_BENCH and LLAMA_QUANTIZE (the peer's binaries, needed),
# GGUF_PY (the peer's gguf-py folder, needed to write the GGUF), PEER_ARGS
# (extra llama-bench options, e.g. "-rtr 1 -fa 1" for ik_llama.cpp), CMF
# (default build/cmf), PYTHON (python3, with numpy for gguf-py), THREADS (2),
# PP (512), TG (128), REPS (3), ROUNDS (3),
# PAIRS ("F16:f16 Q8_0:q8 Q4_0:q4").
set -euo pipefail
if [ $# -ne 2 ]; then
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
HF=$1 WORK=$2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CMF=${CMF:-$ROOT/build/cmf}
THREADS=${THREADS:-2} PP=${PP:-512} TG=${TG:-128} REPS=${REPS:-3} ROUNDS=${ROUNDS:-3}
PAIRS=${PAIRS:-F16:f16 Q8_0:q8 Q4_0:q4}
PEER_ARGS=${PEER_ARGS:-}
PYTHON=${PYTHON:-python3}
die() { echo "peer_bench: $*" >&2; exit 1; }
[ -x "$CMF" ] || die "$CMF: no cmf binary (make build, or set CMF)"
[ -n "${LLAMA_BENCH:-}" ] && [ -x "$LLAMA_BENCH" ] || die "set LLAMA_BENCH to the peer's llama-bench"
[ -f "$HF/config.json" ] || die "$HF: no config.json (make one: python3 bench/make_shape.py qwen2.5-0.5b DIR)"
mkdir -p "$WORK"

if [ ! -s "$WORK/F16.gguf" ]; then
    [ -n "${GGUF_PY:-}" ] && [ -d "$GGUF_PY" ] || die "set GGUF_PY to the peer's gguf-py folder to write $WORK/F16.gguf"
    echo "== gguf_shape.py -> $WORK/F16.gguf"
    PYTHONPATH=$GGUF_PY "$PYTHON" "$ROOT/bench/gguf_shape.py" "$HF" "$WORK/F16.gguf" || die "gguf_shape.py failed"
fi
for pair in $PAIRS; do
    g=${pair%%:*} q=${pair##*:}
    if [ "$g" != F16 ] && [ ! -s "$WORK/$g.gguf" ]; then
        [ -n "${LLAMA_QUANTIZE:-}" ] && [ -x "$LLAMA_QUANTIZE" ] || die "set LLAMA_QUANTIZE to the peer's llama-quantize"
        echo "== llama-quantize $g"
        "$LLAMA_QUANTIZE" "$WORK/F16.gguf" "$WORK/$g.gguf" "$g" >"$WORK/$g.quantize.log" 2>&1 ||
            die "llama-quantize $g failed (see $WORK/$g.quantize.log)"
    fi
    if [ ! -s "$WORK/$q.cmf" ]; then
        echo "== cmf convert --quant $q"
        "$CMF" convert --model "$HF" --output "$WORK/$q.cmf" --quant "$q" --quiet || die "convert --quant $q failed"
    fi
done

log=$WORK/rounds.tsv
: >"$log"
for r in $(seq 1 "$ROUNDS"); do
    for pair in $PAIRS; do
        g=${pair%%:*} q=${pair##*:}
        # shellcheck disable=SC2086
        pj=$("$LLAMA_BENCH" -m "$WORK/$g.gguf" -p "$PP" -n "$TG" -t "$THREADS" -r "$REPS" $PEER_ARGS -o json 2>/dev/null) ||
            die "llama-bench failed on $g"
        cj=$("$CMF" bench "$WORK/$q.cmf" -p "$PP" -n "$TG" -t "$THREADS" -r "$REPS" --json) || die "cmf bench failed on $q"
        python3 - "$pj" "$cj" "$r" "$g" "$q" >>"$log" <<'EOF' || die "cannot read the benchmarks' JSON"
import json, sys
peer, ours, r, g, q = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
def pick(recs, pp):
    for x in recs:
        if (x["n_prompt"] > 0) == pp and (x["n_gen"] > 0) != pp:
            return x["avg_ts"]
    sys.exit("peer_bench: no %s record" % ("pp" if pp else "tg"))
print("\t".join([r, g, q] + ["%.2f" % v for v in (pick(peer, True), pick(ours, True), pick(peer, False), pick(ours, False))]))
EOF
        tail -1 "$log" | awk -F'\t' '{printf "round %s %s/%s: pp peer %s cmf %s | tg peer %s cmf %s\n", $1, $2, $3, $4, $5, $6, $7}'
    done
done

echo
echo "== $(basename "$HF"), $THREADS threads, pp$PP / tg$TG tokens/s, median of $ROUNDS alternating rounds (each the mean of $REPS)"
echo "== peer: $LLAMA_BENCH $PEER_ARGS"
python3 - "$log" "$PP" "$TG" <<'EOF'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
pp, tg = sys.argv[2], sys.argv[3]
print("| peer / cmf weights | peer pp%s | cmf pp%s | ratio | peer tg%s | cmf tg%s | ratio |" % (pp, pp, tg, tg))
print("|---|---|---|---|---|---|---|")
for key in dict.fromkeys((r[1], r[2]) for r in rows):
    sel = [r for r in rows if (r[1], r[2]) == key]
    m = [statistics.median(float(r[i]) for r in sel) for i in (3, 4, 5, 6)]
    print("| %s / %s | %.1f | %.1f | %.2fx | %.2f | %.2f | %.2fx |" % (key[0], key[1], m[0], m[1], m[1] / m[0], m[2], m[3], m[3] / m[2]))
EOF
