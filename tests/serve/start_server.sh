# Sourced by the serve tests: start_server LOG ARGS... runs `$clone serve ARGS... --port 0`
# in the background, waits until it prints its port, and sets pid, port and url (a trap
# kills the server when the test exits). Needs $clone.
start_server() {
  local log=$1
  shift
  "$clone" serve "$@" --port 0 2> "$log" &
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
  url=http://127.0.0.1:$port
}
