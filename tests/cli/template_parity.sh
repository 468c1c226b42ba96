#!/usr/bin/env bash
# template_parity.sh — `cmf template` against transformers: every entry of
# reference_chat_renders.json rendered through the CLI (tokenizer folders,
# and the stand-alone templates via --template with the llama3 folder's
# bos/eos) must equal the reference byte for byte, and raise where it
# raised; a converted .cmf renders through its chat bundle the same as its
# source folder; bad input fails with a message.
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
FIX=${CMF_FIXTURES:-}
[ -n "$FIX" ] && [ -d "$FIX/tokenizers" ] || { echo "SKIP: fixtures absent (CMF_FIXTURES)"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 needed to split the reference JSON"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# One directory per case: conv.json (messages/tools/kwargs), want (bytes) or raises, src, tpl
python3 - "$FIX/tokenizers" "$T" <<'PY'
import json, os, sys
fx, out = sys.argv[1], sys.argv[2]
refs = json.load(open(os.path.join(fx, "reference_chat_renders.json")))
convs = {c["id"]: c for c in json.load(open(os.path.join(fx, "conversations.json")))}
n = 0
for key, cases in refs.items():
    for ref in cases:
        d = os.path.join(out, "case%03d" % n); n += 1
        os.makedirs(d)
        json.dump(convs[ref["id"]], open(os.path.join(d, "conv.json"), "w"), ensure_ascii=False)
        if key.startswith("jinja:"):
            src, tpl = os.path.join(fx, "llama3"), os.path.join(fx, key[6:])
        else:
            src, tpl = os.path.join(fx, key), ""
        open(os.path.join(d, "src"), "w").write(src)
        open(os.path.join(d, "tpl"), "w").write(tpl)
        open(os.path.join(d, "label"), "w").write(key + "/" + ref["id"])
        if "render" in ref:
            open(os.path.join(d, "want"), "wb").write(ref["render"].encode())
        else:
            open(os.path.join(d, "raises"), "w").write(ref.get("error", ""))
PY
total=0 pass=0
for d in "$T"/case*; do
    total=$((total + 1))
    src=$(cat "$d/src") tpl=$(cat "$d/tpl") label=$(cat "$d/label")
    args=("$src" --messages "$d/conv.json")
    [ -n "$tpl" ] && args+=(--template "$tpl")
    if "$BIN" template "${args[@]}" >"$d/got" 2>"$d/err"; then
        if [ -f "$d/want" ]; then
            if cmp -s "$d/got" "$d/want"; then pass=$((pass + 1)); else fail "$label: render differs: $(cmp "$d/got" "$d/want")"; fi
        else
            fail "$label: rendered, but transformers raised $(cat "$d/raises")"
        fi
    else
        if [ -f "$d/raises" ]; then pass=$((pass + 1)); else fail "$label: $(cat "$d/err")"; fi
    fi
done
echo "reference_chat_renders.json through cmf template: $pass/$total identical"

# A .cmf carries the template in its chat bundle: same render as the folder.
M=$FIX/hf-models/qwen3
if [ -d "$M" ]; then
    if "$BIN" convert --model "$M" --output "$T/m.cmf" --quant q8 --quiet >"$T/log" 2>&1; then
        c=$T/case000/conv.json
        "$BIN" template "$T/m.cmf" --messages "$c" >"$T/a" 2>"$T/err" || fail "template on .cmf: $(cat "$T/err")"
        "$BIN" template "$M" --messages "$c" >"$T/b" 2>"$T/err" || fail "template on folder: $(cat "$T/err")"
        cmp -s "$T/a" "$T/b" || fail ".cmf render differs from the folder's"
        [ -s "$T/a" ] || fail ".cmf render is empty"
    else
        echo "note: cmf convert failed, .cmf check skipped: $(head -c 300 "$T/log")"
    fi
fi

# A bare tokenizer.json has no template: the ChatML fallback (spec §6.1).
printf '[{"role": "user", "content": "hi"}]' >"$T/m.json"
"$BIN" template "$FIX/tokenizers/llama3/tokenizer.json" --messages "$T/m.json" --gen >"$T/out" 2>"$T/err" \
    || fail "tokenizer.json SRC: $(cat "$T/err")"
printf '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n' | cmp -s - "$T/out" || fail "ChatML fallback: $(cat "$T/out")"
# In a folder, chat_template.jinja wins over tokenizer_config.json (as in
# transformers); {"content": ...} token objects are read.
mkdir "$T/dir"
cp "$FIX/tokenizers/deepseek_v3/tokenizer.json" "$FIX/tokenizers/deepseek_v3/tokenizer_config.json" "$T/dir/"
printf '{{ bos_token }}|{{ eos_token }}|{{ messages[0].content }}\n' >"$T/dir/chat_template.jinja"
"$BIN" template "$T/dir" --messages "$T/m.json" >"$T/out" 2>"$T/err" || fail "folder SRC: $(cat "$T/err")"
printf '<\xef\xbd\x9cbegin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>|<\xef\xbd\x9cend\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>|hi' \
    | cmp -s - "$T/out" || fail "chat_template.jinja precedence / token objects: $(cat "$T/out")"

# Errors: missing file, bad JSON, a template syntax error with line/column.
"$BIN" template "$T/nonexistent" --messages "$T/case000/conv.json" >/dev/null 2>"$T/err" && fail "missing SRC accepted"
grep -q "nonexistent" "$T/err" || fail "missing SRC message: $(cat "$T/err")"
echo '[{"role": "user"' >"$T/bad.json"
"$BIN" template "$FIX/tokenizers/qwen3" --messages "$T/bad.json" >/dev/null 2>"$T/err" && fail "bad JSON accepted"
grep -q "bad.json" "$T/err" || fail "bad JSON message: $(cat "$T/err")"
printf 'ok\n{%% for m in messages %%}\n{{ m.content + }}\n{%% endfor %%}' >"$T/bad.jinja"
"$BIN" template "$FIX/tokenizers/qwen3" --messages "$T/case000/conv.json" --template "$T/bad.jinja" >/dev/null 2>"$T/err" \
    && fail "bad template accepted"
grep -q "line 3 column" "$T/err" || fail "template error lacks line/column: $(cat "$T/err")"
"$BIN" template >/dev/null 2>&1 && fail "no arguments accepted"

[ "$fails" = 0 ] && [ "$pass" = "$total" ] && [ "$total" -gt 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "template_parity: ok"
