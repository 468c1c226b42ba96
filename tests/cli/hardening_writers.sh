#!/usr/bin/env bash
# hardening_writers.sh — writers never destroy what they should not and
# never launder corruption. requant of a converted file with one flipped
# payload byte (not re-hashed) must fail naming the file, the tensor and the
# hash, and leave no output (--force goes on and records it); compact of a
# file with a flipped vocab byte must refuse. Every writer (requant,
# compact, convert, import-gguf, keygen, sign, logits --out) must refuse an
# output that is its own input (also through ./ and a symlink) and an
# output that is a FIFO or a directory, leaving both untouched and no
# temporary behind. An empty input is named as such.
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
FIX=${CMF_FIXTURES:-}
S=$FIX/shakespeare
G=$FIX/gguf/llama-f32.gguf
[ -n "$FIX" ] && [ -f "$S/model.safetensors" ] && [ -f "$G" ] || { echo "SKIP: fixtures absent (CMF_FIXTURES)"; exit 77; }
command -v mkfifo >/dev/null || { echo "SKIP: mkfifo absent"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
u64() { od -An -tu8 -j "$2" -N 8 "$1" | tr -d ' '; }
flip() { # FILE OFFSET: xor the byte with 1, in place
    local b
    b=$(od -An -tu1 -j "$2" -N 1 "$1" | tr -d ' ')
    printf "\\$(printf '%03o' $((b ^ 1)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
# refuse PATTERN -- CMD...: a non-zero exit and PATTERN on stderr.
refuse() {
    local pat=$1
    shift 2
    "$@" >"$T/out" 2>"$T/err" && { fail "'$*' succeeded: $(cat "$T/out")"; return; }
    grep -qF -- "$pat" "$T/err" || fail "'$*': stderr lacks '$pat': $(cat "$T/err")"
}
no_temps() { # no temporary of any writer is left in $T (or under DIR)
    local left
    left=$(find "${1:-$T}" -name '*.tmp.*' | head -3)
    [ -z "$left" ] || fail "$2: temporaries left: $left"
}

"$BIN" convert --model "$S" --output "$T/m.cmf" --quant q8 --quiet 2>"$T/err" || { fail "convert: $(cat "$T/err")"; exit 1; }
"$BIN" verify "$T/m.cmf" >/dev/null 2>&1 || fail "fresh file does not verify"

# --- 4: requant of a corrupt file ------------------------------------------
cp "$T/m.cmf" "$T/bad.cmf"
data_off=$(u64 "$T/bad.cmf" 48)
flip "$T/bad.cmf" $((data_off + 100)) # inside the first tensor's payload
"$BIN" verify "$T/bad.cmf" >/dev/null 2>&1 && fail "the flipped byte did not break verify"
refuse "not requantizing a file that fails verification" -- "$BIN" requant "$T/bad.cmf" --output "$T/rq.cmf" --quant q4 --quiet
grep -qF "$T/bad.cmf" "$T/err" || fail "requant error does not name the file: $(cat "$T/err")"
grep -q "tensor '.*' at 0x.*hash" "$T/err" || fail "requant error does not say what failed: $(cat "$T/err")"
[ -e "$T/rq.cmf" ] && fail "requant of a corrupt file left an output"
no_temps "$T" "requant (corrupt)"
# --force re-encodes, says so, and records it in the header's provenance
"$BIN" requant "$T/bad.cmf" --output "$T/rqf.cmf" --quant q4 --force --quiet 2>"$T/err" || fail "requant --force: $(cat "$T/err")"
grep -q "fails verification; --force" "$T/err" || fail "requant --force did not warn: $(cat "$T/err")"
"$BIN" info "$T/rqf.cmf" --json 2>/dev/null | grep -q '"unverified_source"' ||
    grep -aq '"unverified_source"' "$T/rqf.cmf" || fail "requant --force left no provenance.requant.unverified_source"
# a healthy source still requantizes
"$BIN" requant "$T/m.cmf" --output "$T/q4.cmf" --quant q4 --quiet 2>"$T/err" || fail "requant: $(cat "$T/err")"
"$BIN" verify "$T/q4.cmf" >/dev/null 2>&1 || fail "requant output does not verify"
grep -aq '"unverified_source"' "$T/q4.cmf" && fail "a verified requant records unverified_source"

# compact verifies the whole chain, sections included
cp "$T/m.cmf" "$T/badvocab.cmf"
vocab_hex=$("$BIN" info "$T/badvocab.cmf" | sed -n 's/^ *vocab *at \(0x[0-9a-f]*\).*/\1/p')
[ -n "$vocab_hex" ] || fail "cannot find the vocab section in cmf info"
[ -n "$vocab_hex" ] && flip "$T/badvocab.cmf" $((vocab_hex + 10))
refuse "not compacting a corrupt file" -- "$BIN" compact "$T/badvocab.cmf" --output "$T/c.cmf"
grep -q "vocab section" "$T/err" || fail "compact error does not name the vocab section: $(cat "$T/err")"
[ -e "$T/c.cmf" ] && fail "compact of a corrupt file left an output"

# --- 5: an output that is the input ------------------------------------------
sum0=$(cksum <"$T/m.cmf")
ln -s m.cmf "$T/link.cmf"
refuse "same file" -- "$BIN" requant "$T/m.cmf" --output "$T/m.cmf" --quant q4 --quiet
refuse "same file" -- "$BIN" requant "$T/m.cmf" --output "$T/./m.cmf" --quant q4 --quiet
refuse "same file" -- "$BIN" requant "$T/m.cmf" --output "$T/link.cmf" --quant q4 --quiet
refuse "same file" -- "$BIN" compact "$T/m.cmf" --output "$T/./m.cmf" --quiet
refuse "same file" -- "$BIN" logits "$T/m.cmf" --tokens 1,2 --out "$T/m.cmf"
[ "$(cksum <"$T/m.cmf")" = "$sum0" ] || fail "a refused writer changed its input"
[ -L "$T/link.cmf" ] || fail "the symlink to the input was replaced"
# convert over a file of the checkpoint folder
mkdir "$T/ck"
cp "$S"/*.json "$S/model.safetensors" "$T/ck/"
ck0=$(cksum <"$T/ck/model.safetensors")
refuse "same file" -- "$BIN" convert --model "$T/ck" --output "$T/ck/model.safetensors" --quiet
refuse "same file" -- "$BIN" convert --model "$T/ck" --output "$T/ck/config.json" --quiet
refuse "same file" -- "$BIN" convert --model "$T/ck" --output "$T/ck/tokenizer.json" --quiet
[ "$(cksum <"$T/ck/model.safetensors")" = "$ck0" ] || fail "convert changed its own safetensors"
"$BIN" convert --model "$T/ck" --output "$T/ck/model.cmf" --quiet 2>"$T/err" || fail "convert into the folder: $(cat "$T/err")"
"$BIN" convert --model "$T/ck" --output "$T/ck/model.cmf" --quiet 2>"$T/err" || fail "convert over its own older output: $(cat "$T/err")"
# import-gguf over its GGUF, as .cmf and as tokenizer.json
cp "$G" "$T/x.gguf"
g0=$(cksum <"$T/x.gguf")
refuse "same file" -- "$BIN" import-gguf "$T/x.gguf" --output "$T/x.gguf" --quiet
refuse "same file" -- "$BIN" import-gguf "$T/x.gguf" --tokenizer-json "$T/./x.gguf"
[ "$(cksum <"$T/x.gguf")" = "$g0" ] || fail "import-gguf changed its input"
# sign: FILE.sig must be neither FILE nor the key
"$BIN" keygen --out "$T/m.cmf.sig" >/dev/null 2>"$T/err" || fail "keygen: $(cat "$T/err")"
k0=$(cksum <"$T/m.cmf.sig")
refuse "same file" -- "$BIN" sign "$T/m.cmf" --key "$T/m.cmf.sig" --quiet
[ "$(cksum <"$T/m.cmf.sig")" = "$k0" ] || fail "sign replaced its key"
no_temps "$T" "same-file refusals"

# --- 5: an output that is a FIFO or a directory --------------------------------
mkdir "$T/dev"
mkfifo "$T/dev/fifo"
mkdir "$T/dev/dir"
ln -s fifo "$T/dev/fifolink"
for o in fifo dir fifolink; do
    out=$T/dev/$o
    case $o in fifo | fifolink) kind=FIFO ;; dir) kind=directory ;; esac
    refuse "$kind" -- "$BIN" requant "$T/m.cmf" --output "$out" --quant q4 --quiet
    refuse "$kind" -- "$BIN" compact "$T/m.cmf" --output "$out" --quiet
    refuse "$kind" -- "$BIN" convert --model "$S" --output "$out" --quiet
    refuse "$kind" -- "$BIN" import-gguf "$G" --output "$out" --quiet
    refuse "$kind" -- "$BIN" import-gguf "$G" --tokenizer-json "$out"
    refuse "$kind" -- "$BIN" keygen --out "$out" --force
    refuse "$kind" -- "$BIN" logits "$T/m.cmf" --tokens 1,2 --out "$out"
done
[ -p "$T/dev/fifo" ] || fail "the FIFO was replaced"
[ -d "$T/dev/dir" ] || fail "the directory was replaced"
[ -L "$T/dev/fifolink" ] || fail "the symlink to the FIFO was replaced"
cp "$T/m.cmf" "$T/dev/s.cmf"
mkfifo "$T/dev/s.cmf.sig"
refuse "FIFO" -- "$BIN" sign "$T/dev/s.cmf" --key "$T/ck/../m.cmf.sig" --quiet
[ -p "$T/dev/s.cmf.sig" ] || fail "sign replaced the FIFO at FILE.sig"
no_temps "$T" "FIFO/directory refusals"
[ "$(find "$T/dev" -type f | wc -l)" = 1 ] || fail "a refused writer created a file: $(ls "$T/dev")"

# --- 10: an empty input says so (not "found 00 00 00 00") ----------------------
: >"$T/empty.cmf"
for c in info verify; do
    refuse "empty.cmf: envelope magic at 0x0: the file is 0 bytes (empty); a .cmf file starts with" -- "$BIN" $c "$T/empty.cmf"
done
refuse "the file is 0 bytes (empty)" -- "$BIN" requant "$T/empty.cmf" --output "$T/e2.cmf" --quant q4
refuse "empty.cmf: file is 0 bytes (empty), too short for the 'GGUF' magic" -- "$BIN" import-gguf "$T/empty.cmf" --output "$T/e.cmf"
refuse "m.cmf: at 0x0: magic is not 'GGUF' (found 43 4d 46 01)" -- "$BIN" import-gguf "$T/m.cmf" --output "$T/e.cmf"
[ -e "$T/e.cmf" ] || [ -e "$T/e2.cmf" ] && fail "a failed writer left an output"

[ $fails -eq 0 ] && echo "hardening_writers: all passed"
exit $((fails > 0))
