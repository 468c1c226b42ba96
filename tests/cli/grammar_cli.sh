#!/usr/bin/env bash
# grammar_cli.sh — constrained decoding through the command: cmf run with
# --json-schema on a converted random-weight fixture, sampled at
# temperature 1.5 over many seeds (once through sample-then-check, once
# through the truncating sampler, which masks every token), always yields
# output that python3-jsonschema validates against the schema; a fixed
# seed gives the same output twice; --grammar and --json; errors name the
# file, the line and column, or the keyword and its path.
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
FIX=${CMF_FIXTURES:-}
[ -n "$FIX" ] && [ -d "$FIX/hf-models/llama" ] || { echo "SKIP: fixtures absent (CMF_FIXTURES)"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
has() { grep -q -- "$2" "$1" || fail "$3: $(basename "$1") lacks '$2': $(head -c 400 "$1")"; }

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

if python3 -c 'import jsonschema' 2>/dev/null; then
    python3 - "$T" "$N" <<'P' || fail "python3-jsonschema: invalid outputs (above)"
import json, sys, jsonschema
d, n = sys.argv[1], int(sys.argv[2])
V = jsonschema.Draft202012Validator
bad = done = 0
for s in ("s1", "s2", "s3"):
    schema = json.load(open(f"{d}/{s}.json"))
    for seed in range(1, n + 1):
        for v in "ab":
            text = open(f"{d}/{s}.{seed}.{v}.out", encoding="utf-8").read()
            try:
                V(schema, format_checker=V.FORMAT_CHECKER).validate(json.loads(text))
                done += 1
            except Exception as e:
                bad += 1
                print(f"INVALID {s} seed {seed} {v}: {text!r}: {str(e).splitlines()[0]}")
print(f"{done} outputs valid, {bad} invalid")
sys.exit(1 if bad or not done else 0)
P
else
    echo "NOTE: python3-jsonschema absent; checking JSON syntax only"
    for f in "$T"/s?.*.out; do python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$f" || fail "not JSON: $f"; done
fi

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

[ $fails -eq 0 ] && echo "grammar_cli: ok" || echo "grammar_cli: $fails failures"
[ $fails -eq 0 ]
