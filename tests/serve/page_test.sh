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
. "$src/tests/serve/start_server.sh"
start_server "$log" -m "$src/models/base/model.gguf" --expert "$src/models/experts/scripture.gguf" \
  --expert "$src/models/experts/quotes.gguf" --device orin-nx-16gb -t 1
HOME=$work NODE_PATH=$npm_dir/node_modules node "$src/tests/serve/page_client.cjs" \
  "$url" "$chromium"
