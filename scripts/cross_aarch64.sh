#!/usr/bin/env bash
# cross_aarch64.sh [BUILD_DIR] — the aarch64 check of CI: installs the
# arm64 group of scripts/deps.txt (the cross gcc, qemu-user, the arm64 -dev
# libraries; as root it first adds the arm64 dpkg architecture), cross-builds
# with cmake/aarch64-linux-gnu.cmake (-Werror, default build-aarch64) and runs
# every test program (all but the CLI scripts) under qemu-aarch64, failing
# unless the NEON kernel table was the one picked and matched the reference.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-aarch64}
JOBS=${JOBS:-$(nproc)}
die() { echo "cross_aarch64: $*" >&2; exit 1; }

# every -dev library of the build group has its arm64 twin in the arm64 group
arm=$(bash scripts/deps.sh list arm64)
for p in $(bash scripts/deps.sh list build | grep -- '-dev$'); do
    grep -qx "$p:arm64" <<<"$arm" || die "scripts/deps.txt: group arm64 lacks $p:arm64 (the build group needs $p)"
done
if ! bash scripts/deps.sh check arm64 2>/dev/null; then
    if [ "$(id -u)" = 0 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
        dpkg --add-architecture arm64
    fi
    bash scripts/deps.sh install arm64
fi

# Every test program runs under qemu but two kinds, left to the native runs
# of CI: the CLI tests (bash scripts around the command) and
# test_engine_skills, whose page-residency case needs madvise(MADV_DONTNEED),
# which qemu-user accepts and ignores (the pages stay resident).
EXCLUDE='^(cli_.*|test_engine_skills)$'

cmake -S . -B "$BUILD" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
targets=$(cd "$BUILD" && ctest -N -E "$EXCLUDE" | sed -n 's/^ *Test *#[0-9]*: //p')
[ -n "$targets" ] || die "no test programs found"
# shellcheck disable=SC2086
cmake --build "$BUILD" -j "$JOBS" --target cmf cmf-membw ${targets//$'\n'/ } >"$BUILD/build.log" 2>&1 ||
    { grep -B2 -A8 -E "error|warning" "$BUILD/build.log" | tail -60; die "cross-build failed ($BUILD/build.log)"; }
# ELF e_machine (offset 18, little-endian): 0xb7 is EM_AARCH64
[ "$(od -An -tx1 -j18 -N2 "$BUILD/cmf" | tr -d ' ')" = b700 ] || die "$BUILD/cmf is not an aarch64 program"

out=$BUILD/ctest.log
# qemu runs the programs ~10x slower: tests that repeat one path over many
# random draws run fewer (tests/harness.h, harness_light); every case runs
export CMF_TEST_LIGHT=1
(cd "$BUILD" && ctest --output-on-failure -j "$JOBS" -E "$EXCLUDE") | tee "$out"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || die "tests failed under qemu-aarch64 (exit $rc)"
# the NEON table ran and was the best one (a silent fallback to the generic
# table would pass the other tests)
kern=$(cd "$BUILD" && ctest -R '^test_engine_kernels$' -V 2>&1) || die "test_engine_kernels failed"
grep -q "ok     neon_kernels_match_reference" <<<"$kern" || die "test_engine_kernels did not run the NEON kernels"
# qemu's default CPU has the dot-product extension: its packed kernels must have run
grep -Eq "neon, dotprod: packed shapes checked: [1-9]" <<<"$kern" || die "test_engine_kernels did not run the NEON dotprod kernels"
echo "cross_aarch64: $(grep -c 'Test *#.*Passed' "$out") test programs passed under qemu-aarch64"
