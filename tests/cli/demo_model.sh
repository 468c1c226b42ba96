#!/usr/bin/env bash
# demo_model.sh — the demo model shipped in models/shakespeare against its
# shipped transformers references; needs no fixtures, so it always runs.
# After `cmf convert` to bf16 (the checkpoint's own dtype; f32 gives the
# same numbers) and q8: logits of ref.json's prompt within a row-relative
# 1e-3 of ref_logits.f32 for bf16 (measured 2.2e-5) and 2e-2 for q8
# (measured 6.7e-3); for bf16 the 64-token greedy ids equal ref.json's
# `greedy` and the greedy text ref_greedy.txt; perplexity on val.txt by the
# model card's protocol within 0.01 of val_ppl_4096_ctx256 (17.7367) for
# bf16 and 0.05 for q8. Also: verify, the tokenizer, seeded sampling, the
# chat template and a chat turn.
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
SRC=${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}
M=$SRC/models/shakespeare
. "$SRC/tests/cli/lib/logits.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
for f in config.json tokenizer.json model.safetensors chat_template.jinja ref.json ref_logits.f32 ref_greedy.txt val.txt; do
    [ -s "$M/$f" ] || { echo "FAIL: $M/$f missing or empty (the demo model ships with the repository)"; exit 1; }
done
# ref.json: one number per line inside "greedy": [...] and "input_ids": [...]
ids() { tr -d ' \n' <"$M/ref.json" | sed -n "s/.*\"$1\":\[\([0-9,]*\)\].*/\1/p"; }
prompt=$(ids input_ids)
want="[$(ids greedy | sed 's/,/, /g')]"
ref_ppl=$(tr -d ' \n' <"$M/ref.json" | sed -n 's/.*"val_ppl_4096_ctx256":\([0-9.]*\).*/\1/p')
[ -n "$prompt" ] && [ "$want" != "[]" ] && [ -n "$ref_ppl" ] || { echo "FAIL: cannot read $M/ref.json"; exit 1; }

for q in bf16 q8; do
    out=$T/shk.$q.cmf
    "$BIN" convert --model "$M" --output "$out" --quant $q --quiet >"$T/log" 2>&1 || { fail "convert $q: $(cat "$T/log")"; continue; }
    case $q in q8) tol=2e-2 ;; *) tol=1e-3 ;; esac
    rm -f "$T/l.f32"
    "$BIN" logits "$out" --tokens "$prompt" --out "$T/l.f32" >"$T/log" 2>&1 || fail "logits $q: $(cat "$T/log")"
    msg=$(logits_compare "$T/l.f32" "$M/ref_logits.f32" 1024 $tol) || fail "$q logits: $msg"
    echo "demo model $q logits: $msg"
    got=$("$BIN" run "$out" --tokens "$prompt" -n 64 --greedy --ids --quiet 2>"$T/log") || fail "run $q: $(cat "$T/log")"
    match=identical; [ "$got" = "$want" ] || match=differs
    ppl=$("$BIN" ppl "$out" --file "$M/val.txt" --ctx 256 --stride 256 --limit 4096 --json 2>"$T/log" |
          sed -n 's/.*"ppl": \([0-9.]*\).*/\1/p')
    [ -n "$ppl" ] || { fail "ppl $q: $(cat "$T/log")"; continue; }
    delta=$(awk -v a="$ppl" -v b="$ref_ppl" 'BEGIN { printf "%+.4f", a - b }')
    echo "demo model $q: greedy(64) ids $match, ppl $ppl (reference $ref_ppl, delta $delta)"
    case $q in q8) ptol=0.05 ;; *) ptol=0.01 ;; esac
    awk -v d="$delta" -v t=$ptol 'BEGIN { exit !(d <= t && d >= -t) }' || fail "$q ppl delta $delta beyond $ptol"
    [ $q = q8 ] || [ "$match" = identical ] || fail "$q greedy ids: $got"
    # the model card's row for $q quotes what was just measured (factor 2 on the error, 0.002 on ppl)
    row=$(grep -E "^\| $q( |\b)" "$M/README.md" | grep -v 'not in the test' | head -1)
    card_err=$(awk -F'|' '{split($3, a, " "); print a[1]}' <<<"$row")
    card_ppl=$(awk -F'|' '{split($5, a, " "); print a[1]}' <<<"$row")
    meas_err=$(sed -nE 's/^max row-relative error ([0-9.e+-]+) .*/\1/p' <<<"$msg")
    if [ -z "$card_err" ] || [ -z "$card_ppl" ] || [ -z "$meas_err" ]; then
        fail "model card row for $q unreadable: '$row' (measured '$msg')"
    else
        awk -v c="$card_err" -v m="$meas_err" 'BEGIN { exit !(c + 0 > 0 && m <= 2 * c && c <= 2 * m) }' ||
            fail "model card quotes $q logits error $card_err, measured $meas_err"
        awk -v c="$card_ppl" -v m="$ppl" 'BEGIN { d = c - m; exit !(d <= 0.002 && d >= -0.002) }' ||
            fail "model card quotes $q perplexity $card_ppl, measured $ppl"
    fi
done

B=$T/shk.bf16.cmf
[ -f "$B" ] || { echo "FAIL: no bf16 conversion, the rest cannot run"; exit 1; }
"$BIN" verify "$B" >"$T/log" 2>&1 && grep -q "hash chain OK" "$T/log" || fail "verify: $(cat "$T/log")"
[ "$("$BIN" tokenize "$B" $'ROMEO:\n' 2>&1)" = "[${prompt//,/, }]" ] || fail "tokenize of the prompt: $("$BIN" tokenize "$B" $'ROMEO:\n' 2>&1)"
# greedy text from the prompt text: the prompt echoed, the reference text, a newline
"$BIN" run "$B" --raw --prompt $'ROMEO:\n' -n 64 --greedy --quiet >"$T/greedy.txt" 2>"$T/log" || fail "run --raw: $(cat "$T/log")"
{ printf 'ROMEO:\n'; cat "$M/ref_greedy.txt"; printf '\n'; } >"$T/want.txt"
cmp -s "$T/greedy.txt" "$T/want.txt" || fail "greedy text differs from ref_greedy.txt: $(cat "$T/greedy.txt")"
# seeded sampling: the same seed gives the same text, and some text
s1=$("$BIN" run "$B" --raw --prompt $'JULIET:\n' -n 48 --temp 0.8 --top-p 0.95 --seed 42 --quiet 2>&1)
s2=$("$BIN" run "$B" --raw --prompt $'JULIET:\n' -n 48 --temp 0.8 --top-p 0.95 --seed 42 --quiet 2>&1)
[ "$s1" = "$s2" ] || fail "seed 42 twice gave two texts"
[ "${#s1}" -gt 40 ] || fail "sampled text too short: '$s1'"
# the chat template frames a conversation as a play
printf '[{"role":"user","content":"Good morrow. "},{"role":"assistant","content":"Good morrow, sir."},{"role":"user","content":"Wilt thou walk?"}]' >"$T/m.json"
"$BIN" template "$B" --messages "$T/m.json" --gen >"$T/tpl.txt" 2>"$T/log" || fail "template: $(cat "$T/log")"
printf 'ROMEO:\nGood morrow.\n\nJULIET:\nGood morrow, sir.\n\nROMEO:\nWilt thou walk?\n\nJULIET:\n' >"$T/tpl.want"
cmp -s "$T/tpl.txt" "$T/tpl.want" || fail "template rendering: $(od -c "$T/tpl.txt" | head -5)"
# one chat turn: greedy from the rendered turn equals greedy from the same text raw
printf 'Good morrow.\n' | "$BIN" chat "$B" --greedy -n 24 --quiet >"$T/chat.txt" 2>"$T/log" || fail "chat: $(cat "$T/log")"
"$BIN" run "$B" --raw --prompt $'ROMEO:\nGood morrow.\n\nJULIET:\n' -n 24 --greedy --quiet >"$T/raw.txt" 2>"$T/log" || fail "raw: $(cat "$T/log")"
answer=$(cat "$T/chat.txt")
raw=$(tail -c +"$(printf 'ROMEO:\nGood morrow.\n\nJULIET:\n' | wc -c)" "$T/raw.txt" | tail -c +2)
[ -n "$answer" ] || fail "chat gave no answer"
[ "$answer" = "$raw" ] || fail "chat answer '$answer' differs from the raw completion of the rendered turn '$raw'"
echo "demo model chat: ROMEO: Good morrow. / JULIET: ${answer%%$'\n'*}"
[ $fails -eq 0 ] && echo "demo_model: all passed"
exit $((fails > 0))
