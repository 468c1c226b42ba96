#!/usr/bin/env bash
# grammar_cli.sh — constrained decoding through the command: cmf run with
# --json-schema on a converted random-weight fixture, sampled at
# temperature 1.5 over many seeds (once through sample-then-check, once
# through the truncating sampler, which masks every token), always yields
# output that validates against the schema (tests/cli/lib/schema_check.py:
# python3-jsonschema with format checkers of its own); a fixed seed gives
# the same output twice; --grammar and --json; errors name the file, the
# line and column, or the keyword and its path. Without python3-jsonschema
# the outputs are still parsed as JSON, and the test reports itself
# skipped (77), not passed.
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
FIX=${CMF_FIXTURES:-}
SC=${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}/tests/cli/lib/schema_check.py
[ -n "$FIX" ] && [ -d "$FIX/hf-models/llama" ] || { echo "SKIP: fixtures absent (CMF_FIXTURES)"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 absent (the output checker)"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
unchecked=0 # 1: python3-jsonschema absent, outputs parsed as JSON only
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
has() { grep -q -- "$2" "$1" || fail "$3: $(basename "$1") lacks '$2': $(head -c 400 "$1")"; }
# check WHAT ARGS...: schema_check.py ARGS; its 77 (no jsonschema) marks the run unchecked
check() {
    local what=$1
    shift
    python3 "$SC" "$@" >"$T/check.log" 2>&1
    case $? in
    0) echo "$what: $(tail -n 1 "$T/check.log")" ;;
    77) unchecked=1 ;;
    *) fail "$what: $(cat "$T/check.log")" ;;
    esac
}

"$BIN" convert --model "$FIX/hf-models/llama" --output "$T/m.cmf" --quant q8 --quiet || { echo "FAIL: convert"; exit 1; }
"$BIN" run --help >"$T/h" 2>&1
for o in --grammar --json-schema --json; do has "$T/h" "$o" "run --help"; done

# schemas small enough for the fixture's 256-token context
cat >"$T/s1.json" <<'S'
{"type": "object", "properties": {"name": {"type": "string", "maxLength": 6},
 "age": {"type": "integer", "minimum": 0, "maximum": 120}, "color": {"enum": ["red", "green", "blue"]},
 "tags": {"type": "array", "items": {"type": "boolean"}, "maxItems": 3},
 "when": {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]}}, "required": ["name", "age", "color"]}
S
cat >"$T/s2.json" <<'S'
{"type": "array", "items": {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"},
 "ok": {"type": "boolean"}}, "required": ["id"], "additionalProperties": false}, "minItems": 1, "maxItems": 2}
S
cat >"$T/s3.json" <<'S'
{"$defs": {"pt": {"type": "object", "properties": {"x": {"type": "integer", "minimum": -9, "maximum": 9},
 "y": {"type": ["integer", "null"], "maximum": 50}}, "required": ["x", "y"]}},
 "type": "object", "properties": {"a": {"$ref": "#/$defs/pt"}, "b": {"$ref": "#/$defs/pt"},
 "at": {"type": "string", "format": "time"}}, "required": ["a"]}
S
N=${CMF_GRAMMAR_SEEDS:-15}
for s in s1 s2 s3; do
    for seed in $(seq 1 "$N"); do
        "$BIN" run "$T/m.cmf" -p "JSON please" --json-schema "$T/$s.json" --temp 1.5 --seed "$seed" -n 230 --quiet \
            >"$T/$s.$seed.a.out" 2>"$T/err" || fail "$s seed $seed (exit): $(cat "$T/err")"
        "$BIN" run "$T/m.cmf" -p "JSON please" --json-schema "$T/$s.json" --temp 1.5 --seed "$seed" -n 230 --quiet \
            --top-k 0 --top-p 1 --min-p 0 >"$T/$s.$seed.b.out" 2>"$T/err" || fail "$s seed $seed (exit, untruncated): $(cat "$T/err")"
        grep -q "before the grammar was complete" "$T/err" && fail "$s seed $seed: stopped early: $(cat "$T/err")"
    done
done
# a fixed seed: the same output twice
"$BIN" run "$T/m.cmf" -p "JSON please" --json-schema "$T/s1.json" --temp 1.5 --seed 1 -n 230 --quiet >"$T/again" 2>/dev/null
cmp -s "$T/again" "$T/s1.1.a.out" || fail "seed 1 twice: $(cat "$T/again") vs $(cat "$T/s1.1.a.out")"

check "cmf run --json-schema outputs" --schema "$T/s1.json" "$T"/s1.*.out --schema "$T/s2.json" "$T"/s2.*.out \
    --schema "$T/s3.json" "$T"/s3.*.out
grep -q "^schema_check: $((N * 6)) outputs" "$T/check.log" || fail "not all $((N * 6)) outputs checked: $(cat "$T/check.log")"

# --json: any object; --grammar: a GBNF file
for seed in 1 2 3; do
    "$BIN" run "$T/m.cmf" -p "x" --json --temp 1.5 --seed $seed -n 230 --quiet >"$T/j" 2>"$T/err" || fail "--json: $(cat "$T/err")"
    python3 -c 'import json,sys; v=json.load(open(sys.argv[1])); assert isinstance(v, dict)' "$T/j" 2>/dev/null \
        || grep -q "before the grammar was complete" "$T/err" || fail "--json output: $(cat "$T/j")"
done
printf 'root ::= ("yes" | "no") " " [0-9]{2,3} "!"\n' >"$T/g.gbnf"
for seed in 1 2 3 4 5; do
    "$BIN" run "$T/m.cmf" -p "x" --grammar "$T/g.gbnf" --temp 1.5 --seed $seed -n 50 --quiet >"$T/g" 2>"$T/err" || fail "--grammar: $(cat "$T/err")"
    grep -Eqx '(yes|no) [0-9]{2,3}!' "$T/g" || fail "--grammar output: '$(cat "$T/g")'"
done

# errors
"$BIN" run "$T/m.cmf" -p x --json --grammar "$T/g.gbnf" >"$T/o" 2>"$T/e"; [ $? -eq 2 ] || fail "--json with --grammar: exit"
has "$T/e" "exclude each other" "--json with --grammar"
printf 'root ::= "a"\nb ::= [x-\n' >"$T/bad.gbnf"
"$BIN" run "$T/m.cmf" -p x --grammar "$T/bad.gbnf" >"$T/o" 2>"$T/e"; [ $? -eq 1 ] || fail "bad grammar: exit"
has "$T/e" "bad.gbnf: grammar: line 2, column 7: unterminated character class" "bad grammar"
echo '{"type": "object", "properties": {"n": {"type": "number", "multipleOf": 2}}}' >"$T/bad.json"
"$BIN" run "$T/m.cmf" -p x --json-schema "$T/bad.json" >"$T/o" 2>"$T/e"; [ $? -eq 1 ] || fail "bad schema: exit"
has "$T/e" "bad.json: json schema: /properties/n/multipleOf: keyword 'multipleOf' not supported" "bad schema"
"$BIN" run "$T/m.cmf" -p x --json-schema "$T/none.json" >"$T/o" 2>"$T/e"; [ $? -eq 1 ] || fail "missing schema: exit"
has "$T/e" "none.json" "missing schema"
[ -s "$T/o" ] && fail "output written on a refused schema: $(cat "$T/o")"
if [ $fails -ne 0 ]; then
    echo "grammar_cli: $fails failures"
    exit 1
fi
if [ $unchecked = 1 ]; then
    echo "SKIP: python3-jsonschema absent: outputs parsed as JSON, not validated against their schemas"
    exit 77
fi
echo "grammar_cli: ok"
