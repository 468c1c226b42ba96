#!/usr/bin/env bash
# hardening_signals.sh — a writer killed by SIGINT or SIGTERM in the middle
# of its write leaves neither the output nor a temporary
# (OUT.tmp.<pid>[.blob]) and dies of that signal. A ~100 MB bf16 llama
# checkpoint is generated (python3), `cmf convert` is started in the
# background, signalled as soon as its temporary appears, and the folder is
# checked; then the same for `cmf requant` of the converted file. The
# signal is sent while the process is stopped (SIGSTOP, signal, SIGCONT),
# so it lands mid-write however fast the machine is.
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
command -v python3 >/dev/null || { echo "SKIP: python3 needed to generate the checkpoint"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/cmf-signals.XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
set -m # background jobs keep SIGINT (without job control bash starts them with it ignored)

python3 - "$T/ck" <<'PY'
import json, os, random, struct, sys
d = sys.argv[1]
os.makedirs(d)
H, I, L, V, NH, KV, HD = 1024, 4096, 4, 8192, 8, 4, 128
cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H,
       "intermediate_size": I, "num_hidden_layers": L, "num_attention_heads": NH,
       "num_key_value_heads": KV, "head_dim": HD, "vocab_size": V, "max_position_embeddings": 1024,
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
random.seed(7)
block = b"".join(struct.pack("<f", random.uniform(-0.05, 0.05))[2:] for _ in range(1 << 18))
with open(os.path.join(d, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(j)) + j)
    left = off
    while left > 0:
        k = min(left, len(block))
        f.write(block[:k])
        left -= k
PY
[ -f "$T/ck/model.safetensors" ] || { fail "checkpoint generation"; exit 1; }

# interrupt SIG OUT -- CMD...: start CMD, wait for OUT's temporary, stop
# it, send SIG, let it go on; it must die of SIG, leaving nothing.
interrupt() {
    local sig=$1 out=$2
    shift 3
    "$@" 2>"$T/err" &
    local pid=$! seen= i rc
    for i in $(seq 1 3000); do
        if compgen -G "$out.tmp.*" >/dev/null; then
            seen=1
            break
        fi
        kill -0 $pid 2>/dev/null || break
        sleep 0.01
    done
    kill -STOP $pid 2>/dev/null
    [ -n "$seen" ] || fail "$1: no temporary $out.tmp.* appeared (finished or failed first: $(cat "$T/err"))"
    kill -"$sig" $pid 2>/dev/null
    kill -CONT $pid 2>/dev/null
    for i in 1 2 3 4 5; do # wait also returns when the job stopped (128 + SIGSTOP)
        wait $pid
        rc=$?
        [ $rc = $((128 + $(kill -l STOP))) ] || break
    done
    local want=$((128 + $(kill -l "$sig")))
    [ $rc = $want ] || fail "$1 after SIG$sig exited $rc, expected $want (died of the signal): $(cat "$T/err")"
    local left
    left=$(find "$T" -name "$(basename "$out")*" | head -3)
    [ -z "$left" ] || fail "$1 after SIG$sig left: $left"
}
interrupt INT "$T/out.cmf" -- "$BIN" convert --model "$T/ck" --output "$T/out.cmf" --quant q8 --quiet
interrupt TERM "$T/out.cmf" -- "$BIN" convert --model "$T/ck" --output "$T/out.cmf" --quant q4 --quiet
# a whole conversion, then requant interrupted
"$BIN" convert --model "$T/ck" --output "$T/full.cmf" --quant q8 --quiet 2>"$T/err" || fail "convert: $(cat "$T/err")"
interrupt INT "$T/rq.cmf" -- "$BIN" requant "$T/full.cmf" --output "$T/rq.cmf" --quant q4 --quiet
interrupt TERM "$T/rq.cmf" -- "$BIN" requant "$T/full.cmf" --output "$T/rq.cmf" --quant q4t --quiet
"$BIN" verify "$T/full.cmf" >/dev/null 2>&1 || fail "the input of the interrupted requant no longer verifies"

[ $fails -eq 0 ] && echo "hardening_signals: all passed"
exit $((fails > 0))
