#!/usr/bin/env bash
# docs_truth.sh — what the docs and the build say about the source is true:
# every folder a cmf_module() of CMakeLists.txt globs exists under src/; no
# private function is declared that nothing calls (the ones found unused
# stay removed); docs/ARCHITECTURE.md does not claim one shader per op, and
# its recipe for a new op names the Vulkan places, each of which exists.
set -u
SRC=${CMF_SOURCE_DIR:?CMF_SOURCE_DIR not set}
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
cd "$SRC" || exit 1
# cmf_module(NAME DIRS a b DEPS ...): each DIRS entry is a folder of src/
grep -E '^cmf_module\(' CMakeLists.txt | sed -E 's/.* DIRS (.*)/\1/; s/ (DEPS|LIBS) .*//; s/\)$//' | tr ' ' '\n' |
    while read -r d; do [ -z "$d" ] || [ -d "src/$d" ] || echo "$d"; done >/tmp/docs_truth.$$
while read -r d; do fail "CMakeLists.txt globs src/$d, which does not exist"; done </tmp/docs_truth.$$
rm -f /tmp/docs_truth.$$
for f in cmf__kv_type_from_name cmf__cpu_backend_isa cmf__cpu_backend_threads; do
    grep -rqw --exclude=docs_truth.sh "$f" src tools tests fuzz && fail "$f: declared or defined, but nothing calls it"
done
A=docs/ARCHITECTURE.md
grep -qi "one shader per op" "$A" && fail "$A still says one shader per op (matmul has three)"
[ "$(ls src/compute/vulkan/shaders/matmul*.comp | wc -l)" -gt 1 ] || fail "expected several matmul shaders"
recipe=$(sed -n '/^### Adding an op/,/^### /p' "$A")
for w in 'shaders/<name>.comp' 'SHADERS(X)' vk_be.h vk_record.c vk_graph.c vk_fused.c; do
    grep -qF -- "$w" <<<"$recipe" || fail "$A's new-op recipe does not name $w"
done
grep -q 'define SHADERS(X)' src/compute/vulkan/vk_be.h || fail "vk_be.h has no SHADERS(X) list (the recipe names it)"
grep -q 'switch ((int)nd->op)' src/compute/vulkan/vk_record.c || fail "vk_record.c has no node switch (the recipe names it)"
for f in vk_graph.c vk_fused.c; do [ -f "src/compute/vulkan/$f" ] || fail "$f, which the recipe names, is gone"; done
[ $fails = 0 ] && echo "docs_truth: ok" || { echo "$fails failure(s)"; exit 1; }
