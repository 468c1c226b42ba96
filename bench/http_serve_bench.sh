#!/usr/bin/env bash
# http_serve_bench.sh MODEL.cmf [PEER.gguf] — HTTP serving in one sitting:
# for each N in CLIENTS ("1 8 32"), starts `cmf serve MODEL --parallel N`
# on a free loopback port, waits for /health, runs bench/http_bench.mjs
# with N streaming clients (REQUESTS each: one value for every N, or one
# per CLIENTS entry), stops the server; then, when LLAMA_SERVER (a
# llama.cpp / ik_llama.cpp llama-server) and PEER.gguf are given, the same
# against `llama-server -np N -c CTX*N` (CTX tokens a slot, as cmf's
# --ctx); ROUNDS (1) alternating rounds. One JSON line per run on stdout
# (and appended to OUT when set), with the load average before and after.
# Environment: CMF (build/cmf), NODE (node), THREADS (2), PROMPT (256),
# GEN (128), CTX (512), CMF_ARGS, PEER_ARGS (extra server options).
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
MODEL=$1 PEER=${2:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CMF=${CMF:-$ROOT/build/cmf} NODE=${NODE:-node}
CLIENTS=${CLIENTS:-1 8 32} REQUESTS=${REQUESTS:-1} ROUNDS=${ROUNDS:-1}
PROMPT=${PROMPT:-256} GEN=${GEN:-128} THREADS=${THREADS:-2} CTX=${CTX:-512}
die() { echo "http_serve_bench: $*" >&2; exit 1; }
[ -x "$CMF" ] || die "$CMF: no cmf binary (make, or set CMF)"
[ -f "$MODEL" ] || die "$MODEL: no such file"
if [ -n "$PEER" ]; then
    if [ -z "${LLAMA_SERVER:-}" ] || [ ! -x "$LLAMA_SERVER" ]; then die "set LLAMA_SERVER to the peer's llama-server"; fi
fi
read -r -a clients <<<"$CLIENTS"
read -r -a requests <<<"$REQUESTS"
[ ${#requests[@]} -eq 1 ] || [ ${#requests[@]} -eq ${#clients[@]} ] || die "REQUESTS: one value, or one per CLIENTS entry"
logs=$(mktemp -d)
pid=
stop() {
    if [ -n "$pid" ]; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; fi
}
trap 'stop; rm -rf "$logs"' EXIT
trap 'exit 130' INT TERM
free_port() { "$NODE" -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
wait_health() { # port, log
    for _ in $(seq 600); do
        kill -0 "$pid" 2>/dev/null || { tail -20 "$2" >&2; die "the server exited before it was ready"; }
        [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/health")" = 200 ] && return 0
        sleep 0.5
    done
    die "no /health 200 after 300 s"
}
run_one() { # label, port, clients, requests
    local out
    out=$("$NODE" "$ROOT/bench/http_bench.mjs" --url "http://127.0.0.1:$2" --clients "$3" --requests "$4" \
        --prompt "$PROMPT" --gen "$GEN" --label "$1") || { echo "$out"; die "http_bench failed against $1"; }
    echo "$out"
    [ -z "${OUT:-}" ] || echo "$out" >>"$OUT"
}
grep -m1 "model name" /proc/cpuinfo || true
for r in $(seq "$ROUNDS"); do
    for i in "${!clients[@]}"; do
        n=${clients[$i]} q=${requests[$(( ${#requests[@]} == 1 ? 0 : i ))]}
        echo "== round $r, $n clients x $q requests; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
        port=$(free_port)
        # shellcheck disable=SC2086
        "$CMF" serve "$MODEL" --host 127.0.0.1 --port "$port" --parallel "$n" --ctx "$CTX" -t "$THREADS" \
            ${CMF_ARGS:-} >"$logs/cmf.log" 2>&1 &
        pid=$!
        wait_health "$port" "$logs/cmf.log"
        run_one "cmf r$r n$n" "$port" "$n" "$q"
        stop
        if [ -n "$PEER" ]; then
            port=$(free_port)
            # shellcheck disable=SC2086
            "$LLAMA_SERVER" -m "$PEER" --host 127.0.0.1 --port "$port" -np "$n" -c $(( CTX * n )) -t "$THREADS" \
                ${PEER_ARGS:-} >"$logs/peer.log" 2>&1 &
            pid=$!
            wait_health "$port" "$logs/peer.log"
            run_one "peer r$r n$n" "$port" "$n" "$q"
            stop
        fi
    done
done
