#!/usr/bin/env bash
# Regenerates every committed `clone sim` result that a controller change moves
# (docs/device.md "Results", docs/serve.md "The predictor in place of the true length"):
# the judged NX and Nano runs, the held-out seeds and Azure replays of the NX, the Nano and
# the Nano Super, the power-mode tables of the three boards, the accelerator ablation, the
# robustness sweep and the length-predictor runs. Deterministic (fixed seeds); about 10
# minutes on 2 cores (9.5 measured; run twice, the second left git diff empty). The runs that
# docs/device.md quotes without committing (the NX's SFU-on run, the Nano Super's seed 42)
# go to $OUT. Not here: identifiability (scripts/identifiability.sh; its
# controllers, performance, static and oracle, do not depend on the learned policy).
#
#   scripts/sim_results.sh            # everything
#   ONLY="orin-nx length-sim" scripts/sim_results.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build/release}
OUT=${OUT:-out/sim-results}
ONLY=${ONLY:-"orin-nx orin-nx-heldout orin-nano orin-nano-heldout nano-super modes ablation robustness length-sim"}
CLONE="$BUILD/bin/clone"
[ -x "$CLONE" ] || { echo "no $CLONE: build first (scripts/test.sh or cmake --build)" >&2; exit 1; }
D=docs/results/device
mkdir -p "$OUT"
want() { [[ " $ONLY " == *" $1 "* ]]; }
step() { echo "[$(date +%T)] $*" >&2; }

if want orin-nx; then
  step "Orin NX, SFU off, seed 42 (committed)"
  "$CLONE" sim --profile orin-nx-16gb --workload chat -n 200 --sfu off \
    --timeline-request 68 --timeline-corunner bursty --out "$D/orin-nx" > /dev/null
  rm -f "$D/orin-nx/requests.csv"
  step "Orin NX, SFU on and off"
  "$CLONE" sim --profile orin-nx-16gb --workload chat -n 200 --sfu both --no-plots \
    --out "$OUT/orin-nx-sfu" > /dev/null
fi
# Held-out runs: chat on seeds the policies and the forecast's quantile were not chosen on
# (7 was looked at while choosing the quantile, 1234 never) and the Azure 2023 traces,
# judged and summarised per board (the Nano Super's are in the nano-super step).
heldout() {  # profile dir
  local p=$1 H=$D/$2
  for seed in 7 1234; do
    step "$p, held-out seed $seed (committed)"
    "$CLONE" sim --profile "$p" --workload chat -n 200 --seed "$seed" --no-plots \
      --out "$H/chat-$seed" > /dev/null
  done
  for w in azure-conv azure-code; do
    step "$p, $w (committed)"
    "$CLONE" sim --profile "$p" -n 200 --workload "$w" --no-plots --out "$H/$w" > /dev/null
  done
  for f in "$H"/*/*; do
    case "$f" in */judged.csv|*/summary.csv) ;; *) rm -f "$f" ;; esac
  done
}
if want orin-nx-heldout; then heldout orin-nx-16gb orin-nx-heldout; fi
if want orin-nano-heldout; then heldout orin-nano-8gb orin-nano-heldout; fi
if want orin-nano; then
  step "Orin Nano, SFU on and off (committed)"
  "$CLONE" sim --profile orin-nano-8gb --workload chat -n 200 --sfu both --no-plots \
    --out "$D/orin-nano" > /dev/null
  rm -f "$D/orin-nano/requests.csv" "$D/orin-nano/timeline.csv"
  for f in "$D"/orin-nano/pivot_*.csv; do git ls-files --error-unmatch "$f" > /dev/null 2>&1 || rm -f "$f"; done
fi
if want nano-super; then
  H=$D/nano-super-heldout
  step "Orin Nano Super, seed 42"
  "$CLONE" sim --profile orin-nano-super-8gb -n 100 --no-plots --out "$OUT/nano-super-42" > /dev/null
  for seed in 7 1234; do
    step "Orin Nano Super, held-out seed $seed (committed)"
    "$CLONE" sim --profile orin-nano-super-8gb -n 100 --seed "$seed" --no-plots \
      --out "$H/chat-$seed" > /dev/null
  done
  for w in azure-conv azure-code; do
    step "Orin Nano Super, $w (committed)"
    "$CLONE" sim --profile orin-nano-super-8gb -n 200 --workload "$w" --no-plots \
      --out "$H/$w" > /dev/null
  done
  for f in "$H"/*/*; do git ls-files --error-unmatch "$f" > /dev/null 2>&1 || rm -f "$f"; done
fi
if want modes; then
  step "power modes: Orin Nano Super, Orin NX, Orin Nano (committed)"
  OUT=$D/modes scripts/modes.sh > /dev/null
  PROFILE=orin-nx-16gb OUT=$D/modes-nx scripts/modes.sh > /dev/null
  PROFILE=orin-nano-8gb OUT=$D/modes-nano scripts/modes.sh > /dev/null
  for f in "$D"/modes*/*/* "$D"/modes*/*; do
    [ -f "$f" ] && { git ls-files --error-unmatch "$f" > /dev/null 2>&1 || rm -f "$f"; }
  done
fi
if want ablation; then
  step "accelerator ablation, Orin NX (committed)"
  "$CLONE" sim --profile orin-nx-16gb --workload chat -n 100 --sfu both --lpu both \
    --lora-experts 4 --lora-bank 6 --controllers performance,learned,oracle \
    --corunner idle,web-search --no-plots --out "$D/ablation-nx" > /dev/null
  for f in "$D"/ablation-nx/*; do git ls-files --error-unmatch "$f" > /dev/null 2>&1 || rm -f "$f"; done
fi
if want robustness; then
  step "robustness sweep, Orin NX (committed)"
  scripts/robustness.sh orin-nx-16gb > /dev/null
fi
if want length-sim; then
  # The RMS of log(predicted / true) the predictor measured on held-out prompts.
  sigma=$(grep -o 'true): predictor [0-9.]*' models/length/length.md | head -1 | awk '{print $NF}')
  [ -n "$sigma" ] || { echo "models/length/length.md gives no RMS log error" >&2; exit 1; }
  for p in orin-nx-16gb orin-nano-8gb; do
    step "length predictor's error (sigma $sigma) against the true length, $p (committed)"
    L=docs/results/length-sim
    "$CLONE" sim --profile "$p" --workload chat -n 200 --length-noise "0,$sigma" --no-plots \
      --out "$L/$p" > "$L/$p.md" 2> "$L/$p.log"
    rm -f "$L/$p/requests.csv" "$L/$p/timeline.csv"
  done
fi
step "done; git diff --stat docs/results shows what moved"
