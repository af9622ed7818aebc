#!/usr/bin/env bash
# The README's speed table from one command: makes the TinyLlama-shaped test models
# (clone init-model, then clone quantize, as llama-quantize --pure would), runs clone bench
# on them and on the shipped base model, and writes
#   <out>/bench.md    the table (decode as a share of the bandwidth probed beside each run,
#                     prefill as a share of the arithmetic peak probed beside each run),
#                     with the machine it ran on
#   <out>/*.json      clone bench -o json documents, to diff between commits
# Models are kept in $WORK (default /tmp/clone-bench-models, about 8.4 GB) for the next run.
# About 6 minutes on 2 cores; run it on a quiet machine.
#   scripts/bench.sh [out]        (THREADS=n to pin the thread count, default all cores)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-docs/results/bench/$(hostname -s)}
CLONE=${CLONE:-build/release/bin/clone}
WORK=${WORK:-/tmp/clone-bench-models}
THREADS=${THREADS:-0}
[ -x "$CLONE" ] || { echo "no $CLONE: build first (cmake --build build/release)" >&2; exit 1; }
mkdir -p "$OUT" "$WORK"

tl="$WORK/tl-f16.gguf"
[ -f "$tl" ] || "$CLONE" init-model --preset tinyllama --type f16 -o "$tl"
for t in f32 q8_0 q4_0; do
  [ -f "$WORK/tl-$t.gguf" ] || "$CLONE" quantize "$tl" "$WORK/tl-$t.gguf" "$t"
done

# Quantized and F16 first (as the README), then F32, then the shipped model with the
# parallel-overhead run.
"$CLONE" bench -t "$THREADS" -m "$WORK/tl-q4_0.gguf" -m "$WORK/tl-q8_0.gguf" -m "$WORK/tl-f16.gguf" \
  -r 2 -n 32 --decode-reps 9 --no-overhead -o json --out "$OUT/tinyllama.md" > "$OUT/tinyllama.json"
"$CLONE" bench -t "$THREADS" -m "$WORK/tl-f32.gguf" -r 2 -n 16 --decode-reps 5 --no-overhead \
  -o json --out "$OUT/tinyllama-f32.md" > "$OUT/tinyllama-f32.json"
"$CLONE" bench -t "$THREADS" -m models/base/model.gguf -r 3 -n 32 --decode-reps 9 -o json \
  --out "$OUT/base.md" > "$OUT/base.json"

{
  echo "# clone bench on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo
  echo "Written by \`scripts/bench.sh\` at commit $(git rev-parse --short HEAD 2> /dev/null || echo unknown)" \
    "on $(date -u +%Y-%m-%d). Decode: medians of the runs, each between two bandwidth probes"
  echo "(pct_bw = weight bytes per token x tok/s over the probe beside it); prefill: best run;"
  echo "prefill_pct_peak is the median over runs of each run's rate over the arithmetic peak probed"
  echo "right before and after it (peak_beside: F32 FMA, or int8 dot products for Q8_0/Q4_0), and"
  echo "prefill_pct_fma the best run against the FMA peak probed once at start-up."
  for f in tinyllama tinyllama-f32 base; do
    echo
    awk '/"machine"/ { m = 1; next } m && /}/ { m = 0 } m' "$OUT/$f.json" | tr -d '\n' |
      sed 's/  */ /g; s/^ */machine during this run: /'
    echo
    echo
    cat "$OUT/$f.md"
  done
} > "$OUT/bench.md"
echo "wrote $OUT/bench.md" >&2
