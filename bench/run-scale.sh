#!/usr/bin/env bash
# delayd at scale and for long: many jobs waiting, a million due at once, a long run under
# faults, and the cost of a job in CPU and bytes beside BullMQ's (docs/performance/scale.md, "At scale
# and for long"). Each phase runs against a delayd of its own (its own topics, group and Redis
# prefix, removed after it), through bench/e2e_load, on the local stack (started if it is not up).
#
#   bench/run-scale.sh [PHASE...]                       all phases, full size: fill restart burst
#                                                       soak cost (the full soak is an hour)
#   SMOKE=1 BUILD_DIR=build bench/run-scale.sh          every phase at a few thousand jobs and a
#                                                       30 s soak (the ctest
#                                                       bench.scale_smoke): fails only when a job
#                                                       is lost or early, or delayd does not start
#
# The phases:
#   fill     N_FILL jobs (10 000 000; 200-byte values), each due FILL_LEAD_MS (10 s) plus a
#            scattered delay under SPAN_MS (24 hours) after its publish, published at most
#            200 000 ahead of what delayd has accepted (e2e_load fill): the accept rate along
#            the fill (the last million's over the first's), Redis bytes per pending job,
#            delayd's RSS, and the jobs falling due meanwhile (none early);
#            RESULTS_DIR/data/fill-series.txt has a reading a second. FILL_AOF_REWRITE=off
#            turns Redis's automatic AOF rewrite off for the fill (CONFIG SET
#            auto-aof-rewrite-percentage 0, its value put back after): with ten million jobs
#            each rewrite forks a child that writes a file of up to 3.5 GB on the same cores,
#            and this tells delayd's write path from Redis's persistence. The figure
#            fill_aof_rewrites counts the rewrites and their seconds during the fill either way.
#            Then the machine's limit for the same fill, with delayd's keys gone: Redis alone
#            (bench/redis_fill_bench, no Kafka, no delayd), N_FILL jobs due as scattered written
#            with one HSET each, then with an HSET and a ZADD each (one sorted set a shard), then
#            with the ZADD into a sorted set of its second (the pending set's layout), then
#            through delayd's accept script: Redis's main thread's CPU a job for each tenth of each (redis_fill_step_*)
#            and the first tenth's over the last's (redis_fill_*): how much of the fill's fall
#            is Redis's own.
#   restart  with the fill's jobs waiting: delayd stopped (SIGTERM) and started again; the time to
#            /readyz, the first fire and the first on-time fire (e2e_load watch), the lateness of
#            the jobs due after the start; then the console's first page (GET /jobs) and
#            `delayctl stats`, each timed.
#   burst    the fire capacity on N_REF (100 000) jobs due over REF_SPREAD_MS (500), then N_BURST
#            (1 000 000) due within BURST_SPREAD_MS (1 000), published ahead (e2e_load burst):
#            the time to drain, the lateness CDF, records out of due order per partition, none
#            early; meanwhile OTHER_RATE (1 000) other jobs a second published, each due 2 s
#            later (e2e_load rate, tag "burst-other"): their lateness while the burst drains.
#            The same other jobs run through the capacity's drain (tag "burst-ref-other"), so
#            that the million's rate is compared with a capacity measured under the same load,
#            once before the million and once after it (tag "burst-ref-after"): the ratio is to
#            the mean of the two, each reported.
#            BURST_AOF_REWRITE=off: Redis's automatic AOF rewrite off for the phase, as
#            FILL_AOF_REWRITE for the fill; burst_aof_rewrites counts them either way. Before
#            both, the capacity on N_REF with no other jobs (phase burst-alone): what the other
#            jobs take from it.
#   soak     SOAK_SECONDS (3 600) of whole lives at SOAK_RATE (1 000) a second, each due
#            SOAK_DELAY_MS (5 000) after its publish, of every kind (e2e_load lives: one job in
#            20 cancelled halfway to its time, one rescheduled later, one reported failed and
#            delivered again, one repeating three times, the rest reported finished on the status
#            topic; payloads kept until a job is finished, so that a failed one can be delivered
#            again: scheduler.keep_payload; SOAK_WORKLOAD=rate: whole lives of one kind, published,
#            fired and read, e2e_load rate), with finished jobs kept SOAK_RETENTION_S (300): delayd killed with SIGKILL and started again every KILL_EVERY_S (600), Redis
#            restarted once at REDIS_RESTART_AT_S (1 500, between two kills; when it is the local
#            stack's, with scripts/stack.sh restart redis); delayd's RSS and Redis's used_memory
#            every SAMPLE_S (60) into data/soak-series.txt, p99 per minute into
#            data/lateness-soak-per-minute.txt; every expected delivery once or more (duplicates
#            counted), none lost, none early; cancels and reschedules that came too late counted.
#   cost     whole lives at each of COST_RATES ("2000:30 5000:30": RATE:SECONDS): CPU per job of
#            delayd, Redis and Kafka (e2e_load rate, from /proc), then BullMQ's node process and
#            Redis at the same rates (bench/bullmq/peer_load.mjs --phases rates; skipped under
#            SMOKE=1, where bench.bullmq_smoke runs it). COST_PRODUCER_LINGER_MS (5): the
#            publishing producer's linger.ms (e2e_load rate --producer-linger-ms). First
#            COST_WARMUP_S (10; 0 under SMOKE=1) at the first rate, not counted: a Kafka started
#            just before runs its first seconds interpreted (its CPU a job at 2 000/s measured
#            2.6 times that of a minute later), which the first rate's figure would carry.
# Settings: the sizes above, BUILD_DIR (default build-release/, built here), RESULTS_DIR
# (bench/results/scale [BUILD_DIR/scale-smoke]), DELAYD_* for every delayd it starts
# (DELAYD_LOG_LEVEL=debug logs what became of each report), KEEP_DATA=1 to keep each phase's
# topics, groups and Redis keys for reading afterwards (delayctl with DELAYD_REDIS_PREFIX=<run>,
# the run names in the output; scripts/stack.sh reset removes them).
# Writes RESULTS_DIR/scale.jsonl (every figure, with "phase") and RESULTS_DIR/table.txt; draws
# RESULTS_DIR/scale-*.png with gnuplot when it is there (not under SMOKE=1).
# Exit status: 0 when no job was lost or early in any phase; 1 otherwise or on an error.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
say() { echo "scale: $*" >&2; }
die() { say "error: $*"; exit 1; }

SMOKE="${SMOKE:-0}"
if [[ "$SMOKE" == 1 ]]; then
  : "${N_FILL:=20000}" "${SPAN_MS:=60000}" "${FILL_LEAD_MS:=1000}" "${N_REF:=2000}" "${REF_SPREAD_MS:=200}" "${N_BURST:=5000}"
  : "${BURST_SPREAD_MS:=1000}" "${BURST_LEAD_MS:=8000}" "${OTHER_RATE:=100}" "${SOAK_SECONDS:=30}"
  : "${SOAK_RATE:=200}" "${SOAK_DELAY_MS:=2000}" "${SOAK_RETENTION_S:=30}" "${KILL_EVERY_S:=10}"
  : "${REDIS_RESTART_AT_S:=15}" "${SAMPLE_S:=5}" "${COST_RATES:=500:5}" "${COST_WARMUP_S:=0}"
fi
: "${N_FILL:=10000000}" "${SPAN_MS:=86400000}" "${FILL_LEAD_MS:=10000}" "${N_REF:=100000}" "${REF_SPREAD_MS:=500}" "${N_BURST:=1000000}"
: "${BURST_SPREAD_MS:=1000}" "${BURST_LEAD_MS:=}" "${OTHER_RATE:=1000}" "${SOAK_SECONDS:=3600}" "${SOAK_RATE:=1000}"
: "${SOAK_DELAY_MS:=5000}" "${SOAK_RETENTION_S:=300}" "${KILL_EVERY_S:=600}" "${REDIS_RESTART_AT_S:=1500}"
: "${SAMPLE_S:=60}" "${COST_RATES:=2000:30 5000:30}" "${COST_WARMUP_S:=10}"
: "${SOAK_WORKLOAD:=lives}"
[[ "$SOAK_WORKLOAD" =~ ^(lives|rate)$ ]] || die "SOAK_WORKLOAD must be lives or rate, not '$SOAK_WORKLOAD'"
phases=("$@")
((${#phases[@]})) || phases=(fill restart burst soak cost)
for p in "${phases[@]}"; do
  [[ "$p" =~ ^(fill|restart|burst|soak|cost)$ ]] || die "unknown phase '$p' (fill restart burst soak cost)"
done
has_phase() { [[ " ${phases[*]} " == *" $1 "* ]]; }
has_phase restart && ! has_phase fill && die "the restart phase needs the fill before it"

# shellcheck source=e2e-delayd.sh
source "$root/bench/e2e-delayd.sh"
find_binaries
delayctl_bin="$(dirname "$delayd_bin")/delayctl"
fill_bench_bin="$build/bench/redis_fill_bench"
if has_phase fill && [[ ! -x "$fill_bench_bin" ]]; then
  [[ -z "${BUILD_DIR:-}" ]] || die "no $fill_bench_bin: build the target redis_fill_bench"
  cmake --build "$build" -j "${BUILD_JOBS:-$(nproc)}" --target redis_fill_bench >/dev/null
fi
if [[ "$SMOKE" == 1 ]]; then results="${RESULTS_DIR:-$build/scale-smoke}"; else results="${RESULTS_DIR:-$root/bench/results/scale}"; fi
data="$results/data"
rm -rf "$data"
mkdir -p "$data/logs" "$data/bin"
# The binaries this run starts, copied: the soak starts delayd again at every kill, and a build
# during the hour must not swap the binary between two kills.
cp "$delayd_bin" "$delayctl_bin" "$data/bin/"
delayd_bin="$data/bin/delayd" delayctl_bin="$data/bin/delayctl"
out="$results/scale.jsonl"
: >"$out"
run="s$$"

# shellcheck source=e2e-stack.sh
source "$root/bench/e2e-stack.sh"
use_stack
# Redis may be restarted (soak) when it is the local stack's (scripts/stack.sh restart redis).
own_redis=0
[[ "$(scripts/stack.sh env 2>/dev/null | sed -n 's/^REDIS_URL=//p')" == "$REDIS_URL" ]] && own_redis=1
# shellcheck source=e2e-redis.sh
source "$root/bench/e2e-redis.sh"

pid="" names=() bg=() aof_percentage=""
stop_delayd() { # SIGNAL (TERM)
  [[ -n "$pid" ]] || return 0
  kill "-${1:-TERM}" "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=""
}
cleanup() {
  local status=$? name p
  for p in "${bg[@]}"; do kill "$p" 2>/dev/null || true; done
  stop_delayd
  [[ -z "$aof_percentage" ]] || aof_rewrite_back || true
  for name in "${names[@]}"; do remove_run "$name" "$name*" "$name" "$name.delay-status" "$name.$name.delay-status"; done
  leave_stack
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_delayd NAME [VAR=value...]: one delayd on the run NAME (its own topics, group, prefix),
# with these settings; returns once its ingest consumer has partitions. Sets pid, started_ms.
# Its log is logs/NAME.log; the logs of the delayds of NAME before it (the soak kills and
# starts again) are kept as NAME.log.1, NAME.log.2, ... in the order they ran.
start_delayd() {
  local name="$1" log="$data/logs/$1.log" kv n=1
  shift
  if [[ -f "$log" ]]; then
    while [[ -f "$log.$n" ]]; do n=$((n + 1)); done
    mv "$log" "$log.$n"
  fi
  [[ " ${names[*]} " == *" $name "* ]] || names+=("$name")
  started_ms=$(date +%s%3N)
  for kv in "$@"; do export "${kv?}"; done
  launch_delayd "$name" "$log"
  for kv in "$@"; do unset "${kv%%=*}"; done
  pid=$launched_pid
  wait_assigned "$name" "$log" "$pid"
}
# record PHASE < lines: adds "phase" to each JSON line, appends it to scale.jsonl and shows it.
record() { sed "s/^{/{\"phase\":\"$1\",/" | tee -a "$out"; }
# figure NAME VALUE [UNIT] [extra JSON fields]: one figure of this script's own.
figure() {
  printf '{"figure":"%s","value":%s,"unit":"%s"%s}\n' "$1" "$2" "${3:-}" "${4:+,$4}"
}
# timed CMD...: runs the command (its output into data/logs/timed.log); sets took_ms to its wall
# time and last_rc to its exit status.
timed() {
  local t0
  t0=$(date +%s%N)
  last_rc=0
  "$@" >>"$data/logs/timed.log" 2>&1 || last_rc=$?
  took_ms=$((($(date +%s%N) - t0) / 1000000))
}
# aof_rewrite_off SETTING PHASE: turns Redis's automatic AOF rewrite off (auto-aof-rewrite-percentage
# 0) when SETTING is off; aof_rewrite_back puts its value back (cleanup() too). aof_rewrites: the
# rewrites Redis has done since it started.
aof_rewrite_off() {
  [[ "$1" == off ]] || return 0
  aof_percentage="$(rcli CONFIG GET auto-aof-rewrite-percentage | tail -n 1)"
  rcli CONFIG SET auto-aof-rewrite-percentage 0 >/dev/null
  say "$2: Redis's automatic AOF rewrite off (auto-aof-rewrite-percentage 0; was $aof_percentage)"
}
aof_rewrite_back() {
  [[ -z "$aof_percentage" ]] || rcli CONFIG SET auto-aof-rewrite-percentage "$aof_percentage" >/dev/null
  aof_percentage=""
}
aof_rewrites() { rcli INFO persistence | tr -d '\r' | awk -F: '/^aof_rewrites:/ { print $2 }'; }
rss_of() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo -1; }
failed=0
load() { # PHASE SUBCOMMAND ARGS...: e2e_load with the common options; its figures recorded
  local phase="$1" status=0
  shift
  "$load_bin" "$@" --bootstrap "$KAFKA_BOOTSTRAP" --redis-url "$REDIS_URL" --data-dir "$data" \
    >"$data/last-$phase.jsonl" || status=$?
  record "$phase" <"$data/last-$phase.jsonl"
  ((status == 0)) || { say "$phase: e2e_load $1 failed (status $status)"; failed=1; }
}

# ---- fill and restart ------------------------------------------------------------------------
if has_phase fill; then
  name="$run-fill"
  say "fill: $N_FILL jobs, each due within $((SPAN_MS / 1000)) s of its publish"
  start_delayd "$name"
  aof_rewrite_off "${FILL_AOF_REWRITE:-on}" fill
  rewrites_before="$(aof_rewrites)"
  load fill fill --ingest-topic "$name.ingest" --ready-topic "$name.ready.bench" --group "$name" --tag f \
    --n "$N_FILL" --span-ms "$SPAN_MS" --lead-ms "$FILL_LEAD_MS" --rss-pid "$pid" --cpu-pids "$(server_cpu_pids),delayd:$pid"
  rewrites_after="$(aof_rewrites)"
  figure fill_aof_rewrites "$((${rewrites_after:-0} - ${rewrites_before:-0}))" rewrites \
    "\"automatic\":\"${FILL_AOF_REWRITE:-on}\"" | record fill
  aof_rewrite_back
  if has_phase restart; then
    say "restart: delayd stopped and started again with the fill's jobs waiting"
    stop_delayd TERM
    start_delayd "$name"
    t0=$started_ms
    port="$(admin_port_of "$data/logs/$name.log")"
    ready_ms=""
    for _ in $(seq 1 600); do
      if admin_get "$port" /readyz | head -n 1 | grep -q " 200"; then ready_ms=$(($(date +%s%3N) - t0)); break; fi
      sleep 0.02
    done
    figure restart_readyz_ms "${ready_ms:-null}" "ms after start" "\"waiting\":$N_FILL" | record restart
    load restart watch --ready-topic "$name.ready.bench" --tag f --n "$N_FILL" --start-ms "$t0" \
      --seconds "$([[ "$SMOKE" == 1 ]] && echo 5 || echo 20)"
    timed curl -fsS "http://127.0.0.1:$port/jobs?limit=50"
    figure console_first_page_ms "$took_ms" ms "\"status\":$last_rc" | record restart
    ((last_rc == 0)) || { say "restart: GET /jobs failed"; failed=1; }
    timed env DELAYD_REDIS_URL="$REDIS_URL" DELAYD_REDIS_PREFIX="$name" DELAYD_KAFKA_BOOTSTRAP="$KAFKA_BOOTSTRAP" \
      "$delayctl_bin" stats
    figure delayctl_stats_ms "$took_ms" ms "\"status\":$last_rc" | record restart
    ((last_rc == 0)) || { say "restart: delayctl stats failed"; failed=1; }
    figure delayd_rss_after_restart "$(rss_of "$pid")" KiB | record restart
  fi
  stop_delayd TERM
  remove_run "$name" "$name*" "$name" "$name.delay-status"
  compact_aof
  say "fill: Redis alone along $N_FILL jobs: HSET, HSET and ZADD, the same into seconds, then delayd's accept script"
  aof_rewrite_off "${FILL_AOF_REWRITE:-on}" fill
  status=0
  "$fill_bench_bin" --redis-url "$REDIS_URL" --n "$N_FILL" --step "$(((N_FILL + 9) / 10))" --span-ms "$SPAN_MS" \
    >"$data/last-redis-fill.jsonl" || status=$?
  record redis-fill <"$data/last-redis-fill.jsonl"
  ((status == 0)) || { say "fill: redis_fill_bench failed (status $status)"; failed=1; }
  aof_rewrite_back
  compact_aof
fi

# ---- burst -----------------------------------------------------------------------------------
if has_phase burst; then
  name="$run-burst"
  start_delayd "$name"
  aof_rewrite_off "${BURST_AOF_REWRITE:-on}" burst
  rewrites_before="$(aof_rewrites)"
  # The capacity alone first (no other jobs): what the other jobs take from it, and a start for
  # a Kafka that has just started.
  say "burst: the fire capacity on $N_REF jobs due over $REF_SPREAD_MS ms, alone"
  load burst-alone burst --ingest-topic "$name.ingest" --ready-topic "$name.ready.bench" --group "$name" --tag a \
    --n "$N_REF" --spread-ms "$REF_SPREAD_MS" --lead-ms "$((5000 + N_REF / 10))" --cpu-pids "$(server_cpu_pids),delayd:$pid"
  # others TAG LEAD_MS SECONDS: OTHER_RATE other jobs a second (e2e_load rate, due 2 s after
  # publish) in the background, from 5 s before a burst due LEAD_MS from now, for SECONDS; their
  # figures into data/last-TAG.jsonl. Sets other_pid.
  others() {
    local tag="$1" lead="$2" seconds="$3"
    (
      sleep $(((lead - 5000) / 1000))
      "$load_bin" rate --ingest-topic "$name.ingest" --ready-topic "$name.ready.bench" --tag "$tag" \
        --rate "$OTHER_RATE" --seconds "$seconds" --delay-ms 2000 --figure "burst_other_lateness_per_s" \
        --bootstrap "$KAFKA_BOOTSTRAP" --redis-url "$REDIS_URL" --data-dir "$data" >"$data/last-$tag.jsonl"
    ) &
    other_pid=$!
    bg+=("$other_pid")
  }
  # The capacity on N_REF with the same other jobs through its drain as the million has through
  # its own: what the million's rate is compared with. Its others run long enough for a drain at
  # 5 000 jobs a second or more.
  ref_lead=$((5000 + N_REF / 10))
  ref_other_seconds=$(((5000 + REF_SPREAD_MS) / 1000 + 1 + N_REF / 5000))
  [[ "$SMOKE" == 1 ]] && ref_other_seconds=5
  say "burst: the fire capacity on $N_REF jobs due over $REF_SPREAD_MS ms; $OTHER_RATE other jobs a second meanwhile"
  others burst-ref-other "$ref_lead" "$ref_other_seconds"
  load burst-ref burst --ingest-topic "$name.ingest" --ready-topic "$name.ready.bench" --group "$name" --tag r \
    --n "$N_REF" --spread-ms "$REF_SPREAD_MS" --lead-ms "$ref_lead" --cpu-pids "$(server_cpu_pids),delayd:$pid"
  wait "$other_pid" || { say "burst: the other jobs' run beside the capacity failed"; failed=1; }
  record burst-ref-other <"$data/last-burst-ref-other.jsonl"
  lead="${BURST_LEAD_MS:-$((20000 + N_BURST / 10))}"
  # The million's others: through its whole drain, as long as the capacity above says it takes
  # and half that again.
  ref_rate="$(sed -n 's/.*"figure":"fire_jobs_per_s".*"value":\([0-9.]*\).*/\1/p' "$data/last-burst-ref.jsonl" | head -n 1)"
  other_seconds=$(awk -v n="$N_BURST" -v r="${ref_rate:-0}" -v s="$BURST_SPREAD_MS" \
    'BEGIN { d = r > 0 ? n / r : 60; printf "%d", 5 + s / 1000 + 1.5 * d + 1 }')
  [[ "$SMOKE" == 1 ]] && other_seconds=5
  say "burst: $N_BURST jobs due within $BURST_SPREAD_MS ms, $((lead / 1000)) s ahead; $OTHER_RATE other jobs a second meanwhile ($other_seconds s)"
  others burst-other "$lead" "$other_seconds"
  load burst burst --ingest-topic "$name.ingest" --ready-topic "$name.ready.bench" --group "$name" --tag b \
    --n "$N_BURST" --spread-ms "$BURST_SPREAD_MS" --lead-ms "$lead" --cpu-pids "$(server_cpu_pids),delayd:$pid"
  wait "$other_pid" || { say "burst: the other jobs' run failed"; failed=1; }
  record burst-other <"$data/last-burst-other.jsonl"
  # The capacity beside the others once more, after the million: on these shared cores it moved
  # by 1.75x between two runs minutes apart, so one reading before the million decides the ratio
  # alone; the ratio is to the mean of the two (scale_table.py), and each is reported.
  say "burst: the fire capacity on $N_REF jobs again, after the million; $OTHER_RATE other jobs a second meanwhile"
  others burst-ref-after-other "$ref_lead" "$ref_other_seconds"
  load burst-ref-after burst --ingest-topic "$name.ingest" --ready-topic "$name.ready.bench" --group "$name" --tag s \
    --n "$N_REF" --spread-ms "$REF_SPREAD_MS" --lead-ms "$ref_lead" --cpu-pids "$(server_cpu_pids),delayd:$pid"
  wait "$other_pid" || { say "burst: the other jobs' run beside the second capacity failed"; failed=1; }
  record burst-ref-after-other <"$data/last-burst-ref-after-other.jsonl"
  rewrites_after="$(aof_rewrites)"
  figure burst_aof_rewrites "$((${rewrites_after:-0} - ${rewrites_before:-0}))" rewrites \
    "\"automatic\":\"${BURST_AOF_REWRITE:-on}\"" | record burst
  aof_rewrite_back
  stop_delayd TERM
  remove_run "$name" "$name*" "$name" "$name.delay-status"
  compact_aof
fi

# ---- soak ------------------------------------------------------------------------------------
if has_phase soak; then
  name="$run-soak"
  soak_s=$SOAK_SECONDS
  soak_env=(DELAYD_REDIS_JOB_RETENTION_S="$SOAK_RETENTION_S" DELAYD_KAFKA_STATUS_TOPIC="$name.delay-status"
            DELAYD_SCHEDULER_KEEP_PAYLOAD=true)
  say "soak: $soak_s s of whole lives ($SOAK_WORKLOAD) at $SOAK_RATE/s; SIGKILL every $KILL_EVERY_S s; Redis restarted at $REDIS_RESTART_AT_S s"
  start_delayd "$name" "${soak_env[@]}"
  workload=(lives --status-topic "$name.delay-status")
  [[ "$SOAK_WORKLOAD" == rate ]] && workload=(rate)
  "$load_bin" "${workload[@]}" --ingest-topic "$name.ingest" --ready-topic "$name.ready.bench" \
    --tag s --rate "$SOAK_RATE" --seconds "$soak_s" --delay-ms "$SOAK_DELAY_MS" --figure lateness_soak_per_s \
    --bootstrap "$KAFKA_BOOTSTRAP" --redis-url "$REDIS_URL" --data-dir "$data" >"$data/last-soak.jsonl" &
  soak=$!
  bg+=("$soak")
  echo "# t_s delayd_rss_kib redis_used_memory_bytes event" >"$data/soak-series.txt"
  t0=$SECONDS kills=0 redis_restarted=0 next_sample=0 next_kill=$KILL_EVERY_S
  while kill -0 "$soak" 2>/dev/null; do
    t=$((SECONDS - t0)) event=""
    if ((t >= next_kill && t < soak_s)); then
      stop_delayd KILL
      start_delayd "$name" "${soak_env[@]}"
      kills=$((kills + 1)) next_kill=$((next_kill + KILL_EVERY_S)) event="kill-9"
    fi
    if ((own_redis && !redis_restarted && t >= REDIS_RESTART_AT_S && t < soak_s)); then
      scripts/stack.sh restart redis >>"$data/logs/redis-restart.log" 2>&1 || { say "soak: the Redis restart failed"; failed=1; }
      redis_restarted=1 event="${event:+$event,}redis-restart"
    fi
    if ((t >= next_sample)) || [[ -n "$event" ]]; then
      echo "$t $(rss_of "$pid") $(rcli INFO memory | tr -d '\r' | awk -F: '$1 == "used_memory" { print $2 }') ${event:--}" \
        >>"$data/soak-series.txt"
      ((t >= next_sample)) && next_sample=$((next_sample + SAMPLE_S))
    fi
    sleep 1
  done
  wait "$soak" || { say "soak: e2e_load $SOAK_WORKLOAD failed or found a job lost or early"; failed=1; }
  record soak <"$data/last-soak.jsonl"
  figure soak_faults "$kills" "kill -9" "\"redis_restarts\":$redis_restarted,\"seconds\":$soak_s" | record soak
  # Growth after the first ten minutes (or the first sixth of a shorter run), per ten minutes:
  # the mean of the regular samples in the first window of that length after it, and in the
  # last (up to the last sample, the drain after the load included), from one window's middle to
  # the other's. A row taken at a fault (a delayd started a moment ago) is left out, and means,
  # not single samples: at 1 000 lives a second delayd's RSS swings between 42 and 67 MiB from
  # one minute to the next, so two samples say where in the swing they fell, not whether it grows.
  awk -v win=$((soak_s < 3600 ? soak_s / 6 : 600)) '
    !/^#/ && $1 >= win && $2 > 0 && $4 == "-" { t[++n] = $1; r[n] = $2; m[n] = $3; if ($1 > tmax) tmax = $1 }
    END {
      for (i = 1; i <= n; i++) {
        if (t[i] < 2 * win) { r0 += r[i]; m0 += m[i]; n0++ }
        if (t[i] > tmax - win) { r1 += r[i]; m1 += m[i]; n1++ }
      }
      span = ((tmax - win / 2) - (1.5 * win)) / 600
      if (!n0 || !n1 || tmax < 3 * win) { print "{\"figure\":\"soak_growth\",\"value\":null}"; exit }
      r0 /= n0; m0 /= n0; r1 /= n1; m1 /= n1
      printf "{\"figure\":\"soak_growth\",\"value\":%.4f,\"unit\":\"fraction per 10 min\",\"rss_per_10_min\":%.4f,\"redis_per_10_min\":%.4f,\"rss_kib\":[%d,%d],\"redis_bytes\":[%d,%d],\"from_s\":%d,\"to_s\":%d,\"window_s\":%d,\"basis\":\"window means\"}\n",
        ((m1 - m0) / m0) / span, ((r1 - r0) / r0) / span, ((m1 - m0) / m0) / span, r0, r1, m0, m1, win, tmax, win
    }' "$data/soak-series.txt" | record soak
  stop_delayd TERM
  remove_run "$name" "$name*" "$name" "$name.$name.delay-status"
  compact_aof
fi

# ---- cost ------------------------------------------------------------------------------------
if has_phase cost; then
  name="$run-cost"
  start_delayd "$name"
  if ((COST_WARMUP_S > 0)); then
    spec="${COST_RATES%% *}"
    say "cost: warming up at ${spec%%:*}/s for $COST_WARMUP_S s (not counted)"
    "$load_bin" rate --bootstrap "$KAFKA_BOOTSTRAP" --redis-url "$REDIS_URL" --data-dir "$data" \
      --ingest-topic "$name.ingest" --ready-topic "$name.ready.bench" --tag cw --rate "${spec%%:*}" \
      --seconds "$COST_WARMUP_S" --delay-ms 2000 --producer-linger-ms "${COST_PRODUCER_LINGER_MS:-5}" \
      >"$data/logs/cost-warmup.jsonl" || { say "cost: the warm-up failed"; failed=1; }
  fi
  for spec in $COST_RATES; do
    rate="${spec%%:*}" secs="${spec##*:}"
    say "cost: whole lives at $rate/s for $secs s"
    load cost rate --ingest-topic "$name.ingest" --ready-topic "$name.ready.bench" --tag "c$rate" --rate "$rate" \
      --seconds "$secs" --delay-ms 2000 --producer-linger-ms "${COST_PRODUCER_LINGER_MS:-5}" \
      --cpu-pids "$(server_cpu_pids),delayd:$pid"
  done
  stop_delayd TERM
  remove_run "$name" "$name*" "$name" "$name.delay-status"
  compact_aof
  if [[ "$SMOKE" != 1 ]]; then
    say "cost: BullMQ at the same rates"
    scripts/npm-ci.sh bench/bullmq >"$data/logs/npm-ci.log" 2>&1 || die "npm ci in bench/bullmq failed (log: $data/logs/npm-ci.log)"
    status=0
    node bench/bullmq/peer_load.mjs --redis-url "$REDIS_URL" --tag "$run" --phases rates --rates "$COST_RATES" \
      >"$data/last-cost-bullmq.jsonl" 2>"$data/logs/bullmq.log" || status=$?
    sed 's/^{/{"peer":"bullmq",/' "$data/last-cost-bullmq.jsonl" | record cost
    ((status == 0)) || { say "cost: BullMQ's run failed (status $status; log: $data/logs/bullmq.log)"; failed=1; }
    compact_aof
  fi
fi

# ---- table -----------------------------------------------------------------------------------
python3 "$root/bench/scale_table.py" "$out" | tee "$results/table.txt"
if [[ "$SMOKE" != 1 ]] && command -v gnuplot >/dev/null; then
  gnuplot -e "data='$data'; out='$results'" "$root/bench/plot-scale.gp" 2>"$data/logs/gnuplot.log" ||
    say "the plots failed: $(tail -n 1 "$data/logs/gnuplot.log")"
fi
((failed == 0)) || { say "a phase lost jobs, fired some early or failed: see $out"; exit 1; }
say "done"
