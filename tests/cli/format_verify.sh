#!/usr/bin/env bash
# format_verify.sh — `cmf verify` on a small valid file, then one flipped
# byte in a tensor, in the header JSON and in the directory: each must fail
# naming what broke. Then the documented blind spot: two swapped 8-byte
# words keep hash64 (verify passes) but the detached signature fails.
# Also: keygen/sign/info basics and error exits (never a crash).
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
SRC=${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}
SAMPLE=$SRC/fuzz/corpus/fuzz_format_open/sample.cmf
[ -f "$SAMPLE" ] || { echo "SKIP: $SAMPLE missing"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

u64() { od -An -tu8 -j "$2" -N 8 "$1" | tr -d ' '; }
flip() { # FILE OFFSET: xor the byte with 1
    local b
    b=$(od -An -tu1 -j "$2" -N 1 "$1" | tr -d ' ')
    printf "\\$(printf '%03o' $((b ^ 1)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
# expect RC PATTERN -- CMD...: exit status RC and PATTERN in stdout+stderr.
expect() {
    local rc=$1 pat=$2
    shift 3
    local out got
    out=$("$@" 2>&1)
    got=$?
    [ "$got" = "$rc" ] || { fail "'$*' exited $got, expected $rc: $out"; return; }
    [ -z "$pat" ] || grep -qF -- "$pat" <<<"$out" || fail "'$*' output lacks '$pat': $out"
}

data_off=$(u64 "$SAMPLE" 48)
dir_off=$(u64 "$SAMPLE" 32)

cp "$SAMPLE" "$T/ok.cmf"
expect 0 "hash chain OK" -- "$BIN" verify "$T/ok.cmf"

# One byte in a tensor (the first tensor starts the data blob).
cp "$SAMPLE" "$T/tensor.cmf"
flip "$T/tensor.cmf" $((data_off + 5))
expect 1 "tensor 'model.embed_tokens.weight'" -- "$BIN" verify "$T/tensor.cmf"

# One byte in the header JSON that keeps it valid JSON ("test" -> "tesu").
cp "$SAMPLE" "$T/header.cmf"
hoff=$(grep -boa '"test"' "$T/header.cmf" | head -1 | cut -d: -f1)
flip "$T/header.cmf" $((hoff + 4))
expect 1 "header JSON at 0x80" -- "$BIN" verify "$T/header.cmf"

# One byte in the directory: the stored hash of record 0.
cp "$SAMPLE" "$T/dir.cmf"
flip "$T/dir.cmf" $((dir_off + 16 + 48))
expect 1 "directory at" -- "$BIN" verify "$T/dir.cmf"
expect 1 "FAILED, 2 problems" -- "$BIN" verify "$T/dir.cmf"

# A structural break fails before hashing, with the reason.
cp "$SAMPLE" "$T/magic.cmf"
flip "$T/magic.cmf" 3
expect 1 "magic" -- "$BIN" verify "$T/magic.cmf"
expect 1 "magic" -- "$BIN" info "$T/magic.cmf"
expect 1 "cannot open" -- "$BIN" verify "$T/nope.cmf"

# Sign, then swap two 8-byte words of the first tensor.
expect 0 "" -- "$BIN" keygen --out "$T/key"
expect 1 "exists" -- "$BIN" keygen --out "$T/key"
[ "$(stat -c %a "$T/key")" = 600 ] || fail "key file mode is not 600"
cp "$SAMPLE" "$T/signed.cmf"
expect 0 "wrote" -- "$BIN" sign "$T/signed.cmf" --key "$T/key" --quiet
[ -f "$T/signed.cmf.sig" ] || fail "no .sig written"
expect 0 "signature OK" -- "$BIN" verify "$T/signed.cmf"
dd if="$T/signed.cmf" of="$T/w0" bs=1 skip="$data_off" count=8 status=none
dd if="$T/signed.cmf" of="$T/w1" bs=1 skip=$((data_off + 8)) count=8 status=none
cmp -s "$T/w0" "$T/w1" && fail "test words are equal; the swap would prove nothing"
dd if="$T/w1" of="$T/signed.cmf" bs=1 seek="$data_off" conv=notrunc status=none
dd if="$T/w0" of="$T/signed.cmf" bs=1 seek=$((data_off + 8)) conv=notrunc status=none
cmp -s "$SAMPLE" "$T/signed.cmf" && fail "swap did not change the file"
expect 0 "hash chain OK" -- "$BIN" verify "$T/signed.cmf" --no-sig
expect 1 "signature FAILED" -- "$BIN" verify "$T/signed.cmf"
expect 1 "changed after signing" -- "$BIN" verify "$T/signed.cmf"

# Sign refuses a corrupt file and needs a key.
expect 1 "not signing" -- "$BIN" sign "$T/tensor.cmf" --key "$T/key"
expect 2 "missing --key" -- "$BIN" sign "$T/ok.cmf"
printf 'zz\n' > "$T/badkey"
expect 1 "64 hex digits" -- "$BIN" sign "$T/ok.cmf" --key "$T/badkey"

# info: text, JSON, tensors; help for each command.
expect 0 "quant mix" -- "$BIN" info "$T/ok.cmf"
expect 0 '"n_tensors": 6' -- "$BIN" info "$T/ok.cmf" --json
expect 0 "lm_head.weight" -- "$BIN" info "$T/ok.cmf" --tensors
expect 2 "unknown option" -- "$BIN" info "$T/ok.cmf" --bogus
for c in info verify sign keygen; do
    expect 0 "usage: cmf $c" -- "$BIN" "$c" --help
done

[ "$fails" = 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "format_verify: all passed"
