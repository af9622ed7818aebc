#!/usr/bin/env bash
# Every knob of the board, per request (docs/device.md, "Choosing the power mode per
# request"): `clone sim` with each power mode held fixed (nvpmodel presets: GPU cap and cores,
# memory clock, CPU clock) and with the mode chosen per request (`--modes all`), every
# controller, every co-runner; then one table over the same requests: those the fastest
# mode's top clock can serve in time (feasible), each run's mean energy on them and the share
# it serves in time. Deterministic; about a minute on 2 cores.
#
#   scripts/modes.sh                                   # Orin Nano Super, Gemma-2B, 100 requests
#   PROFILE=orin-nx-16gb OUT=out/modes-nx scripts/modes.sh
#   MODEL=tinyllama-1.1b MODES="15W 25W" OUT=out/modes-tl scripts/modes.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build/release}
PROFILE=${PROFILE:-orin-nano-super-8gb}
MODEL=${MODEL:-gemma-2b}
N=${N:-100}
SEED=${SEED:-42}
MODES=${MODES:-all}  # the profile's modes; one that serves no request in time is left out
OUT=${OUT:-out/modes}
CONTROLLERS=performance,podgov,static,learned,oracle
CORUNNERS=idle,web-search,video,bursty
CLONE="$BUILD/bin/clone"
[ -x "$CLONE" ] || { echo "no $CLONE: build first (scripts/test.sh or cmake --build)" >&2; exit 1; }
mkdir -p "$OUT"

sim() {
  "$CLONE" sim --profile "$PROFILE" --model "$MODEL" -n "$N" --seed "$SEED" \
    --controllers "$CONTROLLERS" --corunner "$CORUNNERS" --no-plots "$@" > /dev/null 2>&1
}
if [ "$MODES" = all ]; then
  MODES=$("$CLONE" device show "$PROFILE" |
    awk -F'"' '/^  "modes"/ { on = 1; next } /^  "/ { on = 0 } on && /"name"/ { print $4 }')
fi
held=""
for m in $MODES; do
  echo "mode $m held fixed" >&2
  if sim --mode "$m" --out "$OUT/mode-$m"; then
    held="$held $m"
  else  # `clone sim` stops when no request of the workload is feasible
    echo "mode $m: no request served in time, left out" >&2
  fi
done
MODES=$held
echo "mode chosen per request among$MODES" >&2
sim --modes "$(echo $MODES | tr ' ' ,)" --out "$OUT/per-request"

# requests.csv: ...,corunner(4),controller(5),id(6),...,energy_j(17),...,met(19),feasible(20)
table="$OUT/table.md"
{
  echo "$MODEL on $PROFILE, $N generated chat requests (seed $SEED). Mean energy per request"
  echo "(J, whole board) over the requests the fastest mode's top clock serves in time (the"
  echo "per-request run's feasible ones), and in parentheses the share of them served in time."
  echo
  printf "| mode | controller |"
  for c in ${CORUNNERS//,/ }; do printf " %s |" "$c"; done
  echo
  printf "|---|---|"
  for c in ${CORUNNERS//,/ }; do printf "%s" "---|"; done
  echo
  for run in $(for m in $MODES; do echo "mode-$m"; done) per-request; do
    label=${run#mode-}
    [ "$run" = per-request ] && label="chosen per request"
    awk -F, -v label="$label" -v cors="$CORUNNERS" -v ctls="$CONTROLLERS" '
      FNR == 1 { file++; next }
      file == 1 && $5 == "performance" { feas[$4 "," $6] = $20; next }
      file == 2 && feas[$4 "," $6] == 1 { e[$5 "," $4] += $17; met[$5 "," $4] += $19; n[$5 "," $4]++ }
      END {
        nc = split(cors, C, ","); nk = split(ctls, K, ",")
        for (k = 1; k <= nk; k++) {
          printf "| %s | %s |", label, K[k]
          for (c = 1; c <= nc; c++) {
            key = K[k] "," C[c]
            if (n[key] > 0) printf " %.2f (%.0f%%) |", e[key] / n[key], 100 * met[key] / n[key]
            else printf " |"
          }
          print ""
        }
      }' "$OUT/per-request/requests.csv" "$OUT/$run/requests.csv"
  done
} > "$table"
cat "$table"
