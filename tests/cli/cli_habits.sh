#!/usr/bin/env bash
# cli_habits.sh — habits from llama.cpp and GNU tools: --name=value is the
# same as --name value (flags refuse a value); a positional PROMPT after FILE
# and -m FILE as in llama.cpp; an unknown option gets "did you mean" with the
# nearest known one; every command answers --version; a short option means
# one thing across commands; numeric options state their range in --help and
# refuse a value outside it (exit 2 naming the range).
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
SRC=${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
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
commands=$("$BIN" --help | sed -n '/^commands:/,/^$/p' | awk 'NF && !/^commands:/ {print $1}')
[ -n "$commands" ] || fail "cmf --help lists no commands"

# --- --version everywhere --------------------------------------------------------
want=$("$BIN" --version)
[ -n "$want" ] || fail "cmf --version printed nothing"
for c in $commands; do
    got=$("$BIN" $c --version 2>&1)
    [ "$got" = "$want" ] || fail "cmf $c --version: '$got', expected '$want'"
done

# --- did you mean ------------------------------------------------------------------
expect 2 "unknown option '--temperatur'; did you mean '--temperature'?" "$BIN" run x.cmf --temperatur 1
expect 2 "unknown option '--tmp'; did you mean '--temp'?" "$BIN" run x.cmf --tmp 1
expect 2 "unknown option '--top_p'; did you mean '--top-p'?" "$BIN" run x.cmf --top_p 1
expect 2 "unknown option '--outptu'; did you mean '--output'?" "$BIN" convert --outptu x
expect 2 "unknown option '--max-token'; did you mean '--max-tokens'?" "$BIN" chat x.cmf --max-token=3
"$BIN" run x.cmf --zzzzzzzz 2>"$T/err" </dev/null
grep -q "did you mean" "$T/err" && fail "a far-off option got a suggestion: $(cat "$T/err")"

# --- ranges --------------------------------------------------------------------------
expect 2 "--top-p: '2' is out of range (0..1)" "$BIN" run x.cmf --top-p 2
expect 2 "--top-k: '-5' is out of range (0..2147483647)" "$BIN" run x.cmf --top-k -5
expect 2 "--min-p: '1.5' is out of range (0..1)" "$BIN" chat x.cmf --min-p=1.5
expect 2 "--temp: '-1' is out of range (0..100)" "$BIN" run x.cmf --temp -1
expect 2 "-t: '99999' is out of range (0..4096)" "$BIN" logits x.cmf -t 99999
expect 2 "--logprobs: '21' is out of range (0..20)" "$BIN" run x.cmf --logprobs 21
expect 2 "--repetitions: '0' is out of range (1..64)" "$BIN" bench x.cmf --repetitions 0
expect 2 "--stride: '-3' is out of range (0..2147483647)" "$BIN" ppl x.cmf --stride -3
expect 2 "--queue: '-3' is out of range (1..1048576)" "$BIN" serve x.cmf --queue -3
expect 2 "--ctx: '0' is out of range (1..2147483647)" "$BIN" serve x.cmf --ctx 0
expect 2 "--batch-tokens: '0' is out of range (1..1048576)" "$BIN" serve x.cmf --batch-tokens 0
expect 2 "--kv-budget '0': expected bytes > 0" "$BIN" serve x.cmf --kv-budget 0
# every numeric option of run's and serve's --help states its range
has_ranges() { # CMD OPTION...
    local cmd=$1
    shift
    "$BIN" "$cmd" --help >"$T/help"
    for o in "$@"; do
        awk -v o="$o" '$0 ~ "^  (-[a-z]+, )?" o "[ ,]" {p=1} p {print} p && /\)/ {exit}' "$T/help" | tr '\n' ' ' |
            grep -qE '\((-?[0-9.]+\.\.[0-9.]+|[0-9.]+ or more)\)' || fail "$cmd --help: $o states no range"
    done
}
has_ranges run --top-p --top-k --min-p --temp --repeat-penalty --repeat-last-n --presence-penalty \
    --frequency-penalty --max-tokens --ctx --batch --threads --logprobs --blend
has_ranges serve --port --parallel --ctx --queue --batch-tokens --threads --max-tokens --max-connections \
    --request-timeout --idle-timeout

# --- one meaning per short option, as README.md states it ----------------------------
# The README's sentence ("a short option means the same in every command ...,
# except where cmf follows a llama.cpp tool ...") is read for its `-s`/`--long`
# pairs: the rule's pairs hold in every command's --help that has the short
# option (or its stated other spelling), each exception is in that command's
# --help, and no short option has two meanings the sentence does not name.
: >"$T/shorts"
for c in $commands; do
    "$BIN" $c --help 2>/dev/null | sed -nE "s/^  (-[A-Za-z]+), (--[a-z0-9-]+).*/$c \1 \2/p" >>"$T/shorts"
done
if command -v python3 >/dev/null; then
    python3 - "$SRC/README.md" "$T/shorts" >"$T/shortcheck" 2>&1 <<'PY' || fail "README's short-option rule against --help: $(cat "$T/shortcheck")"
import re, sys
text = " ".join(open(sys.argv[1]).read().split())
m = re.search(r"a short option means the same in every command(.*?)`cmf COMMAND --version`", text)
assert m, "README.md: the short-option sentence is missing"
rule, _, exc = m.group(1).partition("except where")
PAIR = r"`(-[A-Za-z]+)`/`(--[a-z0-9-]+)`"
rules, spelt, last = {}, {}, None  # spelt: (command, short) -> the other spelling named after a pair
for t in re.finditer(PAIR + r"|spelt `(--[a-z0-9-]+)` in ((?:`[a-z-]+`(?:, | and )?)+)", rule):
    if t.group(1):
        last = t.group(1)
        rules[last] = t.group(2)
    else:
        for c in re.findall(r"`([a-z-]+)`", t.group(4)):
            spelt[(c, last)] = t.group(3)
excepts = {}  # (command, short) -> long
for c, body in re.findall(r"`cmf ([a-z-]+)`(.*?)(?=`cmf [a-z-]+`|$)", exc):
    for s, l in re.findall(PAIR, body):
        excepts[(c, s)] = l
assert len(rules) >= 3 and excepts, f"README.md: could not read the pairs (rule {rules}, exceptions {excepts})"
helps = [tuple(line.split()) for line in open(sys.argv[2]) if line.strip()]
have = {(c, s): l for c, s, l in helps}
bad = []
for s, l in rules.items():
    if not any(hs == s and hl == l for _, hs, hl in helps):
        bad.append(f"README: {s} is {l}, but no command's --help has '{s}, {l}'")
for (c, s), l in list(spelt.items()) + list(excepts.items()):
    if have.get((c, s)) != l:
        bad.append(f"README: cmf {c} takes {s} as {l}, but its --help has {have.get((c, s))}")
meaning = {}
for c, s, l in helps:
    if (c, s) in excepts or (c, s) in spelt:
        continue
    if s in rules and l != rules[s]:
        bad.append(f"cmf {c}: {s} is {l}; README says {s} is {rules[s]} (or names the exception)")
    meaning.setdefault(s, set()).add(l)
for s, ls in meaning.items():
    if len(ls) > 1:
        bad.append(f"short option {s} has meanings {sorted(ls)} that README does not name")
print("\n".join(bad) or f"rule {rules}; spelt {spelt}; exceptions {excepts}")
sys.exit(1 if bad else 0)
PY
    cat "$T/shortcheck"
else
    echo "SKIP (README short-option check): python3 absent"
fi
grep -qx -- 'bench -p --n-prompt' "$T/shorts" && grep -qx -- 'run -p --prompt' "$T/shorts" ||
    fail "bench -p / run -p: $(grep -e ' -p ' "$T/shorts")"

# --- --name=value, positional prompt, -m FILE: the same answer ---------------------
M=$SRC/models/shakespeare
[ -f "$M/model.safetensors" ] || { echo "SKIP (model part): $M absent"; [ $fails = 0 ] && exit 0 || exit 1; }
"$BIN" convert --model="$M" --output="$T/m.cmf" --quiet 2>"$T/err" || fail "convert with --name=value: $(cat "$T/err")"
[ -s "$T/m.cmf" ] || { echo "$fails failure(s)"; exit 1; }
"$BIN" run "$T/m.cmf" --raw --prompt $'ROMEO:\n' -n 12 --greedy -q >"$T/a" 2>"$T/err" || fail "run: $(cat "$T/err")"
[ -s "$T/a" ] || fail "run printed nothing"
"$BIN" run "$T/m.cmf" --raw --prompt=$'ROMEO:\n' --max-tokens=12 --greedy -q >"$T/b" 2>&1 || fail "run --prompt=: $(cat "$T/b")"
cmp -s "$T/a" "$T/b" || fail "--prompt=P differs from --prompt P: $(head -c 200 "$T/b")"
"$BIN" run "$T/m.cmf" $'ROMEO:\n' --raw -n 12 --greedy -q >"$T/c" 2>&1 || fail "positional prompt: $(cat "$T/c")"
cmp -s "$T/a" "$T/c" || fail "a positional PROMPT differs from --prompt: $(head -c 200 "$T/c")"
"$BIN" run -m "$T/m.cmf" $'ROMEO:\n' --raw -n 12 --greedy -q >"$T/d" 2>&1 || fail "run -m: $(cat "$T/d")"
cmp -s "$T/a" "$T/d" || fail "run -m FILE differs: $(head -c 200 "$T/d")"
expect 2 "option --greedy takes no value" "$BIN" run "$T/m.cmf" hi --greedy=1
expect 2 "a positional PROMPT and --prompt" "$BIN" run "$T/m.cmf" hi --prompt ho
expect 2 "unexpected argument 'ho'" "$BIN" run -m "$T/m.cmf" hi ho

[ $fails = 0 ] && echo "cli_habits: ok" || { echo "$fails failure(s)"; exit 1; }
