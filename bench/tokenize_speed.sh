#!/usr/bin/env bash
# tokenize_speed.sh — encode throughput of `cmf tokenize` (not a test).
# Builds ~1 MB of mixed-language text from the fixtures' corpus.json
# (repeated), then times `cmf tokenize SRC --text-file F` for qwen3 and
# gemma3. Encode time = time(1 MB) - time(tiny text), so tokenizer loading
# is reported apart. Usage: bench/tokenize_speed.sh [CMF_BIN] [FIXTURES]
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
big, small = os.path.join(tmp, "big.txt"), os.path.join(tmp, "small.txt")
open(big, "wb").write(text)
open(small, "wb").write(b"Hello")
def best(args, reps=5):
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        r = subprocess.run([bin_, "tokenize"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        t.append(time.perf_counter() - t0)
        if r.returncode: sys.exit(r.stderr.decode())
    return min(t), r.stdout
print(f"text: {len(text)/1e6:.2f} MB ({len(text)} bytes) of corpus.json repeated")
for name in ("qwen3", "gemma3"):
    src = os.path.join(root, name)
    t_small, _ = best([src, "--text-file", small])
    t_big, out = best([src, "--text-file", big])
    n_ids = len(json.loads(out))
    enc = max(t_big - t_small, 1e-9)
    print(f"{name:8s} load+run tiny {t_small*1e3:7.1f} ms | 1 MB {t_big*1e3:7.1f} ms | "
          f"encode {len(text)/1e6/enc:6.2f} MB/s, {n_ids/enc/1e6:.2f} M tokens/s ({n_ids} ids)")
PY
