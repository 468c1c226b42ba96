#!/usr/bin/env bash
# serve_contract.sh — `cmf serve` on the demo model (bf16) driven by the
# official openai npm client (tests/server/contract.mjs): chat, completion,
# streaming with usage, logprobs, seeds, stops, prefix reuse, errors and
# keys (one from --api-key, one from --api-key-file, one from
# CMF_API_KEY), two models in one process, the second with two skills
# (by id and auto, the choice and scores reported); then SIGTERM must
# stop it with exit status 0.
set -u
. "${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}/tests/cli/lib/serve.sh" # BIN, SRC, T, fail(), the server helpers
serve_need_node
serve_model bf16
serve_skill_model
printf '# keys\n\n  second-key-from-file  \n' >"$T/keys"
export CMF_API_KEY=env-key
serve_start "$T/shk.cmf" "$T/skills.cmf" --name shk --name shk-skills --api-key first-key --api-key-file "$T/keys" --quiet
unset CMF_API_KEY
SECOND_KEY=second-key-from-file node "$SRC/tests/server/contract.mjs" "$URL" first-key "$SRC/models/shakespeare/ref.json" ||
    fail "contract.mjs (log: $(tail -5 "$T/serve.log"))"
# the environment's key works too
code=$(node -e "fetch('$URL/v1/models',{headers:{Authorization:'Bearer env-key'}}).then(r=>console.log(r.status))")
[ "$code" = 200 ] || fail "CMF_API_KEY key: status $code"
serve_stop
# a non-loopback bind without a key is refused; with --insecure-no-auth it warns
"$BIN" serve "$T/shk.cmf" --host 0.0.0.0 --port 0 >"$T/open.log" 2>&1 && fail "0.0.0.0 without a key started"
grep -q "insecure-no-auth" "$T/open.log" || fail "0.0.0.0 without a key: $(cat "$T/open.log")"
[ $fails -eq 0 ] && echo "serve_contract: all passed"
exit $((fails > 0))
