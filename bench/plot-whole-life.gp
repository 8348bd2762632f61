# Lateness against offered whole-life rate (jobs published at R/s, each due a few seconds later,
# so that ingest and fire both run at R), one curve per run, from the data/whole-life.txt files
# that e2e_load's report writes (their comment lines give each run's label and the p99 bound):
#   top: p99 (solid) and max (dotted), with the p99 bound dashed; bottom: p50. 0 ms is drawn at
#   0.5 ms (log scale).
# Usage: gnuplot -e "files='before/data/whole-life.txt after/data/whole-life.txt'; out='x.png'" \
#          bench/plot-whole-life.gp
# (bench/run-e2e.sh draws one run as whole-life.png; bench/compare-e2e.sh two as
# whole-life-lateness.png.)
set terminal pngcairo size 900,800 noenhanced font ",11"
set output out

header(f, key) = system(sprintf("sed -n 's/^# %s: //p' '%s'", key, f))
bound = real(header(word(files, 1), 'p99_bound_ms'))
shown(ms) = ms < 0.5 ? 0.5 : ms

top = 3 * bound  # the bound well inside the plot, whatever the data
do for [i=1:words(files)] {
  stats word(files, i) using 6 nooutput
  if (STATS_max > top) { top = STATS_max }
}

set multiplot layout 2,1
set xlabel 'offered whole-life rate (jobs/s)'
set logscale y
set yrange [0.4:top * 1.5]
set xrange [0:*]
set grid
set key left top

set title sprintf('whole lives: p99 (solid) and max (dotted) lateness; dashed: %g ms', bound)
set ylabel 'lateness (ms, log scale)'
plot for [i=1:words(files)] word(files, i) using 1:(shown($4)) with linespoints lw 2 pt 7 lc i \
       title header(word(files, i), 'label').' p99', \
     for [i=1:words(files)] word(files, i) using 1:(shown($6)) with lines lw 1 dt 3 lc i notitle, \
     bound with lines dt 2 lw 1 lc rgb 'black' title sprintf('%g ms', bound)

set title 'whole lives: p50 lateness'
plot for [i=1:words(files)] word(files, i) using 1:(shown($3)) with linespoints lw 2 pt 7 lc i \
       title header(word(files, i), 'label').' p50'
unset multiplot
