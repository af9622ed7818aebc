# shellcheck shell=bash disable=SC2154  # $tmp: from ../util/expect.sh
# For the tests of the equal-token scripts (source after ../util/expect.sh, with report()
# defined): expect_curves_plot NAME checks, where gnuplot is installed (as scripts/setup.sh
# installs it), that the report plots no curves before the base has a validation point, and
# writes $tmp/NAME.png once it has.
expect_curves_plot() {
  command -v gnuplot > /dev/null || return 0
  expect "$(report)" "verdict"
  [ ! -e "$tmp/$1.png" ] || fail "plotted with no base curve"
  mkdir -p "$tmp/base-21000"
  printf 'step,valid_loss\n19999,3.02\n20999,3.01\n' > "$tmp/base-21000/valid.csv"
  expect "$(report)" "plot: $tmp/$1.png"
  [ -s "$tmp/$1.png" ] || fail "no plot written"
}
