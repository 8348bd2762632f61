# Plots of bench/run-e2e.sh, from the raw data e2e_load writes:
#   lateness-cdf.png      one CDF of lateness (ready record timestamp - deliver-at) per whole-life
#                         rate, the burst's, and the short delays' (the file `short`, if given)
#   burst-throughput.png  ready records per 100 ms during the burst, next to the jobs due per 100 ms
# (whole-life.png, lateness against offered rate, is bench/plot-whole-life.gp's.)
# Usage: gnuplot -e "data='bench/results/data'; out='bench/results'; rates='1000 10000 40000'; \
#          short='lateness-short-20ms.txt'" bench/plot-e2e.gp
set terminal pngcairo size 900,560 noenhanced font ",11"

set output out.'/lateness-cdf.png'
set title 'delayd lateness at a steady whole-life rate (0 ms drawn at 0.5 ms)'
set xlabel 'lateness: ready record timestamp - deliver-at (ms, log scale)'
set ylabel 'fraction of jobs at or below'
set logscale x
set xrange [0.5:*]
set yrange [0:1.02]
set key right bottom
set grid
if (!exists('short')) short = ''
plot for [r in rates] data.'/lateness-'.r.'.txt' using ($1 < 0.5 ? 0.5 : $1):2 with steps lw 2 title r.' jobs/s', \
     data.'/lateness-burst.txt' using ($1 < 0.5 ? 0.5 : $1):2 with steps lw 2 dt 2 title 'burst', \
     for [f in short] data.'/'.f using ($1 < 0.5 ? 0.5 : $1):2 with steps lw 2 dt 3 title 'short delays'

set output out.'/burst-throughput.png'
set title 'delayd burst: ready records per 100 ms (jobs due evenly over the spread)'
set xlabel 'time from the first deliver-at (ms)'
set ylabel 'records per 100 ms'
unset logscale x
set xrange [-200:*]
set yrange [0:*]
set key right top
set style fill solid 0.5 noborder
set boxwidth 90
plot data.'/burst-buckets.txt' using ($1 + 50):2 with boxes title 'ready records', \
     data.'/burst-buckets.txt' using ($1 + 50):3 with steps lw 2 title 'jobs due'
