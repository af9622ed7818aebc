# shellcheck shell=bash
# Helpers of the equal-token comparisons (scripts/converged_65.sh,
# scripts/longer_recovery_65.sh, scripts/longer_recovery_50_80.sh); source this file.
#   cell_of TABLE ROW        the last column of TABLE's markdown row that starts with ROW, or
#                            "not in"
#   geomean TEST_CSV         the geometric mean of a clone eval domains table's perplexities
#                            (third column), or "not in"
#   equal_token_verdict P A B  the reading fixed before those runs: the pruned model's test
#                            perplexity P against two scratch seeds' A and B, ahead of both,
#                            behind both or a tie (one base and two seeds: a ranking)
#   equal_token_seeds        the two scratch seeds of every equal-token comparison (1234, 2)
#   scratch_pair BASE STEPS BUDGET DIR1 DIR2  the deepest model within the Orin NX's BUDGET
#                            (the 7 layers of the 65% cell) trained from scratch
#                            (scripts/tailor_scratch.sh) for STEPS steps, the first seed in
#                            DIR1 and the second in DIR2, side by side at one thread each (on 2
#                            cores a little more work per core than one after the other at
#                            two threads; a run's curve depends on its thread count); BASE
#                            gives the dense model's costs; logs DIR1.log, DIR2.log
#   plot_curves NAME BASE_VALID  scripts/NAME.gp's plot of the validation curves so far
#                            ($PREFIX/NAME.png); nothing before the base has a validation
#                            point (BASE_VALID), and a plot that fails is said and leaves
#                            the table as it is
equal_token_seeds=(1234 2)
cell_of() {
  [ -f "$1" ] || { echo "not in"; return; }
  awk -F' *[|] *' -v key="$2" 'index($0, key) == 1 { v = $(NF - 1) } END { print v ? v : "not in" }' "$1"
}
geomean() {
  [ -f "$1" ] || { echo "not in"; return; }
  awk -F, 'NR > 1 { s += log($3); n++ } END { printf "%.3f\n", exp(s / n) }' "$1"
}
equal_token_verdict() {
  awk -v p="$1" -v a="$2" -v b="$3" 'BEGIN {
    lo = a < b ? a : b; hi = a < b ? b : a
    if (p < lo) printf "verdict: the pruned model ahead at equal tokens, by %.1f%% on the better seed\n", 100 * (lo / p - 1)
    else if (p > hi) printf "verdict: the scratch model ahead at equal tokens, on both seeds (by %.1f%% on the worse)\n", 100 * (p / hi - 1)
    else print "verdict: a tie, within the spread of the two scratch seeds"
  }'
}
scratch_pair() {
  local dirs=("$4" "$5") pids=() i
  for i in 0 1; do
    BUILD=${BUILD:-build/release} BASE="$1" SEED=${equal_token_seeds[$i]} STEPS="$2" BUDGETS="$3" THREADS=1 \
      BOARDS=orin-nx-16gb OUT="${dirs[$i]}" scripts/tailor_scratch.sh > "${dirs[$i]}.log" 2>&1 &
    pids+=($!)
  done
  for i in 0 1; do
    wait "${pids[$i]}" || { echo "the scratch run in ${dirs[$i]} failed: see ${dirs[$i]}.log" >&2; exit 1; }
  done
}
plot_curves() {
  command -v gnuplot > /dev/null && [ -s "$2" ] || return 0
  if gnuplot -e "prefix='$PREFIX'" "scripts/$1.gp" 2> /dev/null; then
    echo "plot: $PREFIX/$1.png (validation loss against tokens seen)"
  else
    echo "plot: gnuplot failed on scripts/$1.gp (the table above stands)" >&2
  fi
}
