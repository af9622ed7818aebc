#!/usr/bin/env bash
# The MPI speed-up of `clone tailor` (docs/tailor.md): the same short search on the shipped
# base model, from an empty cache, as one process of 1 thread, under `mpirun -np 1` and
# `-np 2` (1 thread per rank), and as one process of 2 threads; the wall time of each and
# whether the ranked runs chose the same model, byte for byte, as the single process.
# Writes $OUT/ranks.md. Needs a build with MPI (libopenmpi-dev) and mpirun (openmpi-bin).
#
#   scripts/tailor_ranks.sh        # about 10 minutes on 2 idle cores
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build/release}
DATA=${DATA:-out/data}
BASE=${BASE:-models/base/model.gguf}
OUT=${OUT:-out/tailor-ranks}
CLONE="$BUILD/bin/clone"
[ -x "$CLONE" ] || { echo "no $CLONE: build first (scripts/test.sh or cmake --build)" >&2; exit 1; }
command -v mpirun > /dev/null || { echo "no mpirun: apt-get install openmpi-bin" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

args=(tailor -m "$BASE" --profile orin-nx-16gb --latency-budget 0.65 --energy-budget 0.65
      --data "$DATA" --val-windows 4 --random-samples 8 --rounds 2 --per-round 4 --recover-steps 0)
rm -rf "$OUT"
mkdir -p "$OUT"
run() {  # name, launcher..., then the clone arguments follow
  local name=$1 t0 t1 status=0
  shift
  t0=$(date +%s.%N)
  "$@" > "$OUT/$name.log" 2>&1 || status=$?
  t1=$(date +%s.%N)
  [ "$status" -eq 0 ] || [ "$status" -eq 3 ] || { tail "$OUT/$name.log" >&2; exit "$status"; }
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }'
}
s1=$(run one "$CLONE" "${args[@]}" -t 1 --out "$OUT/one")
m1=$(run mpi1 mpirun --oversubscribe -np 1 "$CLONE" "${args[@]}" -t 1 --out "$OUT/mpi1")
m2=$(run mpi2 mpirun --oversubscribe -np 2 "$CLONE" "${args[@]}" -t 1 --out "$OUT/mpi2")
t2=$(run threads2 "$CLONE" "${args[@]}" -t 2 --out "$OUT/threads2")
same() {
  if [ "$1" = one ]; then echo "(the reference)"
  elif cmp -s "$OUT/one/model.gguf" "$OUT/$1/model.gguf"; then echo "yes"; else echo "NO"; fi
}
n=$(($(wc -l < "$OUT/one/candidates.jsonl") - 1))
{
  echo "\`clone tailor\` ($n evaluations: ${args[*]:2}), from an empty cache each time,"
  echo "on $(nproc) cores of $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'):"
  echo
  echo "| run | wall s | speed-up over one process of 1 thread | same model file as it |"
  echo "|---|---|---|---|"
  for r in "one 1 process, 1 thread:$s1:one" "mpi1 mpirun -np 1, 1 thread:$m1:mpi1" \
           "mpi2 mpirun -np 2, 1 thread each:$m2:mpi2" "t2 1 process, 2 threads:$t2:threads2"; do
    IFS=: read -r label secs dir <<< "$r"
    awk -v l="${label#* }" -v s="$secs" -v b="$s1" -v same="$(same "$dir")" \
      'BEGIN { printf "| %s | %s | %.2fx | %s |\n", l, s, b / s, same }'
  done
} > "$OUT/ranks.md"
cat "$OUT/ranks.md"
