#!/usr/bin/env bash
# engine_cli.sh — the generation commands end to end on converted fixtures:
# run (raw completion, template one-shot fed the rendered template,
# --tokens --ids, stop strings, footer), chat on stdin, logits output size,
# bench --json fields, ppl (recomputed from cmf logits), and argument
# errors (exit status and message, never a crash).
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
FIX=${CMF_FIXTURES:-}
[ -n "$FIX" ] && [ -d "$FIX/shakespeare" ] && [ -d "$FIX/hf-models/llama" ] || { echo "SKIP: fixtures absent (CMF_FIXTURES)"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
has() { grep -q -- "$2" "$1" || fail "$3: $(basename "$1") lacks '$2': $(head -c 400 "$1")"; }

# bf16: the greedy texts and ids below are transformers' own; the q8 / q4
# CPU kernels quantize activations to int8 and flip this tiny model's near-ties
"$BIN" convert --model "$FIX/shakespeare" --output "$T/shk.cmf" --quant bf16 --quiet || fail "convert shakespeare"
"$BIN" convert --model "$FIX/hf-models/llama" --output "$T/llama.cmf" --quant q8 --quiet || fail "convert llama"

for c in run chat logits bench ppl; do
    "$BIN" $c --help >"$T/h" 2>&1 || fail "$c --help exit"
    has "$T/h" "usage: cmf $c" "$c --help"
done

# raw completion (no template): prompt echoed, greedy continuation of ref.json
"$BIN" run "$T/shk.cmf" --prompt $'ROMEO:\n' -n 12 --greedy >"$T/o" 2>"$T/e" || fail "run raw: $(cat "$T/e")"
has "$T/o" "ROMEO:" "raw run"
has "$T/o" "I'll be my back" "raw run greedy text"
has "$T/e" "finish: length" "footer"
has "$T/e" "tok/s" "footer"
# stop string: not printed, finish stop
"$BIN" run "$T/shk.cmf" --prompt $'ROMEO:\n' -n 40 --greedy --stop "back" >"$T/o" 2>"$T/e" || fail "run stop"
has "$T/e" "finish: stop" "stop footer"
grep -q "back" "$T/o" && fail "stop string printed"
# ids
"$BIN" run "$T/shk.cmf" --tokens 814,26,199 -n 3 --greedy --ids --quiet >"$T/o" 2>"$T/e" || fail "run --ids"
[ "$(cat "$T/o")" = "[41, 458, 305]" ] || fail "--ids output: $(cat "$T/o")"
# --logprobs: one JSON line per token; each logprob and top-3 equals the
# log-softmax of `cmf logits` at that position (same weights; prefill vs
# decode differ by float reassociation, ~1e-6 relative in the logits, so
# 1e-3 absolute on a log-probability is loose and still catches a wrong
# normalisation, a penalty/temperature leak or an off-by-one position).
if command -v python3 >/dev/null; then
    "$BIN" run "$T/shk.cmf" --tokens 814,26,199 -n 3 --greedy --logprobs 3 --quiet >"$T/lp" 2>"$T/e" || fail "run --logprobs: $(cat "$T/e")"
    "$BIN" logits "$T/shk.cmf" --tokens 814,26,199,41,458 --out "$T/lg.f32" 2>"$T/e" || fail "logits for --logprobs"
    python3 - "$T/lp" "$T/lg.f32" <<'PY' || fail "--logprobs disagrees with cmf logits"
import json, math, struct, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
raw = open(sys.argv[2], "rb").read()
v = len(raw) // 4 // 5
rows = [struct.unpack_from("<%df" % v, raw, 4 * v * r) for r in range(5)]
assert [r["id"] for r in recs] == [41, 458, 305], recs
for k, r in enumerate(recs):
    row = rows[2 + k]
    m = max(row)
    lse = m + math.log(sum(math.exp(x - m) for x in row))
    want = sorted(range(v), key=lambda i: -row[i])[:3]
    assert [t[0] for t in r["top"]] == want, (k, r["top"], want)
    for i, lp in r["top"]:
        assert abs(lp - (row[i] - lse)) < 1e-3, (k, i, lp, row[i] - lse)
    assert abs(r["logprob"] - (row[r["id"]] - lse)) < 1e-3 and r["top"][0][1] == r["logprob"]
print("logprobs ok")
PY
fi
# sampled with a seed: reproducible
a=$("$BIN" run "$T/shk.cmf" --prompt "KING" -n 16 --seed 5 --temp 0.9 --top-k 20 --quiet 2>/dev/null)
b=$("$BIN" run "$T/shk.cmf" --prompt "KING" -n 16 --seed 5 --temp 0.9 --top-k 20 --quiet 2>/dev/null)
[ -n "$a" ] && [ "$a" = "$b" ] || fail "seeded sampling not reproducible"
# template model: one shot and chat on stdin
"$BIN" run "$T/llama.cmf" --prompt "hi" --system "be brief" -n 5 --seed 1 >"$T/o" 2>"$T/e" || fail "run template: $(cat "$T/e")"
has "$T/e" "generated" "template footer"
# what the one shot fed the model is the file's template rendered: its
# prompt is the tokenized `cmf template` output, and greedy generation from
# it equals greedy generation from those ids given directly
printf '[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]' >"$T/m.json"
"$BIN" template "$T/llama.cmf" --messages "$T/m.json" --gen >"$T/rendered" 2>"$T/e" || fail "template: $(cat "$T/e")"
has "$T/rendered" "be brief" "rendered template"
ids=$("$BIN" tokenize "$T/llama.cmf" --text-file "$T/rendered" | tr -d '[] ')
n_ids=$(tr ',' '\n' <<<"$ids" | grep -c .)
"$BIN" run "$T/llama.cmf" --prompt "hi" --system "be brief" -n 6 --greedy --ids >"$T/a" 2>"$T/e" || fail "run template --ids: $(cat "$T/e")"
has "$T/e" "prompt $n_ids tokens" "template prompt length"
"$BIN" run "$T/llama.cmf" --tokens "$ids" -n 6 --greedy --ids >"$T/b" 2>/dev/null || fail "run --tokens (rendered)"
[ -s "$T/a" ] && cmp -s "$T/a" "$T/b" || fail "template run [$(cat "$T/a")] != run on the rendered ids [$(cat "$T/b")]"
printf 'hello\nsecond turn\n' | "$BIN" chat "$T/llama.cmf" -n 4 --greedy >"$T/o" 2>"$T/e" || fail "chat: $(cat "$T/e")"
[ "$(grep -c "finish:" "$T/e")" = 2 ] || fail "chat: expected 2 answers: $(cat "$T/e")"
has "$T/e" "reused" "chat footer"
# logits size
"$BIN" logits "$T/llama.cmf" --tokens 1,2,3,4,5 --out "$T/l.f32" || fail "logits"
[ "$(stat -c %s "$T/l.f32" 2>/dev/null)" = $((5 * 384 * 4)) ] || fail "logits size"
# bench json
"$BIN" bench "$T/shk.cmf" -p 32 -n 8 -r 2 --json >"$T/b.json" 2>"$T/e" || fail "bench: $(cat "$T/e")"
for k in n_prompt n_gen n_threads avg_ts stddev_ts model_size model_type rss_bytes; do has "$T/b.json" "\"$k\"" "bench json"; done
"$BIN" bench "$T/shk.cmf" -p 16 -n 4 -r 1 >"$T/b.txt" 2>&1 || fail "bench text"
has "$T/b.txt" "pp16" "bench table"
has "$T/b.txt" "tg4" "bench table"
has "$T/b.txt" "peak RSS" "bench memory"
# ppl on a short text
head -c 4000 "$FIX/shakespeare/val.txt" >"$T/v.txt"
"$BIN" ppl "$T/shk.cmf" --file "$T/v.txt" --ctx 64 --stride 32 >"$T/o" 2>"$T/e" || fail "ppl: $(cat "$T/e")"
has "$T/o" "ppl " "ppl output"
# the perplexity is exp(mean NLL) of the windows' next-token predictions:
# recomputed from `cmf logits` of each window (4 windows of 64, fresh
# contexts) over the ids `cmf tokenize --special` gives
if command -v python3 >/dev/null; then
    "$BIN" ppl "$T/shk.cmf" --file "$T/v.txt" --ctx 64 --stride 64 --limit 256 --json >"$T/p.json" 2>"$T/e" ||
        fail "ppl --json: $(cat "$T/e")"
    "$BIN" tokenize "$T/shk.cmf" --special --text-file "$T/v.txt" >"$T/ids.json" || fail "tokenize --special"
    python3 - "$BIN" "$T/shk.cmf" "$T/ids.json" "$T/p.json" "$T" <<'PY' || fail "ppl disagrees with cmf logits"
import json, math, struct, subprocess, sys
bin_, model, ids_path, ppl_path, tmp = sys.argv[1:]
ids = json.load(open(ids_path))
got = json.load(open(ppl_path))
assert got["n_predictions"] == 256 and got["n_windows"] == 4, got
nll = 0.0
for w in range(4):
    win = ids[64 * w: 64 * w + 65]
    out = "%s/w%d.f32" % (tmp, w)
    subprocess.run([bin_, "logits", model, "--tokens", ",".join(map(str, win[:64])), "--out", out], check=True)
    raw = open(out, "rb").read()
    v = len(raw) // 4 // 64
    assert v > 0 and len(raw) == 64 * v * 4, len(raw)
    for i in range(64):
        row = struct.unpack_from("<%df" % v, raw, 4 * v * i)
        assert all(math.isfinite(x) for x in row), (w, i)
        m = max(row)
        nll -= row[win[i + 1]] - m - math.log(sum(math.exp(x - m) for x in row))
nll /= 256
assert math.isfinite(got["nll"]) and abs(got["nll"] - nll) < 1e-3 * nll, (got["nll"], nll)
assert abs(got["ppl"] - math.exp(nll)) < 1e-3 * math.exp(nll), (got["ppl"], math.exp(nll))
print("ppl ok: %.4f (recomputed %.4f)" % (got["ppl"], math.exp(nll)))
PY
fi
# errors
"$BIN" run "$T/nope.cmf" --prompt x >"$T/o" 2>"$T/e" && fail "run on a missing file succeeded"
has "$T/e" "nope.cmf" "missing file message"
"$BIN" run "$T/shk.cmf" --tokens 1,x >"$T/o" 2>"$T/e" && fail "bad --tokens accepted"
has "$T/e" "--tokens" "bad tokens message"
"$BIN" run "$T/shk.cmf" --tokens 99999 -n 1 >"$T/o" 2>"$T/e" && fail "out-of-range id accepted"
has "$T/e" "out of range" "range message"
"$BIN" logits "$T/shk.cmf" --tokens 1 >"$T/o" 2>"$T/e" && fail "logits without --out accepted"
"$BIN" run "$T/shk.cmf" --tokens 1 --logprobs 21 >"$T/o" 2>"$T/e" && fail "--logprobs 21 accepted"
has "$T/e" "0..20" "logprobs range message"
"$BIN" run "$T/shk.cmf" --tokens 1 --logprobs 2 --ids >"$T/o" 2>"$T/e" && fail "--logprobs with --ids accepted"
"$BIN" bench "$T/shk.cmf" --frob >"$T/o" 2>"$T/e" && fail "unknown option accepted"
has "$T/e" "unknown option" "unknown option message"
[ $fails -eq 0 ] && echo "engine_cli: all passed"
exit $((fails > 0))
