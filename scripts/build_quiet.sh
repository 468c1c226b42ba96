#!/usr/bin/env bash
# build_quiet.sh BUILD JOBS TARGET... — `make demo`'s build: configures
# BUILD if needed and builds only TARGET(s), the compiler's chatter going to
# BUILD/build.log; a terminal sees one progress line (percent, files done,
# elapsed seconds), a pipe one line per 25%. A failure prints the log's
# last lines and exits with the build's status.
set -u
BUILD=${1:?usage: build_quiet.sh BUILD JOBS TARGET...}
JOBS=${2:?usage: build_quiet.sh BUILD JOBS TARGET...}
shift 2
mkdir -p "$BUILD"
LOG=$BUILD/build.log
start=$(date +%s)
tty=
[ -t 1 ] && tty=1
echo "build: $* in $BUILD, $JOBS jobs (details: $LOG)"
cmake --build "$BUILD" -j "$JOBS" --target "$@" 2>&1 | tee "$LOG" | {
    files=0 last=-1
    while IFS= read -r line; do
        case $line in *"Building C object"* | *glslc* | *Linking*) files=$((files + 1)) ;; esac
        pct=$(sed -nE 's/^\[ *([0-9]+)%\].*/\1/p' <<<"$line")
        [ -n "$pct" ] || continue
        if [ -n "$tty" ]; then
            printf '\rbuild: %3d%%  %d steps  %ds ' "$pct" "$files" $(($(date +%s) - start))
        elif [ $((pct / 25)) -gt "$last" ]; then
            last=$((pct / 25))
            echo "build: $pct% ($files steps, $(($(date +%s) - start)) s)"
        fi
    done
    [ -n "$tty" ] && echo
}
rc=${PIPESTATUS[0]}
if [ "$rc" != 0 ]; then
    echo "build: FAILED (status $rc); the end of $LOG:" >&2
    grep -E 'error|Error' -A4 "$LOG" | head -40 >&2 || tail -40 "$LOG" >&2
    exit "$rc"
fi
echo "build: done in $(($(date +%s) - start)) s"
