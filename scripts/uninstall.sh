#!/usr/bin/env bash
# uninstall.sh BUILD PREFIX — `make uninstall`: removes from PREFIX exactly
# what `cmake --install BUILD --prefix PREFIX` puts there. The list comes
# from installing into an empty staging folder (DESTDIR), not from a
# manifest another install may have overwritten; folders left empty by the
# removal go too, PREFIX itself stays.
set -eu
BUILD=${1:?usage: uninstall.sh BUILD PREFIX}
PREFIX=${2:?usage: uninstall.sh BUILD PREFIX}
case $PREFIX in /*) ;; *) PREFIX=$(cd "$PREFIX" && pwd) ;; esac
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
DESTDIR=$STAGE cmake --install "$BUILD" --prefix "$PREFIX" >/dev/null
n=0
while IFS= read -r f; do
    p=${f#"$STAGE"}
    if [ -e "$p" ] || [ -L "$p" ]; then
        rm -f -- "$p"
        echo "removed $p"
        n=$((n + 1))
        d=$(dirname "$p")
        while [ "$d" != "$PREFIX" ] && [ "$d" != / ] && rmdir -- "$d" 2>/dev/null; do d=$(dirname "$d"); done
    fi
done < <(find "$STAGE" \( -type f -o -type l \) | sort)
echo "uninstall: $n files removed from $PREFIX"
