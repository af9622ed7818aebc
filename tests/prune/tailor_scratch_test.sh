#!/usr/bin/env bash
# scripts/tailor_scratch.sh against a stand-in for the clone binary that logs each call: the
# deepest model within the budgets is the one trained, with the base model's recipe, and
# with TEACHER set distilled from it (clone train base --teacher, --kd-weight), said in the
# table; its test perplexity is the geometric mean over the domains; a missing teacher stops
# before anything trains.
#   tailor_scratch_test.sh <source dir>
set -euo pipefail
script=$1/scripts/tailor_scratch.sh
# shellcheck source-path=SCRIPTDIR source=../util/expect.sh
source "$(dirname "$0")/../util/expect.sh"  # fail, expect, $tmp

# The stand-in: a model of N layers (shape-N.gguf) is within the budgets when N <= 7.
mkdir -p "$tmp/build/bin"
cat > "$tmp/build/bin/clone" <<'STUB'
#!/usr/bin/env bash
echo "$*" >> "$FAKE_LOG"
arg() { local k=$1; shift; while [ $# -gt 1 ]; do [ "$1" = "$k" ] && { echo "$2"; return; }; shift; done; }
case "$1 $2" in
  "init-model -o") : > "$3" ;;
  "device cost")
    m=$(arg -m "$@"); n=${m##*shape-}; n=${n%.gguf}
    within=yes; [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -gt 7 ] && within=no
    printf '| profile | TTFT ms | TPOT ms | energy J | TPOT budget ms | energy budget J | within | score |\n|---|\n'
    printf '| orin-nx-16gb | 1.2 | 0.94 | 2.30 | 0.97 | 2.37 | %s | |\n' "$within" ;;
  "train base") mkdir -p "$(arg --out "$@")"; : > "$(arg --out "$@")/model.gguf" ;;
  "eval domains") printf 'domain,nll,ppl\nd0,0,20\nd1,0,45\n' > "$(arg --out "$@")" ;;
  *) echo "unexpected call: $*" >&2; exit 2 ;;
esac
STUB
chmod +x "$tmp/build/bin/clone"
export FAKE_LOG=$tmp/calls.log
run() { BUILD=$tmp/build BASE=base.gguf DATA=data BUDGETS=0.65 BOARDS=orin-nx-16gb SEED=2 \
          STEPS=25000 THREADS=1 "$@" "$script"; }

: > "$tmp/teacher.gguf"
run env TEACHER="$tmp/teacher.gguf" OUT="$tmp/kd" > /dev/null
train=$(grep '^train base' "$FAKE_LOG")
expect "$train" "--out $tmp/kd/layers-7 --n-embd 192 --n-layer 7 "
expect "$train" "--seed 2 --threads 1 "
expect "$train" "--steps 25000 --teacher $tmp/teacher.gguf --kd-weight 0.5"
table=$(cat "$tmp/kd/table.md")
expect "$table" "seed 2, the base model's recipe, distilled from teacher.gguf with weight 0.5)"
expect "$table" "| orin-nx-16gb | 0.65 | 7 | 0.94 | 2.30 | 30.000 |"

: > "$FAKE_LOG"
run env KD_WEIGHT=1 TEACHER="$tmp/teacher.gguf" OUT="$tmp/kd1" > /dev/null
expect "$(grep '^train base' "$FAKE_LOG")" "--teacher $tmp/teacher.gguf --kd-weight 1"

: > "$FAKE_LOG"
run env OUT="$tmp/plain" > /dev/null
train=$(grep '^train base' "$FAKE_LOG")
expect "$train" "--steps 25000"
! grep -q -- "--teacher" <<< "$train" || fail "a run without TEACHER was distilled: $train"
expect "$(cat "$tmp/plain/table.md")" "seed 2, the base model's recipe), the deepest"

: > "$FAKE_LOG"
if err=$(run env TEACHER="$tmp/none.gguf" OUT="$tmp/missing" 2>&1); then
  fail "a missing teacher did not stop the run"
fi
expect "$err" "no teacher $tmp/none.gguf"
! grep -q '^train base' "$FAKE_LOG" || fail "trained with a missing teacher"
echo "tailor_scratch.sh: ok"
