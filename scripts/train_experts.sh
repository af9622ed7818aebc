#!/usr/bin/env bash
# Trains one LoRA expert per domain and per generated task on the shipped base model
# (rank 8, alpha 16, all of q,k,v,o,gate,up,down; fixed seed), after
# scripts/train_base.sh. Each expert is also reproducible alone:
#   clone lora train --base models/base/model.gguf --domain code --out models/experts/code.gguf
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-train}
DATA=${DATA:-out/data}
BASE=${BASE:-models/base/model.gguf}
OUT=${OUT:-models/experts}
STEPS=${STEPS:-300}
THREADS=${THREADS:-2}
LOCK=${LOCK:-/tmp/clone-build.lock}
CLONE="$BUILD/tools/clone/clone"
mkdir -p "$OUT"
for d in dictionary computing scripture quotes wordnet code; do
  flock "$LOCK" "$CLONE" lora train --base "$BASE" --data "$DATA" --domain "$d" \
    --out "$OUT/$d.gguf" --rank 8 --alpha 16 --steps "$STEPS" --seed 1234 --threads "$THREADS"
done
for t in arithmetic wordnet_pos; do
  flock "$LOCK" "$CLONE" lora train --base "$BASE" --data "$DATA" --task "$t" \
    --out "$OUT/$t.gguf" --rank 8 --alpha 16 --steps "$STEPS" --seq-len 128 --seed 1234 \
    --threads "$THREADS"
done
