#!/usr/bin/env bash
# convert_template_check.sh — the converter refuses a chat template the
# runtime could not compile (nested past the template engine's depth limit,
# or a syntax error) before writing anything, naming the folder and the
# template; a valid template still converts, and the file opens.
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
FIX=${CMF_FIXTURES:-}
[ -n "$FIX" ] && [ -d "$FIX/hf-models/llama" ] || { echo "SKIP: fixtures absent (CMF_FIXTURES)"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
cp -r "$FIX/hf-models/llama" "$T/m"
rm -f "$T/m/chat_template.json"
refused() { # $1 = what, template text on stdin
    cat >"$T/m/chat_template.jinja"
    "$BIN" convert --quiet --model "$T/m" --output "$T/out.cmf" >"$T/o" 2>&1 && fail "$1: converted"
    grep -q "chat template" "$T/o" || fail "$1: message lacks 'chat template': $(head -c 300 "$T/o")"
    [ -e "$T/out.cmf" ] && fail "$1: output written"
    ls "$T" | grep -q "tmp" && fail "$1: temporary left"
}
{ printf '{{ 1'; for _ in $(seq 5000); do printf '+1'; done; printf ' }}'; } | refused "5000 chained additions"
printf '{%% for m in messages %%}{{ m.content }' | refused "unclosed expression"
printf '{%% for m in messages %%}{{ m.role }}: {{ m.content }}\n{%% endfor %%}' >"$T/m/chat_template.jinja"
"$BIN" convert --quiet --model "$T/m" --output "$T/ok.cmf" >"$T/o" 2>&1 || fail "valid template refused: $(cat "$T/o")"
echo '[{"role":"user","content":"hi"}]' >"$T/msgs.json"
"$BIN" template "$T/ok.cmf" --messages "$T/msgs.json" >"$T/r" 2>&1 || fail "template render: $(cat "$T/r")"
grep -q "user: hi" "$T/r" || fail "render: $(cat "$T/r")"
[ $fails -eq 0 ] && echo "convert_template_check: all checks passed"
exit $((fails > 0))
