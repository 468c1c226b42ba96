#!/usr/bin/env bash
# grammar_cli.sh — constrained decoding through the command: cmf run with
# --json-schema on a converted random-weight fixture, sampled at
# temperature 1.5 over many seeds (once through sample-then-check, once
# through the truncating sampler, which masks every token), always yields
# output that validates against the schema (tests/cli/lib/schema_check.py:
# python3-jsonschema with format checkers of its own); a fixed seed gives
# the same output twice; --grammar and --json; cmf chat with each of the
# three over a piped conversation, every reply checked; the three exclude
# each other; errors name the file, the line and column, or the keyword
# and its path. Without python3-jsonschema the outputs are still parsed
# as JSON, and the test reports itself skipped (77), not passed.
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
echo '{"oneOf": [{"type": "integer"}, {"type": "number"}]}' >"$T/one.json"
"$BIN" run "$T/m.cmf" -p x --json-schema "$T/one.json" >"$T/o" 2>"$T/e"; [ $? -eq 1 ] || fail "overlapping oneOf: exit"
has "$T/e" "one.json: json schema: /oneOf: branches 0 and 1 may both match; use anyOf" "overlapping oneOf"

# --- cmf chat: every reply of a piped conversation follows the grammar ----------
printf 'first question\nsecond one\nand a third\n' >"$T/chat.in"
# bounded: at most 5 runs of whitespace (21 characters each) and a few
# characters more, so -n 120 always completes a reply
echo '{"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99}},
 "required": ["n"], "additionalProperties": false}' >"$T/c1.json"
echo '{"oneOf": [{"enum": ["yes", "no"]}, {"type": "integer", "minimum": 0, "maximum": 9},
 {"type": "array", "items": {"type": "boolean"}, "maxItems": 2}]}' >"$T/c2.json"
for c in c1 c2; do
    for seed in 1 2 3; do
        "$BIN" chat "$T/m.cmf" --json-schema "$T/$c.json" --temp 1.5 --seed $seed -n 120 <"$T/chat.in" \
            >"$T/chat.$c.$seed.out" 2>"$T/err" || fail "chat --json-schema $c seed $seed (exit): $(cat "$T/err")"
        [ "$(grep -c '^\[prompt .* tokens' "$T/err")" = 3 ] || fail "chat $c seed $seed: not 3 answers: $(cat "$T/err")"
        grep -q "before the grammar was complete" "$T/err" && fail "chat $c seed $seed: stopped early: $(cat "$T/err")"
    done
    check "cmf chat --json-schema $c replies" --seq 3 --schema "$T/$c.json" "$T"/chat.$c.*.out
done
# --json: any object, unbounded (strings), so a reply may stop early (said on stderr);
# the runs without such a stop must be three objects
echo '{"type": "object"}' >"$T/obj.json"
complete=0
for seed in 1 2 3 4 5 6; do
    "$BIN" chat "$T/m.cmf" --json --temp 1.5 --seed $seed -n 120 <"$T/chat.in" >"$T/chat.j.$seed.out" 2>"$T/err" ||
        fail "chat --json seed $seed (exit): $(cat "$T/err")"
    grep -q "before the grammar was complete" "$T/err" && continue
    complete=$((complete + 1))
    check "cmf chat --json seed $seed" --seq 3 --schema "$T/obj.json" "$T/chat.j.$seed.out"
done
[ $complete -gt 0 ] || fail "chat --json: no run of 6 completed its 3 replies"
# --grammar: one reply a line
"$BIN" chat "$T/m.cmf" --grammar "$T/g.gbnf" --temp 1.5 --seed 4 -n 50 <"$T/chat.in" >"$T/chat.g.out" 2>"$T/err" ||
    fail "chat --grammar (exit): $(cat "$T/err")"
[ "$(grep -Ecx '(yes|no) [0-9]{2,3}!' "$T/chat.g.out")" = 3 ] || fail "chat --grammar replies: $(cat "$T/chat.g.out")"
# the three exclude each other, before anything is read
for pair in "--json --grammar $T/g.gbnf" "--json-schema $T/c1.json --json" "--grammar $T/g.gbnf --json-schema $T/c1.json"; do
    # shellcheck disable=SC2086 # the pair is two options
    "$BIN" chat "$T/m.cmf" $pair <"$T/chat.in" >"$T/o" 2>"$T/e"
    [ $? -eq 2 ] || fail "chat $pair: exit"
    has "$T/e" "cmf chat: --grammar, --json-schema and --json exclude each other" "chat $pair"
    [ -s "$T/o" ] && fail "chat $pair: answered: $(cat "$T/o")"
done
"$BIN" chat "$T/m.cmf" --json-schema "$T/one.json" <"$T/chat.in" >"$T/o" 2>"$T/e"; [ $? -eq 1 ] || fail "chat, overlapping oneOf: exit"
has "$T/e" "cmf chat: .*one.json: json schema: /oneOf: branches 0 and 1" "chat, overlapping oneOf"
[ -s "$T/o" ] && fail "chat answered on a refused schema: $(cat "$T/o")"

if [ $fails -ne 0 ]; then
    echo "grammar_cli: $fails failures"
    exit 1
fi
if [ $unchecked = 1 ]; then
    echo "SKIP: python3-jsonschema absent: outputs parsed as JSON, not validated against their schemas"
    exit 77
fi
echo "grammar_cli: ok"
