#!/usr/bin/env bash
# CPU and context switches of a running process's threads over a window, summed by thread name
# (librdkafka's rdk:main, rdk:broker<N>; delayd's txn, ingest, claim, mark, ...): where a
# process's CPU goes, without a profiler (docs/performance/cost.md, "Where a shard's cost is in delayd").
#
#   bench/thread-cpu.sh PID [SECONDS]      (SECONDS: 10 by default)
#
# One line a thread name, the busiest first: how many threads have it, their voluntary and
# involuntary context switches a second, and their CPU (user + system) in ms a second, from
# /proc/PID/task/*/status and stat at the window's start and end. Threads that start or end
# within the window are left out.
set -euo pipefail
pid="${1:?usage: bench/thread-cpu.sh PID [SECONDS]}"
secs="${2:-10}"
[[ -d "/proc/$pid/task" ]] || { echo "thread-cpu: no process $pid" >&2; exit 2; }
tick_ms=$((1000 / $(getconf CLK_TCK)))

# One line a thread: tid name voluntary involuntary ticks (the name's spaces made underscores).
snap() {
  local t name vol invol stat rest
  for t in "/proc/$pid"/task/*; do
    name="$(tr ' ' '_' <"$t/comm" 2>/dev/null)" || continue
    vol="$(awk '/^voluntary_ctxt_switches/ { print $2 }' "$t/status" 2>/dev/null)" || continue
    invol="$(awk '/^nonvoluntary_ctxt_switches/ { print $2 }' "$t/status" 2>/dev/null)" || continue
    stat="$(cat "$t/stat" 2>/dev/null)" || continue
    rest="${stat##*) }"  # the fields after the command name, which may hold spaces
    read -r -a f <<<"$rest"
    echo "${t##*/} $name $vol $invol $((f[11] + f[12]))"  # utime, stime: fields 14 and 15
  done | sort
}

before="$(snap)"
sleep "$secs"
after="$(snap)"
join <(echo "$before") <(echo "$after") |
  awk -v s="$secs" -v tick="$tick_ms" '
    { n = $2; v[n] += $7 - $3; i[n] += $8 - $4; c[n] += $9 - $5; k[n]++ }
    END { for (n in v) printf "%-16s threads %3d  vol/s %8.0f  invol/s %7.0f  cpu ms/s %7.1f\n", n, k[n], v[n] / s, i[n] / s, c[n] * tick / s }' |
  sort -k10 -nr
