#!/usr/bin/env bash
# How much of the DVFS saving is an assumption: the paper's seven numbers (all at the top
# clock) cannot tell the DRAM efficiency (how much of decode time is the memory bus, which a
# GPU clock does not speed up) or the rest of the board's idle power apart. For each assumed
# dram_efficiency and board_idle_w this refits the profile's other factors to the paper's
# points (clone device calibrate: the same fit, its loss reported), then simulates the same
# workload with performance, the cheapest static clock and the oracle, and writes the saving
# each finds on feasible requests against the top clock. Writes <out>/savings.csv and
# <out>/savings.png. About 5 minutes on 2 cores.
#   scripts/identifiability.sh [profile] [out]
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE=${1:-orin-nx-16gb}
OUT=${2:-docs/results/identifiability/$PROFILE}
CLONE=${CLONE:-build/release/bin/clone}
N=${N:-100}
[ -x "$CLONE" ] || { echo "no $CLONE: build first (cmake --build build/release)" >&2; exit 1; }
mkdir -p "$OUT"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
csv="$OUT/savings.csv"
echo "dram_efficiency,board_idle_w,fit_loss,compute_efficiency,core_bytes_per_cycle,corunner,static_saving_feasible_pct,oracle_saving_feasible_pct,infeasible" > "$csv"
for de in 0.3 0.4 0.5 0.7 1.0; do
  for idle in 2 4 8; do
    mkdir -p "$tmp/p"
    sed -E "s/(\"dram_efficiency\": )[0-9.e+-]+/\1$de/; s/(\"board_idle_w\": )[0-9.e+-]+/\1$idle/" \
      "profiles/$PROFILE.json" > "$tmp/p/$PROFILE.json"
    "$CLONE" device calibrate --profile "$PROFILE" --profiles-dir "$tmp/p" --write > "$tmp/cal" 2>&1
    loss=$(grep -o 'loss [0-9.e+-]*' "$tmp/cal" | tail -1 | awk '{print $2}')
    ce=$(grep -o '"compute_efficiency": [0-9.e+-]*' "$tmp/p/$PROFILE.json" | awk '{print $2}')
    cb=$(grep -o '"core_bytes_per_cycle": [0-9.e+-]*' "$tmp/p/$PROFILE.json" | awk '{print $2}')
    "$CLONE" sim --profile "$PROFILE" --profiles-dir "$tmp/p" --controllers performance,static,oracle \
      --corunner idle,bursty -n "$N" --no-plots --out "$tmp/run" > /dev/null 2>&1
    awk -F, -v de="$de" -v idle="$idle" -v loss="${loss:-nan}" -v ce="$ce" -v cb="$cb" '
      NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
      { e[$c["corunner"] "," $c["controller"]] = $c["energy_feasible_j"]; inf[$c["corunner"]] = $c["infeasible"]
        if (!($c["corunner"] in seen)) { seen[$c["corunner"]] = 1; order[++n] = $c["corunner"] } }
      END { for (i = 1; i <= n; ++i) { r = order[i]; p = e[r ",performance"]
        printf "%s,%s,%s,%s,%s,%s,%.3f,%.3f,%s\n", de, idle, loss, ce, cb, r,
          100 * (1 - e[r ",static"] / p), 100 * (1 - e[r ",oracle"] / p), inf[r] } }' \
      "$tmp/run/summary.csv" >> "$csv"
    echo "dram_efficiency $de, board idle $idle W: done (fit loss ${loss:-?})" >&2
  done
done
gnuplot <<GP
set terminal pngcairo size 1200,500 font ",10" noenhanced
set output "$OUT/savings.png"
set datafile separator ","
set multiplot layout 1,2 title "$PROFILE: the oracle's saving on feasible requests vs the top clock, per assumed factor (each refitted to the paper's points)"
set xlabel "assumed dram_efficiency"
set ylabel "oracle saving vs performance, feasible requests (%)"
set key top right
set grid
do for [co in "idle bursty"] {
  set title co
  plot for [w in "2 4 8"] "$csv" using (\$2 == w+0 && strcol(6) eq co ? \$1 : 1/0):8 with points pointsize 1.5 title sprintf("board idle %s W", w)
}
unset multiplot
GP
echo "wrote $csv and $OUT/savings.png" >&2
