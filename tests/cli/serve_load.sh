#!/usr/bin/env bash
# serve_load.sh — `cmf serve` under load (tests/server/load.mjs): 32
# concurrent streaming clients x 4 requests on the demo model (bf16; see docs/SERVING.md for q8), each
# stream byte-identical to the request served alone, the metrics counting
# what was sent, disconnecting clients leaving KV usage at its baseline;
# then SIGTERM: exit 0.
set -u
. "${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}/tests/cli/lib/serve.sh" # BIN, SRC, T, fail(), the server helpers
serve_need_node
serve_model bf16
serve_start "$T/shk.cmf" --api-key k --parallel 8 --queue 256 --quiet
node "$SRC/tests/server/load.mjs" "$URL" k || fail "load.mjs (log: $(tail -5 "$T/serve.log"))"
serve_stop
[ $fails -eq 0 ] && echo "serve_load: all passed"
exit $((fails > 0))
