#!/usr/bin/env bash
# test.sh BUILD_DIR [JOBS] — `make test`: runs ctest in BUILD_DIR, then one
# line on the tests skipped for want of the fixtures (how many, plus the
# fixture cases skipped inside programs that ran, and which folder was
# looked for) and, if any, one on tests skipped for other reasons with the
# reason each printed. Exits with ctest's status.
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
# fixture cases a test program skipped while others in it ran ("SKIP case: why")
read -r n_case n_prog < <(awk -v skipped=" ${skipped//$'\n'/ } " '
    /^[0-9]+\/[0-9]+ Test: / { t = substr($0, index($0, " Test: ") + 7); next }
    /^SKIP [^ ]+: / && tolower($0) ~ /fixture/ && !index(skipped, " " t " ") { n++; p[t] = 1 }
    END { np = 0; for (k in p) np++; print n + 0, np }' "$log")
cases=
[ "${n_case:-0}" = 0 ] || cases=" (and $n_case fixture cases inside $n_prog test programs that ran)"
if [ -d "$fix" ]; then
    echo "fixtures: $n_fix fixture tests skipped$cases; fixtures folder: $fix"
else
    echo "fixtures: $n_fix fixture tests skipped$cases: no fixtures folder at $fix (reference data not shipped in the repository; set CMF_FIXTURES to run them)"
fi
[ "$n_other" = 0 ] || echo "other skips: $n_other: $others"
exit "$rc"
