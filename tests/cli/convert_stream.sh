#!/usr/bin/env bash
# convert_stream.sh — streaming bound (slow; skipped unless CMF_SLOW_TESTS=1):
# generates a ~2.9 GB bf16 llama checkpoint (20 layers, hidden 2048, inter
# 8192, vocab 32000), converts it to q8 under /usr/bin/time -v and checks the
# peak RSS stays under the documented bound: the largest tensor as f32 plus
# its encoded payload plus its source pages plus 64 MiB of fixed overhead
# (docs/CONVERT.md) — far below the 2.9 GB a whole-model load would need.
set -u
[ "${CMF_SLOW_TESTS:-0}" = 1 ] || { echo "SKIP: set CMF_SLOW_TESTS=1 to run"; exit 77; }
BIN=${CMF_BIN:?CMF_BIN not set}
command -v python3 >/dev/null || { echo "SKIP: python3 needed to generate the checkpoint"; exit 77; }
[ -x /usr/bin/time ] || { echo "SKIP: /usr/bin/time needed"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/cmf-stream.XXXXXX")
trap 'rm -rf "$T"' EXIT
python3 - "$T" <<'PY'
import json, os, struct, random, sys
d = sys.argv[1]
H, I, L, V, NH, KV, HD = 2048, 8192, 20, 32000, 16, 4, 128
cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H,
       "intermediate_size": I, "num_hidden_layers": L, "num_attention_heads": NH,
       "num_key_value_heads": KV, "head_dim": HD, "vocab_size": V, "max_position_embeddings": 4096,
       "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": True,
       "hidden_act": "silu", "eos_token_id": 2}
json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
json.dump({"version": "1.0", "added_tokens": [], "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}},
          open(os.path.join(d, "tokenizer.json"), "w"))
specs = [("model.embed_tokens.weight", [V, H]), ("model.norm.weight", [H])]
for l in range(L):
    p = "model.layers.%d." % l
    specs += [(p + "input_layernorm.weight", [H]), (p + "post_attention_layernorm.weight", [H]),
              (p + "self_attn.q_proj.weight", [NH * HD, H]), (p + "self_attn.k_proj.weight", [KV * HD, H]),
              (p + "self_attn.v_proj.weight", [KV * HD, H]), (p + "self_attn.o_proj.weight", [H, NH * HD]),
              (p + "mlp.gate_proj.weight", [I, H]), (p + "mlp.up_proj.weight", [I, H]),
              (p + "mlp.down_proj.weight", [H, I])]
hdr, off = {}, 0
for name, shape in specs:
    n = 1
    for s in shape: n *= s
    hdr[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + 2 * n]}
    off += 2 * n
j = json.dumps(hdr).encode()
j += b" " * ((8 - len(j) % 8) % 8)
random.seed(5)
# a 1 MiB block of bf16 values in [-0.05, 0.05], tiled over every tensor
block = b"".join(struct.pack("<f", random.uniform(-0.05, 0.05))[2:] for _ in range(1 << 19))
with open(os.path.join(d, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(j)) + j)
    left = off
    while left > 0:
        k = min(left, len(block))
        f.write(block[:k])
        left -= k
print("checkpoint bytes", 8 + len(j) + off)
PY
/usr/bin/time -v "$BIN" convert --model "$T" --output "$T/out.cmf" --quant q8 --quiet 2>"$T/time" \
    || { cat "$T/time"; echo "FAIL: convert"; exit 1; }
rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$T/time")
secs=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$T/time")
# largest tensor: embed_tokens 32000 x 2048 = 65.5M elements: f32 copy
# 262 MB + q8 payload 66 MB + bf16 source pages 131 MB + 64 MiB overhead
bound_kb=$(( (65536000 * 4 + 65536000 + 32000 * 2 + 65536000 * 2) / 1024 + 65536 ))
echo "peak RSS ${rss_kb} kB (bound ${bound_kb} kB), wall ${secs}, out $(stat -c %s "$T/out.cmf") bytes"
"$BIN" verify "$T/out.cmf" >/dev/null || { echo "FAIL: verify"; exit 1; }
[ "$rss_kb" -le "$bound_kb" ] || { echo "FAIL: peak RSS above the bound"; exit 1; }
echo "convert_stream: passed"
