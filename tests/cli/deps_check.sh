#!/usr/bin/env bash
# deps_check.sh — scripts/deps.sh, the dependency check of `make`: the
# build group of scripts/deps.txt is present here (this build exists);
# `check` says "all present" when they are; .ci/run and the Makefile name
# no package themselves; with a list holding
# fake packages, `check` names exactly the missing ones, `install` prints
# them and calls apt-get update + install (a fake apt-get, through a fake
# sudo when not root), and without apt-get says what to install; a bad list
# is an error naming file and line.
set -u
SRC=${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}
D=$SRC/scripts/deps.sh
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

bash "$D" check build >"$T/out" 2>&1 || fail "build group reported missing here: $(cat "$T/out")"
grep -qx "deps: all present (build): [0-9]* packages" "$T/out" || fail "check with all present says: '$(cat "$T/out")'"
n=$(bash "$D" list build | grep -c .)
[ "$n" -ge 9 ] || fail "list build: $n packages"
bash "$D" list build | grep -qx libjansson-dev || fail "list build lacks libjansson-dev"
bash "$D" list ci | grep -qx clang || fail "list ci lacks clang"
for f in .ci/run Makefile; do
    grep -q 'scripts/deps.sh' "$SRC/$f" || fail "$f does not use scripts/deps.sh"
    ! grep -qE 'libjansson-dev|libsodium-dev' "$SRC/$f" || fail "$f keeps a package list of its own"
done

printf '# test list\nbuild cmf-no-such-pkg cmd:cmf-no-such-command\nbuild bash cmd:bash\nbuild libcmf-fake-dev pc:cmf-no-such-module\nci cmf-ci-only cmd:cmf-no-such-command\n' >"$T/list"
export CMF_DEPS_FILE=$T/list
bash "$D" check build >"$T/out" 2>&1 && fail "check passed with fake packages"
grep -q "missing (build): cmf-no-such-pkg libcmf-fake-dev$" "$T/out" || fail "check message: $(cat "$T/out")"
! grep -q "cmf-ci-only" "$T/out" || fail "check build named a ci package"

# no apt-get: a clear message listing what to install, nothing run
CMF_APT_GET='' bash "$D" install build >"$T/out" 2>&1 && fail "install without apt-get succeeded"
grep -q "apt-get not found" "$T/out" && grep -q "cmf-no-such-pkg .*the command cmf-no-such-command" "$T/out" &&
    grep -q "libcmf-fake-dev .*the pkg-config module cmf-no-such-module" "$T/out" || fail "no-apt-get message: $(cat "$T/out")"

# a fake apt-get (and sudo) that only record their arguments
mkdir "$T/bin"
printf '#!/bin/sh\necho "apt-get $*" >>"%s/calls"\n' "$T" >"$T/bin/apt-get"
printf '#!/bin/sh\necho "sudo $1" >>"%s/calls"\nexec "$@"\n' "$T" >"$T/bin/sudo"
chmod +x "$T/bin/apt-get" "$T/bin/sudo"
PATH=$T/bin:$PATH CMF_APT_GET=$T/bin/apt-get bash "$D" install build >"$T/out" 2>&1 && fail "install succeeded though the packages stay missing"
grep -q "missing Debian packages (build): cmf-no-such-pkg libcmf-fake-dev" "$T/out" || fail "install did not print the list first: $(cat "$T/out")"
grep -q "still missing after installing: cmf-no-such-pkg libcmf-fake-dev" "$T/out" || fail "no re-check: $(cat "$T/out")"
grep -q "^apt-get update" "$T/calls" && grep -q "^apt-get install -y .*--no-install-recommends cmf-no-such-pkg libcmf-fake-dev$" "$T/calls" ||
    fail "apt-get calls: $(cat "$T/calls" 2>/dev/null)"
if [ "$(id -u)" = 0 ]; then
    ! grep -q '^sudo' "$T/calls" || fail "root went through sudo"
else
    grep -q "^sudo $T/bin/apt-get" "$T/calls" || fail "not root, yet no sudo: $(cat "$T/calls")"
fi

# nothing missing: silent, no apt-get
printf 'build bash cmd:bash\n' >"$T/list"
rm -f "$T/calls"
PATH=$T/bin:$PATH CMF_APT_GET=$T/bin/apt-get bash "$D" install build >"$T/out" 2>&1 || fail "install with nothing missing: $(cat "$T/out")"
[ ! -s "$T/out" ] && [ ! -e "$T/calls" ] || fail "nothing missing, yet output or calls: $(cat "$T/out" "$T/calls" 2>/dev/null)"

# a malformed list names the file and line; an unknown probe the package
printf 'build bash\n' >"$T/list"
bash "$D" check build >"$T/out" 2>&1 && fail "2-column line accepted"
grep -q "$T/list:1: expected 3 columns" "$T/out" || fail "bad line message: $(cat "$T/out")"
printf 'build bash what:ever\n' >"$T/list"
bash "$D" check build >"$T/out" 2>&1 && fail "unknown probe accepted"
grep -q "package bash: unknown probe 'what:ever'" "$T/out" || fail "bad probe message: $(cat "$T/out")"
[ $fails -eq 0 ] && echo "deps_check: all passed"
exit $((fails > 0))
