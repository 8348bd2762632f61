# Plots of bench/run-scale.sh, from the raw data e2e_load and the script write:
#   scale-fill.png   the accept rate along the fill (jobs/s over 10 s windows) against the jobs
#                    accepted, with Redis's used_memory and delayd's RSS on the right axis
#   scale-fill-cpu.png  Redis's and delayd's CPU per accepted job along the fill
#   scale-burst.png  the lateness CDF of the big burst (lateness-burst.txt)
#   scale-soak.png   delayd's RSS and Redis's used_memory over the soak, kill -9 and the Redis
#                    restart marked, and p99 lateness per minute
# Usage: gnuplot -e "data='bench/results/scale/data'; out='bench/results/scale'" bench/plot-scale.gp
# A plot whose data the run did not make (a phase left out) is not drawn.
set terminal pngcairo size 900,560 noenhanced font ",11"
set grid
if (!exists('window')) window = 10  # seconds of the fill's rate windows
have(f) = system('test -s '.data.'/'.f.' && echo 1') eq '1'

if (have('fill-series.txt')) {
set output out.'/scale-fill.png'
set title 'delayd fill: accept rate as the backlog grows'
set xlabel 'jobs accepted (millions)'
set ylabel 'accepted jobs/s (over windows of '.sprintf('%g', window).' s)'
set y2label 'memory (GiB for Redis, MiB / 100 for delayd RSS)'
set ytics nomirror
set y2tics
set yrange [0:*]
set y2range [0:*]
set key left bottom
plot '< awk -v w='.sprintf('%g', window).' ''!/^#/ { if (n++ && $1 - t >= w) { print $3 / 1e6, ($3 - a) / ($1 - t); t = $1; a = $3 } else if (n == 1) { t = $1; a = $3 } }'' '.data.'/fill-series.txt' \
       using 1:2 with lines lw 2 title 'accept rate', \
     data.'/fill-series.txt' using ($3 / 1e6):($4 / 2**30) axes x1y2 with lines lw 2 dt 2 title 'Redis used_memory, GiB', \
     data.'/fill-series.txt' using ($3 / 1e6):($5 / 1024 / 100) axes x1y2 with lines lw 2 dt 3 title 'delayd RSS, MiB / 100'

set output out.'/scale-fill-cpu.png'
set title 'delayd fill: CPU per accepted job as the backlog grows'
set ylabel 'CPU per accepted job (µs, over windows of '.sprintf('%g', window).' s)'
unset y2label
unset y2tics
set ytics mirror
set key left top
plot '< awk -v w='.sprintf('%g', window).' ''!/^#/ && $6 >= 0 { if (n++ && $1 - t >= w) { d = $3 - a; if (d > 0) print $3 / 1e6, 1000 * ($6 - r) / d, 1000 * ($7 - c) / d; t = $1; a = $3; r = $6; c = $7 } else if (n == 1) { t = $1; a = $3; r = $6; c = $7 } }'' '.data.'/fill-series.txt' \
       using 1:2 with lines lw 2 title 'Redis', '' using 1:3 with lines lw 2 dt 2 title 'delayd'
}

if (have('lateness-burst.txt')) {
set output out.'/scale-burst.png'
set title 'delayd: lateness of a million jobs due within one second'
set xlabel 'lateness: ready record timestamp - deliver-at (ms)'
set ylabel 'fraction of jobs at or below'
unset y2label
unset y2tics
set ytics mirror
set xrange [0:*]
set yrange [0:1.02]
set key right bottom
plot data.'/lateness-burst.txt' using 1:2 with steps lw 2 title 'burst'
}

if (have('soak-series.txt')) {
set output out.'/scale-soak.png'
set title 'delayd soak: memory and p99 lateness under kill -9 and a Redis restart'
set xlabel 'minutes'
set ylabel 'MiB (delayd RSS) / 10 MiB (Redis used_memory)'
set y2label 'p99 lateness per minute (ms, log scale)'
set ytics nomirror
set y2tics
set logscale y2
set xrange [0:*]
set yrange [0:*]
set y2range [1:*]
set key left top
plot data.'/soak-series.txt' using ($1 / 60):($2 / 1024) with linespoints lw 2 title 'delayd RSS', \
     data.'/soak-series.txt' using ($1 / 60):($3 / 2**20 / 10) with linespoints lw 2 dt 2 title 'Redis used_memory / 10', \
     data.'/soak-series.txt' using ($1 / 60):(strcol(4) ne '-' ? 0 : 1/0) with points pt 9 ps 2 lc rgb 'red' title 'kill -9 / Redis restart', \
     data.'/lateness-soak-per-minute.txt' using 1:($4 < 1 ? 1 : $4) axes x1y2 with steps lw 2 lc rgb 'black' title 'p99 per minute'
}
