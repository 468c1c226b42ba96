#!/usr/bin/env bash
# deps.sh [check|install|list] [GROUP...] — the build dependencies of
# scripts/deps.txt (groups: build, ci; default: install build). `check`
# names what is missing; `install` prints the list, then installs it with
# apt-get (as root, through sudo otherwise), or says what to install where
# there is no apt-get. Presence comes from each package's probe, else dpkg.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
LIST=${CMF_DEPS_FILE:-$HERE/deps.txt} # another list: for tests of this script
APT=${CMF_APT_GET-apt-get}            # empty: behave as on a system without apt-get
action=${1:-install}
[ $# -gt 0 ] && shift
groups=${*:-build}

die() { echo "deps: $*" >&2; exit 1; }
case $action in check | install | list) ;; *) die "unknown action '$action' (check, install or list)" ;; esac
[ -r "$LIST" ] || die "$LIST: cannot read the package list"

# rows of the chosen groups: "package probe"
rows() {
    awk -v groups=" $groups " '!/^[ \t]*(#|$)/ {
        if (NF != 3) { printf "%s:%d: expected 3 columns (group package probe), found %d\n", FILENAME, NR, NF > "/dev/stderr"; bad = 1; next }
        if ($3 !~ /^(cmd:.+|pc:.+|cc:|-)$/) { printf "%s:%d: package %s: unknown probe '\''%s'\'' (cmd:NAME, pc:NAME, cc: or -)\n", FILENAME, NR, $2, $3 > "/dev/stderr"; bad = 1; next }
        if (index(groups, " " $1 " ")) print $2, $3 } END { exit bad }' "$LIST"
}

installed_dpkg() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }

cc_works() {
    local d rc
    d=$(mktemp -d) || return 1
    printf '#include <stdio.h>\nint main(void) { return puts("") < 0; }\n' >"$d/t.c"
    "${CC:-cc}" -o "$d/t" "$d/t.c" >/dev/null 2>&1
    rc=$?
    rm -rf "$d"
    return $rc
}

# present PACKAGE PROBE: 0 when the package (or what it provides) is there
present() {
    case $2 in
    cmd:*) command -v "${2#cmd:}" >/dev/null 2>&1 ;;
    pc:*)
        if command -v pkg-config >/dev/null 2>&1; then
            pkg-config --exists "${2#pc:}"
        elif command -v dpkg-query >/dev/null 2>&1; then
            installed_dpkg "$1"
        else
            return 1
        fi ;;
    cc:) cc_works ;;
    *) ! command -v dpkg-query >/dev/null 2>&1 || installed_dpkg "$1" ;; # -
    esac
}

# what a probe looks for, in words (for the message without apt-get)
provides() {
    case $2 in
    cmd:*) echo "the command ${2#cmd:}" ;;
    pc:*) echo "the pkg-config module ${2#pc:}" ;;
    cc:) echo "a C compiler and the C library headers" ;;
    *) echo "-" ;;
    esac
}

all=$(rows) || exit 1
[ -n "$all" ] || die "$LIST: no packages in group(s) '$groups'"
if [ "$action" = list ]; then
    echo "$all" | awk '{ print $1 }'
    exit 0
fi

missing_rows() {
    local pkg probe
    while read -r pkg probe; do
        present "$pkg" "$probe" || echo "$pkg $probe"
    done <<<"$all"
}
miss=$(missing_rows)
if [ -z "$miss" ]; then
    [ "$action" = check ] && echo "deps: all present ($groups): $(echo "$all" | grep -c .) packages"
    exit 0
fi
names=$(echo "$miss" | awk '{ printf "%s%s", sep, $1; sep = " " }')
if [ "$action" = check ]; then
    echo "deps: missing ($groups): $names" >&2
    exit 1
fi

echo "deps: missing Debian packages ($groups): $names"
if [ -z "$APT" ] || ! command -v "$APT" >/dev/null 2>&1; then
    {
        echo "deps: apt-get not found, so nothing was installed. Install these with your system's"
        echo "deps: package manager (Debian names; the right-hand side is what the build looks for):"
        echo "$miss" | while read -r pkg probe; do printf 'deps:   %-22s %s\n' "$pkg" "$(provides "$pkg" "$probe")"; done
        echo "deps: then run make again. The list lives in $LIST."
    } >&2
    exit 1
fi
if [ "$(id -u)" = 0 ]; then
    sudo=
elif command -v sudo >/dev/null 2>&1; then
    sudo=sudo
else
    die "not root and sudo not found: as root, run: $APT install $names"
fi
[ -t 0 ] || export DEBIAN_FRONTEND=noninteractive
echo "deps: installing them: ${sudo:+$sudo }$APT update && ${sudo:+$sudo }$APT install -y --no-install-recommends $names"
# shellcheck disable=SC2086
$sudo "$APT" update -qq || die "$APT update failed"
# shellcheck disable=SC2086
$sudo "$APT" install -y -qq --no-install-recommends $names || die "$APT install failed for: $names"
miss=$(missing_rows)
[ -z "$miss" ] || die "still missing after installing: $(echo "$miss" | awk '{ printf "%s ", $1 }')"
echo "deps: installed: $names"
