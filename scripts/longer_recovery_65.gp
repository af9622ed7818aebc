# A longer distilled recovery on the longer-trained base (scripts/longer_recovery_65.sh):
# validation loss against tokens seen, from 35 M tokens on, every model at 8 x 256 tokens a
# step. The pruned pick starts where the base ended (43.0 M tokens) and recovers 1000 or
# 4000 steps; the scratch models (plain, and distilled from the base: stage C) start at 0.
# Files not in yet are skipped (gnuplot warns).
# gnuplot -e "prefix='out'" scripts/longer_recovery_65.gp
set terminal pngcairo size 960,540 font ",10"
set output prefix.'/longer_recovery_65.png'
set datafile separator ','
set key top right
set grid
set title "Orin NX, 65% budgets: the search's pick recovered 1000 and 4000 steps against 7 layers from scratch"
set xlabel 'tokens seen (M)'
set ylabel 'validation loss (nats/token, mean over six domains)'
set xrange [35:52]
set yrange [2.95:3.35]
tok(step) = (step + 1) * 2048 / 1e6
base_end = tok(20999)
r1 = prefix.'/tailor-base-21000/orin-nx-16gb-0.65/recover-kd-search/valid.csv'
r4 = prefix.'/tailor-base-21000-r4000/orin-nx-16gb-0.65/recover-kd-search/valid.csv'
plot prefix.'/base-21000/valid.csv' using (tok($1)):2 with lines lw 2 lc rgb '#303030' title 'dense base, 12 layers', \
     r1 using (base_end + tok($1)):2 with linespoints lw 2 pt 7 lc rgb '#e07000' title "search's pick, recovered 1000 steps", \
     r4 using (base_end + tok($1)):2 with linespoints lw 2 pt 7 lc rgb '#b00000' title "search's pick, recovered 4000 steps", \
     prefix.'/scratch-22000-65/layers-7/valid.csv' using (tok($1)):2 with lines lw 2 lc rgb '#0050b0' title '7 layers from scratch, seed 1234, 22000 steps', \
     prefix.'/scratch-seed2-22000-65/layers-7/valid.csv' using (tok($1)):2 with lines lw 2 lc rgb '#3090e0' title '7 layers from scratch, seed 2, 22000 steps', \
     prefix.'/scratch-25000-65/layers-7/valid.csv' using (tok($1)):2 with lines lw 2 dt 2 lc rgb '#0050b0' title '7 layers from scratch, seed 1234, 25000 steps (equal tokens)', \
     prefix.'/scratch-seed2-25000-65/layers-7/valid.csv' using (tok($1)):2 with lines lw 2 dt 2 lc rgb '#3090e0' title '7 layers from scratch, seed 2, 25000 steps (equal tokens)', \
     prefix.'/scratch-kd-25000-65/layers-7/valid.csv' using (tok($1)):2 with lines lw 2 dt 3 lc rgb '#008040' title '7 layers from scratch distilled from the base, seed 1234 (equal tokens)', \
     prefix.'/scratch-kd-seed2-25000-65/layers-7/valid.csv' using (tok($1)):2 with lines lw 2 dt 3 lc rgb '#40b070' title '7 layers from scratch distilled from the base, seed 2 (equal tokens)'
