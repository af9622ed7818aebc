#!/usr/bin/env bash
# Installs what is needed, builds clone, and runs the main job: generate text with the
# shipped default model, co-simulated on the default device profile (Jetson Orin NX)
# under the learned DVFS policy, then print the request's simulated trace.
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
"$clone" run -m "$model" -p "$prompt" -n 64 --temp 0.8 --seed 1 \
  --device orin-nx-16gb --dvfs learned --slo chatbot
