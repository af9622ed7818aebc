#!/usr/bin/env bash
# The judged tailoring experiment (docs/tailor.md): on the shipped base model, for the Orin
# NX and the Orin Nano, at three TPOT budgets (50, 65 and 80% of the dense model's, the
# request energy budget at the same share), `clone tailor` searches and writes, beside its
# own best, each method's best candidate within the budgets (best-<method>.gguf). Each is
# recovered by the same full fine-tuning (RECOVER_STEPS steps of 8 x 256 tokens, lr 3e-4)
# and scored on the test split; the table is written to $OUT/table.md.
#
#   scripts/tailor.sh                          # everything (hours on 2 cores)
#   BOARDS=orin-nx-16gb BUDGETS=0.65 RECOVER_STEPS=50 scripts/tailor.sh   # one cell, short
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build/release}
DATA=${DATA:-out/data}
BASE=${BASE:-models/base/model.gguf}
OUT=${OUT:-out/tailor}
BOARDS=${BOARDS:-"orin-nx-16gb orin-nano-8gb"}
BUDGETS=${BUDGETS:-"0.65 0.5 0.8"}  # 0.65 first: the 2x2 device-specificity table uses it
RECOVER_STEPS=${RECOVER_STEPS:-300}
THREADS=${THREADS:-2}
CLONE="$BUILD/bin/clone"
[ -x "$CLONE" ] || { echo "no $CLONE: build first (scripts/test.sh or cmake --build)" >&2; exit 1; }

# Mean test NLL over domains, as a perplexity (the geometric mean of the domains' ones).
test_ppl() {
  "$CLONE" eval domains -m "$1" --data "$DATA" --split test --seq-len 256 --max-tokens 32768 \
    --threads "$THREADS" --out "$2" > /dev/null
  awk -F, 'NR > 1 { s += log($3); n++ } END { printf "%.3f", exp(s / n) }' "$2"
}

mkdir -p "$OUT"
table="$OUT/table.md"
{
  echo "Test perplexity after the same recovery ($RECOVER_STEPS steps of full fine-tuning); the"
  echo "geometric mean over domains of 256-token windows (up to 32768 tokens per domain, every"
  echo "prediction scored). TPOT and energy: the device model, chat request, performance governor."
  echo
  echo "| board | budget | method | candidate | val ppl (no recovery) | TPOT ms | energy J | test ppl (recovered) |"
  echo "|---|---|---|---|---|---|---|---|"
} > "$table"
echo "| dense (no pruning, no recovery) | | | | | | | $(test_ppl "$BASE" "$OUT/dense-test.csv") |" >> "$table"
# Budgets outer, boards inner: a run stopped early still has both boards at the first budget.
for b in $BUDGETS; do
  for board in $BOARDS; do
    dir="$OUT/$board-$b"
    status=0
    "$CLONE" tailor -m "$BASE" --profile "$board" --latency-budget "$b" --energy-budget "$b" \
      --data "$DATA" --out "$dir" -t "$THREADS" || status=$?
    [ "$status" -eq 0 ] || [ "$status" -eq 3 ] || exit "$status"  # 3: nothing within budget
    for model in "$dir"/best-*.gguf; do
      [ -e "$model" ] || continue
      method=$(basename "$model" .gguf); method=${method#best-}
      ft="$dir/recover-$method"
      [ -f "$ft/model.gguf" ] ||  # done by an earlier, interrupted run
        "$CLONE" train finetune -m "$model" --data "$DATA" --out "$ft" --steps "$RECOVER_STEPS" \
          --warmup 20 --lr 3e-4 --seed 1234 --threads "$THREADS"
      ppl=$(test_ppl "$ft/model.gguf" "$ft/test.csv")
      row=$(awk -F, -v m="$method" 'NR > 1 && index($2, m) == 1 && $7 == 1 {
              if (best == "" || $3 < bp) { best = $0; bp = $3 } } END { print best }' \
            "$dir/candidates.csv")
      IFS=, read -r _ src vppl tpot energy _ _ _ <<< "$row"
      echo "| $board | $b | $method | $src | $vppl | $tpot | $energy | $ppl |" >> "$table"
    done
  done
done
echo "wrote $table"
