# lib/serve.sh — what the cmf serve tests share (sourced): skip loudly
# (exit 77) without node or the npm test clients (tests/server, installed
# by `npm ci --prefix tests/server`, as .ci/run does), convert the demo
# model, start a server on a free loopback port and stop it with SIGTERM,
# checking that it exits 0. Sourcing it sets BIN and SRC (from CMF_BIN,
# CMF_SOURCE_DIR), makes the test's folder T (removed at exit, with any
# server still running) and defines fail() (counted in $fails).
BIN=${CMF_BIN:?CMF_BIN not set}
SRC=${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}
T=$(mktemp -d)
SERVE_PID=
trap '[ -n "$SERVE_PID" ] && kill -KILL $SERVE_PID 2>/dev/null; rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

serve_need_node() {
    command -v node >/dev/null || { echo "SKIP: node is not installed (the cmf serve tests drive the server from Node.js)"; exit 77; }
    [ -f "$SRC/tests/server/node_modules/openai/package.json" ] || {
        echo "SKIP: the npm test clients are missing: run 'npm ci --prefix tests/server' (.ci/run does)"
        exit 77
    }
}

# serve_model QUANT: the demo model converted to $T/shk.cmf
serve_model() {
    "$BIN" convert --model "$SRC/models/shakespeare" --output "$T/shk.cmf" --quant "${1:-bf16}" --quiet >"$T/convert.log" 2>&1 ||
        { echo "FAIL: convert the demo model: $(cat "$T/convert.log")"; exit 1; }
}

# serve_skill_model: $T/skills.cmf, the demo model ($T/shk.cmf) with two
# skills, prose and code, from perturbed donors as the skill tests make them
serve_skill_model() {
    local gen=${CMF_BUILD_DIR:?CMF_BUILD_DIR not set}/test_convert_skill s d
    [ -x "$gen" ] || { echo "SKIP: $gen not built (it writes the skill donors)"; exit 77; }
    . "$SRC/tests/cli/lib/skill_prompts.sh"
    skill_prompt_sets "$T"
    skill_donors "$gen" "$SRC/models/shakespeare" "$T" >/dev/null || { echo "FAIL: skill donors"; exit 1; }
    cp "$T/shk.cmf" "$T/skills.cmf"
    for s in prose code; do
        d=donA
        [ $s = code ] && d=donB
        "$BIN" skill add "$T/skills.cmf" --from "$T/$d" --id $s --prompts "$T/$s.txt" -q 2>"$T/err" ||
            { echo "FAIL: skill add $s: $(cat "$T/err")"; exit 1; }
    done
}

# serve_start ARGS...: starts `cmf serve ARGS --port 0`, waits for "ready";
# sets SERVE_PID, PORT, URL. Log in $T/serve.log.
serve_start() {
    # a fresh log before the start: the redirection below truncates it in
    # the child, which may run after the first look for "ready" (a previous
    # server's log would then give its port)
    rm -f "$T/serve.log"
    : >"$T/serve.log"
    "$BIN" serve "$@" --port 0 >"$T/serve.log" 2>&1 &
    SERVE_PID=$!
    local i
    for i in $(seq 1 600); do
        grep -q "cmf serve: ready" "$T/serve.log" 2>/dev/null && break
        kill -0 $SERVE_PID 2>/dev/null || { echo "FAIL: cmf serve exited at start: $(cat "$T/serve.log")"; exit 1; }
        sleep 0.1
    done
    PORT=$(sed -n 's|.*listening on http://[^ ]*:\([0-9][0-9]*\)/.*|\1|p' "$T/serve.log" | head -1)
    [ -n "$PORT" ] && grep -q "cmf serve: ready" "$T/serve.log" ||
        { echo "FAIL: cmf serve did not get ready: $(cat "$T/serve.log")"; kill $SERVE_PID; exit 1; }
    URL=http://127.0.0.1:$PORT
}

# serve_stop: SIGTERM, then the exit status must be 0 within 30 s.
serve_stop() {
    [ -n "${SERVE_PID:-}" ] || return 0
    kill -TERM $SERVE_PID 2>/dev/null
    local i rc=
    for i in $(seq 1 300); do
        kill -0 $SERVE_PID 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 $SERVE_PID 2>/dev/null; then
        fail "cmf serve still running 30 s after SIGTERM"
        kill -KILL $SERVE_PID
    fi
    wait $SERVE_PID
    rc=$?
    [ $rc = 0 ] || fail "cmf serve exited $rc after SIGTERM (log: $(tail -5 "$T/serve.log"))"
    SERVE_PID=
}
