#!/usr/bin/env bash
# gguf_defaults.sh — import-gguf never fills a missing metadata value in
# silently: the fixture GGUF has no llama.rope.freq_base, and with the RMS
# epsilon and head_count_kv removed too, stderr names each key, the value
# used and the --set that changes it, and the file's provenance (cmf info
# --json) records them under defaults_filled; a --set for one of them
# silences its warning and drops it from the record; the fixture with
# --set rope_theta gets no warning at all. Without llama.rope.dimension_count
# the warning's --set advice, followed literally (its KEY and the value it
# says was used), is accepted and silences that warning.
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
FIX=${CMF_FIXTURES:-}
G=$FIX/gguf/llama-f32.gguf
[ -n "$FIX" ] && [ -f "$G" ] || { echo "SKIP: fixtures absent (CMF_FIXTURES)"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 absent"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# drop KEYS from a GGUF's metadata, keeping tensor infos and data (re-aligned)
cat >"$T/strip.py" <<'PY'
import struct, sys
src, dst, drop = sys.argv[1], sys.argv[2], set(sys.argv[3:])
b = open(src, "rb").read()
assert b[:4] == b"GGUF"
ver, nt, nkv = struct.unpack_from("<IQQ", b, 4)
o = 24
SZ = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def skip_str(o): n, = struct.unpack_from("<Q", b, o); return o + 8 + n
def skip_val(t, o):
    if t == 8: return skip_str(o)
    if t == 9:
        at, n = struct.unpack_from("<IQ", b, o); o += 12
        for _ in range(n): o = skip_val(at, o)
        return o
    return o + SZ[t]
kvs, align, dropped = [], 32, 0
for _ in range(nkv):
    s = o; n, = struct.unpack_from("<Q", b, o); key = b[o + 8:o + 8 + n].decode(); o += 8 + n
    t, = struct.unpack_from("<I", b, o); o = skip_val(t, o + 4)
    if key == "general.alignment": align, = struct.unpack_from("<I", b, o - 4)
    if key in drop: dropped += 1; continue
    kvs.append(b[s:o])
assert dropped == len(drop), "keys not found"
ts = o
for _ in range(nt):
    o = skip_str(o); nd, = struct.unpack_from("<I", b, o); o += 4 + 8 * nd + 4 + 8
infos = b[ts:o]
data = (o + align - 1) // align * align
head = b"GGUF" + struct.pack("<IQQ", ver, nt, len(kvs)) + b"".join(kvs) + infos
head += b"\0" * ((-len(head)) % align)
open(dst, "wb").write(head + b[data:])
PY
python3 - "$G" "$T/m.gguf" llama.attention.layer_norm_rms_epsilon llama.attention.head_count_kv <"$T/strip.py"
[ -s "$T/m.gguf" ] || { fail "could not write the stripped GGUF"; exit 1; }
"$BIN" import-gguf "$G" --output "$T/full.cmf" --quiet --set rope_theta=10000 2>"$T/err" || fail "import of the fixture: $(cat "$T/err")"
grep -q "missing: used" "$T/err" && fail "the fixture with --set rope_theta got a default warning: $(cat "$T/err")"
"$BIN" import-gguf "$T/m.gguf" --output "$T/a.cmf" --quiet 2>"$T/err" || fail "import: $(cat "$T/err")"
grep -qF "metadata key 'llama.rope.freq_base' missing: used 10000.0 for rope_theta (a default; if the model differs, give --set rope_theta=VALUE)" "$T/err" ||
    fail "no rope.freq_base warning: $(cat "$T/err")"
grep -qF "metadata key 'llama.attention.layer_norm_rms_epsilon' missing: used 1e-6 for rms_norm_eps" "$T/err" ||
    fail "no rms epsilon warning: $(cat "$T/err")"
"$BIN" info "$T/a.cmf" --json >"$T/info" 2>"$T/err" || fail "info: $(cat "$T/err")"
python3 - "$T/info" <<'PY' || fail "provenance lacks defaults_filled: $(head -c 600 "$T/info")"
import json, sys
j = json.load(open(sys.argv[1]))
def find(o):
    if isinstance(o, dict):
        if "defaults_filled" in o: return o["defaults_filled"]
        for v in o.values():
            r = find(v)
            if r is not None: return r
    return None
d = find(j)
assert d["llama.rope.freq_base"] == {"value": 10000.0, "set": "rope_theta"}, d
assert d["llama.attention.layer_norm_rms_epsilon"]["set"] == "rms_norm_eps", d
PY
"$BIN" info "$T/a.cmf" >"$T/text" 2>&1 || fail "info: $(cat "$T/text")"
grep -qF "default:     llama.rope.freq_base was missing from the source; rope_theta = 10000.0 was used" "$T/text" ||
    fail "cmf info does not show the default: $(cat "$T/text")"
"$BIN" import-gguf "$T/m.gguf" --output "$T/b.cmf" --quiet --set rope_theta=10000 2>"$T/err" || fail "import --set: $(cat "$T/err")"
grep -q "rope.freq_base' missing" "$T/err" && fail "--set rope_theta still warned: $(cat "$T/err")"
grep -q "layer_norm_rms_epsilon' missing" "$T/err" || fail "--set rope_theta silenced the epsilon warning too"
grep -qF "metadata key 'llama.attention.head_count_kv' missing: used 4 for num_kv_heads" "$T/err" ||
    fail "no head_count_kv warning: $(cat "$T/err")"
"$BIN" info "$T/b.cmf" --json | grep -q '"llama.rope.freq_base"' && fail "--set rope_theta still recorded as a default"
python3 - "$G" "$T/r.gguf" llama.rope.dimension_count <"$T/strip.py" || fail "could not strip rope.dimension_count"
"$BIN" import-gguf "$T/r.gguf" --output "$T/r.cmf" --quiet --set rope_theta=10000 2>"$T/err" || fail "import without rope.dimension_count: $(cat "$T/err")"
line=$(grep -F "metadata key 'llama.rope.dimension_count' missing: used " "$T/err")
[ -n "$line" ] || fail "no rope.dimension_count warning: $(cat "$T/err")"
# the advice: "used VALUE for KEY (... give --set KEY=VALUE)"
used=$(printf '%s\n' "$line" | sed -n 's/.* missing: used \([^ ]*\) for \([^ ]*\) (.*give --set \([^=]*\)=VALUE).*/\1 \2 \3/p')
set -- $used
if [ $# != 3 ] || [ "$2" != "$3" ]; then
    fail "rope.dimension_count warning not of the form 'used V for K ... --set K=VALUE': $line"
else
    [ "$2" = partial_rotary_factor ] && [ "$1" = 1.0 ] || fail "rope.dimension_count warning names $1 for $2, expected 1.0 for partial_rotary_factor: $line"
    "$BIN" import-gguf "$T/r.gguf" --output "$T/r2.cmf" --quiet --set rope_theta=10000 --set "$3=$1" 2>"$T/err" ||
        fail "the printed advice --set $3=$1 was refused: $(cat "$T/err")"
    grep -q "rope.dimension_count' missing" "$T/err" && fail "--set $3=$1 still warned: $(cat "$T/err")"
    "$BIN" info "$T/r2.cmf" --json 2>/dev/null | python3 -c '
import json, sys
j = json.load(sys.stdin)
def find(o, k):
    if isinstance(o, dict):
        if k in o: return o[k]
        for v in o.values():
            r = find(v, k)
            if r is not None: return r
    return None
assert find(j, "partial_rotary_factor") == 1.0, find(j, "partial_rotary_factor")
assert "llama.rope.dimension_count" not in (find(j, "defaults_filled") or {}), find(j, "defaults_filled")
' || fail "after --set $3=$1 the header's partial_rotary_factor is not 1.0 or the default is still recorded"
fi
[ $fails = 0 ] && echo "gguf_defaults: ok" || { echo "$fails failure(s)"; exit 1; }
