# shellcheck shell=bash
# logits.sh — sourced by CLI tests: compare two f32 logit files, row by row.
# logits_compare GOT REF VOCAB TOL prints "max row-relative error E" and
# succeeds when E <= TOL; it fails, saying why, on a missing or empty file,
# sizes that differ or are not whole rows, NaN or Inf on either side, or a
# reference row that is all zero (no scale to measure against).
# Row-relative error of a row: max |got - ref| / max |ref| over the row.
# field FILE KEY prints the JSON array KEY of a one-line JSON file (a
# fixture's ref.json) as "a,b,c". tests/cli/lib_logits.sh tests both.
logits_compare() {
    local got=$1 ref=$2 vocab=$3 tol=$4 gs rs
    [ -s "$got" ] || { echo "$got: missing or empty"; return 1; }
    [ -s "$ref" ] || { echo "$ref: missing or empty"; return 1; }
    gs=$(stat -c %s "$got") rs=$(stat -c %s "$ref")
    [ "$gs" = "$rs" ] || { echo "$got: $gs bytes, reference $ref has $rs"; return 1; }
    [ $((rs % (4 * vocab))) = 0 ] || { echo "$ref: $rs bytes is not whole rows of $vocab f32"; return 1; }
    paste <(od -An -v -tf4 -w4 "$got") <(od -An -v -tf4 -w4 "$ref") | awk -v V="$vocab" -v T="$tol" '
        function num(s) { return s ~ /^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$/ }
        NF != 2 { printf "line %d: expected two values, found %d\n", NR, NF; bad = 1; exit }
        !num($1) || !num($2) { printf "row %d column %d: not a finite number (got %s, reference %s)\n",
                               int((NR - 1) / V), (NR - 1) % V, $1, $2; bad = 1; exit }
        { r = int((NR - 1) / V); d = $1 - $2; if (d < 0) d = -d; a = $2 < 0 ? -$2 : $2;
          if (d > e[r]) e[r] = d; if (a > m[r]) m[r] = a; n = r + 1 }
        END {
            if (bad) exit 1
            if (!n) { print "no values read"; exit 1 }
            w = 0
            for (r = 0; r < n; r++) {
                if (m[r] == 0) { printf "reference row %d is all zero\n", r; exit 1 }
                x = e[r] / m[r]; if (x > w) w = x
            }
            printf "max row-relative error %.3g (tolerance %g, %d rows of %d)\n", w, T, n, V
            exit !(w <= T)
        }'
}

field() { sed -n "s/.*\"$2\": *\[\([^]]*\)\].*/\1/p" "$1" | tr -d ' '; }
