#!/usr/bin/env bash
# tokenize_cli.sh — `cmf tokenize` / `cmf detokenize` against the fixtures'
# reference_encodings.json (HF tokenizers): for every tokenizer, all texts
# through --jsonl (with and without --special) must give the reference ids
# exactly, and detokenize of the reference ids must print `decoded` exactly
# (for a few entries per tokenizer: each run loads the tokenizer again;
# test_text_tokenizer_ref checks the decode of every entry).
# Also checks --pieces, TEXT / --text-file input, errors and --help.
set -u
: "${CMF_BIN:?CMF_BIN not set}"
FIX="${CMF_FIXTURES:-}"
REF="$FIX/tokenizers/reference_encodings.json"
if [ -z "$FIX" ] || [ ! -f "$REF" ]; then
    echo "SKIP: tokenizer fixtures absent (CMF_FIXTURES)"
    exit 77
fi
command -v python3 >/dev/null || { echo "SKIP: python3 absent"; exit 77; }

python3 - "$CMF_BIN" "$FIX/tokenizers" <<'PY'
import json, subprocess, sys, os, tempfile
cmf, root = sys.argv[1], sys.argv[2]
ref = json.load(open(os.path.join(root, "reference_encodings.json"), encoding="utf-8"))
fails = 0

def run(args, inp=None):
    return subprocess.run([cmf] + args, input=inp, capture_output=True)

for name, entries in sorted(ref.items()):
    src = os.path.join(root, name)
    lines = "".join(json.dumps(e["text"]) + "\n" for e in entries).encode()
    ok = {"ids": 0, "ids_special": 0, "decoded": 0}
    # newlines, emoji + ZWJ, special token text, trailing newline
    dec_idx = [i for i, e in enumerate(entries) if i in (2, 13, 16) or e["text"].endswith("\n")]
    for key, extra in (("ids", []), ("ids_special", ["--special"])):
        r = run(["tokenize", src, "--jsonl", "-"] + extra, lines)
        if r.returncode != 0:
            print(f"FAIL {name} tokenize {key}: rc {r.returncode}: {r.stderr.decode()}")
            fails += 1
            continue
        got = r.stdout.decode().splitlines()
        for e, g in zip(entries, got):
            if json.loads(g) == e[key]:
                ok[key] += 1
            elif ok[key] >= 0:
                print(f"FAIL {name} {key} {e['text']!r}: want {e[key]} got {g}")
        if len(got) != len(entries):
            print(f"FAIL {name} {key}: {len(got)} lines for {len(entries)} texts")
    for e in (entries[i] for i in dec_idx):
        r = run(["detokenize", src, "--ids", ",".join(map(str, e["ids"]))])
        if r.returncode == 0 and r.stdout == e["decoded"].encode():
            ok["decoded"] += 1
        else:
            print(f"FAIL {name} detokenize {e['ids']}: want {e['decoded']!r} got {r.stdout!r} {r.stderr.decode()}")
    n, nd = len(entries), len(dec_idx)
    print(f"{name}: ids {ok['ids']}/{n} ids_special {ok['ids_special']}/{n} detokenize {ok['decoded']}/{nd}")
    fails += (n - ok["ids"]) + (n - ok["ids_special"]) + (nd - ok["decoded"])

# One text as an argument, via --text-file, --pieces, and a tokenizer.json path.
e = ref["qwen3"][0]
r = run(["tokenize", os.path.join(root, "qwen3", "tokenizer.json"), e["text"]])
if r.returncode != 0 or json.loads(r.stdout) != e["ids"]:
    print("FAIL qwen3 TEXT argument:", r.stdout, r.stderr); fails += 1
with tempfile.NamedTemporaryFile("wb", delete=False) as f:
    f.write(ref["llama3"][2]["text"].encode()); tf = f.name
r = run(["tokenize", os.path.join(root, "llama3"), "--text-file", tf])
os.unlink(tf)
if r.returncode != 0 or json.loads(r.stdout) != ref["llama3"][2]["ids"]:
    print("FAIL llama3 --text-file:", r.stdout, r.stderr); fails += 1
r = run(["tokenize", os.path.join(root, "llama2"), "Hello", "--special", "--pieces"])
if r.returncode != 0 or json.loads(r.stdout) != ["<s>", "\u2581Hello"]:
    print("FAIL llama2 --pieces:", r.stdout, r.stderr); fails += 1
# skip-special drops the BOS.
ids = ref["gemma3"][0]["ids_special"]
r = run(["detokenize", os.path.join(root, "gemma3"), "--ids", ",".join(map(str, ids)), "--skip-special"])
if r.returncode != 0 or r.stdout != ref["gemma3"][0]["text"].encode():
    print("FAIL gemma3 --skip-special:", r.stdout, r.stderr); fails += 1
# Errors: a missing file, a bad id list, a corrupt tokenizer.json.
r = run(["tokenize", "/nonexistent/tokenizer.json", "x"])
if r.returncode == 0 or not r.stderr: print("FAIL missing SRC accepted"); fails += 1
r = run(["detokenize", os.path.join(root, "qwen3"), "--ids", "1,x"])
if r.returncode == 0: print("FAIL bad --ids accepted"); fails += 1
with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
    f.write('{"model": {"type": "BPE", "vocab": {}, "merges": []}, "pre_tokenizer": {"type": "Foo"}}'); bad = f.name
r = run(["tokenize", bad, "x"])
os.unlink(bad)
if r.returncode == 0 or b"pre_tokenizer.type: unknown 'Foo'" not in r.stderr:
    print("FAIL unknown component:", r.stderr); fails += 1
# A folder whose tokenizer_config.json chat_template is not a string (nor a
# list of named templates): an error naming the file and field.
d = tempfile.mkdtemp()
import shutil
shutil.copy(os.path.join(root, "qwen3", "tokenizer.json"), d)
open(os.path.join(d, "tokenizer_config.json"), "w").write('{"chat_template": 5}')
r = run(["template", d, "--messages", "-"], b'[{"role": "user", "content": "hi"}]')
shutil.rmtree(d)
if r.returncode == 0 or b"tokenizer_config.json: field 'chat_template': expected a string" not in r.stderr:
    print("FAIL non-string chat_template:", r.returncode, r.stderr); fails += 1
for c in ("tokenize", "detokenize"):
    r = run([c, "--help"])
    if r.returncode != 0 or b"usage: cmf " + c.encode() not in r.stdout:
        print("FAIL", c, "--help"); fails += 1
# A .cmf as SRC: its vocab section must tokenize like the folder it came
# from (needs `cmf convert`; noted and skipped when that fails).
hf = os.path.join(os.path.dirname(root), "hf-models", "llama")
if os.path.isdir(hf):
    d = tempfile.mkdtemp()
    out = os.path.join(d, "m.cmf")
    r = run(["convert", "--model", hf, "--output", out, "--quant", "f32"])
    if r.returncode != 0:
        print("note: cmf convert failed, .cmf SRC not checked:", r.stderr.decode()[:200])
    else:
        t = "Hello, world! <|im_end|> \u00e9t\u00e9"
        a, b = run(["tokenize", out, t, "--special"]), run(["tokenize", hf, t, "--special"])
        if a.returncode != 0 or a.stdout != b.stdout:
            print("FAIL .cmf SRC:", a.stdout, b.stdout, a.stderr); fails += 1
        ids = json.loads(b.stdout)
        a = run(["detokenize", out, "--ids", ",".join(map(str, ids))])
        b = run(["detokenize", hf, "--ids", ",".join(map(str, ids))])
        if a.returncode != 0 or a.stdout != b.stdout:
            print("FAIL .cmf detokenize:", a.stdout, b.stdout, a.stderr); fails += 1
        os.unlink(out)
    os.rmdir(d)
print("failures:", fails)
sys.exit(1 if fails else 0)
PY
