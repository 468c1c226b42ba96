#!/usr/bin/env bash
# tokenize_speed.sh — encode throughput of `cmf tokenize` (not a test).
# Builds ~1 MB of mixed-language text from the fixtures' corpus.json
# (repeated), then times `cmf tokenize SRC --text-file F` for qwen3 and
# gemma3 on a tiny text (= load time), 1 MB and 9 MB: encode throughput is
# 8 MB / (t(9 MB) - t(1 MB)), best of 5 runs each, so load-time jitter
# cancels out. It includes printing the ids. The text repeats, so the BPE
# word cache hits often: real text is slower (see docs/TOKENIZER.md).
# Usage: bench/tokenize_speed.sh [CMF_BIN] [FIXTURES]
set -euo pipefail
BIN="${1:-${CMF_BIN:-build/cmf}}"
FIX="${2:-${CMF_FIXTURES:-../shared/fixtures}}"
[ -x "$BIN" ] || { echo "cmf binary not found: $BIN" >&2; exit 1; }
[ -f "$FIX/tokenizers/corpus.json" ] || { echo "fixtures not found: $FIX" >&2; exit 1; }
python3 - "$BIN" "$FIX/tokenizers" <<'PY'
import json, os, subprocess, sys, tempfile, time
bin_, root = sys.argv[1], sys.argv[2]
corpus = json.load(open(os.path.join(root, "corpus.json"), encoding="utf-8"))
unit = "\n".join(corpus) + "\n"
text = (unit * (1_000_000 // len(unit.encode()) + 1)).encode()
tmp = tempfile.mkdtemp()
files = {}
for label, data in (("tiny", b"Hello"), ("1MB", text), ("9MB", text * 9)):
    files[label] = os.path.join(tmp, label + ".txt")
    open(files[label], "wb").write(data)
def best(args, reps=5):
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        r = subprocess.run([bin_, "tokenize"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        t.append(time.perf_counter() - t0)
        if r.returncode: sys.exit(r.stderr.decode())
    return min(t), r.stdout
print(f"text: {len(text)/1e6:.2f} MB of corpus.json repeated (and 9x that)")
for name in ("qwen3", "gemma3"):
    src = os.path.join(root, name)
    t_tiny, _ = best([src, "--text-file", files["tiny"]])
    t_1, out = best([src, "--text-file", files["1MB"]])
    t_9, _ = best([src, "--text-file", files["9MB"]])
    n_ids = len(json.loads(out))
    enc = max(t_9 - t_1, 1e-9)
    mb = 8 * len(text) / 1e6
    print(f"{name:8s} load (tiny text) {t_tiny*1e3:7.1f} ms | 1 MB {t_1*1e3:7.1f} ms | 9 MB {t_9*1e3:7.1f} ms | "
          f"encode {mb/enc:6.1f} MB/s, {8*n_ids/enc/1e6:.2f} M tokens/s")
PY
