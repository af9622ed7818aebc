#!/usr/bin/env bash
# Installs what is needed, builds clone, and runs the main job: generate text with the
# shipped default model, its LoRA experts mixed for the prompt by the router (soft mixture
# of experts), the output length predicted for the controller, co-simulated on the default
# device profile (Jetson Orin NX) under the learned DVFS policy; then print the routing
# weights, the predicted length and the request's simulated trace.
#   scripts/run.sh                 # default prompt
#   scripts/run.sh "Your prompt"   # your prompt
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j"$(nproc)" --target clone
clone=build/release/bin/clone

model=${CLONE_MODEL:-models/base/model.gguf}
[ -f "$model" ] || { echo "error: $model not found (scripts/train_base.sh trains it)" >&2; exit 1; }
prompt=${1:-"The computer"}
experts=()
for e in models/experts/*.gguf; do experts+=(--expert "$e"); done
length=()
[ -f models/length/predictor.json ] && length=(--length-model models/length/predictor.json)
"$clone" run -m "$model" -p "$prompt" -n 64 --temp 0.8 --seed 1 "${experts[@]}" "${length[@]}" \
  --device orin-nx-16gb --dvfs learned --slo chatbot
