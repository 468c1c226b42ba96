#!/usr/bin/env bash
# format_info.sh — `cmf info` and `cmf verify` on a shard set: any shard
# name shows the whole set, --single only that file, every shard verifies
# alone, --all-shards verifies the set, and a missing sibling is an error
# naming the shard (never a crash).
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
SRC=${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}
C=$SRC/fuzz/corpus/fuzz_format_open
[ -f "$C/set-00001-of-00003.cmf" ] || { echo "SKIP: shard set missing in $C"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
expect() { # RC PATTERN -- CMD...
    local rc=$1 pat=$2
    shift 3
    local out got
    out=$("$@" 2>&1)
    got=$?
    [ "$got" = "$rc" ] || { fail "'$*' exited $got, expected $rc: $out"; return; }
    [ -z "$pat" ] || grep -qF -- "$pat" <<<"$out" || fail "'$*' output lacks '$pat': $out"
}

for no in 1 2 3; do
    f=$C/set-0000$no-of-00003.cmf
    expect 0 "shard set of 3 files" -- "$BIN" info "$f"
    expect 0 '"n_tensors": 6' -- "$BIN" info "$f" --json
    expect 0 "hash chain OK" -- "$BIN" verify "$f"
done
expect 0 "tensors:     1," -- "$BIN" info "$C/set-00002-of-00003.cmf" --single
expect 0 "hash chain OK (6 tensors" -- "$BIN" verify "$C/set-00003-of-00003.cmf" --all-shards
expect 0 "masks:       1" -- "$BIN" info "$C/set-00003-of-00003.cmf"
expect 0 "appended" -- "$BIN" info "$C/appended.cmf" --tensors

cp "$C/set-00001-of-00003.cmf" "$C/set-00003-of-00003.cmf" "$T/"
expect 1 "shard 2 of 3 is missing" -- "$BIN" info "$T/set-00003-of-00003.cmf"
expect 0 "hash chain OK" -- "$BIN" verify "$T/set-00003-of-00003.cmf"
cp "$C/set-00001-of-00003.cmf" "$T/renamed.cmf"
expect 1 "does not follow" -- "$BIN" info "$T/renamed.cmf"
expect 0 "tensors:     2," -- "$BIN" info "$T/renamed.cmf" --single

# info never reads the weights: a file whose blob bytes are all wrong still
# opens and summarises (verify is what reads them).
cp "$C/sample.cmf" "$T/zeroed.cmf"
off=$(od -An -tu8 -j 48 -N 8 "$T/zeroed.cmf" | tr -d ' ')
dd if=/dev/zero of="$T/zeroed.cmf" bs=1 seek="$off" count=256 conv=notrunc status=none
expect 0 "quant mix" -- "$BIN" info "$T/zeroed.cmf"
expect 1 "tensor 'model.embed_tokens.weight'" -- "$BIN" verify "$T/zeroed.cmf"

[ "$fails" = 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "format_info: all passed"
