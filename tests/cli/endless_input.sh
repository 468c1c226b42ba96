#!/usr/bin/env bash
# endless_input.sh — an endless or huge source (/dev/zero) given where a
# file is read whole (tokenizer, template, convert's folder files) ends
# quickly with an error naming it, never reading forever; nan and inf
# given as numbers are refused.
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
for args in "tokenize /dev/zero hi" "detokenize /dev/zero --ids 1" "info /dev/zero"; do
    # shellcheck disable=SC2086
    timeout 60 "$BIN" $args >"$T/o" 2>&1
    rc=$?
    [ $rc -eq 124 ] && fail "cmf $args: still reading after 60 s"
    [ $rc -eq 0 ] && fail "cmf $args: exit 0"
    grep -q "/dev/zero" "$T/o" || fail "cmf $args: message does not name the source: $(head -c 200 "$T/o")"
done
# non-finite numbers are refused where a number is parsed (sampling flags)
for v in nan inf -inf; do
    "$BIN" run /nonexistent.cmf --prompt hi --temp "$v" >"$T/o" 2>&1 && fail "--temp $v accepted"
    grep -q "not a finite number" "$T/o" || fail "--temp $v: $(head -c 200 "$T/o")"
done
[ $fails -eq 0 ] && echo "endless_input: all checks passed"
exit $((fails > 0))
