# lib/lora.sh — write_adapter DIR TARGET...: a PEFT LoRA adapter written
# with python3's standard library into DIR (adapter_model.safetensors and
# adapter_config.json: r 4, lora_alpha 8, random A and B in [-0.2, 0.2]
# from a fixed seed), one A/B pair per TARGET given as "name:out:in"
# (e.g. model.layers.0.self_attn.q_proj:96:96). Sourced by the tests.
write_adapter() {
    python3 - "$@" <<'PY'
import json, random, struct, sys, os
d, targets = sys.argv[1], sys.argv[2:]
os.makedirs(d, exist_ok=True)
rng = random.Random(5)
r = 4
hdr, blobs, off = {}, [], 0
for t in targets:
    name, out, inp = t.split(":")
    out, inp = int(out), int(inp)
    for which, shape in (("A", [r, inp]), ("B", [out, r])):
        n = shape[0] * shape[1]
        data = struct.pack("<%df" % n, *[rng.uniform(-0.2, 0.2) for _ in range(n)])
        hdr["base_model.model.%s.lora_%s.weight" % (name, which)] = {
            "dtype": "F32", "shape": shape, "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
h = json.dumps(hdr).encode()
h += b" " * ((8 - len(h) % 8) % 8)
with open(os.path.join(d, "adapter_model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
with open(os.path.join(d, "adapter_config.json"), "w") as f:
    json.dump({"peft_type": "LORA", "r": r, "lora_alpha": 8}, f)
PY
}
