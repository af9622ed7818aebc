#!/usr/bin/env bash
# scripts/converged_65.sh --report, the equal-token comparison on the longer-trained base: its
# parsing of the results folders and the reading fixed before the runs (the search's pick
# against both equal-token scratch seeds: ahead of both, behind both, or a tie between).
#   converged_test.sh <source dir>
set -euo pipefail
script=$1/scripts/converged_65.sh
# shellcheck source-path=SCRIPTDIR source=../util/expect.sh
source "$(dirname "$0")/../util/expect.sh"  # fail, expect, $tmp
# shellcheck source-path=SCRIPTDIR source=plot_check.sh
source "$(dirname "$0")/plot_check.sh"  # expect_curves_plot
report() { PREFIX=$tmp "$script" --report; }

# A model's test.csv: domain, mean NLL, perplexity; the table reads the geometric mean of
# the perplexities.
test_csv() {  # test_csv FILE PPL...
  mkdir -p "$(dirname "$1")"
  echo "domain,nll,ppl" > "$1"
  local i=0 p
  for p in "${@:2}"; do echo "d$i,0,$p" >> "$1"; i=$((i + 1)); done
}
cell=$tmp/tailor-base-21000
mkdir -p "$cell"
{
  echo "| board | budget | method | candidate | val ppl | TPOT ms | energy J | test ppl |"
  echo "|---|---|---|---|---|---|---|---|"
  echo "| orin-nx-16gb | 0.65 | puzzle | puzzle | 40.1 | 0.96 | 2.34 | 27.500 |"
  echo "| orin-nx-16gb | 0.65 | search | search 4 | 39.9 | 0.95 | 2.31 | 27.000 |"
} > "$cell/table.md"
test_csv "$cell/dense-test.csv" 25 36  # geometric mean 30

out=$(report)
expect "$out" "| dense base, 21000 steps | 43.0 M | 30.000 |"
expect "$out" "| search's pick, recovered 1000 steps | 43.0 + 2.0 M | 27.000 |"
expect "$out" "| Puzzle's pick, recovered 1000 steps | 43.0 + 2.0 M | 27.500 |"
expect "$out" "| 7 layers from scratch, seed 2 (equal tokens) | 45.1 M | not in |"
expect "$out" "verdict: not yet"

# One seed in: still no reading.
test_csv "$tmp/scratch-22000-65/layers-7/test.csv" 28 28
expect "$(report)" "verdict: not yet"

# Both in, the pick below both: ahead, by the better seed's margin (27.27 / 27 - 1 = 1.0%).
test_csv "$tmp/scratch-seed2-22000-65/layers-7/test.csv" 27.27 27.27
out=$(report)
expect "$out" "| 7 layers from scratch, seed 2 (equal tokens) | 45.1 M | 27.270 |"
expect "$out" "verdict: the pruned model ahead at equal tokens, by 1.0% on the better seed"
# Between the two seeds: a tie.
test_csv "$tmp/scratch-seed2-22000-65/layers-7/test.csv" 26 26
expect "$(report)" "verdict: a tie, within the spread of the two scratch seeds"
# Above both: behind, by the worse seed's margin (27 / 26.73 - 1 = 1.0%).
test_csv "$tmp/scratch-22000-65/layers-7/test.csv" 26.73
out=$(report)
expect "$out" "verdict: the scratch model ahead at equal tokens, on both seeds (by 1.0% on the worse)"
# The issue's baseline on this base is reported, not read.
test_csv "$tmp/scratch-21000-65/layers-7/test.csv" 31
expect "$(report)" "| 7 layers from scratch, seed 1234 (the base's tokens) | 43.0 M | 31.000 |"
expect_curves_plot converged_65
echo "converged_65.sh: ok"
