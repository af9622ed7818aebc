#!/usr/bin/env bash
# The 50% and 80% cells of the Orin NX on the longer-trained base, at the 65% cell's four
# times longer recovery, each against its equal-token models from scratch (docs/tailor.md,
# "What follows stage B's reading": the branch of the pruned model ahead on both seeds,
# fixed 2026-12-07 at 20:15 before stage B's result). For each budget, 50% then 80%:
#
#   A. the search's pick, distilled from the base 4000 steps (8.2 M tokens, 51.2 M in all),
#      the 65% cell's recipe otherwise (KD weight 0.5, peak lr 1e-3)           (~1 h a cell)
#   B. the deepest model within the budgets (5 layers at 50%, 9 at 80% on the shipped base)
#      from scratch on 51.2 M tokens, 25000 steps, seeds 1234 and 2 side by side at one
#      thread each                                          (~4 h at 50%, ~6.5 h at 80%)
#
# Each cell is read as the 65% cell was: the pruned model ahead at equal tokens if below both
# seeds' test perplexity, behind if above both, a tie otherwise; one base, one recovery seed
# and two scratch seeds make each a ranking, and a confirmation with fresh seeds on both
# sides, planned in full before it runs, comes after both. Re-running goes on where it
# stopped (each trainer resumes from its checkpoint; a finished step is skipped).
#
#   scripts/longer_recovery_50_80.sh            # run (or resume), then print the tables
#   scripts/longer_recovery_50_80.sh --report   # print the tables from what is in, run nothing
#
# Either way it plots the validation curves against tokens seen, one panel a cell
# ($PREFIX/longer_recovery_50_80.png, scripts/longer_recovery_50_80.gp).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source-path=SCRIPTDIR source=lib/equal_tokens.sh
source scripts/lib/equal_tokens.sh  # cell_of, equal_token_verdict, scratch_pair, plot_curves
BUILD=${BUILD:-build/release}
PREFIX=${PREFIX:-out}
base="$PREFIX/base-21000"
budgets=(0.5 0.8)

cell() { echo "$PREFIX/tailor-base-21000-r4000-$1"; }           # stage A of budget $1
pct() { awk -v b="$1" 'BEGIN { printf "%d", 100 * b + 0.5 }'; }  # 0.5 -> 50
scratch() {  # scratch BUDGET I: the folder of the I-th seed's model from scratch
  local p
  p=$(pct "$1")
  if [ "$2" -eq 0 ]; then echo "$PREFIX/scratch-25000-$p"; else echo "$PREFIX/scratch-seed2-25000-$p"; fi
}
row() { echo "| orin-nx-16gb | $1 |"; }
pick() { cell_of "$(cell "$1")/table.md" "$(row "$1") search |"; }
from_scratch() { cell_of "$(scratch "$1" "$2")/table.md" "$(row "$1")"; }
layers() {  # the scratch model's depth, from its folder (layers-N, once it started), or "?"
  local d
  for d in "$(scratch "$1" "$2")"/layers-*; do
    [ -d "$d" ] && { echo "${d##*-}"; return; }
  done
  echo "?"
}

run_all() {
  local b
  for b in "${budgets[@]}"; do
    grep -qs "$(row "$b") search |" "$(cell "$b")/table.md" ||
      BUILD=$BUILD BASE="$base/model.gguf" BOARDS=orin-nx-16gb BUDGETS="$b" RECOVER_STEPS=4000 \
        RECOVER_LR=1e-3 RECOVER_TEACHER="$base/model.gguf" METHODS=search OUT="$(cell "$b")" \
        scripts/tailor.sh
    scratch_pair "$base/model.gguf" 25000 "$b" "$(scratch "$b" 0)" "$(scratch "$b" 1)"
  done
}

report() {
  local b p s1 s2 i
  for b in "${budgets[@]}"; do
    p=$(pick "$b"); s1=$(from_scratch "$b" 0); s2=$(from_scratch "$b" 1)
    echo "Orin NX, $(pct "$b")% of the dense model's TPOT and energy; test perplexity (six domains)"
    echo
    echo "| model | tokens | test ppl |"
    echo "|---|---|---|"
    echo "| search's pick, recovered 4000 steps | 43.0 + 8.2 M | $p |"
    for i in 0 1; do
      echo "| $(layers "$b" "$i") layers from scratch, seed ${equal_token_seeds[$i]}, 25000 steps (equal tokens) | 51.2 M | $(from_scratch "$b" "$i") |"
    done
    echo
    # The reading fixed before the runs; one base and two seeds: a ranking, not a test.
    if [ "$p" = "not in" ] || [ "$s1" = "not in" ] || [ "$s2" = "not in" ]; then
      echo "verdict: not yet (the search's pick and both 25000-step scratch seeds are needed)"
    else
      equal_token_verdict "$p" "$s1" "$s2"
    fi
    echo
  done
}

[ "${1:-}" = --report ] || run_all
report
plot_curves longer_recovery_50_80 "$base/valid.csv"
