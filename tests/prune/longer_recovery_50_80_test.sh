#!/usr/bin/env bash
# scripts/longer_recovery_50_80.sh --report, the 50% and 80% cells on the longer-trained base
# at the four times longer recovery: its parsing of each cell's results folders (the depth of
# the models from scratch from their folders), the reading fixed before the runs for each
# cell on its own (ahead of both seeds, behind both, or a tie), and scripts/lib's
# scratch_pair, which starts both seeds' runs at the cell's budget.
#   longer_recovery_50_80_test.sh <source dir>
set -euo pipefail
src=$1
script=$src/scripts/longer_recovery_50_80.sh
# shellcheck source-path=SCRIPTDIR source=../util/expect.sh
source "$(dirname "$0")/../util/expect.sh"  # fail, expect, $tmp
# shellcheck source-path=SCRIPTDIR source=plot_check.sh
source "$(dirname "$0")/plot_check.sh"  # expect_curves_plot
report() { PREFIX=$tmp "$script" --report; }
cell() { report | awk -v h="Orin NX, $1% of" 'index($0, h) == 1 { on = 1 } on && /^verdict/ { print; exit } on'; }

table() {  # table BUDGET SEARCH_PPL: a scripts/tailor.sh table, the search's row and Puzzle's
  local d="$tmp/tailor-base-21000-r4000-$1"
  mkdir -p "$d"
  {
    echo "| board | budget | method | candidate | val ppl | TPOT ms | energy J | test ppl |"
    echo "|---|---|---|---|---|---|---|---|"
    echo "| dense (no pruning, no recovery) | | | | | | | 21.096 |"
    echo "| orin-nx-16gb | $1 | search | search 2 | 39.9 | 0.95 | 2.31 | $2 |"
    echo "| orin-nx-16gb | $1 | puzzle | puzzle | 40.1 | 0.96 | 2.34 | 99.000 |"
  } > "$d/table.md"
}
scratch() {  # scratch FOLDER BUDGET LAYERS [PPL]: a scripts/tailor_scratch.sh folder, its
  # row only once the model is scored
  mkdir -p "$tmp/$1/layers-$3"
  printf '| board | budget | layers | TPOT ms | energy J | test ppl |\n|---|---|---|---|---|---|\n' \
    > "$tmp/$1/table.md"
  [ $# -lt 4 ] || echo "| orin-nx-16gb | $2 | $3 | 0.7 | 1.8 | $4 |" >> "$tmp/$1/table.md"
}

out=$(report)
expect "$(cell 50)" "verdict: not yet (the search's pick and both"
expect "$(cell 80)" "verdict: not yet (the search's pick and both"
expect "$out" "| ? layers from scratch, seed 1234, 25000 steps (equal tokens) | 51.2 M | not in |"

# 50%: the pick, then the seeds one at a time; the 80% cell stays unread.
table 0.5 28.000
scratch scratch-25000-50 0.5 5
out=$(report)
expect "$out" "| search's pick, recovered 4000 steps | 43.0 + 8.2 M | 28.000 |"
expect "$out" "| 5 layers from scratch, seed 1234, 25000 steps (equal tokens) | 51.2 M | not in |"
expect "$(cell 50)" "verdict: not yet"
scratch scratch-25000-50 0.5 5 29.000
scratch scratch-seed2-25000-50 0.5 5 30.000
out=$(report)
expect "$out" "| 5 layers from scratch, seed 2, 25000 steps (equal tokens) | 51.2 M | 30.000 |"
expect "$(cell 50)" "verdict: the pruned model ahead at equal tokens, by 3.6% on the better seed"
expect "$(cell 80)" "verdict: not yet"
# 80%: another budget's rows are not read as this one's.
table 0.8 25.000
scratch scratch-25000-80 0.8 9 24.000
scratch scratch-seed2-25000-80 0.8 9
expect "$(cell 80)" "verdict: not yet"
scratch scratch-seed2-25000-80 0.8 9 26.000
expect "$(report)" "| 9 layers from scratch, seed 2, 25000 steps (equal tokens) | 51.2 M | 26.000 |"
expect "$(cell 80)" "verdict: a tie, within the spread of the two scratch seeds"
table 0.8 27.000
expect "$(cell 80)" "verdict: the scratch model ahead at equal tokens, on both seeds (by 3.8% on the worse)"
expect "$(cell 50)" "verdict: the pruned model ahead at equal tokens, by 3.6% on the better seed"

expect_curves_plot longer_recovery_50_80

# scratch_pair: both seeds at the cell's budget, side by side, each in its folder; a failed
# run is said and stops the caller.
mkdir -p "$tmp/repo/scripts"
cat > "$tmp/repo/scripts/tailor_scratch.sh" <<'STUB'
#!/usr/bin/env bash
echo "seed=$SEED steps=$STEPS budgets=$BUDGETS threads=$THREADS boards=$BOARDS base=$BASE" > "$OUT.args"
[ "$SEED" != "${FAIL_SEED:-}" ]
STUB
chmod +x "$tmp/repo/scripts/tailor_scratch.sh"
(cd "$tmp/repo" && source "$src/scripts/lib/equal_tokens.sh" && scratch_pair b.gguf 25000 0.8 r1 r2)
expect "$(cat "$tmp/repo/r1.args")" "seed=1234 steps=25000 budgets=0.8 threads=1 boards=orin-nx-16gb base=b.gguf"
expect "$(cat "$tmp/repo/r2.args")" "seed=2 steps=25000 budgets=0.8 threads=1 boards=orin-nx-16gb base=b.gguf"
if err=$(cd "$tmp/repo" && source "$src/scripts/lib/equal_tokens.sh" &&
         FAIL_SEED=2 scratch_pair b.gguf 25000 0.5 r1 r2 2>&1); then
  fail "scratch_pair went on after a failed run"
fi
expect "$err" "the scratch run in r2 failed: see r2.log"
echo "longer_recovery_50_80.sh: ok"
