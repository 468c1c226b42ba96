#!/usr/bin/env bash
# serve_malformed.sh — `cmf serve` against bad clients
# (tests/server/malformed.mjs: broken JSON, wrong types, invalid UTF-8,
# huge bodies, slowloris, idle and too many connections, unknown model),
# each answered with its error while the server keeps serving; then the
# graceful shutdown (tests/server/shutdown.mjs: SIGTERM with streams in
# flight, each finishes, exit 0).
set -u
. "${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}/tests/cli/lib/serve.sh" # BIN, SRC, T, fail(), the server helpers
serve_need_node
serve_model bf16
serve_start "$T/shk.cmf" --api-key k --max-body 65536 --request-timeout 2 --idle-timeout 3 --max-connections 16 --quiet
node "$SRC/tests/server/malformed.mjs" "$URL" k || fail "malformed.mjs (log: $(tail -5 "$T/serve.log"))"
serve_stop

serve_start "$T/shk.cmf" --api-key k --shutdown-timeout 20 --parallel 4 -t 1
node "$SRC/tests/server/shutdown.mjs" "$URL" k $SERVE_PID || fail "shutdown.mjs (log: $(tail -5 "$T/serve.log"))"
for i in $(seq 1 300); do kill -0 $SERVE_PID 2>/dev/null || break; sleep 0.1; done
kill -0 $SERVE_PID 2>/dev/null && { fail "still running after SIGTERM"; kill -KILL $SERVE_PID; }
wait $SERVE_PID
rc=$?
SERVE_PID=
[ $rc = 0 ] || fail "exit status $rc after SIGTERM"
grep -q "cmf serve: stopped" "$T/serve.log" || fail "no 'stopped' in the log: $(tail -3 "$T/serve.log")"
[ $fails -eq 0 ] && echo "serve_malformed: all passed"
exit $((fails > 0))
