#!/bin/bash
# The chat page at / in headless Chromium (Debian's chromium, driven by the puppeteer-core npm
# package installed here): tests/serve/page_client.cjs. Exit 77 ("skipped") only if chromium
# is missing or npm cannot reach its registry.
# Usage: page_test.sh <clone binary> <source dir> <work dir>
set -euo pipefail
clone=$1 src=$2 work=$3
chromium=$(command -v chromium || true)
[ -n "$chromium" ] || { echo "SKIPPED: no chromium (scripts/setup.sh installs it)"; exit 77; }
mkdir -p "$work"
npm_dir=$work/npm
if [ ! -d "$npm_dir/node_modules/puppeteer-core" ]; then
  mkdir -p "$npm_dir"
  if ! (cd "$npm_dir" && npm install --no-audit --no-fund --silent puppeteer-core@22 > npm.log 2>&1); then
    cat "$npm_dir/npm.log"
    echo "SKIPPED: npm could not install puppeteer-core (no registry?)"
    exit 77
  fi
fi
log=$work/serve.log
"$clone" serve -m "$src/models/base/model.gguf" --expert "$src/models/experts/scripture.gguf" \
  --expert "$src/models/experts/quotes.gguf" --device orin-nx-16gb --port 0 -t 1 2> "$log" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
port=
for _ in $(seq 100); do
  port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  [ -n "$port" ] && break
  kill -0 $pid 2>/dev/null || { cat "$log"; echo "FAIL: the server exited"; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { cat "$log"; echo "FAIL: no port"; exit 1; }
HOME=$work NODE_PATH=$npm_dir/node_modules node "$src/tests/serve/page_client.cjs" \
  "http://127.0.0.1:$port" "$chromium"
