#!/usr/bin/env bash
# chat_input.sh — `cmf chat` on hostile or long input, through a pipe. The
# Shakespeare checkpoint gets a small chat template (so turns accumulate)
# and is converted. A line that is not UTF-8 (a stray 0xff, a truncated
# sequence, an overlong encoding, a NUL) is refused on its own, naming the
# line, and the chat answers the lines after it. A conversation longer
# than --ctx keeps going: the oldest turns are dropped and stderr says so;
# a single line longer than the context is refused alone (also in raw
# mode, without a template). --prompt and --system that are not UTF-8 are
# refused before the model is opened.
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
FIX=${CMF_FIXTURES:-}
S=$FIX/shakespeare
[ -n "$FIX" ] && [ -f "$S/model.safetensors" ] || { echo "SKIP: fixtures absent (CMF_FIXTURES)"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

mkdir "$T/ck"
cp "$S/config.json" "$S/model.safetensors" "$S/tokenizer.json" "$S/tokenizer_config.json" "$T/ck/"
printf '%s' "{% for m in messages %}{{ m['role'] | upper }}: {{ m['content'] }}
{% endfor %}{% if add_generation_prompt %}ASSISTANT:{% endif %}" >"$T/ck/chat_template.jinja"
"$BIN" convert --model "$T/ck" --output "$T/c.cmf" --quiet 2>"$T/err" || { fail "convert: $(cat "$T/err")"; exit 1; }
answers() { grep -c '^\[prompt .* tokens' "$1"; } # one stats line per answer

# --- invalid UTF-8, line by line ----------------------------------------------
printf 'ROMEO: good morrow\n\xff\xfe stray bytes\nhalf a char \xc3\nover\xc0\xaflong\nnul\000here\nJULIET: and to you\n' |
    "$BIN" chat "$T/c.cmf" -n 4 --greedy >"$T/out" 2>"$T/err"
rc=$?
[ $rc = 0 ] || fail "chat exited $rc after bad lines: $(cat "$T/err")"
[ "$(answers "$T/err")" = 2 ] || fail "expected answers to the 2 good lines: $(cat "$T/err")"
for n in 2 3 4 5; do
    grep -q "cmf chat: input line $n: not valid UTF-8 (byte 0x[0-9a-f]* at offset [0-9]*.*); not sent" "$T/err" ||
        fail "no refusal naming line $n: $(cat "$T/err")"
done
grep -q "line 2: not valid UTF-8 (byte 0xff at offset 0)" "$T/err" || fail "line 2: wrong byte/offset: $(cat "$T/err")"
grep -q "line 4: not valid UTF-8 (byte 0xc0 at offset 4)" "$T/err" || fail "overlong: wrong byte/offset: $(cat "$T/err")"
grep -q "line 5: not valid UTF-8 (byte 0x00 at offset 3, a NUL)" "$T/err" || fail "NUL: $(cat "$T/err")"
grep -q "dict object" "$T/err" && fail "the template saw a bad line: $(cat "$T/err")"
# well-formed multi-byte text is fine
printf 'caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\n' | "$BIN" chat "$T/c.cmf" -n 2 --greedy >/dev/null 2>"$T/err" ||
    fail "valid UTF-8 refused: $(cat "$T/err")"
grep -q "not valid UTF-8" "$T/err" && fail "valid UTF-8 refused: $(cat "$T/err")"
"$BIN" run "$T/c.cmf" --prompt "$(printf 'x\xffy')" -n 2 >/dev/null 2>"$T/err" && fail "run accepted a non-UTF-8 --prompt"
grep -q -- "--prompt: not valid UTF-8 (byte 0xff at offset 1)" "$T/err" || fail "--prompt message: $(cat "$T/err")"
"$BIN" chat "$T/c.cmf" --system "$(printf '\xe2\x82')" </dev/null >/dev/null 2>"$T/err" && fail "chat accepted a non-UTF-8 --system"
grep -q -- "--system: not valid UTF-8" "$T/err" || fail "--system message: $(cat "$T/err")"

# --- a conversation longer than the context -------------------------------------
for i in 1 2 3 4 5 6 7 8; do echo "First Citizen: we are accounted poor citizens, the patricians good, number $i"; done >"$T/long.txt"
"$BIN" chat "$T/c.cmf" --ctx 96 -n 8 --greedy <"$T/long.txt" >"$T/out" 2>"$T/err"
rc=$?
[ $rc = 0 ] || fail "long chat exited $rc: $(cat "$T/err")"
[ "$(answers "$T/err")" = 8 ] || fail "expected 8 answers in the long chat: $(cat "$T/err")"
grep -q "cmf chat: the conversation passed the context (96 tokens): dropped the \([0-9]* \)\?oldest turn" "$T/err" ||
    fail "no note about dropped turns: $(cat "$T/err")"
grep -q "exceeds n_ctx" "$T/err" && fail "the chat hit the context instead of dropping turns: $(cat "$T/err")"
# every prompt stayed inside the context
awk '/^\[prompt/ { if ($2 + 0 > 96) bad = 1 } END { exit bad }' "$T/err" || fail "a prompt passed --ctx: $(cat "$T/err")"
# with room enough nothing is dropped
"$BIN" chat "$T/c.cmf" --ctx 512 -n 8 --greedy <"$T/long.txt" >/dev/null 2>"$T/err" || fail "chat --ctx 512: $(cat "$T/err")"
grep -q "dropped" "$T/err" && fail "turns dropped although the context holds them: $(cat "$T/err")"
# one line longer than the whole context is refused alone; the next is answered
{ printf 'word%.0s ' $(seq 1 120); echo; echo "ROMEO: a short line"; } |
    "$BIN" chat "$T/c.cmf" --ctx 64 -n 4 --greedy >/dev/null 2>"$T/err"
rc=$?
[ $rc = 0 ] || fail "chat with an overlong line exited $rc: $(cat "$T/err")"
grep -q "this message needs [0-9]* tokens, more than the context holds (64): not sent" "$T/err" ||
    fail "no refusal of the overlong line: $(cat "$T/err")"
[ "$(answers "$T/err")" = 1 ] || fail "the line after the overlong one got no answer: $(cat "$T/err")"

# the same in raw mode (the plain checkpoint has no template): refused alone
"$BIN" convert --model "$S" --output "$T/raw.cmf" --quiet 2>"$T/err" || fail "convert raw: $(cat "$T/err")"
{ printf 'word%.0s ' $(seq 1 120); echo; printf 'bad \xff\n'; echo "ROMEO: a short line"; } |
    "$BIN" chat "$T/raw.cmf" --ctx 64 -n 4 --greedy >"$T/out" 2>"$T/err"
rc=$?
[ $rc = 0 ] || fail "raw chat with an overlong line exited $rc: $(cat "$T/err")"
grep -q "this message needs [0-9]* tokens, more than the context holds (64): not sent" "$T/err" ||
    fail "raw chat: no refusal of the overlong line: $(cat "$T/err")"
grep -q "input line 2: not valid UTF-8 (byte 0xff at offset 4)" "$T/err" || fail "raw chat: bad line: $(cat "$T/err")"
[ "$(answers "$T/err")" = 1 ] && grep -q "^ROMEO: a short line" "$T/out" ||
    fail "raw chat: the short line got no answer: $(cat "$T/out") $(cat "$T/err")"

[ $fails -eq 0 ] && echo "chat_input: all passed"
exit $((fails > 0))
