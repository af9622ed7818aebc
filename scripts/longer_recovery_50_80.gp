# The 50% and 80% cells on the longer-trained base (scripts/longer_recovery_50_80.sh):
# validation loss against tokens seen, from 35 M tokens on, one panel a cell, every model at
# 8 x 256 tokens a step. The pruned pick starts where the base ended (43.0 M tokens) and
# recovers 4000 steps; the models from scratch start at 0. Files not in yet are skipped
# (gnuplot warns).
# gnuplot -e "prefix='out'" scripts/longer_recovery_50_80.gp
set terminal pngcairo size 1280,540 font ",10"
set output prefix.'/longer_recovery_50_80.png'
set datafile separator ','
set key top right
set grid
set xlabel 'tokens seen (M)'
set ylabel 'validation loss (nats/token, mean over six domains)'
set xrange [35:52]
tok(step) = (step + 1) * 2048 / 1e6
base_end = tok(20999)
# The folder of a model from scratch: its depth is the one found within the budget.
run(dir) = system('ls -d '.dir.'/layers-* 2> /dev/null | head -n 1')
set multiplot layout 1,2
do for [p in "50 80"] {
  b = (p eq "50") ? '0.5' : '0.8'
  s1 = run(prefix.'/scratch-25000-'.p)
  s2 = run(prefix.'/scratch-seed2-25000-'.p)
  set title sprintf("Orin NX, %s%% budgets: the search's pick recovered 4000 steps against models from scratch", p)
  plot prefix.'/base-21000/valid.csv' using (tok($1)):2 with lines lw 2 lc rgb '#303030' title 'dense base, 12 layers', \
       prefix.'/tailor-base-21000-r4000-'.b.'/orin-nx-16gb-'.b.'/recover-kd-search/valid.csv' using (base_end + tok($1)):2 with linespoints lw 2 pt 7 lc rgb '#b00000' title "search's pick, recovered 4000 steps", \
       s1.'/valid.csv' using (tok($1)):2 with lines lw 2 lc rgb '#0050b0' title 'from scratch, seed 1234, 25000 steps', \
       s2.'/valid.csv' using (tok($1)):2 with lines lw 2 lc rgb '#3090e0' title 'from scratch, seed 2, 25000 steps'
}
unset multiplot
