#!/usr/bin/env bash
# scripts/confirm_65.sh, the planned 65% confirmation's one look: its arithmetic against
# values known from elsewhere, its parsing of the results tables, and that it runs no test
# until all twelve models are scored.
#   confirm_test.sh <source dir>
set -euo pipefail
script=$1/scripts/confirm_65.sh
# shellcheck source-path=SCRIPTDIR source=../util/expect.sh
source "$(dirname "$0")/../util/expect.sh"  # fail, expect, $tmp

# Student's t: t = 2.228 on 10 df is the textbook two-sided 5% point (two samples of six,
# equal variance, so Welch's df is 2(n-1) = 10).
out=$("$script" --values 0,1,2,3,4,5 2.4065,3.4065,4.4065,5.4065,6.4065,7.4065)
expect "$out" "Welch t 2.23, 10.0 df, two-sided p 0.050"
# t = 4.587 on 10 df is the 0.1% point.
out=$("$script" --values 0,1,2,3,4,5 4.9544,5.9544,6.9544,7.9544,8.9544,9.9544)
expect "$out" "two-sided p 0.001"
# Mann-Whitney, 4 against 8 fully separated: 2 of the C(12,4) = 495 splits are as extreme.
out=$("$script" --values 1,2,3,4 5,6,7,8,9,10,11,12)
expect "$out" "Mann-Whitney U 32 of 32 (first lower), exact two-sided p 2/495 = 0.004"
# Ties count one half; all values equal: every split is as extreme.
out=$("$script" --values 1,1 1,1,1)
expect "$out" "U 3 of 6 (first lower), exact two-sided p 10/10 = 1.000"
expect "$out" "Welch t undefined: neither sample has any spread"
# The 65% look of 2026-12-05 (four bases against eight scratch seeds), as computed then by a
# separate implementation (docs/tailor.md, "Scratch seed 8 at 65%").
out=$("$script" --values 30.292,30.009,30.210,30.106 \
  31.483,29.977,31.405,31.113,30.528,34.673,31.216,32.148)
expect "$out" "Welch t 2.81, 7.2 df, two-sided p 0.025"
expect "$out" "U 28 of 32 (first lower), exact two-sided p 24/495 = 0.048"
"$script" --values 1 2,3 2> /dev/null && fail "a one-value sample was accepted"

# The tables: eleven of twelve in, no test; the twelfth in, the test runs on the parsed values.
base_table() {  # base_table DIR SEARCH PUZZLE
  mkdir -p "$1"
  printf '| board | budget | method | candidate | val ppl | TPOT ms | energy J | test ppl |\n' > "$1/table.md"
  printf '|---|---|---|---|---|---|---|---|\n| dense (no pruning, no recovery) | | | | | | | 29.4 |\n' >> "$1/table.md"
  printf '| orin-nx-16gb | 0.65 | puzzle | puzzle | 42.4 | 0.96 | 2.34 | %s |\n' "$3" >> "$1/table.md"
  printf '| orin-nx-16gb | 0.65 | search | search 2 | 43.6 | 0.91 | 2.22 | %s |\n' "$2" >> "$1/table.md"
}
scratch_table() {  # scratch_table DIR PPL
  mkdir -p "$1/layers-7"
  printf '| board | budget | layers | TPOT ms | energy J | test ppl |\n|---|---|---|---|---|---|\n' > "$1/layers-7/table.md"
  printf '| orin-nx-16gb | 0.65 | 7 | 0.9411 | 2.3002 | %s |\n' "$2" >> "$1/layers-7/table.md"
}
base_table "$tmp/base-seed101" 1 11
base_table "$tmp/base-seed102" 2 12
base_table "$tmp/base-seed103" 3 13
base_table "$tmp/base-seed104" 4 14
for n in 201 202 203 204 205 206 207; do scratch_table "$tmp/scratch-seed$n" $((n - 196)); done
out=$(RESULTS=$tmp "$script")
expect "$out" "base 104: search 4, Puzzle 14"
expect "$out" "scratch 208: (not yet)"
expect "$out" "11 of 12 scored: the one planned look waits for all 12 (no test run)"
grep -q "Welch" <<< "$out" && fail "a test ran before all twelve were in"
scratch_table "$tmp/scratch-seed208" 12
out=$(RESULTS=$tmp "$script")
# search 1-4 against scratch 5-12: fully separated; Puzzle 11-14 against the same.
expect "$out" "n 4 / 8; means 2.500 / 8.500"
expect "$out" "exact two-sided p 2/495 = 0.004"
expect "$out" "n 4 / 8; means 12.500 / 8.500"
echo "confirm_65.sh: ok"
