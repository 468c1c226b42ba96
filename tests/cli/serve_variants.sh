#!/usr/bin/env bash
# serve_variants.sh — per-request task masks and LoRA sets in `cmf serve`.
# The llama fixture with a masks section (test_engine_taskmask --write, as
# serve_task.sh) and a LoRA adapter (lib/lora.sh: layer 0's q_proj, layer
# 2's q_proj and down_proj, scale 4; "cut" gates layer 1 whole), served with
# `--lora AD --variants 2`: a greedy completion asking for each of the
# four combinations (none named: the server's own, every --lora; lora [];
# task cut; task cut with lora []) equals `cmf run` with the same flags,
# the four differ from one another, and a third combination beyond the two
# variants takes the place of the least recently used idle one (asked
# again, in another order, they still answer the same). While eight
# streams hold the one variant of a `--variants 1 --parallel 1` server
# busy, another combination is a 429 naming 'task'; after them it is
# served. Unknown tasks and adapters
# are 400s naming the field; with --variants 0 another combination is a 400.
set -u
FIX=${CMF_FIXTURES:-}
GEN=${CMF_BUILD_DIR:?CMF_BUILD_DIR not set}/test_engine_taskmask
[ -n "$FIX" ] && [ -f "$FIX/hf-models/llama/config.json" ] || { echo "SKIP: hf-models fixtures absent"; exit 77; }
[ -x "$GEN" ] || { echo "SKIP: $GEN not built"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 needed to write the adapter"; exit 77; }
. "${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}/tests/cli/lib/serve.sh" # BIN, SRC, T, fail(), the server helpers
serve_need_node
. "$SRC/tests/cli/lib/lora.sh" # write_adapter
"$BIN" convert --quiet --quant f32 --model "$FIX/hf-models/llama" --output "$T/src.cmf" >"$T/log" 2>&1 ||
    { echo "FAIL: convert: $(cat "$T/log")"; exit 1; }
"$GEN" --write "$T/src.cmf" "$T/masked.cmf" "$T/zeroed.cmf" >"$T/log" 2>&1 ||
    { echo "FAIL: writing the masked file: $(cat "$T/log")"; exit 1; }
write_adapter "$T/ad" model.layers.0.self_attn.q_proj:96:96 model.layers.2.mlp.down_proj:96:128 \
    model.layers.2.self_attn.q_proj:96:96 ||
    { echo "FAIL: writing the adapter"; exit 1; }
AD=$T/ad/adapter_model.safetensors:4 # at scale 4, so that it changes the greedy tokens
IDS=26,147,292,286,233,112,54,301,7,88,190,240
run() { "$BIN" run "$T/masked.cmf" "$@" --tokens "$IDS" --greedy --ids -n 12 --quiet 2>"$T/err" | tr -d '[] '; }
lora=$(run --lora "$AD") || fail "run --lora: $(cat "$T/err")"
plain=$(run) || fail "run: $(cat "$T/err")"
cut=$(run --task cut) || fail "run --task cut: $(cat "$T/err")"
cutlora=$(run --task cut --lora "$AD") || fail "run --task cut --lora: $(cat "$T/err")"
[ "$(printf '%s\n' "$lora" "$plain" "$cut" "$cutlora" | grep . | sort -u | wc -l)" = 4 ] ||
    fail "the four combinations do not all differ here: $lora / $plain / $cut / $cutlora"

# req FIELDS_JSON WANT_IDS: the status, and whether the completion is the text of WANT_IDS
req() {
    node -e "
const [url, extra, want] = process.argv.slice(1);
const body = Object.assign({ prompt: '$IDS'.split(',').map(Number), max_tokens: 12, temperature: 0 }, JSON.parse(extra));
fetch(url + '/v1/completions', { method: 'POST', body: JSON.stringify(body) }).then(async (r) => {
  const j = await r.json();
  if (r.status !== 200) { console.log(r.status + ' ' + (j.error && j.error.param)); return; }
  const d = await (await fetch(url + '/detokenize', { method: 'POST', body: JSON.stringify({ tokens: want.split(',').map(Number) }) })).json();
  console.log('200 ' + (j.choices[0].text === d.prompt ? 'same' : 'differs: ' + JSON.stringify([j.choices[0].text, d.prompt])));
});" "$URL" "$1" "$2"
}
expect() { # expect FIELDS WANT_IDS RESULT WHAT
    local got
    got=$(req "$1" "$2")
    [ "$got" = "$3" ] || fail "$4: $got (want $3)"
}

serve_start "$T/masked.cmf" --lora "$AD" --variants 2 --quiet
expect '{}' "$lora" "200 same" "no task or lora named: the server's own (every --lora)"
expect '{"lora": []}' "$plain" "200 same" "lora []"
expect '{"task": "cut"}' "$cutlora" "200 same" "task cut with the server's adapter"
expect '{"task": "cut", "lora": []}' "$cut" "200 same" "task cut, lora [] (a third combination: one idle variant freed)"
expect '{"lora": ["adapter_model.safetensors"]}' "$lora" "200 same" "lora named by file name (the server's own set)"
expect '{"task": "", "lora": []}' "$plain" "200 same" "task \"\" and lora [] again"
expect '{"task": "cut"}' "$cutlora" "200 same" "task cut again"
expect '{"task": "nope"}' "$plain" "400 task" "an unknown task"
expect '{"lora": "other.safetensors"}' "$plain" "400 lora" "an adapter the server was not started with"
expect '{"lora": 5}' "$plain" "400 lora" "lora of the wrong type"
serve_stop

# one variant, held busy by eight streams: another combination is a 429, then served once they end
serve_start "$T/masked.cmf" --variants 1 --parallel 1 --quiet
got=$(node -e "
const url = process.argv[1];
const body = (extra) => JSON.stringify(Object.assign({ prompt: '$IDS'.split(',').map(Number), max_tokens: 200,
  temperature: 0, ignore_eos: true }, extra));
(async () => {
  const streams = [];
  for (let i = 0; i < 8; i++)
    streams.push(await fetch(url + '/v1/completions', { method: 'POST', body: body({ task: 'cut', stream: true }) }));
  const busy = await fetch(url + '/v1/completions', { method: 'POST', body: body({ task: 'full' }) });
  const bj = await busy.json();
  const texts = await Promise.all(streams.map((r) => r.text()));
  const done = texts.every((t) => t.includes('data: [DONE]'));
  const after = await fetch(url + '/v1/completions', { method: 'POST', body: body({ task: 'full', max_tokens: 4 }) });
  console.log(busy.status + ' ' + (bj.error && bj.error.param) + ' ' + done + ' ' + after.status);
})();" "$URL")
[ "$got" = "429 task true 200" ] || fail "a combination while the one variant is busy: $got (want 429 on task, then 200)"
serve_stop

serve_start "$T/masked.cmf" --variants 0 --quiet
expect '{"task": "cut"}' "$cut" "400 task" "--variants 0: another task"
expect '{}' "$plain" "200 same" "--variants 0: the server's own"
serve_stop
[ $fails -eq 0 ] && echo "serve_variants: all passed"
exit $((fails > 0))
