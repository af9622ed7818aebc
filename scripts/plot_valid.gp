# The base model's validation curve, where the run stopped and why (scripts/train_base.sh).
# gnuplot -e "dir='out/base'; retarget=2800; planned=10000; steps=7000" scripts/plot_valid.gp
set terminal pngcairo size 900,500 font ",10"
set output dir.'/valid.png'
set datafile separator ','
set key top right
set grid
set title 'clone base model: validation loss (mean over domains) and learning rate'
set xlabel 'step'
set ylabel 'validation loss (nats/token)'
set y2label 'learning rate'
set y2tics
set ytics nomirror
set xrange [0:planned]
set arrow 1 from retarget, graph 0 to retarget, graph 1 nohead dt 2 lw 1.5
set label 1 sprintf("step %d: schedule re-targeted\n%d -> %d steps (compute at hand)", retarget, planned, steps) at retarget, graph 0.93 left offset 0.5,0
set arrow 2 from steps, graph 0 to steps, graph 1 nohead lw 2 lc rgb '#b00000'
set label 2 sprintf("stopped at step %d: end of the schedule,\nvalidation still falling", steps) at steps, graph 0.55 right offset -0.5,0 tc rgb '#b00000'
plot dir.'/valid.csv' using ($1+1):2 skip 1 with linespoints lw 2 pt 7 ps 0.6 title 'validation loss', \
     dir.'/loss.csv' using 1:2 skip 1 axes x1y2 with lines lw 1 lc rgb '#888888' title 'learning rate'
