#!/usr/bin/env bash
# chat_sched.sh — `cmf chat` answers through the serving scheduler, one
# request per turn on a slot that keeps the conversation's cache:
# (1) turn 2 reuses what turn 1 left in the cache (the paged cache shares
#     whole blocks of 16 positions): its footer says it reused turn 1's
#     prompt to its last whole block at least, and computed plus reused is
#     exactly the rendered turn-2 conversation (`cmf template` then
#     `cmf tokenize`); its answer equals a cold `cmf run --tokens` of that
#     conversation; after /reset, turn 1's message again reuses the whole
#     blocks of its prompt before the last token (which is run for its
#     logits) and gives turn 1's answer;
# (2) /skill to a skill that replaces a DeltaNet mixer's tensors (which a
#     request cannot run beside another binding) moves the chat to a
#     session: its answers equal `--skill ID`'s, then the backbone's;
# (3) Ctrl-C (SIGINT) while an answer is generated cancels that answer
#     (finish cancelled, fewer tokens than asked) and the chat answers the
#     next line; Ctrl-C at the prompt ends the program by SIGINT. The model
#     for (3) is a random 4-layer llama (bench/make_shape.py
#     llama-signal-test) slow enough to be caught mid-answer; --logprobs 0
#     prints one line per token, so the test sees generation under way.
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
SRC=${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}
M=$SRC/models/shakespeare
[ -f "$M/model.safetensors" ] || { echo "SKIP: $M absent"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 needed"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
"$BIN" convert --model "$M" --output "$T/m.cmf" --quiet 2>"$T/err" || { fail "convert: $(cat "$T/err")"; exit 1; }

# --- (1) prefix reuse between turns -------------------------------------------
# footer N: "computed reused" of the N-th answer's stats line
footer() { sed -n 's/^\[prompt \([0-9]*\) tokens (\([0-9]*\) reused).*/\1 \2/p' "$T/err" | sed -n "$1p"; }
first='Good morrow, my good lord; what tidings do you bring from the court of Mantua, and how fares the prince?'
printf '%s\nWhat news from Mantua?\n/save %s\n/reset\n%s\n/save %s\n' "$first" "$T/conv.json" "$first" "$T/conv3.json" |
    "$BIN" chat "$T/m.cmf" -n 8 --greedy >"$T/out" 2>"$T/err" || fail "chat: $(cat "$T/err")"
read -r c1 r1 <<<"$(footer 1)"
read -r c2 r2 <<<"$(footer 2)"
read -r c3 r3 <<<"$(footer 3)"
[ -n "${c1:-}" ] && [ -n "${c2:-}" ] && [ -n "${c3:-}" ] || { fail "expected 3 stats lines: $(cat "$T/err")"; exit 1; }
# the turn-2 conversation (user, assistant, user) rendered and tokenized;
# stdout is the three answers, each ended by a newline; after /reset the
# same first message is the first turn again
python3 - "$T/conv.json" "$T/conv3.json" "$T/out" "$T/turn2.json" "$T/answer2" <<'PY' || fail "saved conversations or stdout"
import json, sys
conv, conv3 = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert [m["role"] for m in conv] == ["user", "assistant", "user", "assistant"], conv
assert [m["role"] for m in conv3] == ["user", "assistant"], conv3
assert conv3 == conv[:2], (conv3, conv[:2])
out = open(sys.argv[3]).read()
want = "".join(a["content"] + "\n" for a in (conv[1], conv[3], conv3[1]))
assert out == want, (out, want)
json.dump(conv[:3], open(sys.argv[4], "w"))
open(sys.argv[5], "w").write(conv[3]["content"])
PY
"$BIN" template "$T/m.cmf" --messages "$T/turn2.json" --gen >"$T/rendered" 2>"$T/e" || fail "template: $(cat "$T/e")"
ids=$("$BIN" tokenize "$T/m.cmf" --text-file "$T/rendered" | tr -d '[] ')
n2=$(tr ',' '\n' <<<"$ids" | grep -c .)
[ "$r1" = 0 ] || fail "turn 1 reused $r1 tokens of an empty cache"
B=${CMF_KV_BLOCK:-16} # positions a KV block holds
[ "$c1" -ge $((2 * B)) ] || fail "turn 1's prompt of $c1 tokens is shorter than two blocks: the test shows little"
[ "$r2" -ge $((c1 / B * B)) ] && [ $((r2 % B)) = 0 ] ||
    fail "turn 2 reused $r2 tokens, not the $((c1 / B * B)) of turn 1's prompt's whole blocks: recomputed"
[ $((c2 + r2)) = "$n2" ] || fail "turn 2: $c2 computed + $r2 reused != the conversation's $n2 tokens"
[ "$c2" -lt $((n2 - c1 + 1)) ] || fail "turn 2 computed $c2 of $n2 tokens"
# turn 3 repeats turn 1's prompt: its whole blocks before the last token reused, the rest run
[ "$r3" = $(((c1 - 1) / B * B)) ] && [ $((c3 + r3)) = "$c1" ] ||
    fail "turn 3 (turn 1's prompt again): $c3 computed, $r3 reused; expected $(((c1 - 1) / B * B)) reused of $c1"
# the answer from the reused cache is the answer of a cold run on those ids
"$BIN" run "$T/m.cmf" --tokens "$ids" -n 8 --greedy --quiet >"$T/cold" 2>"$T/e" || fail "run --tokens: $(cat "$T/e")"
printf '%s\n' "$(cat "$T/answer2")" | cmp -s - "$T/cold" ||
    fail "turn 2 answered '$(cat "$T/answer2")', a cold run '$(cat "$T/cold")'"

# --- (2) /skill to a skill the scheduler runs only session-wide ---------------
# qwen3_next with a skill "gd" that replaces layer 0's DeltaNet out_proj: a
# request cannot run it beside the file's binding, so the chat moves to a
# session; the answers are those of --skill gd, then (/skill none) the
# backbone's
GEN=${CMF_BUILD_DIR:-}/test_convert_skill
Q=${CMF_FIXTURES:-}/hf-models/qwen3_next
if [ -x "$GEN" ] && [ -f "$Q/config.json" ]; then
    "$GEN" --write-donor "$Q" "$T/donQ" 4 model.layers.0.linear_attn.out_proj.weight >"$T/e" 2>&1 &&
        "$BIN" convert --model "$Q" --output "$T/q.cmf" --quant f32 --quiet 2>"$T/e" &&
        "$BIN" skill add "$T/q.cmf" --from "$T/donQ" --id gd -q 2>"$T/e" || fail "qwen3_next skill: $(cat "$T/e")"
    qchat() { "$BIN" chat "$T/q.cmf" --raw -n 4 --greedy --logprobs 0 "$@" 2>"$T/e" || fail "chat $*: $(cat "$T/e")"; }
    base=$(echo hello | qchat)
    gd=$(echo hello | qchat --skill gd)
    [ -n "$gd" ] && [ "$gd" != "$base" ] || fail "skill gd does not change the answer: '$gd'"
    both=$(printf '/skill gd\nhello\n/skill none\nhello\n' | qchat)
    [ "$both" = "$gd"$'\n'"$base" ] || fail "/skill gd then /skill none: '$both', expected '$gd' then '$base'"
else
    echo "SKIP (part 2): $GEN or $Q absent"
fi

# --- (3) Ctrl-C --------------------------------------------------------------
python3 "$SRC/bench/make_shape.py" llama-signal-test "$T/ck" >/dev/null 2>"$T/e" || { fail "make_shape: $(cat "$T/e")"; exit 1; }
"$BIN" convert --model "$T/ck" --output "$T/slow.cmf" --quant q8 --quiet 2>"$T/e" || { fail "convert slow: $(cat "$T/e")"; exit 1; }
set -m # a background job keeps SIGINT (without job control bash starts it ignored)
mkfifo "$T/in"
"$BIN" chat "$T/slow.cmf" --raw -n 1000 --ignore-eos --greedy --logprobs 0 <"$T/in" >"$T/lp" 2>"$T/err" &
pid=$!
exec 3>"$T/in"
# wait_count N COUNT...: until the command COUNT prints N or more (60 s at
# most, while the chat runs)
wait_count() {
    local n=$1 i
    shift
    for i in $(seq 1 600); do
        [ "$("$@")" -ge "$n" ] && return 0
        kill -0 $pid 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
out_lines() { wc -l <"$T/lp"; }                 # tokens printed so far
stats_lines() { grep -c '^\[prompt' "$T/err"; } # answers ended so far
lines_at_least() { wait_count "$1" out_lines; }
wait_answers() { wait_count "$1" stats_lines; }
echo 'aaaa' >&3
lines_at_least 2 || fail "no token of the first answer: $(cat "$T/err")"
kill -INT $pid
wait_answers 1 || fail "the first answer did not end after SIGINT: $(cat "$T/err")"
grep -q 'finish: cancelled' "$T/err" || fail "first answer: not cancelled: $(cat "$T/err")"
n_first=$(wc -l <"$T/lp")
[ "$n_first" -lt 1000 ] || fail "the cancelled answer has all $n_first tokens"
echo 'aaa' >&3
lines_at_least $((n_first + 2)) || fail "no token of the second answer: $(cat "$T/err")"
kill -INT $pid
wait_answers 2 || fail "the second answer did not end after SIGINT: $(cat "$T/err")"
kill -0 $pid 2>/dev/null || fail "the chat ended after Ctrl-C in an answer: $(cat "$T/err")"
sleep 0.3 # back at the prompt: reading the next line
kill -INT $pid
for i in $(seq 1 300); do
    wait $pid
    rc=$?
    [ $rc = $((128 + $(kill -l STOP))) ] || break
    sleep 0.1
done
exec 3>&-
[ "$rc" = $((128 + $(kill -l INT))) ] || fail "Ctrl-C at the prompt: exit $rc, expected $((128 + $(kill -l INT))): $(cat "$T/err")"
[ "$(grep -c 'finish: cancelled' "$T/err")" = 2 ] || fail "expected 2 cancelled answers: $(cat "$T/err")"

[ $fails = 0 ] && echo "chat_sched: ok" || { echo "$fails failure(s)"; exit 1; }
