# shellcheck shell=bash
# Helpers for the shell tests that check a script's printed output (source this file):
#   fail MESSAGE...        print FAIL: MESSAGE to stderr and exit 1
#   expect OUTPUT TEXT     fail, showing OUTPUT, unless OUTPUT contains TEXT (fixed string)
# and $tmp, a scratch folder removed when the test exits.
fail() { echo "FAIL: $*" >&2; exit 1; }
expect() {
  grep -qF -- "$2" <<< "$1" || { echo "$1" >&2; fail "missing '$2'"; }
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
