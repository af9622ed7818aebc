#!/usr/bin/env bash
# The online half's learned parts and tables, on the shipped base model and experts (after
# scripts/train_experts.sh): the router judged on held-out prompts (docs/results/route/),
# the output-length predictor trained and judged (models/length/: predictor.json, length.md,
# train.log), and the judged simulations with the predictor's measured error in place of the
# true length (docs/results/length-sim/). Deterministic for the fixed seeds; resumable by
# step (each step is skipped when its output exists).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build/release}
DATA=${DATA:-out/data}
BASE=${BASE:-models/base/model.gguf}
EXPERTS=${EXPERTS:-models/experts}
THREADS=${THREADS:-2}
[ -f "$BUILD/build.ninja" ] || cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD" -j"$THREADS" --target clone
CLONE="$BUILD/bin/clone"
[ -f "$DATA/tokens/code.test.tok" ] || { echo "no corpora in $DATA: run scripts/train_base.sh first" >&2; exit 1; }

sources=(dictionary computing scripture quotes wordnet code addition subtraction number_words digit_reverse)
route_experts=() length_experts=()
for s in "${sources[@]}"; do
  route_experts+=(--expert "$EXPERTS/$s.gguf")
  length_experts+=(--expert "$s=$EXPERTS/$s.gguf")
done

mkdir -p docs/results/route models/length docs/results/length-sim
# 1. The router. a) Its temperature and threshold, chosen on the validation split (the
#    setting with the smallest mean gap to the right single expert over every set).
[ -f docs/results/route/tune.md ] || "$CLONE" route eval --base "$BASE" --data "$DATA" \
  "${route_experts[@]}" --split valid --items 50 --threads "$THREADS" \
  --grid-temperature 0.01,0.02,0.03,0.05,0.1 --grid-threshold 0,0.1,0.2,0.3 \
  --out docs/results/route/tune.md 2>&1 | tee docs/results/route/tune.log
read -r temp thr < <(sed -n 's/^Chosen: temperature \([0-9.e-]*\), threshold \([0-9.e-]*\) .*/\1 \2/p' \
  docs/results/route/tune.md)
[ -n "$temp" ] || { echo "docs/results/route/tune.md names no chosen setting" >&2; exit 1; }
# b) Judged with that setting on held-out (test) prompts of every domain and task and on
#    prompts that need two experts: routing accuracy, and soft MoE vs top-1 vs uniform vs the
#    right expert vs the base.
[ -f docs/results/route/route.md ] || "$CLONE" route eval --base "$BASE" --data "$DATA" \
  "${route_experts[@]}" --temperature "$temp" --threshold "$thr" --items 100 \
  --threads "$THREADS" --out docs/results/route/route.md 2>&1 | tee docs/results/route/route.log

# 2. The output-length predictor (sampled generations of every source's training prompts
#    with the expert that serves it; judged on held-out prompts).
[ -f models/length/predictor.json ] || "$CLONE" length train --base "$BASE" --data "$DATA" \
  "${length_experts[@]}" --per-source 200 --test-per-source 100 --max-new 256 --seed 1 \
  --threads "$THREADS" --out models/length/predictor.json --report models/length/length.md \
  2>&1 | tee models/length/train.log

# 3. The judged simulations with the predictor's error (the RMS of log(predicted/true) it
#    measured on held-out prompts) in place of the true length, per board.
sigma=$(grep -o 'true): predictor [0-9.]*' models/length/length.md | head -1 | awk '{print $NF}')
[ -n "$sigma" ] || { echo "models/length/length.md gives no RMS log error" >&2; exit 1; }
for p in orin-nx-16gb orin-nano-8gb; do
  [ -f "docs/results/length-sim/$p/summary.csv" ] || "$CLONE" sim --profile "$p" --workload chat \
    -n 200 --length-noise "0,$sigma" --no-plots --out "docs/results/length-sim/$p" \
    > "docs/results/length-sim/$p.md" 2> "docs/results/length-sim/$p.log"
  rm -f "docs/results/length-sim/$p/requests.csv" "docs/results/length-sim/$p/timeline.csv"  # MBs
done
echo "done: docs/results/route/route.md, models/length/length.md, docs/results/length-sim/*.md"
