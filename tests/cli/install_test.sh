#!/usr/bin/env bash
# `cmake --install` gives a clone that runs anywhere: install to a temporary prefix, move
# the prefix, and run from there with none of clone's variables set and from another
# working directory. Also: no data folder of the source tree is compiled into the binary.
#   install_test.sh <build dir> <source dir>
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/a" > /dev/null
mv "$tmp/a" "$tmp/moved"
clone=$tmp/moved/bin/clone
unset CLONE_PROFILES CLONE_MODELS CLONE_SHARED
cd "$tmp"

# (Sanitizer builds record source file names for their reports; the data folders must
# not appear in any build.)
if command -v objcopy > /dev/null; then
  objcopy -O binary --only-section=.rodata "$clone" "$tmp/rodata"
  for dir in "$src/profiles" "$src/models" "$src/../shared" "$(cd "$src/.." && pwd)/shared"; do
    if grep -q -F "$dir" "$tmp/rodata"; then
      echo "FAIL: $dir is compiled into bin/clone" >&2
      exit 1
    fi
  done
fi

"$clone" device show orin-nx-16gb > show.json
grep -q '"name": "orin-nx-16gb"' show.json || { echo "FAIL: device show" >&2; cat show.json; exit 1; }

# The default controllers include `learned`: its weights come from share/clone/models.
"$clone" sim -n 5 --no-plots --out "$tmp/simA" > sim.txt 2> sim.err ||
  { echo "FAIL: clone sim" >&2; cat sim.err >&2; exit 1; }
rows=$(($(wc -l < "$tmp/simA/summary.csv") - 1))
# 7 default controllers (performance, powersave, schedutil, podgov, static, learned, oracle) x 4
# co-runners.
[ "$rows" -eq 28 ] || { echo "FAIL: summary.csv has $rows rows, want 28" >&2; exit 1; }
grep -q ',learned,' "$tmp/simA/summary.csv" || { echo "FAIL: no learned rows" >&2; exit 1; }

if [ -d "$tmp/moved/share/clone/shared/data/azure-llm-inference-2023" ]; then
  "$clone" sim -n 5 --no-plots --workload azure-conv --corunner idle --out "$tmp/simB" \
    > /dev/null 2> sim.err || { echo "FAIL: clone sim azure-conv" >&2; cat sim.err >&2; exit 1; }
fi

[ -f "$tmp/moved/share/clone/models/base/model.gguf" ] || [ ! -f "$src/models/base/model.gguf" ] ||
  { echo "FAIL: the base model was not installed" >&2; exit 1; }
echo "install test: passed ($tmp/moved)"
