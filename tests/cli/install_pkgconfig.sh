#!/usr/bin/env bash
# install_pkgconfig.sh — `cmake --install` (what `make install` runs) into a
# temporary prefix, then the prefix is MOVED: the installed cmf.pc must
# still point into it (it is relocatable, ${pcfiledir}), examples/chat.c
# must build with `cc $(pkg-config --cflags --libs cmf)` alone and run two
# chat turns on the shipped demo model, linked to the moved libcmf.so;
# `pkg-config --static` lists only what libcmf links, and a -static build links.
set -u
BIN=${CMF_BIN:?CMF_BIN not set}
SRC=${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}
BUILD=${CMF_BUILD_DIR:?CMF_BUILD_DIR not set}
command -v pkg-config >/dev/null || { echo "FAIL: pkg-config absent (scripts/deps.txt lists it)"; exit 1; }
CC=${CC:-cc}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# the suite runs on a built tree: building here would relink binaries other tests are running
for f in libcmf.a cmf; do [ -e "$BUILD/$f" ] || fail "$BUILD/$f not built (run the tests through make test)"; done
cmake --install "$BUILD" --prefix "$T/first" >"$T/log" 2>&1 || fail "install: $(tail -20 "$T/log")"
pc=$(cd "$T/first" && find . -name cmf.pc | head -1)
[ -n "$pc" ] || fail "cmf.pc not installed under the prefix"
grep -q '^prefix=\${pcfiledir}/' "$T/first/$pc" || fail "cmf.pc is not relocatable: $(grep '^prefix=' "$T/first/$pc")"
mv "$T/first" "$T/moved"
P=$T/moved
PKG_CONFIG_PATH=$P/$(dirname "$pc")
export PKG_CONFIG_PATH
inc=$(pkg-config --variable=includedir cmf) && libdir=$(pkg-config --variable=libdir cmf) || fail "pkg-config cmf: $(pkg-config --print-errors cmf 2>&1)"
[ "$(realpath "$inc")" = "$(realpath "$P/include")" ] || fail "includedir $inc is not $P/include"
[ -f "$inc/cmf.h" ] || fail "no cmf.h in includedir $inc"
[ -f "$libdir/libcmf.so" ] && [ -f "$libdir/libcmf.a" ] || fail "libcmf.so / libcmf.a not in libdir $libdir"
case " $(pkg-config --cflags cmf) " in *" -I$inc "*) ;; *) fail "--cflags '$(pkg-config --cflags cmf)' lacks -I$inc" ;; esac
# a sanitizer build's libcmf.so needs the runtime linked into the program
SAN=
grep -q '^CMF_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null && SAN="-fsanitize=address,undefined"
# shellcheck disable=SC2046
$CC -std=c11 -Wall -Wextra -Werror -pedantic $SAN -o "$T/chat" "$SRC/examples/chat.c" $(pkg-config --cflags --libs cmf) \
    -Wl,-rpath,"$libdir" >"$T/log" 2>&1 || fail "compile: $(cat "$T/log")"
# libcmf does not use libmicrohttpd: its static link list must not drag it (and gnutls, unistring) in
case " $(pkg-config --static --libs cmf) " in *microhttpd*|*unistring*|*gnutls*)
    fail "pkg-config --static --libs cmf lists the server's libraries: $(pkg-config --static --libs cmf)" ;; esac
# shellcheck disable=SC2046
[ -n "$SAN" ] || $CC -std=c11 -static -o "$T/chat-static" "$SRC/examples/chat.c" $(pkg-config --static --cflags --libs cmf) \
    >"$T/log" 2>&1 || fail "static link: $(grep -v 'statically linked applications' "$T/log" | head -20)"
so=$(ldd "$T/chat" | awk '$1 ~ /^libcmf\.so/ { print $3 }')
[ "$(realpath "$so" 2>/dev/null)" = "$(realpath "$libdir/libcmf.so")" ] || fail "chat links '$so', not $libdir/libcmf.so"
"$BIN" convert --model "$SRC/models/shakespeare" --output "$T/m.cmf" --quiet >"$T/log" 2>&1 || fail "convert: $(cat "$T/log")"
printf 'Good morrow.\nWilt thou walk with me?\n' | "$T/chat" "$T/m.cmf" >"$T/out" 2>"$T/err" || fail "chat run: $(cat "$T/err")"
[ "$(grep -Ec '^\[[0-9]+ tokens, [a-z_]+\]$' "$T/out")" = 2 ] || fail "expected two answers: $(cat "$T/out")"
[ "$(grep -v '^\[' "$T/out" | tr -d ' \n' | wc -c)" -gt 40 ] || fail "answers nearly empty: $(cat "$T/out")"
"$T/chat" "$T/missing.cmf" </dev/null >/dev/null 2>"$T/err" && fail "missing model accepted"
grep -q "missing.cmf" "$T/err" || fail "error lacks the path: $(cat "$T/err")"
if [ -z "$SAN" ]; then # the static program runs too (on the CPU: a static program cannot load Vulkan)
    printf 'Good morrow.\nWilt thou walk with me?\n' | "$T/chat-static" "$T/m.cmf" >"$T/out-static" 2>"$T/err" ||
        fail "static chat run (exit $?): $(tail -5 "$T/err")"
    [ "$(grep -Ec '^\[[0-9]+ tokens, [a-z_]+\]$' "$T/out-static")" = 2 ] || fail "static: expected two answers: $(cat "$T/out-static")"
    [ "$(grep -v '^\[' "$T/out-static" | tr -d ' \n' | wc -c)" -gt 40 ] || fail "static: answers nearly empty"
fi
cat "$T/out"
echo "install_pkgconfig: installed, moved, built examples/chat.c with pkg-config, two turns answered"
