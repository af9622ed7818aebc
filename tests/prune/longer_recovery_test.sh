#!/usr/bin/env bash
# scripts/longer_recovery_65.sh --report, the four times longer distilled recovery on the
# longer-trained base: its parsing of the results folders, the check that the repeated search
# gave the same pick, and the readings fixed before the runs (stage B only when the pick is
# not above both 22000-step scratch seeds; then ahead of both, behind both, or a tie; stage
# C the same against the models from scratch distilled from the base).
#   longer_recovery_test.sh <source dir>
set -euo pipefail
script=$1/scripts/longer_recovery_65.sh
# shellcheck source-path=SCRIPTDIR source=../util/expect.sh
source "$(dirname "$0")/../util/expect.sh"  # fail, expect, $tmp
# shellcheck source-path=SCRIPTDIR source=plot_check.sh
source "$(dirname "$0")/plot_check.sh"  # expect_curves_plot
report() { PREFIX=$tmp "$script" --report; }

test_csv() {  # test_csv FILE PPL...: domain, mean NLL, perplexity (read: geometric mean)
  mkdir -p "$(dirname "$1")"
  echo "domain,nll,ppl" > "$1"
  local i=0 p
  for p in "${@:2}"; do echo "d$i,0,$p" >> "$1"; i=$((i + 1)); done
}
table() {  # table FOLDER SEARCH_PPL: a scripts/tailor.sh table with the search's row
  mkdir -p "$1"
  {
    echo "| board | budget | method | candidate | val ppl | TPOT ms | energy J | test ppl |"
    echo "|---|---|---|---|---|---|---|---|"
    echo "| orin-nx-16gb | 0.65 | puzzle | puzzle | 40.1 | 0.96 | 2.34 | 99.000 |"
    echo "| orin-nx-16gb | 0.65 | search | search 4 | 39.9 | 0.95 | 2.31 | $2 |"
  } > "$1/table.md"
}
table "$tmp/tailor-base-21000" 27.000
test_csv "$tmp/scratch-22000-65/layers-7/test.csv" 25 36  # geometric mean 30
test_csv "$tmp/scratch-seed2-22000-65/layers-7/test.csv" 26.5

out=$(report)
expect "$out" "| search's pick, recovered 1000 steps | 43.0 + 2.0 M | 27.000 |"
expect "$out" "| search's pick, recovered 4000 steps | 43.0 + 8.2 M | not in |"
expect "$out" "| 7 layers from scratch, seed 1234, 22000 steps | 45.1 M | 30.000 |"
expect "$out" "| 7 layers from scratch, seed 2, 22000 steps | 45.1 M | 26.500 |"
expect "$out" "verdict: not yet (stage A's pick"

# Stage A in but a 22000-step seed missing: no reading (and stage B not judged unwanted).
table "$tmp/tailor-base-21000-r4000" 30.100
mv "$tmp/scratch-seed2-22000-65" "$tmp/seed2-away"
expect "$(report)" "verdict: not yet (stage A's pick and both"
mv "$tmp/seed2-away" "$tmp/scratch-seed2-22000-65"
# Stage A above both 22000-step seeds: they lead with fewer tokens; stage B is not wanted.
table "$tmp/tailor-base-21000-r4000" 30.100
expect "$(report)" "both scratch models lead it with 6.1 M fewer tokens (stage B not run)"
# Equal to the worse seed is not above it: stage B is wanted.
table "$tmp/tailor-base-21000-r4000" 30.000
expect "$(report)" "verdict: not yet (stage A's pick is below a 22000-step seed"
# Between the seeds, stage B in: read against the 25000-step seeds only.
table "$tmp/tailor-base-21000-r4000" 28.000
test_csv "$tmp/scratch-25000-65/layers-7/test.csv" 28.28
expect "$(report)" "verdict: not yet (stage A's pick is below a 22000-step seed"
test_csv "$tmp/scratch-seed2-25000-65/layers-7/test.csv" 29
out=$(report)
expect "$out" "| 7 layers from scratch, seed 2, 25000 steps (equal tokens) | 51.2 M | 29.000 |"
expect "$out" "verdict: the pruned model ahead at equal tokens, by 1.0% on the better seed"
test_csv "$tmp/scratch-25000-65/layers-7/test.csv" 27
expect "$(report)" "verdict: a tie, within the spread of the two scratch seeds"
test_csv "$tmp/scratch-seed2-25000-65/layers-7/test.csv" 27.72
test_csv "$tmp/scratch-25000-65/layers-7/test.csv" 25
expect "$(report)" "verdict: the scratch model ahead at equal tokens, on both seeds (by 1.0% on the worse)"

# Stage C: the same reading against the models from scratch distilled from the base.
expect "$(report)" "stage C: not yet (stage A's pick and both distilled"
test_csv "$tmp/scratch-kd-25000-65/layers-7/test.csv" 26.5
expect "$(report)" "stage C: not yet"
test_csv "$tmp/scratch-kd-seed2-25000-65/layers-7/test.csv" 27.45
out=$(report)
expect "$out" "| 7 layers from scratch distilled from the base, seed 2, 25000 steps (equal tokens) | 51.2 M | 27.450 |"
expect "$out" "stage C, against the models from scratch distilled from the base: verdict: the scratch model ahead at equal tokens, on both seeds (by 2.0% on the worse)"
# The plain models' reading is theirs alone.
expect "$out" "
verdict: the scratch model ahead at equal tokens, on both seeds (by 1.0% on the worse)"
table "$tmp/tailor-base-21000-r4000" 26.000
expect "$(report)" "stage C, against the models from scratch distilled from the base: verdict: the pruned model ahead at equal tokens, by 1.9% on the better seed"

# The repeated search's pick against the 1000-step cell's.
mkdir -p "$tmp/tailor-base-21000/orin-nx-16gb-0.65" "$tmp/tailor-base-21000-r4000/orin-nx-16gb-0.65"
printf 'layer,attn,ffn\n0,1,0\n1,0.5,0.75\n' > "$tmp/tailor-base-21000/orin-nx-16gb-0.65/ratios.csv"
cp "$tmp/tailor-base-21000/orin-nx-16gb-0.65/ratios.csv" "$tmp/tailor-base-21000-r4000/orin-nx-16gb-0.65/"
expect "$(report)" "search's pick (ratios.csv): the same as the 1000-step cell's"
printf 'layer,attn,ffn\n0,1,0\n1,0.5,0.5\n' > "$tmp/tailor-base-21000-r4000/orin-nx-16gb-0.65/ratios.csv"
expect "$(report)" "search's pick (ratios.csv): DIFFERENT from the 1000-step cell's"

expect_curves_plot longer_recovery_65

# The run's order, with stand-ins for the trainers (a copy of the script beside them): with
# stage A in and below a 22000-step seed, stage B's pair; stage C only once step 4 of
# converged_65.sh is in, with the base as the teacher of both seeds.
repo=$tmp/repo
mkdir -p "$repo/scripts/lib"
cp "$1/scripts/longer_recovery_65.sh" "$1/scripts/longer_recovery_65.gp" "$repo/scripts/"
cp "$1/scripts/lib/equal_tokens.sh" "$repo/scripts/lib/"
for stub in tailor.sh tailor_scratch.sh; do
  # shellcheck disable=SC2016  # the stand-in expands them when it runs
  printf '#!/usr/bin/env bash\necho "%s seed=${SEED:-} teacher=${TEACHER:-none} out=$OUT" >> "$CALLS"\n' \
    "$stub" > "$repo/scripts/$stub"
  chmod +x "$repo/scripts/$stub"
done
export CALLS=$tmp/calls.log
run() { PREFIX=$tmp "$repo/scripts/longer_recovery_65.sh"; }
expect "$(run)" "stage C waits for step 4 of scripts/converged_65.sh"
calls=$(cat "$CALLS")
expect "$calls" "tailor_scratch.sh seed=1234 teacher=none out=$tmp/scratch-25000-65"
expect "$calls" "tailor_scratch.sh seed=2 teacher=none out=$tmp/scratch-seed2-25000-65"
[ "$(wc -l < "$CALLS")" -eq 2 ] || fail "stage A again, or stage C before step 4: $calls"
test_csv "$tmp/scratch-21000-65/layers-7/test.csv" 23
: > "$CALLS"
run > /dev/null
calls=$(cat "$CALLS")
expect "$calls" "tailor_scratch.sh seed=1234 teacher=$tmp/base-21000/model.gguf out=$tmp/scratch-kd-25000-65"
expect "$calls" "tailor_scratch.sh seed=2 teacher=$tmp/base-21000/model.gguf out=$tmp/scratch-kd-seed2-25000-65"
echo "longer_recovery_65.sh: ok"
