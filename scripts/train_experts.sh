#!/usr/bin/env bash
# Trains one LoRA expert per domain and per generated task on the shipped base model
# (fixed seed), after scripts/train_base.sh, then scores the bank through the engine
# (models/experts/experts.md: per-domain test perplexity of the base and every expert;
# task exact match on 500 test items for the trivial baselines, the base, the right and a
# wrong expert). Domain experts: rank 8, alpha 16, all of q,k,v,o,gate,up,down, 400 steps
# of 8 x 256 tokens. Task experts: rank 16, alpha 32, 600 steps of 16 x 128 tokens (the loss
# on answers only). Each expert is also reproducible alone, e.g.
#   clone lora train --base models/base/model.gguf --domain code --out models/experts/code.gguf
# Each writes <name>.train/{train.log,loss.csv,loss.png} beside it; an interrupted run
# resumes from <name>.train/checkpoint.bin.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-train}
DATA=${DATA:-out/data}
BASE=${BASE:-models/base/model.gguf}
OUT=${OUT:-models/experts}
DOMAIN_STEPS=${DOMAIN_STEPS:-400}
TASK_STEPS=${TASK_STEPS:-600}
THREADS=${THREADS:-2}
LOCK=${LOCK:-/tmp/clone-build.lock}

[ -f "$BUILD/build.ninja" ] || cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release
flock "$LOCK" cmake --build "$BUILD" -j"$THREADS" --target clone
CLONE="$BUILD/bin/clone"
[ -f "$DATA/tokens/code.test.tok" ] || { echo "no corpora in $DATA: run scripts/train_base.sh first" >&2; exit 1; }
mkdir -p "$OUT"

experts=()
# Tasks first: their exact-match bar (right expert >= every baseline + 20 points, addition
# >= 90%) is the one an interrupted run should answer soonest.
for t in addition subtraction number_words digit_reverse; do
  [ -f "$OUT/$t.gguf" ] || flock "$LOCK" "$CLONE" lora train --base "$BASE" --data "$DATA" \
    --task "$t" --out "$OUT/$t.gguf" --rank 16 --alpha 32 --steps "$TASK_STEPS" --warmup 30 \
    --lr 2e-3 --batch 16 --seq-len 128 --seed 1234 --threads "$THREADS"
  experts+=(--expert "$OUT/$t.gguf")
done

for d in dictionary computing scripture quotes wordnet code; do
  [ -f "$OUT/$d.gguf" ] || flock "$LOCK" "$CLONE" lora train --base "$BASE" --data "$DATA" \
    --domain "$d" --out "$OUT/$d.gguf" --rank 8 --alpha 16 --steps "$DOMAIN_STEPS" \
    --warmup 30 --lr 1e-3 --seed 1234 --threads "$THREADS"
  experts+=(--expert "$OUT/$d.gguf")
done
# The bank's TF-IDF router keys beside each expert's hidden one (the idf fitted on every
# expert's training prompts together; `clone serve --prompt-part-router tfidf-checked` reads
# them) and each expert's unigram key over its training text (`--prompt-part-router unigram`).
flock "$LOCK" "$CLONE" lora keys --base "$BASE" --data "$DATA" --tfidf --unigram \
  --threads "$THREADS" \
  "$OUT"/{addition,subtraction,number_words,digit_reverse,dictionary,computing,scripture,quotes,wordnet,code}.gguf
flock "$LOCK" "$CLONE" lora eval --base "$BASE" --data "$DATA" "${experts[@]}" \
  --tokens 32768 --task-items 500 --max-new 16 --threads "$THREADS" --out "$OUT" \
  --tasks addition,subtraction,number_words,digit_reverse,add_words \
  | tee "$OUT/eval.log"
