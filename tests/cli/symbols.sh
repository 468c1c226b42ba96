#!/usr/bin/env bash
# symbols.sh — what libcmf links into a program: every symbol libcmf.a
# defines for the linker starts with cmf_ (public) or cmf__ (private), so
# a static link never collides with a user's own names; libcmf.so exports
# only the public cmf_ API (cmf.h). Lists offenders with the object file
# that defines them. Needs nm (binutils) and CMF_BUILD_DIR.
set -u
B=${CMF_BUILD_DIR:-}
[ -f "$B/libcmf.a" ] || { echo "SKIP: $B/libcmf.a not built (set CMF_BUILD_DIR)"; exit 77; }
command -v nm >/dev/null || { echo "SKIP: nm absent"; exit 77; }
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# "object symbol" per defined global symbol (nm -A prints archive:object: value type name)
defs=$(nm -A -g --defined-only "$B/libcmf.a" 2>/dev/null | awk 'NF == 3 { n = split($1, p, ":"); print p[n - 1], $3 }')
count=$(printf '%s\n' "$defs" | grep -c .)
[ "$count" -ge 100 ] || fail "nm listed $count symbols in libcmf.a; expected the library's hundreds"
# a sanitizer build adds an ODR marker per global, named after it
bad=$(printf '%s\n' "$defs" | awk '{ n = $2; sub(/^__odr_asan(_gen_|\.)/, "", n) } n !~ /^cmf_/')
[ -z "$bad" ] || fail "libcmf.a defines symbols outside cmf_/cmf__:
$bad"

if [ -f "$B/libcmf.so" ]; then
    dyn=$(nm -D --defined-only "$B/libcmf.so" | awk 'NF == 3 { print $3 }')
    [ -n "$dyn" ] || fail "libcmf.so exports nothing"
    # the sanitizer runtime's hooks are the compiler's, not the library's
    extra=$(printf '%s\n' "$dyn" | grep -v '^cmf_[a-z]' | grep -v '^__\(asan\|ubsan\|sanitizer\|odr_asan\)' || true)
    [ -z "$extra" ] || fail "libcmf.so exports more than the cmf_ API:
$extra"
    priv=$(printf '%s\n' "$dyn" | grep '^cmf__' || true)
    [ -z "$priv" ] || fail "libcmf.so exports private cmf__ symbols:
$priv"
fi
[ "$fails" = 0 ] || exit 1
echo "symbols: $count symbols in libcmf.a, all cmf_ or cmf__; libcmf.so exports only the cmf_ API"
