#!/usr/bin/env bash
# hardening_skills.sh — the skill writers and the readers added with skills
# and LoRA, against hostile files and each other (docs/SECURITY.md):
#  1 concurrent writers: a writer refuses (CMF_LOCK_WAIT=0) or waits for a
#    lock another process holds (flock(1) stands in for it), a reader too;
#    two `skill add` started together both land, the file verifies, and
#    `info` run meanwhile never fails;
#  2 no laundering: export / apply of a source with a flipped payload byte
#    refused (--force warns and records unverified_source, carried on by
#    apply), apply of a SKILL_FILE with a flipped byte refused, remove /
#    add over a flipped header byte refused;
#  3 a tokenizer id past arch.vocab_size refused at open (ppl, run, skill
#    add --quality, which takes its skill out again);
#  4 `skill explain` on arch.hidden_size 0 or "8" (a file that verifies):
#    an error naming the field, not SIGFPE;
#  5 a FIFO given to info, as --lora, or as adapter_config.json, and as
#    every file the commands read (tokenize/detokenize/template SRC and
#    their --messages, --tools, --template, --jsonl, --text-file, ppl --file,
#    run --grammar / --json-schema, serve --api-key-file, sign --key, skill
#    add --prompts / --quality): an error naming it, no hang; "-" still
#    reads stdin;
#  7 `logits --out` onto the --lora adapter or its adapter_config.json,
#    `lora merge -o` onto adapter_config.json: refused; merge of a corrupt
#    source refused;
#  8 a LoRA scale (lora_alpha 1e308, :3e38) that is no finite float:
#    refused by logits and merge; A and B entries of 1e19 (finite, but
#    their product overflows), a NaN, and a user scale that takes a pair
#    past the bound: refused by logits, run and merge naming the tensor;
#  also: ids and names with control bytes escaped by skill list / route /
#    info; `skill route -p` with invalid UTF-8 refused; `skill add --name`
#    / `--id` with invalid UTF-8 or control bytes refused.
# The interrupted append (item 9) is tests/test_format_writers.c.
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
BUILD=${CMF_BUILD_DIR:?CMF_BUILD_DIR not set}
FIX=${CMF_FIXTURES:-}
GEN=$BUILD/test_convert_skill
TOY=$BUILD/test_format_writers
[ -n "$FIX" ] && [ -f "$FIX/hf-models/llama/config.json" ] || { echo "SKIP: hf-models fixtures absent"; exit 77; }
[ -x "$GEN" ] && [ -x "$TOY" ] || { echo "SKIP: generators not built"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 needed"; exit 77; }
command -v flock >/dev/null || { echo "SKIP: flock(1) needed"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
want() { # want RC EXPECTED_RC OUTPUT SUBSTRING WHAT
    [ "$1" = "$2" ] || fail "$5: exit $1, expected $2: $(printf %s "$3" | head -c 600)"
    case $3 in *"$4"*) ;; *) fail "$5: output lacks '$4': $(printf %s "$3" | head -c 600)" ;; esac
}
# flip FILE OFFSET: xor one byte with 0x01
flip() { python3 -c 'import sys; f=open(sys.argv[1],"r+b"); o=int(sys.argv[2]); f.seek(o); b=f.read(1); f.seek(o); f.write(bytes([b[0]^1]))' "$1" "$2"; }
# flip_last FILE TEXT: flip the first byte of TEXT's last occurrence
flip_last() { python3 -c 'import sys; d=open(sys.argv[1],"rb").read(); i=d.rfind(sys.argv[2].encode()); assert i>=0; f=open(sys.argv[1],"r+b"); f.seek(i+1); f.write(bytes([d[i+1]^1]))' "$1" "$2"; }
LL=$FIX/hf-models/llama

"$GEN" --write-donor "$LL" "$T/donA" 0.05 model.layers.1.mlp.down_proj.weight || { echo "FAIL: donor A"; exit 1; }
"$GEN" --write-donor "$LL" "$T/donB" 0.05 model.layers.0.self_attn.o_proj.weight || { echo "FAIL: donor B"; exit 1; }
"$BIN" convert -q --quant f32 -m "$LL" -o "$T/base.cmf" 2>"$T/err" || { echo "FAIL: convert: $(cat "$T/err")"; exit 1; }
BASE_SIZE=$(stat -c %s "$T/base.cmf")

# ---- 1: concurrent writers ------------------------------------------------------
F=$T/conc.cmf
cp "$T/base.cmf" "$F"
# hold FILE SECONDS: flock(1) holds the exclusive lock; returns once it does
hold() {
    flock -x "$1" sleep "$2" &
    HOLDER=$!
    for _ in $(seq 200); do flock -n -s "$1" true 2>/dev/null || return 0; sleep 0.02; done
    fail "flock(1) never took the lock"
}
sum=$(md5sum <"$F")
hold "$F" 3
out=$(CMF_LOCK_WAIT=0 "$BIN" skill add "$F" --from "$T/donA" --id held -q 2>&1)
want $? 1 "$out" "another process is writing this file" "skill add while another holds the lock"
out=$(CMF_LOCK_WAIT=0 "$BIN" skill remove "$F" --id nothing 2>&1)
want $? 1 "$out" "another process is writing this file" "skill remove while another holds the lock"
out=$(CMF_LOCK_WAIT=0 "$BIN" info "$F" 2>&1)
want $? 1 "$out" "another process is writing this file" "info while a writer holds the lock"
[ "$(md5sum <"$F")" = "$sum" ] || fail "a refused writer changed the file"
# waiting (the default): goes on once the holder lets go
out=$(CMF_LOCK_WAIT=20 "$BIN" skill add "$F" --from "$T/donA" --id waited -q 2>&1) || fail "add that waits: $out"
wait $HOLDER
"$BIN" skill list "$F" | grep -q '^waited ' || fail "the add that waited is not listed"
# two writers at once, a reader looping meanwhile
for round in 1 2 3; do
    cp "$T/base.cmf" "$F"
    "$BIN" skill add "$F" --from "$T/donA" --id a$round -q >"$T/a.out" 2>&1 &
    pa=$!
    "$BIN" skill add "$F" --from "$T/donB" --id b$round -q >"$T/b.out" 2>&1 &
    pb=$!
    nread=0
    while kill -0 $pa 2>/dev/null || kill -0 $pb 2>/dev/null; do
        "$BIN" info "$F" >"$T/info.out" 2>&1 || fail "round $round: info during the adds: $(cat "$T/info.out")"
        nread=$((nread + 1))
    done
    wait $pa || fail "round $round: add a: $(cat "$T/a.out")"
    wait $pb || fail "round $round: add b: $(cat "$T/b.out")"
    "$BIN" skill list "$F" >"$T/list" 2>&1
    grep -q "^a$round " "$T/list" && grep -q "^b$round " "$T/list" ||
        fail "round $round: a skill was lost: $(cat "$T/list")"
    "$BIN" verify -q "$F" >/dev/null 2>"$T/err" || fail "round $round: verify after two adds: $(cat "$T/err")"
    echo "round $round: two concurrent adds landed, $nread reads meanwhile"
done

# ---- 2: no laundering -----------------------------------------------------------
F=$T/lau.cmf
cp "$T/base.cmf" "$F"
"$BIN" skill add "$F" --from "$T/donA" --id alpha --name "Alpha skill" -q 2>"$T/err" || fail "add alpha: $(cat "$T/err")"
cp "$F" "$T/lau_hdr.cmf"
# a payload byte of skill alpha (its payloads start 64-aligned at the old end)
flip "$F" $(((BASE_SIZE + 63) / 64 * 64 + 4096 + 5))
"$BIN" verify -q "$F" >/dev/null 2>&1 && fail "the flipped payload byte is not seen by verify"
out=$("$BIN" skill export "$F" --id alpha -o "$T/ex.cmf" 2>&1)
want $? 1 "$out" "fails verification" "export from a corrupt file"
[ -e "$T/ex.cmf" ] && fail "a refused export left its output"
out=$("$BIN" skill export "$F" --id alpha -o "$T/ex.cmf" --force 2>&1)
want $? 0 "$out" "warning" "export --force"
grep -q "unverified_source" "$T/ex.cmf" || fail "export --force did not record unverified_source"
out=$("$BIN" skill apply "$T/base.cmf" "$T/ex.cmf" -o "$T/ap.cmf" 2>&1)
want $? 0 "$out" "warning" "apply of a skill file exported with --force"
grep -q "skill_file_unverified_source" "$T/ap.cmf" || fail "apply did not carry the export's unverified_source"
cp "$T/base.cmf" "$T/bad_base.cmf"
flip "$T/bad_base.cmf" $((BASE_SIZE - 100))
"$BIN" skill export "$T/lau_hdr.cmf" --id alpha -o "$T/ok.skill.cmf" >/dev/null 2>"$T/err" || fail "export: $(cat "$T/err")"
out=$("$BIN" skill apply "$T/bad_base.cmf" "$T/ok.skill.cmf" -o "$T/ap2.cmf" --force 2>&1)
want $? 0 "$out" "warning: an input fails verification" "apply --force onto a corrupt base"
grep -q '"unverified_source"' "$T/ap2.cmf" || fail "apply --force did not record unverified_source"
out=$("$BIN" skill apply "$T/bad_base.cmf" "$T/ok.skill.cmf" -o "$T/ap3.cmf" 2>&1)
want $? 1 "$out" "fails verification" "apply onto a corrupt base"
[ -e "$T/ap3.cmf" ] && fail "a refused apply left its output"
# the SKILL_FILE itself corrupt: one flipped byte of its payload (the first tensor after its header)
cp "$T/ok.skill.cmf" "$T/bad.skill.cmf"
flip "$T/bad.skill.cmf" $(($(stat -c %s "$T/bad.skill.cmf") - 200))
"$BIN" verify -q "$T/bad.skill.cmf" >/dev/null 2>&1 && fail "the flipped skill-file byte is not seen by verify"
out=$("$BIN" skill apply "$T/base.cmf" "$T/bad.skill.cmf" -o "$T/ap4.cmf" 2>&1)
want $? 1 "$out" "fails verification" "apply of a corrupt skill file"
case $out in *bad.skill.cmf*) ;; *) fail "apply of a corrupt skill file: the message does not name it: $out" ;; esac
[ -e "$T/ap4.cmf" ] && fail "a refused apply of a corrupt skill file left its output"
out=$("$BIN" skill apply "$T/base.cmf" "$T/bad.skill.cmf" -o "$T/ap4.cmf" --force 2>&1)
want $? 0 "$out" "warning: an input fails verification" "apply --force of a corrupt skill file"
grep -q '"unverified_source"' "$T/ap4.cmf" || fail "apply --force of a corrupt skill file did not record unverified_source"
# a header byte: remove and add refuse to re-hash it
flip_last "$T/lau_hdr.cmf" "Alpha skill"
"$BIN" verify -q "$T/lau_hdr.cmf" >/dev/null 2>&1 && fail "the flipped header byte is not seen by verify"
sum=$(md5sum <"$T/lau_hdr.cmf")
out=$("$BIN" skill remove "$T/lau_hdr.cmf" --id alpha 2>&1)
want $? 1 "$out" "not rewriting the header of a corrupt file" "remove over a corrupt header"
out=$("$BIN" skill add "$T/lau_hdr.cmf" --from "$T/donB" --id beta -q 2>&1)
want $? 1 "$out" "not rewriting the header of a corrupt file" "add over a corrupt header"
[ "$(md5sum <"$T/lau_hdr.cmf")" = "$sum" ] || fail "a refused remove/add changed the file"
"$BIN" verify -q "$T/lau_hdr.cmf" >/dev/null 2>&1 && fail "the corrupt header verifies after the refused writers"

# ---- 3: tokenizer ids past the vocabulary ---------------------------------------
mkdir -p "$T/tok"
cp -r "$LL"/. "$T/tok/"
python3 - "$T/tok/tokenizer.json" <<'PY'
import json, sys
p = sys.argv[1]
t = json.load(open(p))
t.setdefault("added_tokens", []).append({"id": 384, "content": "<past_the_rows>", "single_word": False,
    "lstrip": False, "rstrip": False, "normalized": False, "special": False})
json.dump(t, open(p, "w"))
PY
if "$BIN" convert -q --quant f32 -m "$T/tok" -o "$T/tok.cmf" 2>"$T/err"; then
    printf 'the cat <past_the_rows> sat on the mat %.0s' $(seq 40) >"$T/tok.txt"
    out=$("$BIN" ppl "$T/tok.cmf" --file "$T/tok.txt" 2>&1)
    want $? 1 "$out" "token 384 ('<past_the_rows>') is past the model's vocabulary" "ppl with an id past the rows"
    out=$("$BIN" run "$T/tok.cmf" -p "hi" -n 1 2>&1)
    want $? 1 "$out" "is past the model's vocabulary" "run with an id past the rows"
    # skill add --quality measures through the model: refused naming the token, the skill taken out again
    cp "$T/tok.cmf" "$T/tokq.cmf"
    out=$("$BIN" skill add "$T/tokq.cmf" --from "$T/donA" --id qual --quality "$T/tok.txt" -q 2>&1)
    want $? 1 "$out" "token 384 ('<past_the_rows>') is past the model's vocabulary" "skill add --quality with an id past the rows"
    "$BIN" skill list "$T/tokq.cmf" 2>&1 | grep -q '^qual ' && fail "skill add --quality refused but its skill is listed"
else
    # refused already when converting: that is the border too
    want 1 1 "$(cat "$T/err")" "384" "convert of a tokenizer with an id past the rows"
fi

# ---- 4: arch numbers through the typed parse -------------------------------------
SEL='{"metric":"mse","phi_layer":1,"mean":"AAAAAA==","basis":"AAAAAA=="}'
for hs in 0 '"8"'; do
    "$TOY" --write "$T/hs.cmf" '{"skills":[{"id":"s","selection":'"$SEL"'}]}' "hidden_size=$hs" 2>"$T/err" ||
        { fail "write toy hidden_size=$hs: $(cat "$T/err")"; continue; }
    "$BIN" verify -q "$T/hs.cmf" >/dev/null 2>"$T/err" || fail "the toy with hidden_size=$hs does not verify: $(cat "$T/err")"
    out=$("$BIN" skill explain "$T/hs.cmf" --id s 2>&1)
    want $? 1 "$out" "arch.hidden_size" "skill explain with hidden_size=$hs"
done

# ---- 5: FIFOs ---------------------------------------------------------------------
mkfifo "$T/fifo.cmf"
out=$(timeout 20 "$BIN" info "$T/fifo.cmf" 2>&1)
want $? 1 "$out" "not a regular file" "info FIFO"
mkdir -p "$T/fifolora"
echo '{"peft_type":"LORA","r":4,"lora_alpha":8}' >"$T/fifolora/adapter_config.json"
mkfifo "$T/fifolora/adapter_model.safetensors"
out=$(timeout 20 "$BIN" run "$T/base.cmf" --lora "$T/fifolora/adapter_model.safetensors" --tokens 1,2 -n 1 2>&1)
want $? 1 "$out" "not a regular file" "run --lora FIFO"
mkdir -p "$T/fifocfg"
mkfifo "$T/fifocfg/adapter_config.json"
: >"$T/fifocfg/adapter_model.safetensors"
out=$(timeout 20 "$BIN" run "$T/base.cmf" --lora "$T/fifocfg/adapter_model.safetensors" --tokens 1,2 -n 1 2>&1)
want $? 1 "$out" "adapter_config.json: not a regular file (a FIFO)" "run --lora with a FIFO adapter_config.json"
# every other file a command reads: refused at once, naming the FIFO; a
# blocking open would wait for a writer that never comes (timeout: 124)
FF=$T/in.fifo
mkfifo "$FF"
mkdir -p "$T/fifotok"
mkfifo "$T/fifotok/tokenizer.json"
echo '[{"role":"user","content":"hi"}]' >"$T/m.json"
cp "$T/base.cmf" "$T/fq.cmf"
fsum=$(md5sum <"$T/fq.cmf")
fifo_refused() { # WHAT FIFO -- CMD...
    local what=$1 ff=$2
    shift 3
    local t0=$SECONDS
    out=$(timeout 10 "$@" </dev/null 2>&1)
    local rc=$?
    [ $rc = 124 ] && { fail "$what: still waiting on the FIFO after 10 s"; return; }
    [ $rc = 0 ] && fail "$what: exit 0"
    case $out in *"$ff: not a regular file (a FIFO)"*) ;; *) fail "$what: output lacks '$ff: not a regular file (a FIFO)': $(printf %s "$out" | head -c 400)" ;; esac
    [ $((SECONDS - t0)) -le 5 ] || fail "$what: took $((SECONDS - t0)) s"
}
fifo_refused "tokenize FIFO" "$FF" -- "$BIN" tokenize "$FF" hi
fifo_refused "tokenize FOLDER with a FIFO tokenizer.json" "$T/fifotok/tokenizer.json" -- "$BIN" tokenize "$T/fifotok" hi
fifo_refused "detokenize FIFO" "$FF" -- "$BIN" detokenize "$FF" --ids 1,2
fifo_refused "template FIFO" "$FF" -- "$BIN" template "$FF" --messages "$T/m.json"
fifo_refused "template --messages FIFO" "$FF" -- "$BIN" template "$T/base.cmf" --messages "$FF"
fifo_refused "template --tools FIFO" "$FF" -- "$BIN" template "$T/base.cmf" --messages "$T/m.json" --tools "$FF"
fifo_refused "template --template FIFO" "$FF" -- "$BIN" template "$T/base.cmf" --messages "$T/m.json" --template "$FF"
fifo_refused "tokenize --jsonl FIFO" "$FF" -- "$BIN" tokenize "$T/base.cmf" --jsonl "$FF"
fifo_refused "tokenize --text-file FIFO" "$FF" -- "$BIN" tokenize "$T/base.cmf" --text-file "$FF"
fifo_refused "ppl --file FIFO" "$FF" -- "$BIN" ppl "$T/base.cmf" --file "$FF"
fifo_refused "run --grammar FIFO" "$FF" -- "$BIN" run "$T/base.cmf" -p hi -n 1 --grammar "$FF"
fifo_refused "run --json-schema FIFO" "$FF" -- "$BIN" run "$T/base.cmf" -p hi -n 1 --json-schema "$FF"
fifo_refused "serve --api-key-file FIFO" "$FF" -- "$BIN" serve "$T/base.cmf" --port 0 --api-key-file "$FF"
fifo_refused "sign --key FIFO" "$FF" -- "$BIN" sign "$T/fq.cmf" --key "$FF"
fifo_refused "skill add --prompts FIFO" "$FF" -- "$BIN" skill add "$T/fq.cmf" --from "$T/donA" --id fp -q --prompts "$FF"
[ "$(md5sum <"$T/fq.cmf")" = "$fsum" ] || fail "a refused skill add --prompts changed the file"
fifo_refused "skill add --quality FIFO" "$FF" -- "$BIN" skill add "$T/fq.cmf" --from "$T/donA" --id fq -q --quality "$FF"
"$BIN" skill list "$T/fq.cmf" 2>&1 | grep -q '^fq ' && fail "skill add --quality FIFO refused but its skill is listed"
[ -e "$T/fq.cmf.sig" ] && fail "a refused sign left a signature"
# "-" is standard input, which may be a pipe
out=$(printf '"hi"\n' | timeout 10 "$BIN" tokenize "$T/base.cmf" --jsonl - 2>&1)
want $? 0 "$out" "[" "tokenize --jsonl - from a pipe"
out=$(printf 'hi' | timeout 10 "$BIN" tokenize "$T/base.cmf" --text-file - 2>&1)
want $? 0 "$out" "[" "tokenize --text-file - from a pipe"
out=$(timeout 10 "$BIN" template "$T/base.cmf" --messages - <"$T/m.json" 2>&1)
want $? 0 "$out" "hi" "template --messages - from stdin"

# ---- 7, 8: LoRA inputs and scales ----------------------------------------------------
write_adapter() { # DIR ALPHA [MAGNITUDE: entries uniform in +-M, default 0.2]
    python3 - "$1" "$2" "${3:-0.2}" <<'PY'
import json, random, struct, sys, os
d, alpha, mag = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
os.makedirs(d, exist_ok=True)
rng = random.Random(5)
r, hdr, blobs, off = 4, {}, [], 0
for which, shape in (("A", [r, 96]), ("B", [96, r])):
    n = shape[0] * shape[1]
    data = struct.pack("<%df" % n, *[rng.uniform(-mag, mag) for _ in range(n)])
    hdr["base_model.model.model.layers.0.self_attn.q_proj.lora_%s.weight" % which] = {
        "dtype": "F32", "shape": shape, "data_offsets": [off, off + len(data)]}
    blobs.append(data)
    off += len(data)
h = json.dumps(hdr).encode()
h += b" " * ((8 - len(h) % 8) % 8)
open(os.path.join(d, "adapter_model.safetensors"), "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
open(os.path.join(d, "adapter_config.json"), "w").write(json.dumps({"peft_type": "LORA", "r": r, "lora_alpha": alpha}))
PY
}
write_adapter "$T/ad" 8
AD=$T/ad/adapter_model.safetensors
asum=$(cat "$AD" "$T/ad/adapter_config.json" | md5sum)
"$BIN" logits "$T/base.cmf" --tokens 1,2,3 --lora "$AD" --out "$T/ok.f32" 2>"$T/err" || fail "logits --lora: $(cat "$T/err")"
out=$("$BIN" logits "$T/base.cmf" --tokens 1,2,3 --lora "$AD" --out "$AD" 2>&1)
want $? 1 "$out" "is the input file" "logits --out onto the adapter"
out=$("$BIN" logits "$T/base.cmf" --tokens 1,2,3 --lora "$AD:0.5" --out "$T/ad/adapter_config.json" 2>&1)
want $? 1 "$out" "is the input file" "logits --out onto adapter_config.json"
out=$("$BIN" lora merge "$T/base.cmf" --lora "$AD" -o "$T/ad/adapter_config.json" 2>&1)
want $? 1 "$out" "is the input file" "lora merge -o onto adapter_config.json"
[ "$(cat "$AD" "$T/ad/adapter_config.json" | md5sum)" = "$asum" ] || fail "a refused writer changed the adapter"
out=$("$BIN" lora merge "$T/bad_base.cmf" --lora "$AD" -o "$T/merged.cmf" 2>&1)
want $? 1 "$out" "fails verification" "lora merge of a corrupt source"
[ -e "$T/merged.cmf" ] && fail "a refused merge left its output"
write_adapter "$T/huge" 1e308
out=$("$BIN" logits "$T/base.cmf" --tokens 1,2,3 --lora "$T/huge/adapter_model.safetensors" --out "$T/h.f32" 2>&1)
want $? 1 "$out" "not a finite 32-bit float" "logits with lora_alpha 1e308"
out=$("$BIN" logits "$T/base.cmf" --tokens 1,2,3 --lora "$AD:3e38" --out "$T/h.f32" 2>&1)
want $? 1 "$out" "not a finite 32-bit float" "logits with --lora :3e38"
[ -e "$T/h.f32" ] && fail "a refused logits left its output"
out=$("$BIN" lora merge "$T/base.cmf" --lora "$AD:3e38" -o "$T/m38.cmf" 2>&1)
want $? 1 "$out" "not a finite 32-bit float" "lora merge with :3e38"
[ -e "$T/m38.cmf" ] && fail "a refused merge left its output"
# finite values whose product is not: |A|, |B| up to 1e19 (x A^T B^T ~ 1e40 per unit of input)
QA=base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight
write_adapter "$T/big" 8 1e19
BIG=$T/big/adapter_model.safetensors
out=$("$BIN" logits "$T/base.cmf" --tokens 1,2,3 --lora "$BIG" --out "$T/b.f32" 2>&1)
want $? 1 "$out" "tensors '$QA' and" "logits with A, B entries of 1e19"
want 1 1 "$out" "could overflow 32-bit floats" "logits with A, B entries of 1e19"
[ -e "$T/b.f32" ] && fail "a refused logits left its output"
out=$("$BIN" run "$T/base.cmf" --tokens 1,2,3 -n 2 --lora "$BIG" 2>&1)
want $? 1 "$out" "could overflow 32-bit floats" "run with A, B entries of 1e19"
out=$("$BIN" lora merge "$T/base.cmf" --lora "$BIG" -o "$T/mbig.cmf" 2>&1)
want $? 1 "$out" "could overflow 32-bit floats" "lora merge with A, B entries of 1e19"
[ -e "$T/mbig.cmf" ] && fail "a refused merge left its output"
write_adapter "$T/nan" 8 nan
out=$("$BIN" logits "$T/base.cmf" --tokens 1,2,3 --lora "$T/nan/adapter_model.safetensors" --out "$T/n.f32" 2>&1)
want $? 1 "$out" "'$QA': element 0 is not finite" "logits with NaN in lora_A"
# 1e7 entries: rank 4 x width 96 x 1e14 x alpha/r 2 ~ 8e16 is inside the bound (2^62 ~ 4.6e18); :1000 is not
write_adapter "$T/mid" 8 1e7
MID=$T/mid/adapter_model.safetensors
"$BIN" logits "$T/base.cmf" --tokens 1,2,3 --lora "$MID" --out "$T/mid.f32" 2>"$T/err" || fail "logits with 1e7 entries: $(cat "$T/err")"
out=$("$BIN" logits "$T/base.cmf" --tokens 1,2,3 --lora "$MID:1000" --out "$T/m1k.f32" 2>&1)
want $? 1 "$out" "LoRA 'model.layers.0.self_attn.q_proj.weight' at scale 1000" "logits with 1e7 entries at :1000"
want 1 1 "$out" "could overflow 32-bit floats" "logits with 1e7 entries at :1000"
out=$("$BIN" run "$T/base.cmf" --tokens 1,2,3 -n 2 --lora "$MID:1000" 2>&1)
want $? 1 "$out" "could overflow 32-bit floats" "run with 1e7 entries at :1000"

# ---- also: control bytes escaped, invalid UTF-8 refused ---------------------------------
SEL8='{"metric":"mse","phi_layer":1,"mean":"AAAAAAAAAAAAAAAAAAAAAA==","basis":"ADwAAAAAAAAAAAAAAAAAAA=="}'
"$TOY" --write "$T/esc.cmf" '{"skills":[{"id":"e\u001b[31mX","name":"n\u0007\u009bZ","selection":'"$SEL8"'}]}' 2>"$T/err" ||
    fail "write toy with control bytes: $(cat "$T/err")"
ESC=$(printf '\033')
BEL=$(printf '\007')
"$BIN" skill list "$T/esc.cmf" >"$T/esc.list" 2>&1 || fail "skill list: $(cat -v "$T/esc.list")"
"$BIN" skill route "$T/esc.cmf" --tokens 1,2,3 >"$T/esc.route" 2>&1 || fail "skill route: $(cat -v "$T/esc.route")"
"$BIN" info "$T/esc.cmf" >"$T/esc.info" 2>&1 || fail "info: $(cat -v "$T/esc.info")"
for o in list route info; do
    grep -q "$ESC\|$BEL" "$T/esc.$o" && fail "$o printed a raw control byte: $(cat -v "$T/esc.$o" | head -5)"
    grep -qF 'e\x1b[31mX' "$T/esc.$o" || fail "$o did not print the escaped id: $(cat -v "$T/esc.$o" | head -5)"
done
grep -qF 'n\x07\u009bZ' <("$BIN" skill list "$T/esc.cmf") || fail "skill list did not escape the name"
out=$("$BIN" skill route "$T/base.cmf" -p "$(printf 'ab\377cd')" 2>&1)
want $? 1 "$out" "not valid UTF-8" "skill route -p with invalid UTF-8"
# skill add --name / --id: refused before anything is converted or written, naming the option
cp "$T/base.cmf" "$T/nm.cmf"
nsum=$(md5sum <"$T/nm.cmf")
out=$("$BIN" skill add "$T/nm.cmf" --from "$T/donA" --id nm --name "$(printf 'a\377b')" -q 2>&1)
want $? 2 "$out" "--name: not valid UTF-8 (byte 0xff at offset 1)" "skill add --name with invalid UTF-8"
out=$("$BIN" skill add "$T/nm.cmf" --from "$T/donA" --id nm --name "$(printf 'a\033[31mb')" -q 2>&1)
want $? 2 "$out" "--name: control character 0x1b at offset 1" "skill add --name with an escape"
out=$("$BIN" skill add "$T/nm.cmf" --from "$T/donA" --id nm --name "$(printf 'a\302\233b')" -q 2>&1)
want $? 2 "$out" "--name: control character U+009b at offset 1" "skill add --name with a C1 control"
out=$("$BIN" skill add "$T/nm.cmf" --from "$T/donA" --id "$(printf 'a\377b')" -q 2>&1)
want $? 2 "$out" "--id 'a" "skill add --id with invalid UTF-8"
out=$("$BIN" skill add "$T/nm.cmf" --from "$T/donA" --id "$(printf 'a\033b')" -q 2>&1)
want $? 2 "$out" "--id 'a\x1bb'" "skill add --id with an escape (printed escaped)"
[ "$(md5sum <"$T/nm.cmf")" = "$nsum" ] || fail "a refused skill add changed the file"
"$BIN" skill add "$T/nm.cmf" --from "$T/donA" --id nm --name "Caf$(printf '\303\251') skill" -q 2>"$T/err" ||
    fail "skill add --name with UTF-8: $(cat "$T/err")"
"$BIN" skill list "$T/nm.cmf" | grep -q "Caf$(printf '\303\251') skill" || fail "the UTF-8 name is not listed"

[ $fails = 0 ] && echo "PASS" || { echo "$fails failure(s)"; exit 1; }
