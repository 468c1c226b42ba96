#!/usr/bin/env bash
# serve_tools.sh — function calling on `cmf serve` (tests/server/tools.mjs,
# the official openai client): the demo model converted with a tool-aware
# chat template (tests/server/tools_template.jinja); renders are compared
# with jinja2's (python3-jinja2) and call arguments validated by
# python3-jsonschema.
set -u
. "${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}/tests/cli/lib/serve.sh" # BIN, SRC, T, fail(), the server helpers
serve_need_node
python3 -c 'import jinja2, jsonschema' 2>/dev/null ||
    { echo "SKIP: python3 with jinja2 and jsonschema is needed (the references)"; exit 77; }
cp -r "$SRC/models/shakespeare" "$T/hf"
cp "$SRC/tests/server/tools_template.jinja" "$T/hf/chat_template.jinja"
"$BIN" convert --model "$T/hf" --output "$T/tools.cmf" --quant bf16 --quiet >"$T/convert.log" 2>&1 ||
    { echo "FAIL: convert: $(cat "$T/convert.log")"; exit 1; }
serve_start "$T/tools.cmf" --name shk-tools --api-key k --quiet
node "$SRC/tests/server/tools.mjs" "$URL" k "$SRC/tests/server/tools_template.jinja" ||
    fail "tools.mjs (log: $(tail -5 "$T/serve.log"))"
serve_stop
[ $fails -eq 0 ] && echo "serve_tools: all passed"
exit $((fails > 0))
