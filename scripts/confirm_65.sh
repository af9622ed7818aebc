#!/usr/bin/env bash
# The planned confirmation of the 65% Orin NX cell (docs/tailor.md, "The confirmation of the
# 65% cell"; plan fixed 2026-12-05 before any of its models trained): the CLONE search's picks
# on four fresh bases (seeds 101-104) against eight fresh scratch models (seeds 201-208), test
# perplexity. It reads the twelve numbers from the results folders, prints each, and runs the
# one planned look only when all twelve are in: Welch's two-sided t at 5% (primary) and the
# exact two-sided Mann-Whitney test by enumerating every split (beside it); the Puzzle-style
# picks of the same bases are reported the same way, as a secondary line. No model is
# dropped, nothing is pooled with the earlier runs.
#
#   scripts/confirm_65.sh                      # the confirmation, from docs/results/tailor/
#   scripts/confirm_65.sh --values 30.29,30.01 31.48,29.98,31.41   # the arithmetic on any
#                                              # two samples (picks, then scratch)
#
# Where the numbers come from (the layout of the earlier seeds):
#   docs/results/tailor/base-seedN/table.md           rows "| orin-nx-16gb | 0.65 | search |"
#                                                      and "| ... | puzzle |", last column
#   docs/results/tailor/scratch-seedN/layers-7/table.md  row "| orin-nx-16gb | 0.65 | 7 |"
set -euo pipefail
cd "$(dirname "$0")/.."
RESULTS=${RESULTS:-docs/results/tailor}
BASES=${BASES:-"101 102 103 104"}
SCRATCH=${SCRATCH:-"201 202 203 204 205 206 207 208"}

# test A B: Welch's t (A better when lower), its Welch-Satterthwaite df, the two-sided p from
# Student's t, and the exact two-sided Mann-Whitney p over all C(nA+nB, nA) splits.
test_samples() {
  awk -v A="$1" -v B="$2" '
  function mean(x, n,   i, s) { s = 0; for (i = 1; i <= n; i++) s += x[i]; return s / n }
  function var(x, n, m,   i, s) { s = 0; for (i = 1; i <= n; i++) s += (x[i] - m) ^ 2; return s / (n - 1) }
  # U: pairs where the first sample is lower (better), ties counted one half.
  function ustat(sel,   i, j, u) {
    u = 0
    for (i = 1; i <= N; i++) if (sel[i]) for (j = 1; j <= N; j++) if (!sel[j])
      u += (v[i] < v[j]) ? 1 : (v[i] == v[j] ? 0.5 : 0)
    return u
  }
  # Visit every way to choose na of the N pooled values (recursive combinations).
  function visit(start, left,   i) {
    if (left == 0) { total++; if (abs(ustat(pick) - mu) >= d0 - 1e-9) extreme++; return }
    for (i = start; i <= N - left + 1; i++) { pick[i] = 1; visit(i + 1, left - 1); pick[i] = 0 }
  }
  function abs(x) { return x < 0 ? -x : x }
  # Two-sided p of Student t with df dof: with x = sqrt(df) tan(th) the density becomes
  # cos(th)^(df-1), so p = 1 - int_0^atan(|t|/sqrt(df)) cos^(df-1) / int_0^(pi/2) cos^(df-1).
  function cospow_int(hi, e,   k, h, s, n) {
    n = 200000; h = hi / n; s = cos(0) ^ e + cos(hi) ^ e
    for (k = 1; k < n; k++) s += (k % 2 ? 4 : 2) * cos(k * h) ^ e
    return s * h / 3
  }
  function student_p(t, df,   pi) {
    pi = atan2(0, -1)
    return 1 - cospow_int(atan2(abs(t), sqrt(df)), df - 1) / cospow_int(pi / 2, df - 1)
  }
  BEGIN {
    na = split(A, a, ","); nb = split(B, b, ",")
    if (na < 2 || nb < 2) { print "each sample needs two values or more" > "/dev/stderr"; exit 2 }
    ma = mean(a, na); mb = mean(b, nb); va = var(a, na, ma); vb = var(b, nb, mb)
    se2 = va / na + vb / nb
    if (se2 > 0) {
      t = (mb - ma) / sqrt(se2)
      df = se2 ^ 2 / ((va / na) ^ 2 / (na - 1) + (vb / nb) ^ 2 / (nb - 1))
    }
    N = na + nb
    for (i = 1; i <= na; i++) { v[i] = a[i]; pick[i] = 1 }
    for (i = 1; i <= nb; i++) { v[na + i] = b[i]; pick[na + i] = 0 }
    u0 = ustat(pick); mu = na * nb / 2; d0 = abs(u0 - mu)
    for (i = 1; i <= N; i++) pick[i] = 0
    total = 0; extreme = 0; visit(1, na)
    printf "  n %d / %d; means %.3f / %.3f (sd %.1f%% / %.1f%%); lead %.2f%% of the second mean\n", \
      na, nb, ma, mb, 100 * sqrt(va) / ma, 100 * sqrt(vb) / mb, 100 * (mb - ma) / mb
    if (se2 > 0) printf "  Welch t %.2f, %.1f df, two-sided p %.3f\n", t, df, student_p(t, df)
    else print "  Welch t undefined: neither sample has any spread"
    printf "  Mann-Whitney U %g of %d (first lower), exact two-sided p %d/%d = %.3f\n", \
      u0, na * nb, extreme, total, extreme / total
  }'
}

if [ "${1:-}" = "--values" ]; then
  [ $# -eq 3 ] || { echo "usage: $0 --values a1,a2,... b1,b2,..." >&2; exit 2; }
  test_samples "$2" "$3"
  exit
fi

# row FILE PATTERN: the last column of the one row matching PATTERN, or nothing.
row() {
  [ -f "$1" ] || return 0
  awk -F'|' -v p="$2" 'index($0, p) == 1 { x = $(NF - 1); gsub(/ /, "", x); print x; exit }' "$1"
}

search="" puzzle="" scratch="" missing=0
echo "65% Orin NX, test perplexity (planned confirmation)"
for n in $BASES; do
  f="$RESULTS/base-seed$n/table.md"
  s=$(row "$f" "| orin-nx-16gb | 0.65 | search |")
  p=$(row "$f" "| orin-nx-16gb | 0.65 | puzzle |")
  echo "  base $n: search ${s:-(not yet)}, Puzzle ${p:-(not yet)}"
  if [ -n "$s" ]; then search="$search${search:+,}$s"; else missing=$((missing + 1)); fi
  [ -n "$p" ] && puzzle="$puzzle${puzzle:+,}$p"
done
for n in $SCRATCH; do
  s=$(row "$RESULTS/scratch-seed$n/layers-7/table.md" "| orin-nx-16gb | 0.65 | 7 |")
  echo "  scratch $n: ${s:-(not yet)}"
  if [ -n "$s" ]; then scratch="$scratch${scratch:+,}$s"; else missing=$((missing + 1)); fi
done
nall=$(($(echo $BASES | wc -w) + $(echo $SCRATCH | wc -w)))
if [ "$missing" -gt 0 ]; then
  echo "$((nall - missing)) of $nall scored: the one planned look waits for all $nall (no test run)"
  exit 0
fi
echo "search's picks against scratch (primary: Welch two-sided at 5%):"
test_samples "$search" "$scratch"
echo "Puzzle-style picks against scratch (secondary):"
test_samples "$puzzle" "$scratch"
