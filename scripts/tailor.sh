#!/usr/bin/env bash
# The judged tailoring experiment (docs/tailor.md): on the shipped base model, for the Orin
# NX and the Orin Nano, at three TPOT budgets (50, 65 and 80% of the dense model's, the
# request energy budget at the same share), `clone tailor` searches and writes, beside its
# own best, each method's best candidate within the budgets (best-<method>.gguf). Each is
# recovered the same way (by default every weight fine-tuned for RECOVER_STEPS steps of
# 8 x 256 tokens at RECOVER_LR) and scored on the test split; the table is $OUT/table.md.
#
#   scripts/tailor.sh                          # everything (hours on 2 cores)
#   BOARDS=orin-nx-16gb BUDGETS=0.65 RECOVER_STEPS=50 scripts/tailor.sh   # one cell, short
#   SLO_TPOT_MS=1.104 SLO_ENERGY_J=2.0 scripts/tailor.sh   # one absolute SLO for every board
#   RECOVER_TEACHER=models/base/model.gguf scripts/tailor.sh  # recovery by distillation
#   METHODS="search puzzle" scripts/tailor.sh  # recover and score only these methods' bests
#   RECOVER_LORA_RANK=8 scripts/tailor.sh     # recovery by LoRA then merge
#   DVFS=learned DVFS_POLICY=models/dvfs/base/orin-nx-16gb.json BOARDS=orin-nx-16gb \
#     scripts/tailor.sh   # every candidate's request served by a DVFS controller
#
# With DVFS (learned, static, mpc, oracle) every candidate's request is served by that
# controller to a TPOT target at the latency budget (the clock set at each layer boundary)
# instead of at the top clock; DVFS_POLICY names the learned controller's weights.
#
# With SLO_TPOT_MS and SLO_ENERGY_J every board gets the same TPOT target (ms) and request
# energy budget (J), as one application deployed on several boards would; each board's search
# then runs at its own shares of its dense model (which budget binds depends on the board).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build/release}
DATA=${DATA:-out/data}
BASE=${BASE:-models/base/model.gguf}
OUT=${OUT:-out/tailor}
BOARDS=${BOARDS:-"orin-nx-16gb orin-nano-8gb"}
BUDGETS=${BUDGETS:-"0.65 0.5 0.8"}  # 0.65 first: the 2x2 device-specificity table uses it
RECOVER_STEPS=${RECOVER_STEPS:-300}
RECOVER_LR=${RECOVER_LR:-3e-4}  # the committed tables' recipe (clone tailor's own default: 1e-3)
# Set: recovery distils from this model (KL to its next-token distribution, KD_WEIGHT of the
# loss, the rest cross entropy) instead of plain fine-tuning on the corpora.
RECOVER_TEACHER=${RECOVER_TEACHER:-}
KD_WEIGHT=${KD_WEIGHT:-0.5}
# Set: LoRA then merge (an adapter of this rank on every matrix of the frozen pruned model,
# folded in at the end) instead of training every weight.
RECOVER_LORA_RANK=${RECOVER_LORA_RANK:-}
# each method's recovered model: <cell>/$RECOVER-<method>/
RECOVER=recover${RECOVER_TEACHER:+-kd}${RECOVER_LORA_RANK:+-lora$RECOVER_LORA_RANK}
METHODS=${METHODS:-}  # empty: every method with a candidate within the budgets
THREADS=${THREADS:-2}
DVFS=${DVFS:-performance}
DVFS_POLICY=${DVFS_POLICY:-}
CLONE="$BUILD/bin/clone"
[ -x "$CLONE" ] || { echo "no $CLONE: build first (scripts/test.sh or cmake --build)" >&2; exit 1; }
SLO_TPOT_MS=${SLO_TPOT_MS:-}
SLO_ENERGY_J=${SLO_ENERGY_J:-}
if [ -n "$SLO_TPOT_MS$SLO_ENERGY_J" ]; then
  [ -n "$SLO_TPOT_MS" ] && [ -n "$SLO_ENERGY_J" ] ||
    { echo "set both SLO_TPOT_MS and SLO_ENERGY_J, or neither" >&2; exit 1; }
  BUDGETS="${SLO_TPOT_MS}ms-${SLO_ENERGY_J}J"
fi

# A board's budgets as "latency_share energy_share" of its dense model's TPOT and energy:
# the budget share itself, or the absolute SLO over the dense model's cost on that board.
shares() {
  if [ -n "$SLO_TPOT_MS" ]; then
    "$CLONE" device cost -m "$BASE" --profile "$1" |
      awk -F' *[|] *' -v t="$SLO_TPOT_MS" -v e="$SLO_ENERGY_J" \
        'NR == 3 { if (t > $4 || e > $5) { print "an absolute budget above the dense model'"'"'s cost" > "/dev/stderr"; exit 1 }
                   printf "%.4f %.4f", t / $4, e / $5 }'
  else
    echo "$2 $2"
  fi
}

# Mean test NLL over domains, as a perplexity (the geometric mean of the domains' ones).
test_ppl() {
  [ -f "$2" ] || "$CLONE" eval domains -m "$1" --data "$DATA" --split test --seq-len 256 --max-tokens 32768 \
    --threads "$THREADS" --out "$2" > /dev/null
  awk -F, 'NR > 1 { s += log($3); n++ } END { printf "%.3f", exp(s / n) }' "$2"
}

mkdir -p "$OUT"
table="$OUT/table.md"
{
  [ -z "$RECOVER_LORA_RANK" ] || echo "Recovery trains a rank-$RECOVER_LORA_RANK LoRA adapter on the frozen pruned model, merged at the end."
  if [ -n "$RECOVER_TEACHER" ]; then
    echo "Test perplexity after the same recovery ($RECOVER_STEPS steps distilled from $(basename "$RECOVER_TEACHER"), KD weight $KD_WEIGHT, lr $RECOVER_LR); the"
  else
    echo "Test perplexity after the same recovery ($RECOVER_STEPS steps of full fine-tuning, lr $RECOVER_LR); the"
  fi
  echo "geometric mean over domains of 256-token windows (up to 32768 tokens per domain, every"
  echo "prediction scored). TPOT and energy: the device model, chat request, $DVFS${DVFS_POLICY:+ ($DVFS_POLICY)}$([ "$DVFS" = performance ] && echo " governor" || echo " controller to a TPOT target at the budget")."
  echo
  echo "| board | budget | method | candidate | val ppl (no recovery) | TPOT ms | energy J | test ppl (recovered) |"
  echo "|---|---|---|---|---|---|---|---|"
} > "$table"
echo "| dense (no pruning, no recovery) | | | | | | | $(test_ppl "$BASE" "$OUT/dense-test.csv") |" >> "$table"
# Budgets outer, boards inner: a run stopped early still has both boards at the first budget.
for b in $BUDGETS; do
  for board in $BOARDS; do
    dir="$OUT/$board-$b"
    sh=$(shares "$board" "$b")  # fails the script on a bad SLO
    read -r lat en <<< "$sh"
    status=0
    # A finished search (its summary written) is not run again; an interrupted one resumes
    # from its candidates.jsonl with the same result.
    [ -f "$dir/summary.md" ] ||
      "$CLONE" tailor -m "$BASE" --profile "$board" --latency-budget "$lat" --energy-budget "$en" \
        --recover-steps 0 --data "$DATA" --out "$dir" -t "$THREADS" --dvfs "$DVFS" \
        ${DVFS_POLICY:+--dvfs-policy "$DVFS_POLICY"} || status=$?
    [ "$status" -eq 0 ] || [ "$status" -eq 3 ] || exit "$status"  # 3: nothing within budget
    for model in "$dir"/best-*.gguf; do
      [ -e "$model" ] || continue
      method=$(basename "$model" .gguf); method=${method#best-}
      [ -z "$METHODS" ] || [[ " $METHODS " == *" $method "* ]] || continue
      ft="$dir/$RECOVER-$method"
      [ -f "$ft/model.gguf" ] ||  # done by an earlier, interrupted run
        "$CLONE" train finetune -m "$model" --data "$DATA" --out "$ft" --steps "$RECOVER_STEPS" \
          --warmup 20 --lr "$RECOVER_LR" --seed 1234 --threads "$THREADS" \
          ${RECOVER_TEACHER:+--teacher "$RECOVER_TEACHER" --kd-weight "$KD_WEIGHT"} \
          ${RECOVER_LORA_RANK:+--lora-rank "$RECOVER_LORA_RANK"}
      ppl=$(test_ppl "$ft/model.gguf" "$ft/test.csv")
      row=$(awk -F, -v m="$method" 'NR > 1 && index($2, m) == 1 && $7 == 1 {
              if (best == "" || $3 < bp) { best = $0; bp = $3 } } END { print best }' \
            "$dir/candidates.csv")
      IFS=, read -r _ src vppl tpot energy _ _ _ <<< "$row"
      echo "| $board | $b | $method | $src | $vppl | $tpot | $energy | $ppl |" >> "$table"
    done
  done
done

# Device specificity at the first budget: each board's tailored model (its lowest recovered
# test perplexity) costed on both boards, each against that board's budgets; the score is the
# search's (1 / test ppl, penalised by how far over a budget it is).
b0=${BUDGETS%% *}
spec="$OUT/specificity.md"
{
  if [ -n "$SLO_TPOT_MS" ]; then
    echo "Device specificity under one SLO for every board: TPOT $SLO_TPOT_MS ms, request energy $SLO_ENERGY_J J"
    for on in $BOARDS; do
      sh=$(shares "$on" "$b0")
      read -r lat en <<< "$sh"
      echo "($on: $lat of its dense model's TPOT, $en of its energy);"
    done
  else
    echo "Device specificity at budgets of $b0 of the dense model's TPOT and energy on each board:"
  fi
  echo "the search score (1 / recovered test perplexity, times (budget / cost)^2 for a budget"
  echo "exceeded) of each board's tailored model on each board; (within) = meets both budgets."
  echo
  printf "| tailored for \\ run on |"; for on in $BOARDS; do printf " %s |" "$on"; done; echo
  printf "|---|"; for on in $BOARDS; do printf "%s" "---|"; done; echo
} > "$spec"
for for_board in $BOARDS; do
  best=$(awk -F' [|] ' -v bd="| $for_board" -v b="$b0" '$1 == bd && $2 == b {
           if (m == "" || $8 + 0 < p) { m = $3; p = $8 + 0 } } END { if (m != "") print m, p }' "$table")
  [ -n "$best" ] || continue
  read -r method ppl <<< "$best"
  model="$OUT/$for_board-$b0/$RECOVER-$method/model.gguf"
  printf "| %s (%s, test ppl %s) |" "$for_board" "$method" "$ppl" >> "$spec"
  for on in $BOARDS; do
    sh=$(shares "$on" "$b0")
    read -r lat en <<< "$sh"
    cell=$("$CLONE" device cost -m "$model" --profile "$on" --dense "$BASE" \
             --latency-budget "$lat" --energy-budget "$en" --ppl "$ppl" |
           awk -F' *[|] *' 'NR == 3 { printf "%s%s", $9, ($8 == "yes" ? " (within)" : "") }')
    printf " %s |" "$cell" >> "$spec"
  done
  echo >> "$spec"
done

# Does measured CPU latency rank the candidates as the cost model does? Every method's best
# of every cell (pruned, before recovery: recovery changes no shape), decode on this machine
# (`clone bench`, medians of 9 runs of 256 tokens: these models decode a token in 0.1-0.4 ms,
# so shorter runs rank them by noise) against the cost model's TPOT on each board.
rank="$OUT/cpu-latency.csv"
models=$(ls "$OUT"/*/best-*.gguf 2> /dev/null || true)
if [ -n "$models" ]; then
  # shellcheck disable=SC2086
  "$CLONE" bench $(printf -- "-m %s " $models) -p 16 -n 256 -r 1 --decode-reps 9 --no-overhead \
    -t "$THREADS" -o csv 2> /dev/null |
    awk -F, '$1 == "model" { for (i = 1; i <= NF; i++) if ($i == "decode_tok_s") c = i; next }
             c { print 1000 / $c }' |  # the column by its name: bench's columns grow
    paste -d, <(printf "%s\n" $models) - > "$rank.cpu"  # rows in the order of -m
  echo "model,cpu_ms_per_token,$(echo "$BOARDS" | sed 's/ /_tpot_ms,/g')_tpot_ms" > "$rank"
  while IFS=, read -r model cpu; do
    line="$model,$cpu"
    for on in $BOARDS; do
      line="$line,$("$CLONE" device cost -m "$model" --profile "$on" | awk -F' *[|] *' 'NR == 3 { print $4 }')"
    done
    echo "$line" >> "$rank"
  done < "$rank.cpu"
  rm -f "$rank.cpu"
  # Spearman rank correlation of column 2 (CPU) with each board's column (ties: mean rank).
  col=3
  for on in $BOARDS; do
    rho=$(awk -F, -v c="$col" '
      function ranks(v, r, n,   i, j, k, t) {
        for (i = 1; i <= n; i++) idx[i] = i
        for (i = 2; i <= n; i++) { t = idx[i]; for (j = i - 1; j >= 1 && v[idx[j]] > v[t]; j--) idx[j + 1] = idx[j]; idx[j + 1] = t }
        for (i = 1; i <= n; i = j) { for (j = i; j <= n && v[idx[j]] == v[idx[i]]; j++); for (k = i; k < j; k++) r[idx[k]] = (i + j - 1) / 2 }
      }
      NR > 1 { n++; x[n] = $2 + 0; y[n] = $c + 0 }
      END {
        ranks(x, rx, n); ranks(y, ry, n)
        for (i = 1; i <= n; i++) { mx += rx[i] / n; my += ry[i] / n }
        for (i = 1; i <= n; i++) { sxy += (rx[i] - mx) * (ry[i] - my); sxx += (rx[i] - mx) ^ 2; syy += (ry[i] - my) ^ 2 }
        printf "%.3f over %d models", sxy / sqrt(sxx * syy), n
      }' "$rank")
    echo "Spearman (CPU decode ms/token on this machine vs $on cost-model TPOT): $rho" | tee -a "$spec"
    col=$((col + 1))
  done
fi
echo "wrote $table, $spec, $rank"
