#!/usr/bin/env bash
# serve_task.sh — `cmf serve --task NAME`: the task mask runs for every
# request. The llama fixture with a masks section (test_engine_taskmask
# --write, as engine_task.sh): a greedy completion through the server
# equals `cmf run --task cut` and differs from the unmasked run; a request
# naming the server's task is accepted, one naming another task runs that
# one ("full": all ones, the unmasked text; serve_variants.sh has the
# rest), an unknown task is a 400 on 'task'.
set -u
FIX=${CMF_FIXTURES:-}
GEN=${CMF_BUILD_DIR:?CMF_BUILD_DIR not set}/test_engine_taskmask
[ -n "$FIX" ] && [ -f "$FIX/hf-models/llama/config.json" ] || { echo "SKIP: hf-models fixtures absent"; exit 77; }
[ -x "$GEN" ] || { echo "SKIP: $GEN not built"; exit 77; }
command -v node >/dev/null || { echo "SKIP: node is not installed"; exit 77; }
. "${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}/tests/cli/lib/serve.sh" # BIN, SRC, T, fail(), the server helpers
"$BIN" convert --quiet --quant f32 --model "$FIX/hf-models/llama" --output "$T/src.cmf" >"$T/log" 2>&1 ||
    { echo "FAIL: convert: $(cat "$T/log")"; exit 1; }
"$GEN" --write "$T/src.cmf" "$T/masked.cmf" "$T/zeroed.cmf" >"$T/log" 2>&1 ||
    { echo "FAIL: writing the masked file: $(cat "$T/log")"; exit 1; }
IDS=26,147,292,286,233,112,54,301,7,88,190,240
run() { "$BIN" run "$T/masked.cmf" "$@" --tokens "$IDS" --greedy --ids -n 12 --quiet 2>"$T/err" | tr -d '[] '; }
cut=$(run --task cut) || fail "run --task cut: $(cat "$T/err")"
plain=$(run) || fail "run: $(cat "$T/err")"
[ -n "$cut" ] && [ "$cut" != "$plain" ] || fail "the task changes nothing here ($cut)"
serve_start "$T/masked.cmf" --task cut --quiet
req() { # req TASK IDS: the status, and whether the completion is the text of IDS
    node -e "
const [url, task, ids] = process.argv.slice(1);
const body = { prompt: ids.split(',').map(Number), max_tokens: 12, temperature: 0 };
if (task) body.task = task;
fetch(url + '/v1/completions', { method: 'POST', body: JSON.stringify(body) }).then(async (r) => {
  const j = await r.json();
  if (r.status !== 200) { console.log(r.status + ' ' + (j.error && j.error.param)); return; }
  const d = await (await fetch(url + '/detokenize', { method: 'POST', body: JSON.stringify({ tokens: process.argv[4].split(',').map(Number) }) })).json();
  console.log('200 ' + (j.choices[0].text === d.prompt ? 'same' : 'differs: ' + JSON.stringify([j.choices[0].text, d.prompt])));
});" "$URL" "$1" "$IDS" "$2"
}
got=$(req "" "$cut")
[ "$got" = "200 same" ] || fail "served with --task cut: $got (want the text of cmf run --task cut)"
got=$(req cut "$cut")
[ "$got" = "200 same" ] || fail "a request naming task cut: $got"
got=$(req full "$plain")
[ "$got" = "200 same" ] || fail "a request naming task full: $got (want the unmasked text)"
got=$(req nope "$cut")
[ "$got" = "400 task" ] || fail "a request naming an unknown task: $got"
echo "serve --task cut: the completion equals cmf run --task cut ($cut)"
serve_stop
"$BIN" serve "$T/masked.cmf" --task nope --port 0 >"$T/bad.log" 2>&1 && fail "--task nope started"
grep -q "nope" "$T/bad.log" || fail "--task nope: $(cat "$T/bad.log")"
[ $fails -eq 0 ] && echo "serve_task: all passed"
exit $((fails > 0))
