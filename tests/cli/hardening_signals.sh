#!/usr/bin/env bash
# hardening_signals.sh — a writer killed by SIGINT or SIGTERM in the middle
# of its write leaves neither the output nor a temporary
# (OUT.tmp.<pid>[.blob]) and dies of that signal. A ~140 MB bf16 llama
# checkpoint is generated (bench/make_shape.py llama-signal-test), `cmf
# convert` is started in the background, signalled as soon as its
# temporary appears, and the folder is checked; then the same for `cmf requant` of the converted file. The
# signal is sent while the process is stopped (SIGSTOP, signal, SIGCONT),
# so it lands mid-write however fast the machine is.
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
command -v python3 >/dev/null || { echo "SKIP: python3 needed to generate the checkpoint"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/cmf-signals.XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
set -m # background jobs keep SIGINT (without job control bash starts them with it ignored)

python3 "${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}/bench/make_shape.py" llama-signal-test "$T/ck" >/dev/null ||
    { fail "checkpoint generation"; exit 1; }
[ -f "$T/ck/model.safetensors" ] || { fail "checkpoint generation"; exit 1; }

# interrupt SIG OUT -- CMD...: start CMD, wait for OUT's temporary, stop
# it, send SIG, let it go on; it must die of SIG, leaving nothing.
interrupt() {
    local sig=$1 out=$2
    shift 3
    "$@" 2>"$T/err" &
    local pid=$! seen= i rc
    for i in $(seq 1 3000); do
        if compgen -G "$out.tmp.*" >/dev/null; then
            seen=1
            break
        fi
        kill -0 $pid 2>/dev/null || break
        sleep 0.01
    done
    kill -STOP $pid 2>/dev/null
    [ -n "$seen" ] || fail "$1: no temporary $out.tmp.* appeared (finished or failed first: $(cat "$T/err"))"
    kill -"$sig" $pid 2>/dev/null
    kill -CONT $pid 2>/dev/null
    # With job control, wait also returns 128 + SIGSTOP while bash's job
    # table still holds the job as stopped: it learns of the SIGCONT and of
    # the exit only as the child's notifications arrive, which on a loaded
    # machine (ASan, a parallel ctest) takes a while. Ask again, pausing,
    # for up to 60 s.
    for i in $(seq 1 600); do
        wait $pid
        rc=$?
        [ $rc = $((128 + $(kill -l STOP))) ] || break
        sleep 0.1
    done
    local want=$((128 + $(kill -l "$sig")))
    [ $rc = $want ] || fail "$1 after SIG$sig exited $rc, expected $want (died of the signal): $(cat "$T/err")"
    local left
    left=$(find "$T" -name "$(basename "$out")*" | head -3)
    [ -z "$left" ] || fail "$1 after SIG$sig left: $left"
}
interrupt INT "$T/out.cmf" -- "$BIN" convert --model "$T/ck" --output "$T/out.cmf" --quant q8 --quiet
interrupt TERM "$T/out.cmf" -- "$BIN" convert --model "$T/ck" --output "$T/out.cmf" --quant q4 --quiet
# a whole conversion, then requant interrupted
"$BIN" convert --model "$T/ck" --output "$T/full.cmf" --quant q8 --quiet 2>"$T/err" || fail "convert: $(cat "$T/err")"
interrupt INT "$T/rq.cmf" -- "$BIN" requant "$T/full.cmf" --output "$T/rq.cmf" --quant q4 --quiet
interrupt TERM "$T/rq.cmf" -- "$BIN" requant "$T/full.cmf" --output "$T/rq.cmf" --quant q4t --quiet
"$BIN" verify "$T/full.cmf" >/dev/null 2>&1 || fail "the input of the interrupted requant no longer verifies"

[ $fails -eq 0 ] && echo "hardening_signals: all passed"
exit $((fails > 0))
