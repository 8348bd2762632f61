#!/usr/bin/env bash
# Scale-out benchmark: the fire capacity of one delayd against two in one group on the same stack
# (docs/operating/scaling.md, "How the work spreads"). Each phase starts K instances (K = 1, then
# 2, alternated for ROUNDS rounds) on topics, groups and a Redis prefix of its own, waits until
# every instance owns its share of the ingest topic's partitions (its /stats), publishes N jobs
# due evenly over SPREAD_MS (bench/e2e_load's burst phase: ingest done before the first is due),
# and measures the fire capacity (jobs/s from the first deliver-at to the last ready record) and
# the CPU each process spent on the fire, per job: each delayd instance, Redis and Kafka.
# On two cores shared with Kafka, Redis and the load generator two instances cannot fire twice as
# fast; what must hold is that they do not fire slower than one (the work spreads instead of
# piling onto one instance, and two instances do not fight over it).
#
#   bench/run-scaleout.sh                         Release build in build-release/, ROUNDS=3
#   SMOKE=1 BUILD_DIR=build bench/run-scaleout.sh one round of 2 000 jobs (the ctest
#                                                 bench.scaleout_smoke): fails only when a job is
#                                                 lost or early, or an instance gets no share
# Settings: N (100000 [2000]), SPREAD_MS (2000), ROUNDS (3 [1]), BUILD_DIR, RESULTS_DIR
#   (bench/results [BUILD_DIR/scaleout-smoke]), BUILD_JOBS.
# Writes RESULTS_DIR/scaleout.jsonl (every e2e_load line with "instances" and "round" added) and
# prints a table: per K, the median fire capacity, delayd's CPU µs per job per instance and in
# all, Redis's and Kafka's; and the ratio of two instances' capacity to one's.
# Exit status: 0 when every job of every phase was delivered once and none early; 1 otherwise.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
say() { echo "scaleout: $*" >&2; }
die() { say "error: $*"; exit 1; }

SMOKE="${SMOKE:-0}"
if [[ "$SMOKE" == 1 ]]; then N="${N:-2000}" ROUNDS="${ROUNDS:-1}"; fi
N="${N:-100000}" SPREAD_MS="${SPREAD_MS:-2000}" ROUNDS="${ROUNDS:-3}"

# shellcheck source=e2e-delayd.sh
source "$root/bench/e2e-delayd.sh"
find_binaries
if [[ "$SMOKE" == 1 ]]; then results="${RESULTS_DIR:-$build/scaleout-smoke}"; else results="${RESULTS_DIR:-$root/bench/results}"; fi
data="$results/data"
mkdir -p "$data/logs"
out="$results/scaleout.jsonl"
: >"$out"
run="s$$"

# shellcheck source=e2e-stack.sh
source "$root/bench/e2e-stack.sh"
use_stack
# shellcheck source=e2e-redis.sh
source "$root/bench/e2e-redis.sh"

pids=() ports=() groups=()
stop_instances() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=() ports=()
}
cleanup() {
  local status=$?
  stop_instances
  remove_run "$run" "$run*" "${groups[@]}"
  leave_stack
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ingest_share PORT TOPIC: the partitions of TOPIC that instance's /stats says it owns ("" if none yet).
ingest_share() {
  { admin_get "$1" /stats | grep -o "\"$2\": *[0-9]*" | head -n 1 | cut -d: -f2 | tr -d ' '; } || true
}
# start_instances NAME K: K instances of one group; returns once each owns a share of the ingest
# topic's partitions and together they own all of them (kafka.topic_partitions: 4).
start_instances() {
  local name="$1" k="$2" i log port shares sum ok
  for ((i = 1; i <= k; i++)); do
    log="$data/logs/$name-$i.log"
    launch_delayd "$name" "$log"
    pids+=("$launched_pid")
    for _ in $(seq 1 300); do
      port="$(admin_port_of "$log")"
      [[ -n "$port" ]] && break
      kill -0 "$launched_pid" 2>/dev/null || { tail -n 20 "$log" >&2; die "delayd $name-$i exited during start-up"; }
      sleep 0.1
    done
    [[ -n "$port" ]] || die "delayd $name-$i opened no admin endpoint (log: $log)"
    ports+=("$port")
  done
  groups+=("$name" "$name.delay-status")
  for _ in $(seq 1 600); do
    ok=1 sum=0 shares=""
    for port in "${ports[@]}"; do
      share="$(ingest_share "$port" "$name.ingest")"
      shares+="${share:-?} "
      [[ -n "$share" && "$share" -gt 0 ]] || ok=0
      sum=$((sum + ${share:-0}))
    done
    ((ok && sum == 4)) && { say "$k instance(s) own the ingest partitions: ${shares% }"; return 0; }
    sleep 0.1
  done
  die "the $k instances of $name did not share the ingest partitions within 60 s (shares: $shares)"
}
cpu_pids() {
  local list i
  list="$(server_cpu_pids)"
  for i in "${!pids[@]}"; do list+="${list:+,}delayd$((i + 1)):${pids[$i]}"; done
  echo "$list"
}

failed=0
for ((round = 1; round <= ROUNDS; round++)); do
  for k in 1 2; do
    name="$run-k$k-r$round"
    say "round $round: $k instance(s), $N jobs due over $SPREAD_MS ms"
    start_instances "$name" "$k"
    status=0
    "$load_bin" burst --bootstrap "$KAFKA_BOOTSTRAP" --redis-url "$REDIS_URL" --data-dir "$data" \
      --ingest-topic "$name.ingest" --ready-topic "$name.ready.bench" --group "$name" --tag j \
      --n "$N" --spread-ms "$SPREAD_MS" --cpu-pids "$(cpu_pids)" >"$data/last.jsonl" || status=$?
    sed "s/^{/{\"instances\":$k,\"round\":$round,/" "$data/last.jsonl" | tee -a "$out"
    ((status == 0)) || { say "round $round with $k instance(s): e2e_load burst failed (status $status)"; failed=1; }
    stop_instances
    "$load_bin" cleanup --redis-url "$REDIS_URL" --redis-match "$name*" >/dev/null 2>>"$data/logs/cleanup-$run.log" || true
    compact_aof
  done
done

# The table: medians over the rounds.
echo
awk '
  function num(line, key,   m) { if (match(line, "\"" key "\":-?[0-9.]+")) { m = substr(line, RSTART, RLENGTH); sub(/.*:/, "", m); return m + 0 } return "" }
  function median(list, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (list[j] < list[i]) { t = list[i]; list[i] = list[j]; list[j] = t }
    return n % 2 ? list[(n + 1) / 2] : (list[n / 2] + list[n / 2 + 1]) / 2
  }
  /"figure":"fire_jobs_per_s"/ { k = num($0, "instances"); fire[k, ++nf[k]] = num($0, "value") }
  /"figure":"fire_cpu"/ {
    k = num($0, "instances"); c = ++nc[k]
    for (i = 1; i <= k; i++) d[k, i, c] = num($0, "delayd" i "_us_per_job")
    redis[k, c] = num($0, "redis_us_per_job"); kafka[k, c] = num($0, "kafka_us_per_job")
  }
  END {
    printf "%-10s %12s %28s %14s %12s %12s\n", "instances", "fire jobs/s", "delayd CPU us/job (each)", "delayd in all", "redis", "kafka"
    for (k = 1; k <= 2; k++) {
      n = nf[k]; for (i = 1; i <= n; i++) l[i] = fire[k, i]; f[k] = median(l, n)
      each = ""; all = 0
      for (i = 1; i <= k; i++) { n = nc[k]; for (c = 1; c <= n; c++) l[c] = d[k, i, c]; v = median(l, n); each = each (i > 1 ? " + " : "") sprintf("%.1f", v); all += v }
      n = nc[k]; for (c = 1; c <= n; c++) l[c] = redis[k, c]; r = median(l, n)
      for (c = 1; c <= n; c++) l[c] = kafka[k, c]; q = median(l, n)
      printf "%-10d %12.0f %28s %14.1f %12.1f %12.1f\n", k, f[k], each, all, r, q
    }
    if (f[1] > 0) printf "two instances / one: %.2f (medians of %d rounds)\n", f[2] / f[1], nf[1]
  }' "$out"
say "results: $out"
exit "$failed"
