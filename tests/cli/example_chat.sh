#!/usr/bin/env bash
# example_chat.sh — examples/chat.c builds against the INSTALLED library:
# `cmake --install` into a temporary prefix, compile with
# `cc $(pkg-config --cflags --libs cmf)` (shared library, rpath to the
# prefix), and run two chat turns on a converted fixture model.
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
SRC=${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}
BUILD=${CMF_BUILD_DIR:?CMF_BUILD_DIR not set}
FIX=${CMF_FIXTURES:-}
[ -n "$FIX" ] && [ -d "$FIX/hf-models/llama" ] || { echo "SKIP: fixtures absent (CMF_FIXTURES)"; exit 77; }
command -v pkg-config >/dev/null || { echo "SKIP: pkg-config absent"; exit 77; }
CC=${CC:-cc}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# the suite runs on a built tree: building here would relink binaries other tests are running
for f in libcmf.a cmf; do [ -e "$BUILD/$f" ] || fail "$BUILD/$f not built (run the tests through make test)"; done
cmake --install "$BUILD" --prefix "$T/prefix" >"$T/log" 2>&1 || fail "install: $(tail -20 "$T/log")"
[ -f "$T/prefix/include/cmf.h" ] || fail "cmf.h not installed"
PC=$(dirname "$(find "$T/prefix" -name cmf.pc | head -1)")
[ -n "$PC" ] || fail "cmf.pc not installed"
export PKG_CONFIG_PATH=$PC
# cmf.pc names the configure-time prefix; point it at the temporary one
PKG="pkg-config --define-variable=prefix=$T/prefix"
LIBDIR=$($PKG --variable=libdir cmf)
# a sanitizer build's libcmf.so needs the runtime linked into the program
SAN=
grep -q '^CMF_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null && SAN="-fsanitize=address,undefined"
# shellcheck disable=SC2046
$CC -std=c11 -Wall -Wextra -Werror -pedantic $SAN -o "$T/chat" "$SRC/examples/chat.c" $($PKG --cflags --libs cmf) \
    -Wl,-rpath,"$LIBDIR" >"$T/log" 2>&1 || fail "compile: $(cat "$T/log")"
[ "$(wc -l <"$SRC/examples/chat.c")" -lt 60 ] || fail "examples/chat.c is 60 lines or more"
"$BIN" convert --model "$FIX/hf-models/llama" --output "$T/m.cmf" --quant q8 --quiet || fail "convert"
printf 'hello\nand again\n' | "$T/chat" "$T/m.cmf" >"$T/out" 2>"$T/err" || fail "chat run: $(cat "$T/err")"
[ "$(grep -c '^\[.* tokens, ' "$T/out")" = 2 ] || fail "expected two answers: $(cat "$T/out")"
"$T/chat" "$T/missing.cmf" </dev/null >/dev/null 2>"$T/err" && fail "missing model accepted"
grep -q "missing.cmf" "$T/err" || fail "error lacks the path: $(cat "$T/err")"
echo "example_chat: passed"
