#!/bin/bash
# ctx.sh PID SECONDS: context switches and CPU ticks per thread name over the window
pid=$1; s=$2
snap() { for t in /proc/$pid/task/*; do n=$(cat $t/comm); v=$(awk '/^voluntary_ctxt/{print $2}' $t/status); nv=$(awk '/^nonvoluntary_ctxt/{print $2}' $t/status); read -r -a st < $t/stat; echo "$(basename $t) $n $v $nv $((st[13]+st[14]))"; done; }
snap > /tmp/ctx.a; sleep $s; snap > /tmp/ctx.b
join <(sort /tmp/ctx.a) <(sort /tmp/ctx.b) | awk -v s=$s '{name=$2; dv=$7-$3; dn=$8-$4; dc=$9-$5; V[name]+=dv; N[name]+=dn; C[name]+=dc; K[name]++} END {for (n in V) printf "%-14s threads %2d  vol/s %7.0f  invol/s %6.0f  cpu ms/s %6.1f\n", n, K[n], V[n]/s, N[n]/s, C[n]*10/s}' | sort -k7 -nr
