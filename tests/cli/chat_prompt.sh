#!/usr/bin/env bash
# chat_prompt.sh — `cmf chat` on a terminal, driven through tmux: a one-line
# banner says how to leave; the line is edited (Backspace, Ctrl-A) and Up
# recalls the last line; /help lists the commands; /system, /reset, /save
# and /bye act and never reach the model (the saved JSON holds exactly the
# turns sent); an unknown /command is refused; Ctrl-D leaves with status 0.
# Piped stdin stays plain: no banner, no prompt, slash commands still work.
# /skill ID on a file with two skills (prose, code: the demo model with one
# tensor perturbed each, written by test_convert_skill --write-donor): each
# answer equals `cmf chat --skill ID`'s, /skill none the backbone's, and an
# unknown id is refused naming it, leaving the running skill as it was.
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
SRC=${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}
M=$SRC/models/shakespeare
[ -f "$M/model.safetensors" ] || { echo "SKIP: $M absent"; exit 77; }
command -v tmux >/dev/null || { echo "SKIP: tmux absent (scripts/deps.txt, group ci)"; exit 77; }
T=$(mktemp -d)
SOCK=cmf-chat-$$
trap 'tmux -L $SOCK kill-server 2>/dev/null; rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
"$BIN" convert --model "$M" --output "$T/m.cmf" --quiet 2>"$T/err" || { fail "convert: $(cat "$T/err")"; exit 1; }
# the two-skill file (the perturbation is large enough that each skill's
# greedy answer differs from the backbone's: checked below)
GEN=${CMF_BUILD_DIR:-}/test_convert_skill
F=$T/m.cmf
if [ -x "$GEN" ]; then
    "$GEN" --write-donor "$M" "$T/donA" 4 model.layers.1.mlp.down_proj.weight >"$T/err" 2>&1 &&
        "$GEN" --write-donor "$M" "$T/donB" 4 model.layers.2.self_attn.v_proj.weight >"$T/err" 2>&1 ||
        { fail "donors: $(cat "$T/err")"; exit 1; }
    cp "$T/m.cmf" "$T/sk.cmf"
    "$BIN" skill add "$T/sk.cmf" --from "$T/donA" --id prose -q 2>"$T/err" &&
        "$BIN" skill add "$T/sk.cmf" --from "$T/donB" --id code -q 2>"$T/err" || { fail "skill add: $(cat "$T/err")"; exit 1; }
    F=$T/sk.cmf
else
    echo "SKIP (/skill part): $GEN not built"
fi

keys() { tmux -L $SOCK send-keys -t chat "$@"; }
screen() { tmux -L $SOCK capture-pane -p -J -S -200 -t chat; }
# wait_for PATTERN [N]: until the screen shows PATTERN N times (default 1), 60 s at most
wait_for() {
    local i n=${2:-1}
    for i in $(seq 1 600); do
        [ "$(screen | grep -cF -- "$1")" -ge "$n" ] && return 0
        sleep 0.1
    done
    fail "timed out waiting for '$1' x$n: $(screen | tail -15)"
    return 1
}
tmux -L $SOCK new-session -d -s chat -x 160 -y 50 \
    "'$BIN' chat '$F' -n 6 --greedy 2>&1; echo CHAT-EXIT=\$?; sleep 60"
wait_for "/bye or Ctrl-D to leave" || exit 1
wait_for "> "
keys -l 'Good morxx'
keys BSpace BSpace
keys -l 'row'
keys C-a
keys -l '  '
keys Enter
wait_for "finish:" 1
keys Up
keys Enter
wait_for "finish:" 2
keys -l '/help'
keys Enter
wait_for "/save FILE"
keys -l '/nosuch'
keys Enter
wait_for "unknown command '/nosuch'"
keys -l '/system Speak as Juliet.'
keys Enter
wait_for "system message set"
keys -l "/save $T/a.json"
keys Enter
wait_for "saved 5 messages"
keys -l '/reset'
keys Enter
wait_for "conversation cleared"
keys -l "/save $T/b.json"
keys Enter
wait_for "saved 1 messages"
if [ "$F" = "$T/sk.cmf" ]; then
    keys -l '/skill prose'
    keys Enter
    wait_for "running skill prose"
    keys -l '/skill nosuch'
    keys Enter
    wait_for "skill 'nosuch' not in this file"
    keys -l '/skill none'
    keys Enter
    wait_for "running the backbone alone"
fi
keys C-d
wait_for "CHAT-EXIT="
screen >"$T/screen"
grep -q "CHAT-EXIT=0" "$T/screen" || fail "chat did not exit 0: $(tail -5 "$T/screen")"
grep -q '\^\[\[A' "$T/screen" && fail "Up printed an escape sequence"
[ "$(grep -c 'finish:' "$T/screen")" = 2 ] || fail "expected 2 answers: $(cat "$T/screen")"
python3 - "$T/a.json" "$T/b.json" <<'PY' || fail "saved conversations wrong"
import json, sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
roles = [m["role"] for m in a]
assert roles == ["system", "user", "assistant", "user", "assistant"], roles
assert a[0]["content"] == "Speak as Juliet.", a[0]
# the edited line (Backspace, Ctrl-A + two spaces) and its recall by Up
assert a[1]["content"] == "  Good morrow" and a[3]["content"] == "  Good morrow", (a[1], a[3])
assert a[2]["content"] and a[2]["content"] == a[4]["content"], (a[2], a[4])
assert not any(m["content"].startswith("/") for m in a), a
assert b == [a[0]], b
PY

# --- piped: plain, no banner, no prompt; commands work; /bye ends --------------------
printf 'Good morrow\n/help\n/bye\nnot sent\n' | "$BIN" chat "$T/m.cmf" -n 6 --greedy >"$T/out" 2>"$T/err"
rc=$?
[ $rc = 0 ] || fail "piped chat exited $rc: $(cat "$T/err")"
grep -q "to leave" "$T/err" && fail "piped chat printed the banner"
grep -q "^> " "$T/out" && fail "piped chat printed a prompt"
[ "$(grep -c 'finish:' "$T/err")" = 1 ] || fail "piped: expected 1 answer (/bye ends): $(cat "$T/err")"
grep -q "/save FILE" "$T/err" || fail "piped /help: $(cat "$T/err")"

# --- /skill ID, piped: the answers are those of --skill ID ---------------------------
if [ "$F" = "$T/sk.cmf" ]; then
    # chat_out NAME [OPTION...] <INPUT: the answers on NAME.out, stderr on NAME.err
    chat_out() {
        local n=$1
        shift
        "$BIN" chat "$F" -n 8 --greedy "$@" >"$T/$n.out" 2>"$T/$n.err" || fail "chat $* ($n) exited $?: $(cat "$T/$n.err")"
    }
    echo 'Good morrow' | chat_out base
    echo 'Good morrow' | chat_out prose --skill prose
    echo 'Good morrow' | chat_out code --skill code
    cmp -s "$T/base.out" "$T/prose.out" || cmp -s "$T/base.out" "$T/code.out" || cmp -s "$T/prose.out" "$T/code.out" &&
        fail "the fixture's skills do not tell apart: base '$(cat "$T/base.out")', prose '$(cat "$T/prose.out")', code '$(cat "$T/code.out")'"
    printf '/skill prose\nGood morrow\n' | chat_out a
    cmp -s "$T/a.out" "$T/prose.out" || fail "/skill prose answered '$(cat "$T/a.out")', --skill prose '$(cat "$T/prose.out")'"
    grep -qx "cmf chat: running skill prose" "$T/a.err" || fail "/skill prose: $(cat "$T/a.err")"
    printf '/skill prose\n/skill none\nGood morrow\n' | chat_out b
    cmp -s "$T/b.out" "$T/base.out" || fail "/skill none answered '$(cat "$T/b.out")', the backbone '$(cat "$T/base.out")'"
    grep -qx "cmf chat: running the backbone alone" "$T/b.err" || fail "/skill none: $(cat "$T/b.err")"
    printf '/skill code\n/skill nosuch\nGood morrow\n' | chat_out c
    grep -qF "cmf chat: /skill: $F: skill 'nosuch' not in this file" "$T/c.err" || fail "/skill nosuch: $(cat "$T/c.err")"
    cmp -s "$T/c.out" "$T/code.out" || fail "after a refused /skill nosuch the answer '$(cat "$T/c.out")' is not skill code's '$(cat "$T/code.out")'"
    # switching mid-conversation: each turn runs the skill chosen before it
    printf '/skill prose\nGood morrow\n/reset\n/skill code\nGood morrow\n' | chat_out d
    cat "$T/prose.out" "$T/code.out" | cmp -s - "$T/d.out" ||
        fail "/skill prose then /skill code: '$(cat "$T/d.out")', expected prose's then code's answer"
fi
[ $fails = 0 ] && echo "chat_prompt: ok" || { echo "$fails failure(s)"; exit 1; }
