#!/usr/bin/env python3
"""make_shape.py — a random-weight Hugging Face checkpoint (bf16 safetensors,
config.json, a one-token tokenizer.json) of a named model shape, for speed
benchmarks only: its text is meaningless. Pure Python (no numpy): one 1 MiB
block of random bf16 values in [-0.05, 0.05) is repeated with a per-tensor
rotation, which is all a speed measurement needs.
Shapes: qwen2.5-0.5b (hidden 896, 24 layers, 14 heads, 2 KV heads,
intermediate 4864, vocab 151936, tied), llama-3.2-1b (2048, 16, 32, 8,
8192, 128256, tied), llama-3.1-8b (4096, 32, 32, 8, 14336, 128256), llama-stream-test (2048, 20, 16, 4, 8192, 32000, tied:
the converter's memory test), llama-signal-test (1024, 4, 8, 4, 4096, 8192,
tied: writers interrupted mid-write). Usage: make_shape.py SHAPE OUT_DIR"""
import json, os, random, struct, sys

SHAPES = {
    "qwen2.5-0.5b": dict(model_type="qwen2", arch="Qwen2ForCausalLM", H=896, L=24, NH=14, KV=2, I=4864, V=151936,
                         tied=True, bias=True, theta=1000000.0, eps=1e-6, maxpos=32768),
    # the converter's streaming-memory test (tests/cli/convert_stream.sh): ~2.9 GB of bf16
    "llama-stream-test": dict(model_type="llama", arch="LlamaForCausalLM", H=2048, L=20, NH=16, KV=4, I=8192, V=32000,
                              tied=True, bias=False, theta=10000.0, eps=1e-5, maxpos=4096),
    # writers interrupted mid-write (tests/cli/hardening_signals.sh): ~140 MB of bf16
    "llama-signal-test": dict(model_type="llama", arch="LlamaForCausalLM", H=1024, L=4, NH=8, KV=4, I=4096, V=8192,
                              tied=True, bias=False, theta=10000.0, eps=1e-5, maxpos=1024),
    "llama-3.2-1b": dict(model_type="llama", arch="LlamaForCausalLM", H=2048, L=16, NH=32, KV=8, I=8192, V=128256,
                         tied=True, bias=False, theta=500000.0, eps=1e-5, maxpos=131072),
    "llama-3.1-8b": dict(model_type="llama", arch="LlamaForCausalLM", H=4096, L=32, NH=32, KV=8, I=14336, V=128256,
                         tied=False, bias=False, theta=500000.0, eps=1e-5, maxpos=131072),
}

def main():
    if len(sys.argv) != 3 or sys.argv[1] not in SHAPES:
        sys.exit("usage: make_shape.py {%s} OUT_DIR" % "|".join(SHAPES))
    s, out = SHAPES[sys.argv[1]], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    H, L, NH, KV, I, V = s["H"], s["L"], s["NH"], s["KV"], s["I"], s["V"]
    HD = H // NH
    cfg = {"architectures": [s["arch"]], "model_type": s["model_type"], "hidden_size": H, "intermediate_size": I,
           "num_hidden_layers": L, "num_attention_heads": NH, "num_key_value_heads": KV, "vocab_size": V,
           "max_position_embeddings": s["maxpos"], "rms_norm_eps": s["eps"], "rope_theta": s["theta"],
           "tie_word_embeddings": s["tied"], "hidden_act": "silu", "eos_token_id": 0}
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
    json.dump({"version": "1.0", "added_tokens": [], "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}},
              open(os.path.join(out, "tokenizer.json"), "w"))
    specs = [("model.embed_tokens.weight", [V, H]), ("model.norm.weight", [H])]
    if not s["tied"]:
        specs.append(("lm_head.weight", [V, H]))
    for l in range(L):
        p = "model.layers.%d." % l
        specs += [(p + "input_layernorm.weight", [H]), (p + "post_attention_layernorm.weight", [H]),
                  (p + "self_attn.q_proj.weight", [NH * HD, H]), (p + "self_attn.k_proj.weight", [KV * HD, H]),
                  (p + "self_attn.v_proj.weight", [KV * HD, H]), (p + "self_attn.o_proj.weight", [H, NH * HD]),
                  (p + "mlp.gate_proj.weight", [I, H]), (p + "mlp.up_proj.weight", [I, H]),
                  (p + "mlp.down_proj.weight", [H, I])]
        if s["bias"]:
            specs += [(p + "self_attn.q_proj.bias", [NH * HD]), (p + "self_attn.k_proj.bias", [KV * HD]),
                      (p + "self_attn.v_proj.bias", [KV * HD])]
    hdr, off = {}, 0
    for name, shape in specs:
        n = 1
        for d in shape:
            n *= d
        hdr[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + 2 * n]}
        off += 2 * n
    rng = random.Random(1234)
    block = b"".join(struct.pack("<f", rng.uniform(-0.05, 0.05))[2:] for _ in range(1 << 19))  # bf16 = top half
    ones = struct.pack("<f", 1.0)[2:]
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for k, (name, shape) in enumerate(specs):
            nbytes = hdr[name]["data_offsets"][1] - hdr[name]["data_offsets"][0]
            if name.endswith("norm.weight"):
                f.write(ones * (nbytes // 2))
                continue
            rot = (k * 4099 * 2) % len(block)
            blk = block[rot:] + block[:rot]
            while nbytes > 0:
                f.write(blk[:nbytes])
                nbytes -= min(nbytes, len(blk))

main()
