#!/usr/bin/env bash
# cli_options.sh — the one option parser and the one exit-status rule of
# every `cmf` command: an unknown option and a missing value exit 2 naming
# the option; --help exits 0 and lists known options, and every option it
# lists is one the parser accepts; a failure at run time (a missing file)
# exits 1 naming the file; `cmf --help` documents the rule.
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
SRC=${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect RC PATTERN CMD...: exit status RC and PATTERN (fixed string) in stderr.
expect() {
    local rc=$1 pat=$2 got
    shift 2
    "$@" </dev/null >"$T/out" 2>"$T/err"
    got=$?
    [ "$got" = "$rc" ] || { fail "'$*' exited $got, expected $rc: $(head -c 400 "$T/err")"; return; }
    [ -z "$pat" ] || grep -qF -- "$pat" "$T/err" || fail "'$*' stderr lacks '$pat': $(head -c 400 "$T/err")"
}

NOFILE=$T/absent.cmf
# command | an option taking a value | known options its --help must list | a run-time failure (args)
while IFS='|' read -r cmd valopt known failargs; do
    [ -n "$cmd" ] || continue
    pos=$NOFILE # a positional argument (keygen takes none)
    [ "$cmd" = keygen ] && pos=
    # unknown option, before and after a positional
    expect 2 "unknown option '--no-such-option'" "$BIN" $cmd --no-such-option
    expect 2 "unknown option '--no-such-option'" "$BIN" $cmd $pos --no-such-option
    # a value-taking option as the last argument ("-": the command has none)
    [ "$valopt" = - ] || expect 2 "option $valopt needs a value" "$BIN" $cmd $pos $valopt
    # --help: exit 0, on stdout, usage line, the known options listed
    "$BIN" $cmd --help >"$T/help" 2>"$T/err"
    rc=$?
    [ $rc = 0 ] || fail "$cmd --help exited $rc"
    [ -s "$T/err" ] && fail "$cmd --help wrote to stderr: $(cat "$T/err")"
    grep -q "^usage: cmf $cmd" "$T/help" || fail "$cmd --help: no usage line"
    # the option names of the generated list: "  -x, --name ARG  help" or "  --name ARG  help"
    sed -nE 's/^  (-[A-Za-z], )?(--[a-z0-9-]+)(, --[a-z0-9-]+)?( [^ ]+)?( .*)?$/\2/p' "$T/help" | sort -u >"$T/names"
    [ -s "$T/names" ] || fail "$cmd --help: no option list"
    for o in $known; do
        grep -qxF -- "$o" "$T/names" || fail "$cmd --help does not list $o: $(tr '\n' ' ' <"$T/names")"
    done
    # every listed option is accepted by the parser (never "unknown option")
    while read -r o; do
        line=$(grep -E "^  (-[A-Za-z], )?$o( |,|$)" "$T/help" | head -1)
        arg=$(sed -nE "s/^  (-[A-Za-z], )?$o(, --[a-z0-9-]+)? ([^ ]+).*/\3/p" <<<"$line")
        if [ -z "$arg" ]; then set -- "$o"; else set -- "$o" 1; fi
        timeout 20 "$BIN" $cmd "$@" </dev/null >/dev/null 2>"$T/err"
        grep -q "unknown option" "$T/err" && fail "$cmd: listed option $o refused: $(cat "$T/err")"
    done <"$T/names"
    # a failure at run time: exit 1, the message names the file
    eval "set -- $failargs"
    expect 1 "absent" "$BIN" $cmd "$@"
done <<EOF
info|-|--json --tensors --single --gpu|$NOFILE
verify|-|--all-shards --no-sig --quiet|$NOFILE
sign|--key|--key --quiet|$NOFILE --key $T/absent.key
keygen|--out|--out --force|--out $T/absent/key
convert|--quant|--model --output --quant --quant-attn --quant-ffn --quant-embed --dry-run --quiet|--model $T/absent --output $T/o.cmf
import-gguf|--set|--output --quant --set --tokenizer-json --dry-run --quiet|$T/absent.gguf --output $T/o.cmf
requant|--quant-ffn|--output --quant --quant-attn --quant-ffn --quant-embed --dry-run --force --quiet|$NOFILE --output $T/o.cmf --quant q8
compact|--output|--output --quiet|$NOFILE --output $T/o.cmf
tokenize|--jsonl|--special --pieces --text-file --jsonl|$T/absent hello
detokenize|--ids|--ids --skip-special|$T/absent --ids 1,2
template|--messages|--messages --tools --gen --kwargs --template|$T/absent --messages $T/m.json
run|--stop|--prompt --interactive --tokens --max-tokens --stop --ctx --batch --threads --kv-type --gpu --skill --lora --task --greedy --temp --top-k --seed|$NOFILE --tokens 1,2
chat|--system|--prompt --system --max-tokens --stop --kv-type --gpu --temp --seed|$NOFILE
logits|--tokens|--tokens --out --batch --ctx --threads --kv-type --gpu --skill --lora --task|$NOFILE --tokens 1,2 --tokens 3 --out $T/l.f32
bench|--seqs|--n-prompt --n-gen --threads --repetitions --ctx --seqs --kv-type --gpu --skill --lora --json|$NOFILE
ppl|--file|--file --ctx --stride --limit --batch --threads --kv-type --gpu --skill --lora --task --json|$NOFILE --file $T/absent.txt
lora merge|--output|--lora --output --quiet|$NOFILE --lora $T/absent.safetensors --output $T/o.cmf
skill add|--from|--from --id --name --min-delta --prompts --phi-layer --rank --quality --quiet|$NOFILE --from $T/absent --id x
skill list|-|--json|$NOFILE
skill explain|--id|--id|$NOFILE --id x
skill route|--prompt|--prompt --tokens --blend|$NOFILE -p hi
skill remove|--id|--id|$NOFILE --id x
skill compact|--output|--output|$NOFILE --output $T/o.cmf
skill export|--id|--id --output|$NOFILE --id x --output $T/o.cmf
skill apply|--output|--output --force|$NOFILE $T/absent2.cmf --output $T/o.cmf
EOF

# malformed values and argument counts are usage errors too
expect 2 "is not an integer" "$BIN" bench "$NOFILE" -r x
expect 2 "is not a finite number" "$BIN" run "$NOFILE" --temp warm
expect 2 "is not a finite number" "$BIN" chat "$NOFILE" --top-p nan
expect 2 "unexpected argument" "$BIN" info a.cmf b.cmf
expect 2 "missing FILE" "$BIN" verify
expect 2 "missing --key" "$BIN" sign "$NOFILE"
expect 2 "missing --out" "$BIN" keygen
expect 2 "at most 16 --stop values" "$BIN" run "$NOFILE" $(for i in $(seq 17); do echo --stop s$i; done)
expect 2 "expected KEY=JSON" "$BIN" import-gguf x.gguf --set novalue
expect 2 "--ids needs --tokens or --prompt" "$BIN" run "$NOFILE" --ids
# a bad session value is a usage error in every generation command, before any file is read
for c in run chat logits bench ppl; do
    case $c in logits) extra="--tokens 1 --out $T/l.f32" ;; ppl) extra="--file $T/x" ;; *) extra= ;; esac
    expect 2 "--kv-type: 'f8' is not one of" "$BIN" $c "$NOFILE" --kv-type f8 $extra
    expect 2 "--gpu: 'maybe' is not on, off or auto" "$BIN" $c "$NOFILE" --gpu maybe $extra
done
# aliases reach the same option as the long name
expect 1 "absent" "$BIN" sign "$NOFILE" -k "$T/absent.key" -q
expect 2 "option -k needs a value" "$BIN" sign "$NOFILE" -k
# "--" ends the options: what follows is a positional
expect 2 "unexpected argument '--json'" "$BIN" info "$NOFILE" -- --json

# the whole program: usage errors exit 2, the rule is in cmf --help
expect 2 "unknown command 'no-such-command'" "$BIN" no-such-command
"$BIN" </dev/null >/dev/null 2>&1
[ $? = 2 ] || fail "cmf with no arguments did not exit 2"
"$BIN" --help >"$T/help" || fail "cmf --help failed"
grep -q "0 success, 1 a failure at run time" "$T/help" && grep -q "2 a usage error" "$T/help" ||
    fail "cmf --help does not state the exit status rule: $(cat "$T/help")"

# the parsed values arrive: info --json on a real file prints its JSON
SAMPLE=$SRC/fuzz/corpus/fuzz_format_open/sample.cmf
if [ -f "$SAMPLE" ]; then
    "$BIN" info "$SAMPLE" --json >"$T/out" 2>"$T/err" || fail "info --json: $(cat "$T/err")"
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["version"] == 2, d' "$T/out" ||
        fail "info --json did not print the file's JSON: $(head -c 300 "$T/out")"
    "$BIN" info --single -- "$SAMPLE" >"$T/out" 2>"$T/err" || fail "info -- FILE: $(cat "$T/err")"
    grep -q "$SAMPLE" "$T/out" || fail "info -- FILE did not describe the file: $(head -c 300 "$T/out")"
fi
# tokenize: TEXT may start with one dash; after "--" even two
TOK=${CMF_FIXTURES:-$SRC/../shared/fixtures}/tokenizers/qwen3
if [ -d "$TOK" ]; then
    a=$("$BIN" tokenize "$TOK" -hello 2>"$T/err") || fail "tokenize TEXT '-hello': $(cat "$T/err")"
    b=$("$BIN" tokenize "$TOK" --text-file - <<<"-hello" 2>"$T/err")
    [ -n "$a" ] && [ "$a" != "[]" ] || fail "tokenize -hello printed '$a'"
    c=$("$BIN" tokenize "$TOK" -- --special 2>"$T/err") || fail "tokenize -- --special: $(cat "$T/err")"
    d=$("$BIN" tokenize "$TOK" --special --pieces -- --special 2>"$T/err") || fail "tokenize --pieces: $(cat "$T/err")"
    grep -q 'special' <<<"$d" || fail "tokenize -- --special: the text was not tokenized: $d"
    [ "$c" != "$a" ] || fail "tokenize -- --special gave the ids of '-hello'"
    [ -n "$b" ] || fail "tokenize --text-file - printed nothing"
else
    echo "note: $TOK absent, tokenize TEXT checks skipped"
fi

[ $fails -eq 0 ] && echo "cli_options: all passed" || echo "cli_options: $fails failed"
[ $fails -eq 0 ]
