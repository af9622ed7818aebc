#!/usr/bin/env bash
# The tailoring experiment's last baseline (docs/tailor.md): a dense model of the pruned size
# trained from scratch with the base model's token budget (the paper's smaller-model
# comparison). For each board and budget, the deepest model of the base's width (192 wide,
# 6 query / 2 KV heads, FFN 512) whose chat request meets both budgets on that board (the
# same device cost and budgets as `clone tailor`: shares of the dense base model's top-clock
# TPOT and energy); at this size the fixed per-layer cost dominates the boards' decode, so
# depth is what a budget buys. Each depth is trained once, with the base model's recipe
# (scripts/train_base.sh: 8 x 256 tokens, lr 2e-3, 200 warm-up steps, cosine to 0.1, seed
# 1234, or SEED) for STEPS steps (default 7000: the base's 14.3 M tokens; about 1.3-2 hours a
# model on 2 cores), and scored on the test split as scripts/tailor.sh scores the pruned models.
# Resumes: a run interrupted goes on from its checkpoint; a trained model is not trained again.
#
#   scripts/tailor_scratch.sh                                   # every board and budget
#   STEPS=20 BUDGETS=0.65 OUT=out/scratch-smoke scripts/tailor_scratch.sh   # the recipe, short
#   SEED=2 BUDGETS=0.65 BOARDS=orin-nx-16gb OUT=out/scratch-seed2-65 scripts/tailor_scratch.sh
#
# TEACHER=<gguf> distils that model into each one from its first step (clone train base
# --teacher, KD_WEIGHT of the loss, 0.5 by default, as the pruned models' recovery): the
# scratch side given the dense model's outputs too, the strongest form of this baseline.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build/release}
DATA=${DATA:-out/data}
BASE=${BASE:-models/base/model.gguf}
OUT=${OUT:-out/tailor-scratch}
BOARDS=${BOARDS:-"orin-nx-16gb orin-nano-8gb"}
BUDGETS=${BUDGETS:-"0.65 0.5 0.8"}
STEPS=${STEPS:-7000}
SEED=${SEED:-1234}
THREADS=${THREADS:-2}
TEACHER=${TEACHER:-}
KD_WEIGHT=${KD_WEIGHT:-0.5}
CLONE="$BUILD/bin/clone"
[ -x "$CLONE" ] || { echo "no $CLONE: build first (scripts/test.sh or cmake --build)" >&2; exit 1; }
mkdir -p "$OUT"
kd=()
how="the base model's recipe"
if [ -n "$TEACHER" ]; then
  [ -f "$TEACHER" ] || { echo "no teacher $TEACHER" >&2; exit 1; }
  kd=(--teacher "$TEACHER" --kd-weight "$KD_WEIGHT")
  how="the base model's recipe, distilled from $(basename "$TEACHER") with weight $KD_WEIGHT"
fi

shape=(--embd 192 --heads 6 --kv-heads 2 --ff 512)
# The deepest model within both budgets on a board (0 when not even one layer is).
depth_for() {
  local board=$1 b=$2 n within
  for n in $(seq 12 -1 1); do
    "$CLONE" init-model -o "$OUT/shape-$n.gguf" --layers "$n" "${shape[@]}" --vocab-from "$BASE" \
      > /dev/null
    within=$("$CLONE" device cost -m "$OUT/shape-$n.gguf" --profile "$board" --dense "$BASE" \
               --latency-budget "$b" --energy-budget "$b" | awk -F' *[|] *' 'NR == 3 { print $8 }')
    [ "$within" = yes ] && { echo "$n"; return; }
  done
  echo 0
}

table="$OUT/table.md"
{
  echo "Dense models of the base model's width trained from scratch ($STEPS steps of 8 x 256"
  echo "tokens, seed $SEED, $how), the deepest within each board's"
  echo "budgets; test perplexity as scripts/tailor.sh scores the pruned models (geometric mean"
  echo "over domains)."
  echo
  echo "| board | budget | layers | TPOT ms | energy J | test ppl |"
  echo "|---|---|---|---|---|---|"
} > "$table"
for b in $BUDGETS; do
  for board in $BOARDS; do
    n=$(depth_for "$board" "$b")
    if [ "$n" -eq 0 ]; then
      echo "| $board | $b | none within | | | |" >> "$table"
      continue
    fi
    run="$OUT/layers-$n"
    if [ ! -f "$run/model.gguf" ]; then
      "$CLONE" train base --data "$DATA" --out "$run" \
        --n-embd 192 --n-layer "$n" --n-head 6 --n-head-kv 2 --n-ff 512 \
        --batch 8 --seq-len 256 --warmup 200 --lr 2e-3 --min-lr-ratio 0.1 \
        --weight-decay 0.1 --clip 1.0 --seed "$SEED" --threads "$THREADS" \
        --log-every 50 --eval-every 500 --ckpt-every 100 --steps "$STEPS" "${kd[@]}"
    fi
    [ -f "$run/test.csv" ] || "$CLONE" eval domains -m "$run/model.gguf" --data "$DATA" \
      --split test --seq-len 256 --max-tokens 32768 --threads "$THREADS" --out "$run/test.csv" \
      > /dev/null
    ppl=$(awk -F, 'NR > 1 { s += log($3); n++ } END { printf "%.3f", exp(s / n) }' "$run/test.csv")
    cost=$("$CLONE" device cost -m "$run/model.gguf" --profile "$board" |
           awk -F' *[|] *' 'NR == 3 { print $4 " | " $5 }')
    echo "| $board | $b | $n | $cost | $ppl |" >> "$table"
  done
done
rm -f "$OUT"/shape-*.gguf
echo "wrote $table"
