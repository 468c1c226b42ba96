#!/usr/bin/env bash
# serve_page.sh — the chat page of `cmf serve` (GET /) in Debian's
# chromium driven headless by playwright-core (tests/server/page.mjs):
# key prompt, models and skills, a streamed reply, skill auto with its
# scores, the live panel. The screenshot is kept as
# $CMF_BUILD_DIR/artifacts/serve_page.png.
set -u
. "${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}/tests/cli/lib/serve.sh" # BIN, SRC, T, fail(), the server helpers
serve_need_node
[ -f "$SRC/tests/server/node_modules/playwright-core/package.json" ] ||
    { echo "SKIP: playwright-core missing: run 'npm ci --prefix tests/server' (.ci/run does)"; exit 77; }
[ -x "${CMF_CHROMIUM:-/usr/bin/chromium}" ] || { echo "SKIP: no chromium (Debian package chromium; .ci/run installs it)"; exit 77; }
serve_model bf16
serve_skill_model
serve_start "$T/shk.cmf" "$T/skills.cmf" --name shk --name shk-skills --api-key page-key --quiet
mkdir -p "$CMF_BUILD_DIR/artifacts"
node "$SRC/tests/server/page.mjs" "$URL" page-key "$CMF_BUILD_DIR/artifacts/serve_page.png" ||
    fail "page.mjs (log: $(tail -5 "$T/serve.log"))"
[ -s "$CMF_BUILD_DIR/artifacts/serve_page.png" ] || fail "no screenshot"
serve_stop
[ $fails -eq 0 ] && echo "serve_page: all passed"
exit $((fails > 0))
