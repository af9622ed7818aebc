#!/bin/bash
# `clone serve` as a user runs it, driven by curl and by the official `openai` npm package
# (installed here with npm; exit 77, "skipped", only if npm cannot reach its registry).
# SIGTERM while a request is in flight: that request completes, then the server exits 0.
# Usage: client_test.sh <clone binary> <source dir> <work dir>
set -euo pipefail
clone=$1 src=$2 work=$3
mkdir -p "$work"
log=$work/serve.log
. "$src/tests/serve/start_server.sh"
start_server "$log" -m "$src/models/base/model.gguf" --expert "$src/models/experts/scripture.gguf" \
  --expert "$src/models/experts/quotes.gguf" -t 1 --slots 2
fail() { echo "FAIL: $*"; exit 1; }

# curl: plain, streaming, and a bad request.
out=$(curl -sS "$url/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt": "In the beginning", "max_tokens": 8, "temperature": 0, "clone": {"experts": ["scripture"]}}')
echo "$out" | grep -q '"completion_tokens":8' || fail "plain completion: $out"
sse=$(curl -sSN "$url/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 5, "stream": true, "clone": {"experts": "none"}}')
[ "$(echo "$sse" | grep -c '^data: {')" -ge 2 ] || fail "streaming chunks: $sse"
echo "$sse" | tail -n 2 | grep -q '^data: \[DONE\]$' || fail "no [DONE] at the end: $sse"
code=$(curl -sS -o "$work/bad.json" -w '%{http_code}' "$url/v1/completions" -d '{"prompt": ')
[ "$code" = 400 ] && grep -q 'malformed JSON' "$work/bad.json" || fail "malformed JSON gave $code"
curl -sS "$url/health" | grep -q '"status":"ok"' || fail "health"
curl -sS "$url/metrics" | grep -q '^clone_requests_total{outcome="ok"} 2$' || fail "metrics"
# A routed prompt that turns from scripture to quotes is prefilled in parts (the default, 32
# tokens, routed by the experts' unigram keys): its first part under scripture, its last
# under quotes.
mixed='And the LORD spake unto Moses, saying, Speak unto the children of Israel, and say unto them, When any man of you bring an offering unto the LORD, ye shall bring your offering of the cattle. Imagination is more important than knowledge. Knowledge is limited, imagination encircles the world. Be yourself; everyone else is already taken. In three words I can sum up everything I have learned about life: it goes on.'
out=$(curl -sS "$url/v1/completions" -d "{\"prompt\": \"$mixed\", \"max_tokens\": 2, \"clone\": {\"experts\": \"auto\"}}")
parts=$(echo "$out" | grep -oE '"experts":\{[^}]*\},"from_token":[0-9]+' || true)
[ "$(echo "$parts" | grep -c from_token)" -ge 3 ] || fail "prompt parts: $out"
echo "$parts" | head -n 1 | grep -qE '^"experts":\{"scripture":[0-9.]+\}' || fail "first part: $parts"
echo "$parts" | tail -n 1 | grep -qE '^"experts":\{"quotes":[0-9.]+\}' || fail "last part: $parts"
echo "curl: all checks passed"

# The official client.
npm_dir=$work/npm
if [ ! -d "$npm_dir/node_modules/openai" ]; then
  mkdir -p "$npm_dir"
  if ! (cd "$npm_dir" && npm install --no-audit --no-fund --silent openai@4 > npm.log 2>&1); then
    cat "$npm_dir/npm.log"
    echo "SKIPPED: npm could not install the openai package (no registry?)"
    exit 77
  fi
fi
NODE_PATH=$npm_dir/node_modules node "$src/tests/serve/openai_client.cjs" "$url/v1"

# SIGTERM drains: a long request in flight still completes with all its tokens.
curl -sS "$url/v1/completions" -d '{"prompt": "Once", "max_tokens": 150, "clone": {"experts": "none", "ignore_eos": true}}' \
  > "$work/drained.json" &
curl_pid=$!
for _ in $(seq 200); do
  curl -sS "$url/health" | grep -q '"active":1' && break
  sleep 0.02
done
kill -TERM $pid
wait $curl_pid
grep -q '"completion_tokens":150' "$work/drained.json" || fail "drained request: $(cat "$work/drained.json")"
wait $pid && rc=0 || rc=$?
trap - EXIT
[ $rc = 0 ] || fail "the server exited with $rc after SIGTERM"
grep -q 'SIGTERM: finishing 1 active' "$log" || fail "no drain message: $(cat "$log")"
echo "SIGTERM: the in-flight request completed; exit 0"
