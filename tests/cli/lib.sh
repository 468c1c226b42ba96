#!/usr/bin/env bash
# lib.sh — helpers the CLI tests source: relerr (worst row of max|Δ| /
# max|ref| over two float32 files), within (a number at most a tolerance)
# and field (an array of a fixture's ref.json). relerr and within fail on
# NaN, Inf, empty or mismatched input, so a broken run can never compare as
# "close". Run directly, it tests itself.

# relerr REF GOT V: prints the worst row's max|ref - got| / max|ref| over
# rows of V float32 values. Prints "nan", says why on stderr and returns 1
# when a file is missing or empty, the sizes differ or are not whole rows,
# or any value is NaN or infinite (a row of zeros in REF against a nonzero
# row gives inf, so it fails too).
relerr() {
    local ref=$1 got=$2 v=$3 sa sb
    sa=$(stat -c %s "$ref" 2>/dev/null) || sa=0
    sb=$(stat -c %s "$got" 2>/dev/null) || sb=0
    if [ "$sa" = 0 ] || [ "$sb" = 0 ]; then
        echo "relerr: empty or missing input ($ref: $sa bytes, $got: $sb bytes)" >&2
        echo nan
        return 1
    fi
    if [ "$sa" != "$sb" ] || [ $((sa % (4 * v))) != 0 ]; then
        echo "relerr: $ref ($sa bytes) and $got ($sb bytes) are not the same whole number of $v-float rows" >&2
        echo nan
        return 1
    fi
    paste <(od -An -v -tf4 -w4 "$ref") <(od -An -v -tf4 -w4 "$got") | awk -v V="$v" '
        function finite(s) { return s !~ /nan|inf/ }
        !finite($1) || !finite($2) { bad = NR; exit }
        { r = int((NR - 1) / V); d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1;
          if (d > e[r]) e[r] = d; if (a > m[r]) m[r] = a; n = r }
        END {
            if (bad) { printf "relerr: value %d (row %d) is not finite\n", bad, int((bad - 1) / V) > "/dev/stderr"; print "nan"; exit 1 }
            w = 0
            for (r = 0; r <= n; r++) {
                if (m[r] == 0 && e[r] > 0) { printf "relerr: row %d of the reference is all zeros\n", r > "/dev/stderr"; print "nan"; exit 1 }
                x = m[r] == 0 ? 0 : e[r] / m[r]; if (x > w) w = x
            }
            printf "%.3g\n", w
        }'
}

# field FILE KEY: the JSON array KEY of a one-line JSON file (the fixtures'
# ref.json), as "a,b,c".
field() { sed -n "s/.*\"$2\": *\[\([^]]*\)\].*/\1/p" "$1" | tr -d ' '; }

# within X TOL: true when X is a finite number and X <= TOL.
within() {
    awk -v e="$1" -v t="$2" 'BEGIN { exit !(e ~ /^[-+]?[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$/ && e + 0 <= t + 0) }'
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -u
    T=$(mktemp -d)
    trap 'rm -rf "$T"' EXIT
    fails=0
    fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
    f32() { python3 -c 'import struct, sys; sys.stdout.buffer.write(struct.pack("<%df" % (len(sys.argv) - 1), *map(float, sys.argv[1:])))' "$@"; }
    command -v python3 >/dev/null || { echo "SKIP: python3 absent"; exit 77; }
    f32 1 -2 4 8 >"$T/ref"
    f32 1 -2 4 8 >"$T/same"
    f32 1 -2 4.4 8 >"$T/near"   # row 1: |Δ| 0.4 over max 8
    f32 nan nan nan nan >"$T/nan"
    f32 1 -2 inf 8 >"$T/inf"
    f32 1 -2 >"$T/short"
    : >"$T/empty"
    f32 0 0 4 8 >"$T/zrow"
    f32 0 1 4 8 >"$T/zrow_off"
    e=$(relerr "$T/ref" "$T/same" 2) && within "$e" 0 || fail "identical files: [$e]"
    e=$(relerr "$T/ref" "$T/near" 2) && [ "$e" = 0.05 ] || fail "0.4 of 8 should be 0.05: [$e]"
    within "$e" 0.05 && ! within "$e" 0.04 || fail "within 0.05 / 0.04 of $e"
    for bad in nan inf short empty missing; do
        e=$(relerr "$T/ref" "$T/$bad" 2 2>"$T/err") && fail "$bad output accepted as $e"
        within "$e" 1 && fail "$bad output: within accepted [$e]"
        [ -s "$T/err" ] || fail "$bad output: no reason given"
    done
    e=$(relerr "$T/nan" "$T/ref" 2 2>/dev/null) && fail "NaN reference accepted as $e"
    e=$(relerr "$T/ref" "$T/ref" 3 2>/dev/null) && fail "4 floats taken as rows of 3 ($e)"
    e=$(relerr "$T/zrow" "$T/zrow" 2) && within "$e" 0 || fail "equal rows of zeros: [$e]"
    e=$(relerr "$T/zrow" "$T/zrow_off" 2 2>/dev/null) && fail "zero reference row against a nonzero row accepted as $e"
    for x in nan inf -inf "" abc 1e-3x; do within "$x" 1 && fail "within accepted [$x]"; done
    within 1e-5 1e-4 && within 0 0 && ! within 2 1 || fail "within on plain numbers"
    printf '{"input_ids": [1, 2, 3], "greedy": []}\n' >"$T/ref.json"
    [ "$(field "$T/ref.json" input_ids)" = "1,2,3" ] || fail "field input_ids: $(field "$T/ref.json" input_ids)"
    [ -z "$(field "$T/ref.json" greedy)" ] && [ -z "$(field "$T/ref.json" nosuch)" ] || fail "field of an empty / absent array"
    [ "$fails" = 0 ] || { echo "$fails failure(s)"; exit 1; }
    echo "lib.sh: relerr and within fail on NaN, Inf, empty and mismatched input"
fi
