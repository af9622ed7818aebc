#!/usr/bin/env bash
# Robustness of the DVFS controllers to device-model error: the controllers plan with the
# fitted profile while the simulated board runs with one factor scaled (clone sim --perturb),
# swept from 0.7x to 1.3x. Writes <out>/robustness.csv (per factor, scale, co-runner,
# controller: SLO attainment on feasible requests, energy vs the performance governor) and
# <out>/robustness.png. About 2 minutes on 2 cores.
#   scripts/robustness.sh [profile] [out]
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE=${1:-orin-nx-16gb}
OUT=${2:-docs/results/robustness/$PROFILE}
CLONE=${CLONE:-build/release/bin/clone}
N=${N:-60}
[ -x "$CLONE" ] || { echo "no $CLONE: build first (cmake --build build/release)" >&2; exit 1; }
mkdir -p "$OUT"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
csv="$OUT/robustness.csv"
echo "factor,scale,corunner,controller,attainment_feasible_pct,energy_vs_performance_pct,infeasible" > "$csv"
for factor in core_bytes_per_cycle compute_efficiency board_idle_w; do
  for scale in 0.7 0.8 0.9 1.0 1.1 1.2 1.3; do
    "$CLONE" sim --profile "$PROFILE" --controllers performance,podgov,static,learned,oracle \
      --corunner idle,bursty -n "$N" --no-plots --perturb "$factor=$scale" --out "$tmp/run" \
      > "$tmp/log" 2> /dev/null
    # Columns by their header names (summary.csv has grown columns before; a fixed index read
    # a TTFT percentile as the attainment once).
    awk -F, -v f="$factor" -v s="$scale" 'NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next } {
        key = $c["corunner"] "," $c["controller"]
        e[key] = $c["energy_j"]; a[key] = $c["attainment_feasible_pct"]; inf[key] = $c["infeasible"]
        order[++n] = key
      } END {
        for (i = 1; i <= n; ++i) { k = order[i]; split(k, p, ",");
          printf "%s,%s,%s,%s,%.3f,%.3f,%s\n", f, s, p[1], p[2], a[k], 100 * (e[k] / e[p[1] ",performance"] - 1), inf[k] }
      }' "$tmp/run/summary.csv" >> "$csv"
    echo "$factor x$scale done" >&2
  done
done
gnuplot <<GP
set terminal pngcairo size 1400,800 font ",10" noenhanced
set output "$OUT/robustness.png"
set datafile separator ","
ctl = "performance podgov static learned oracle"
set multiplot layout 2,3 title "$PROFILE: controllers plan with the fitted profile, the board runs with one factor scaled (chat, $N requests)"
set key bottom left
set grid
do for [f in "core_bytes_per_cycle compute_efficiency board_idle_w"] {
  set title f." (bursty co-runner)"
  set xlabel "board's factor / profile's"
  set ylabel "SLO attainment, feasible requests (%)"
  set yrange [0:105]
  plot for [i=1:5] "$csv" using (strcol(1) eq f && strcol(3) eq "bursty" && \
    strcol(4) eq word(ctl, i) ? \$2 : 1/0):5 with linespoints lt i title word(ctl, i)
}
do for [f in "core_bytes_per_cycle compute_efficiency board_idle_w"] {
  set title f." (bursty co-runner)"
  set ylabel "energy vs performance (%)"
  set autoscale y
  plot for [i=1:5] "$csv" using (strcol(1) eq f && strcol(3) eq "bursty" && \
    strcol(4) eq word(ctl, i) ? \$2 : 1/0):6 with linespoints lt i title word(ctl, i)
}
unset multiplot
GP
echo "wrote $csv and $OUT/robustness.png"
