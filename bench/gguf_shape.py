"""Write a llama.cpp GGUF (F16) from a Hugging Face checkpoint of the qwen2 or
llama family (bf16 safetensors, tied or untied embeddings, tokenizer.json),
so llama-bench can run the very same shape beside `cmf bench`. Weights are
not permuted for llama.cpp's rope layout: good for speed, not for logits.
Needs llama.cpp's gguf-py on PYTHONPATH (and numpy, sentencepiece).
Then: llama-quantize OUT.gguf OUT-Q8_0.gguf Q8_0 (or Q4_0).
Usage: gguf_shape.py HF_DIR OUT.gguf
(bench/make_shape.py makes HF_DIR; bench/cpu_bench.sh runs both sides.)"""
import json, os, struct, sys
import numpy as np
import gguf

src, out = sys.argv[1], sys.argv[2]
cfg = json.load(open(os.path.join(src, "config.json")))
arch = cfg["model_type"]  # qwen2 | llama
h, L = cfg["hidden_size"], cfg["num_hidden_layers"]
w = gguf.GGUFWriter(out, arch)
w.add_block_count(L)
w.add_context_length(cfg["max_position_embeddings"])
w.add_embedding_length(h)
w.add_feed_forward_length(cfg["intermediate_size"])
w.add_head_count(cfg["num_attention_heads"])
w.add_head_count_kv(cfg["num_key_value_heads"])
w.add_rope_freq_base(cfg["rope_theta"])
w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
w.add_rope_dimension_count(h // cfg["num_attention_heads"])
w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
# tokenizer: the checkpoint's own tokenizer.json, padded to vocab_size
tj = json.load(open(os.path.join(src, "tokenizer.json")))
vocab = dict(tj["model"]["vocab"])
for t in tj.get("added_tokens", []):
    vocab[t["content"]] = t["id"]
n = cfg["vocab_size"]
toks = [f"[PAD{i}]" for i in range(n)]
for t, i in vocab.items():
    if i < n:
        toks[i] = t
merges = tj["model"].get("merges", [])
merges = [m if isinstance(m, str) else " ".join(m) for m in merges]
if not merges:  # llama.cpp refuses a BPE vocabulary without merges; the random shapes have none
    merges = [f"{toks[0]} {toks[0]}"]
w.add_tokenizer_model("gpt2")
w.add_tokenizer_pre("qwen2" if arch == "qwen2" else "llama-bpe")
w.add_token_list(toks)
w.add_token_types([1] * n)
w.add_token_merges(merges)
w.add_bos_token_id(0)
w.add_eos_token_id(1)
# tensors
with open(os.path.join(src, "model.safetensors"), "rb") as f:
    hl = struct.unpack("<Q", f.read(8))[0]
    hdr = json.loads(f.read(hl))
    base = 8 + hl
    mm = np.memmap(os.path.join(src, "model.safetensors"), dtype=np.uint8, mode="r")
names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
         "lm_head.weight": "output.weight"}
per = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
       "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
       "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
       "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
       "self_attn.v_proj.bias": "attn_v.bias", "mlp.gate_proj.weight": "ffn_gate.weight",
       "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight"}
for k, meta in hdr.items():
    if k == "__metadata__":
        continue
    if k in names:
        g = names[k]
    else:
        parts = k.split(".")
        g = f"blk.{parts[2]}." + per[".".join(parts[3:])]
    a, b = meta["data_offsets"]
    raw = np.frombuffer(mm[base + a:base + b], dtype="<u2").astype(np.uint32) << 16
    x = raw.view(np.float32).reshape(meta["shape"])
    x = x.astype(np.float32 if x.ndim == 1 else np.float16)
    w.add_tensor(g, x)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
