#!/usr/bin/env bash
# chat_prompt.sh — `cmf chat` on a terminal, driven through tmux: a one-line
# banner says how to leave; the line is edited (Backspace, Ctrl-A) and Up
# recalls the last line; /help lists the commands; /system, /reset, /save
# and /bye act and never reach the model (the saved JSON holds exactly the
# turns sent); an unknown /command is refused; Ctrl-D leaves with status 0.
# Piped stdin stays plain: no banner, no prompt, slash commands still work.
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
    "'$BIN' chat '$T/m.cmf' -n 6 --greedy 2>&1; echo CHAT-EXIT=\$?; sleep 60"
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
[ $fails = 0 ] && echo "chat_prompt: ok" || { echo "$fails failure(s)"; exit 1; }
