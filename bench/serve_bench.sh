#!/usr/bin/env bash
# serve_bench.sh MODEL.cmf [PEER.gguf] — the serving workload in one
# sitting: for each P in PARALLEL ("1 4 16 64"), P requests of PROMPT
# tokens (256) each generating GEN (128) through `cmf bench --requests P
# --parallel P`, and, when LLAMA_BATCHED_BENCH (a llama.cpp / ik_llama.cpp
# llama-batched-bench) and PEER.gguf are given, the peer on the same shape
# (-npp PROMPT -ntg GEN -npl P) right after, ROUNDS (1) times. cmf's line
# gives generated and prompt tokens/s over the wall time of the whole
# workload (their sum is comparable to the peer's S column), TTFT and
# inter-token latency. Also `cmf bench -p 0 -n GEN --seqs P -c GEN+64`
# (decode of P sequences together: the peer's S_TG; a context of its own,
# as the model's 32k for 64 sequences would not fit the memory). Environment: CMF (build/cmf),
# THREADS (2), LLAMA_ARGS (extra peer options). The peer's table is read
# from its stdout and stderr together (ik_llama.cpp logs it to stderr).
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
MODEL=$1 PEER=${2:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CMF=${CMF:-$ROOT/build/cmf}
PARALLEL=${PARALLEL:-1 4 16 64} PROMPT=${PROMPT:-256} GEN=${GEN:-128} THREADS=${THREADS:-2} ROUNDS=${ROUNDS:-1}
grep -m1 "model name" /proc/cpuinfo || true
for r in $(seq "$ROUNDS"); do
    for p in $PARALLEL; do
        echo "== round $r, $p at once"
        "$CMF" bench "$MODEL" --requests "$p" --parallel "$p" --prompt-min "$PROMPT" --prompt-max "$PROMPT" -n "$GEN" \
            -t "$THREADS" --batch-tokens "${BATCH_TOKENS:-256}" | sed -n 2p
        "$CMF" bench "$MODEL" -p 0 -n "$GEN" --seqs "$p" -c $((GEN + 64)) -r 1 -t "$THREADS" | grep tg
        if [ -n "${LLAMA_BATCHED_BENCH:-}" ] && [ -n "$PEER" ]; then
            "$LLAMA_BATCHED_BENCH" -m "$PEER" -c $(( (PROMPT + GEN) * p + 64 )) -b 2048 -ub 512 -npp "$PROMPT" \
                -ntg "$GEN" -npl "$p" -t "$THREADS" ${LLAMA_ARGS:-} 2>&1 | grep -E "^\|" | tail -1
        fi
    done
done
