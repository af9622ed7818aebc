# The equal-token comparison on the longer-trained base (scripts/converged_65.sh): validation
# loss against tokens seen, every model at 8 x 256 tokens a step. The pruned picks start
# where the base ended (43.0 M tokens) and recover 1000 steps; the scratch models start at 0.
# Files not in yet are skipped (gnuplot warns).
# gnuplot -e "prefix='out'" scripts/converged_65.gp
set terminal pngcairo size 960,540 font ",10"
set output prefix.'/converged_65.png'
set datafile separator ','
set key top right
set grid
set title "Orin NX, 65% budgets: validation loss against tokens seen (the base trained 21000 steps)"
set xlabel 'tokens seen (M)'
set ylabel 'validation loss (nats/token, mean over six domains)'
set yrange [2.9:4.2]
tok(step) = (step + 1) * 2048 / 1e6
base_end = tok(20999)
cell = prefix.'/tailor-base-21000/orin-nx-16gb-0.65'
plot prefix.'/base-21000/valid.csv' using (tok($1)):2 with lines lw 2 lc rgb '#303030' title 'dense base, 12 layers', \
     cell.'/recover-kd-search/valid.csv' using (base_end + tok($1)):2 with linespoints lw 2 pt 7 lc rgb '#b00000' title "search's pick, recovered from the base", \
     cell.'/recover-kd-puzzle/valid.csv' using (base_end + tok($1)):2 with linespoints lw 2 pt 5 lc rgb '#e07000' title "Puzzle's pick, recovered from the base", \
     prefix.'/scratch-22000-65/layers-7/valid.csv' using (tok($1)):2 with lines lw 2 lc rgb '#0050b0' title '7 layers from scratch, seed 1234, 22000 steps (equal tokens)', \
     prefix.'/scratch-seed2-22000-65/layers-7/valid.csv' using (tok($1)):2 with lines lw 2 lc rgb '#3090e0' title '7 layers from scratch, seed 2, 22000 steps (equal tokens)', \
     prefix.'/scratch-21000-65/layers-7/valid.csv' using (tok($1)):2 with lines lw 2 dt 2 lc rgb '#208020' title "7 layers from scratch, seed 1234, 21000 steps (the base's tokens)"
