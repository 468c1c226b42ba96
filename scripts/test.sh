#!/usr/bin/env bash
# test.sh BUILD_DIR [JOBS] — `make test`: runs ctest in BUILD_DIR, then one
# line on the tests skipped for want of the fixtures (how many, which
# folder was looked for) and one on tests skipped for other reasons, each
# with the reason the test printed. Exits with ctest's status.
set -u
BUILD=${1:?usage: test.sh BUILD_DIR [JOBS]}
JOBS=${2:-2}
cd "$BUILD" || exit 1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
ctest --output-on-failure -j "$JOBS" | tee "$out"
rc=${PIPESTATUS[0]}
fix=$(sed -n 's/^CMF_FIXTURES:PATH=//p' CMakeCache.txt)
log=Testing/Temporary/LastTest.log
# ctest's closing list: "	 32 - cli_convert_stream (Skipped)"
skipped=$(sed -n 's/^[[:space:]]*[0-9]* - \(.*\) (Skipped)$/\1/p' "$out")
# the first SKIP line a skipped test printed, from its output in the log
reason() {
    awk -v t="$1" '/^[0-9]+\/[0-9]+ Test: / { on = substr($0, index($0, " Test: ") + 7) == t; next }
        on && /^<end of output>$/ { on = 0; next }
        on && /SKIP|skipp/ { sub(/^\*\*\* */, ""); sub(/ *\*\*\*$/, ""); print; exit }' "$log"
}
n_fix=0 n_other=0 others=
for t in $skipped; do
    why=$(reason "$t")
    if printf '%s' "$why" | grep -qi fixture; then
        n_fix=$((n_fix + 1))
    else
        n_other=$((n_other + 1))
        others="$others${others:+; }$t (${why:-no reason printed})"
    fi
done
if [ -d "$fix" ]; then
    echo "fixtures: $fix present; $n_fix fixture tests skipped"
else
    echo "fixtures: $n_fix fixture tests skipped: no fixtures folder at $fix (reference data not shipped in the repository; set CMF_FIXTURES to run them)"
fi
[ "$n_other" = 0 ] || echo "other skips: $n_other: $others"
exit "$rc"
