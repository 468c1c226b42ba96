#!/usr/bin/env bash
# wrong_file.sh — the wrong kind of file is named for what it is, with the
# command that takes it: a GGUF (run, info, tokenize), a safetensors file,
# a JSON file, a Hugging Face folder and a plain folder given where a .cmf
# is expected; `convert --model DIR/config.json` converts DIR, and
# `convert --model X.gguf` points at import-gguf. Exit 1 for each refusal.
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
SRC=${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}
M=$SRC/models/shakespeare
[ -f "$M/model.safetensors" ] || { echo "SKIP: $M absent"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
expect() {
    local rc=$1 pat=$2 got
    shift 2
    "$@" </dev/null >"$T/out" 2>"$T/err"
    got=$?
    [ "$got" = "$rc" ] || { fail "'$*' exited $got, expected $rc: $(head -c 400 "$T/err")"; return; }
    grep -qF -- "$pat" "$T/err" || fail "'$*' stderr lacks '$pat': $(head -c 400 "$T/err")"
}
# a GGUF header (magic, version 3, no tensors, no metadata) is enough to be recognised
printf 'GGUF\003\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000' >"$T/m.gguf"
mkdir "$T/hf" "$T/plain"
cp "$M/config.json" "$M/model.safetensors" "$M/tokenizer.json" "$M/tokenizer_config.json" "$T/hf/"
for c in run info verify; do
    args=; [ $c = run ] && args="-p hi"
    expect 1 "m.gguf: a GGUF file (llama.cpp's format), not a .cmf file: import it with \`cmf import-gguf" \
        "$BIN" $c "$T/m.gguf" $args
    expect 1 "model.safetensors: a safetensors file, not a .cmf file: convert its Hugging Face folder with \`cmf convert --model DIR" \
        "$BIN" $c "$T/hf/model.safetensors" $args
    expect 1 "config.json: a JSON file, not a .cmf file" "$BIN" $c "$T/hf/config.json" $args
    expect 1 "hf: a Hugging Face checkpoint folder, not a .cmf file: convert it with \`cmf convert --model $T/hf --output FILE.cmf\`" \
        "$BIN" $c "$T/hf" $args
    expect 1 "plain: a folder, not a .cmf file" "$BIN" $c "$T/plain" $args
done
expect 1 "m.gguf: a GGUF file; this command reads a .cmf, a tokenizer.json or a Hugging Face folder (import the GGUF first: \`cmf import-gguf" \
    "$BIN" tokenize "$T/m.gguf" hello
expect 1 "model.safetensors: neither a .cmf file nor a tokenizer.json" "$BIN" tokenize "$T/hf/model.safetensors" hello
expect 1 "a GGUF file imports with \`cmf import-gguf\`" "$BIN" convert --model "$T/m.gguf" --output "$T/x.cmf"
[ -e "$T/x.cmf" ] && fail "convert --model X.gguf wrote a file"
expect 0 "is a file of $T/hf: converting that folder" "$BIN" convert --model "$T/hf/config.json" --output "$T/c.cmf"
"$BIN" verify "$T/c.cmf" >/dev/null 2>"$T/err" || fail "convert --model DIR/config.json: output does not verify: $(cat "$T/err")"
[ $fails = 0 ] && echo "wrong_file: ok" || { echo "$fails failure(s)"; exit 1; }
