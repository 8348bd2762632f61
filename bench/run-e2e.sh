#!/usr/bin/env bash
# End-to-end benchmark: delayd through its contract (Kafka in, Kafka out, Redis INFO), next to the
# limits of the same machine measured with the same tools. Starts the local stack if it is not up
# (and stops it again then), starts delayd from the build for each phase with topics, group and
# Redis prefix of its own, and removes the run's topics, groups and Redis keys at the end.
#
#   1. machine limits: redis-benchmark on the scripts of a lean job store (bench/redis-scripts/:
#      accept, claim, finish; 500 jobs per call), and Kafka produce / consume rates (e2e_load);
#   2. delayd: durable ingest rate and Redis bytes per pending and finished job; fire capacity
#      (a burst due over 2 s); whole lives: jobs published at rate R for S seconds, each due
#      RATE_DELAY_MS after its publish, so that ingest and fire both run at R (one phase per rate
#      of RATES, which brackets where delayd breaks on 2 cores); short delays: jobs due
#      SHORT_DELAY_MS after publish (these two start once a warm-up job went through delayd);
#      restart recovery (overdue jobs after delayd was down);
#   3. one JSON line per figure into bench/results/e2e.jsonl, then a table; whole_life_max_rate is
#      the highest rate of RATES that held (see e2e_load's report), beside the machine's
#      whole-life limit; <phase>_produce_ack_ms is how long delayd's ready records waited for
#      Kafka's acknowledgement in that phase (read from delayd's /metrics);
#   4. plots with gnuplot (skipped if it is missing): lateness-cdf.png, burst-throughput.png,
#      whole-life.png (lateness against offered whole-life rate, bench/plot-whole-life.gp).
# Raw data (lateness samples, burst buckets, the sweep as data/whole-life.txt, delayd logs) goes
# to bench/results/data/ (ignored). About 7 minutes.
#
#   bench/run-e2e.sh                         the full run (Release build in build-release/)
#   SMOKE=1 BUILD_DIR=build bench/run-e2e.sh tiny sizes with the binaries of BUILD_DIR, results
#                                            under BUILD_DIR/e2e-smoke/ (the ctest bench.e2e_smoke)
#   DELAYD_BIN=/path/delayd LABEL=abc1234 RESULTS_DIR=... bench/run-e2e.sh
#                                            another delayd measured by this tree's e2e_load
#                                            (bench/compare-e2e.sh runs two versions so)
# Sizes (environment; SMOKE's in brackets; set in bench/e2e-sizes.sh, which bench/run-bullmq.sh
#   shares): N_INGEST (200000 [2000]), INGEST_DUE_MS (60000 [3000]), N_BURST (100000 [2000]),
#   BURST_SPREAD_MS (2000), RATES ("1000:20 5000:20 10000:30 20000:30 30000:20 40000:20" ["200:2 500:2"], rate:seconds),
#   SWEEP_SECONDS (unset: the seconds of RATES; set, e.g. 60: every rate runs that long),
#   RATE_DELAY_MS (2000), SHORT_RATE (100), SHORT_SECONDS (20 [2]), SHORT_DELAY_MS (20),
#   RESTART_FAR (900000 [1800]), RESTART_OVERDUE (100000 [200]), RESTART_MARGIN_MS (10000 [3000]),
#   REDIS_BENCH_CALLS (400 calls of 500 jobs [4]), KAFKA_LIMIT_N (= N_INGEST).
# Other settings: BUILD_DIR (binaries built there, nothing built), DELAYD_BIN (the delayd to run;
#   default BUILD_DIR's apps/delayd), DELAYD_LIBRDKAFKA_DIR (another librdkafka for it: a
#   directory with librdkafka.so.1 and librdkafka++.so.1; bench/e2e-delayd.sh; the "run" figure
#   names the one delayd loaded), LABEL (the run's name in the "run" figure and the plots;
#   default this tree's short commit, "+changes" if files differ from it), RESULTS_DIR (bench/results [BUILD_DIR/e2e-smoke]), KEEP_DATA=1
#   (leave topics and Redis keys in place), BUILD_JOBS. Relative paths are from the repository root.
# Exit status: 0 when every job of every phase was delivered and none early; 1 otherwise.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# shellcheck source=e2e-sizes.sh
source "$root/bench/e2e-sizes.sh"
JOBS_PER_CALL=500

say() { echo "e2e: $*" >&2; }
die() { say "error: $*"; exit 1; }
t_start=$SECONDS

# --- binaries -------------------------------------------------------------------------------
# shellcheck source=e2e-delayd.sh
source "$root/bench/e2e-delayd.sh"
find_binaries
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
changes=false
[[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]] || changes=true
if [[ -z "${LABEL:-}" ]]; then
  LABEL="$commit"
  [[ "$changes" == false ]] || LABEL+="+changes"
fi

if [[ "$SMOKE" == 1 ]]; then results="${RESULTS_DIR:-$build/e2e-smoke}"; else results="${RESULTS_DIR:-$root/bench/results}"; fi
data="$results/data"
rm -rf "$data/logs" "$data"/raw-*.jsonl  # the previous run's; this run's stay until the next one
mkdir -p "$data/logs"
# Short names, like a deployment's (prefix "delayd", topic "delay-ingest", ids like "order-123"):
# key and id lengths are part of the bytes per job.
run="e$$"
raw="$data/raw-$run.jsonl"
out="$data/last-output.jsonl"

# --- the stack, and leaving nothing behind ---------------------------------------------------
# shellcheck source=e2e-stack.sh
source "$root/bench/e2e-stack.sh"
use_stack
# shellcheck source=e2e-redis.sh
source "$root/bench/e2e-redis.sh"

pid=""
groups=()
phase_logs=()
phase_forks0=0
cleanup() {
  local status=$?
  stop_delayd
  remove_run "$run" "$run*,{bench}:$run:*" "${groups[@]}"  # nothing with KEEP_DATA=1
  leave_stack
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- delayd, one instance per phase ----------------------------------------------------------
# start_delayd NAME: starts delayd on topics NAME.ingest, NAME.dlq, NAME.ready.{business}, group
# NAME and Redis prefix NAME (bench/e2e-delayd.sh), and returns once its ingest topic's consumer
# has partitions ("assigned NAME.ingest[" in its log). Sets pid, log and started_ms (the epoch ms
# just before the start).
start_delayd() {
  local name="$1"
  log="$data/logs/$name-$(date +%s%3N).log"
  started_ms=$(date +%s%3N)
  launch_delayd "$name" "$log"
  pid=$launched_pid
  groups+=("$name" "$name.delay-status")
  ((${#phase_logs[@]})) || phase_forks0="$(redis_forks)"
  phase_logs+=("$log")
  for _ in $(seq 1 600); do
    if grep -q ": assigned $name.ingest\[" "$log"; then
      admin_port="$(admin_port_of "$log")"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || { tail -n 20 "$log" >&2; pid=""; die "delayd ($name) exited during start-up"; }
    sleep 0.1
  done
  tail -n 20 "$log" >&2
  die "delayd ($name) got no partitions within 60 s (log: $log)"
}
# metrics: delayd's /metrics (its admin endpoint on the port start_delayd found), read over bash's
# /dev/tcp so that no HTTP client is needed; nothing when it cannot be read within 5 s.
metrics() {
  [[ -n "${admin_port:-}" ]] || return 0
  admin_get "$admin_port" /metrics
}
# produce_ack PHASE: how long delayd's ready records waited for Kafka's acknowledgement in this
# phase (delayd_kafka_produce_seconds: from the produce call to the report), as a figure: the mean,
# and the bucket bounds within which p50, p99 and p99.9 lie. A record's timestamp is taken at the
# produce call, so this is the part of the reader's lateness ("at the consumer") that delayd's
# lateness figures cannot show. The whole /metrics page stays in data/logs/metrics-PHASE.txt.
produce_ack() {
  local phase="$1" line count previous="" file="$data/logs/metrics-$phase.txt"
  # delayd publishes its counters about five times a second: read until the count holds still
  # across two reads (the last records' reports may not be published when the load ends).
  for _ in $(seq 1 10); do
    metrics | tr -d '\r' >"$file"
    count="$(awk '/^delayd_kafka_produce_seconds_count / { print $2 }' "$file")"
    [[ -n "$count" && "$count" != 0 && "$count" == "$previous" ]] && break
    previous="$count"
    sleep 0.3
  done
  line="$(awk '
    /^delayd_kafka_produce_seconds_bucket\{le="/ {
      le = $1; sub(/.*le="/, "", le); sub(/".*/, "", le); n++; bound[n] = le; cum[n] = $2 }
    /^delayd_kafka_produce_seconds_sum / { sum = $2 }
    /^delayd_kafka_produce_seconds_count / { count = $2 }
    function at(q,   i) {
      for (i = 1; i <= n; i++) if (cum[i] >= q * count) return bound[i] == "+Inf" ? "null" : bound[i] * 1000
      return "null"
    }
    END {
      if (count > 0)
        printf "\"value\":%.2f,\"unit\":\"ms\",\"count\":%d,\"p50_at_most\":%s,\"p99_at_most\":%s,\"p999_at_most\":%s",
          1000 * sum / count, count, at(0.5), at(0.99), at(0.999)
    }' "$file")"
  [[ -n "$line" ]] || { say "phase $phase: delayd's produce-to-acknowledgement histogram could not be read"; return 0; }
  emit "{\"figure\":\"${phase}_produce_ack_ms\",$line}"
}
# stop_delayd: SIGTERM, and waits until it is gone.
stop_delayd() {
  [[ -n "$pid" ]] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid="" admin_port=""
}

# --- the load generator ----------------------------------------------------------------------
failed=()
# load SUBCOMMAND [options]: runs e2e_load; its JSON lines go to the terminal, to $raw and to $out.
# A broken pipeline (status 3) is remembered and the run goes on; any other failure ends it.
load() {
  local cmd="$1" status=0
  shift
  "$load_bin" "$cmd" --bootstrap "$KAFKA_BOOTSTRAP" --redis-url "$REDIS_URL" --data-dir "$data" "$@" >"$out" || status=$?
  cat "$out"
  cat "$out" >>"$raw"
  if ((status == 3)); then
    failed+=("$cmd")
  elif ((status != 0)); then
    die "e2e_load $cmd failed (status $status)"
  fi
}
# field FIGURE NAME: a numeric field of the first JSON line of that figure in $out.
field() { grep -F "\"figure\":\"$1\"" "$out" | head -n 1 | sed -n "s/.*\"$2\":\(-\{0,1\}[0-9][0-9.]*\).*/\1/p"; }
# text_field FIGURE NAME: a string field (without quotes or escapes) of that figure in $out.
text_field() { grep -F "\"figure\":\"$1\"" "$out" | head -n 1 | sed -n "s/.*\"$2\":\"\([^\"\\]*\)\".*/\1/p"; }
emit() { echo "$1"; echo "$1" >>"$raw"; }
json_string() { printf '"%s"' "$(tr -d '\000-\037' <<<"$1" | sed 's/\\/\\\\/g; s/"/\\"/g')"; }
redis_run_id() { rcli INFO server | tr -d '\r' | awk -F: '$1 == "run_id" { print $2 }'; }
# Forks of Redis so far: with `save ""` (the stack's setting) each is an AOF rewrite, which on two
# cores competes with everything else for a few seconds.
redis_forks() { rcli INFO stats | tr -d '\r' | awk -F: '$1 == "total_forks" { print $2 }'; }
# phase_end PHASE: stops delayd and notes how many warnings and errors its logs of this phase hold
# (on this shared machine they show when something else disturbed the stack, such as a Redis
# restart or pause by another user's fault tests) and how many AOF rewrites Redis ran meanwhile.
phase_end() {
  local phase="$1" count first forks
  produce_ack "$phase"
  stop_delayd
  forks=$(($(redis_forks) - phase_forks0))
  count="$(cat "${phase_logs[@]}" | grep -cE '^[^ ]+ (warning|error|critical) ' || true)"
  first="$(cat "${phase_logs[@]}" | grep -m 1 -E '^[^ ]+ (warning|error|critical) ' || true)"
  emit "{\"figure\":\"${phase}_log\",\"warnings\":$count,\"first_warning\":$(json_string "$first"),\"redis_forks\":$forks}"
  ((count == 0)) || say "delayd logged $count warnings in phase $phase; first: $first"
  phase_logs=()
  fresh_redis "$name*"
}

# fresh_redis MATCH: removes the keys of a finished phase and compacts Redis's AOF, so that each
# phase starts on a Redis holding only its own jobs, as a dedicated deployment would (the AOF
# rewrite forks Redis; after a large phase that fork competes with the next phase for the two
# cores, and on a Redis filled by every earlier phase it would come sooner and last longer).
fresh_redis() {
  [[ "${KEEP_DATA:-0}" == 1 ]] && return 0
  "$load_bin" cleanup --redis-url "$REDIS_URL" --redis-match "$1" >/dev/null 2>>"$data/logs/cleanup-$run.log" ||
    say "cleanup of $1 failed: $(tail -n 1 "$data/logs/cleanup-$run.log")"
  compact_aof
}

emit "{\"figure\":\"run\",\"run\":\"$run\",\"label\":$(json_string "$LABEL"),\"delayd\":$(json_string "$delayd_bin"),\"librdkafka\":$(json_string "$librdkafka_version"),\"smoke\":$([[ "$SMOKE" == 1 ]] && echo true || echo false),\"started_at_ms\":$(date +%s%3N),\"nproc\":$(nproc),\"n_ingest\":$N_INGEST,\"n_burst\":$N_BURST,\"rates\":\"$RATES\",\"rate_delay_ms\":$RATE_DELAY_MS,\"short\":\"$SHORT_RATE:$SHORT_SECONDS\",\"short_delay_ms\":$SHORT_DELAY_MS,\"restart_far\":$RESTART_FAR,\"restart_overdue\":$RESTART_OVERDUE,\"loadavg\":\"$(cut -d' ' -f1-3 /proc/loadavg)\",\"commit\":\"$commit\",\"uncommitted_changes\":$changes,\"delivery\":\"${DELAYD_KAFKA_DELIVERY:-exactly_once}\"}"
run_id_at_start="$(redis_run_id)"

# --- 1a. Redis: a lean job store's scripts with redis-benchmark ------------------------------
# redis_lean STEP VALUE: runs bench/redis-scripts/lean-STEP.lua REDIS_BENCH_CALLS times (4
# clients) and emits jobs/s; prints nothing else.
redis_lean() {
  local step="$1" value="$2" sha csv rps
  sha="$(rcli SCRIPT LOAD "$(cat "$root/bench/redis-scripts/lean-$step.lua")")"
  csv="$(redis-benchmark -h "$redis_host" -p "$redis_port" -c 4 -n "$REDIS_BENCH_CALLS" --csv \
    EVALSHA "$sha" 2 "{bench}:$run:seq:$step" "{bench}:$run:pending" "{bench}:$run:job:" "$JOBS_PER_CALL" "$value")"
  rps="$(tail -n 1 <<<"$csv" | awk -F'","' '{ print $2 }')"
  [[ "$rps" =~ ^[0-9.]+$ ]] || die "redis-benchmark printed no rate for $step: $csv"
  emit "$(awk -v s="$step" -v r="$rps" -v k="$JOBS_PER_CALL" -v c="$REDIS_BENCH_CALLS" \
    'BEGIN { printf "{\"figure\":\"redis_%s_jobs_per_s\",\"value\":%.0f,\"unit\":\"jobs/s\",\"machine\":true,\"calls_per_s\":%s,\"jobs_per_call\":%d,\"calls\":%d}", s, r * k, r, k, c }')"
}
used_memory() { rcli INFO memory | tr -d '\r' | awk -F: '$1 == "used_memory" { print $2 }'; }
bytes_per_job() { # name before after
  emit "$(awk -v n="$1" -v a="$2" -v b="$3" -v j="$((REDIS_BENCH_CALLS * JOBS_PER_CALL))" \
    'BEGIN { printf "{\"figure\":\"%s\",\"value\":%.1f,\"unit\":\"B\",\"machine\":true,\"jobs\":%d}", n, (b - a) / j, j }')"
}
say "machine limits: redis-benchmark, $REDIS_BENCH_CALLS calls x $JOBS_PER_CALL jobs per step"
value240="$(printf 'v%.0s' $(seq 1 240))"
mem0="$(used_memory)"
redis_lean accept "$value240"
mem1="$(used_memory)"
redis_lean claim "1 1900000000000"
redis_lean finish "ready:1900000000000"
mem2="$(used_memory)"
bytes_per_job redis_lean_bytes_per_pending_job "$mem0" "$mem1"
bytes_per_job redis_lean_bytes_per_finished_job "$mem0" "$mem2"
fresh_redis "{bench}:$run:*"

# --- 1b. Kafka alone -------------------------------------------------------------------------
say "machine limits: Kafka, $KAFKA_LIMIT_N records"
load kafka-limit --topic "$run-kafka-limit" --n "$KAFKA_LIMIT_N" --tag "$run-limit"

# --- 2. delayd -------------------------------------------------------------------------------
# cpu_pids: "redis:PID,kafka:PID,delayd:PID" for e2e_load's --cpu-pids (what each spends of the
# two cores during the ingest, burst and whole-life phases); a server whose pid cannot be found
# is left out.
cpu_pids() {
  local servers
  servers="$(server_cpu_pids)"
  echo "${servers:+$servers,}delayd:$pid"
}
# phase NAME: the delayd names of one phase
phase_args() { echo --ingest-topic "$1.ingest" --ready-topic "$1.ready.bench" --group "$1" --tag j; }

say "ingest: $N_INGEST jobs due ${INGEST_DUE_MS} ms after publish"
name="$run-ingest"
start_delayd "$name"
# shellcheck disable=SC2046
load ingest $(phase_args "$name") --n "$N_INGEST" --due-ms "$INGEST_DUE_MS" --stats-match "$name:*stats" \
  --cpu-pids "$(cpu_pids)"
phase_end ingest

say "burst: $N_BURST jobs due over $BURST_SPREAD_MS ms"
name="$run-burst"
start_delayd "$name"
# shellcheck disable=SC2046
load burst $(phase_args "$name") --n "$N_BURST" --spread-ms "$BURST_SPREAD_MS" --cpu-pids "$(cpu_pids)"
phase_end burst

rate_list=()
for spec in $RATES; do
  rate="${spec%%:*}" secs="${spec##*:}"
  rate_list+=("$rate")
  say "whole lives: $rate jobs/s for $secs s, due ${RATE_DELAY_MS} ms after publish"
  name="$run-rate$rate"
  start_delayd "$name"
  # shellcheck disable=SC2046
  load rate $(phase_args "$name") --rate "$rate" --seconds "$secs" --delay-ms "$RATE_DELAY_MS" \
    --cpu-pids "$(cpu_pids)"
  phase_end "rate$rate"
done

say "short delays: $SHORT_RATE jobs/s for $SHORT_SECONDS s, due ${SHORT_DELAY_MS} ms after publish"
name="$run-short" short_figure="lateness_short_${SHORT_DELAY_MS}ms"
start_delayd "$name"
# shellcheck disable=SC2046
load rate $(phase_args "$name") --rate "$SHORT_RATE" --seconds "$SHORT_SECONDS" --delay-ms "$SHORT_DELAY_MS" \
  --figure "$short_figure" --cpu-pids "$(cpu_pids)"
short_cdf="$(text_field "$short_figure" cdf_file)"
phase_end short

say "restart: $RESTART_FAR jobs due in 1 h, $RESTART_OVERDUE due while delayd is down"
name="$run-restart"
start_delayd "$name"
# shellcheck disable=SC2046
load restart-publish $(phase_args "$name") --far "$RESTART_FAR" --overdue "$RESTART_OVERDUE" \
  --margin-ms "$RESTART_MARGIN_MS"
overdue_at="$(field restart_setup overdue_at_ms)"
[[ -n "$overdue_at" ]] || die "restart-publish printed no overdue_at_ms"
stop_delayd
wait_ms=$((overdue_at + 2000 - $(date +%s%3N)))
((wait_ms > 0)) && sleep "$(awk -v ms="$wait_ms" 'BEGIN { printf "%.3f", ms / 1000 }')"
start_delayd "$name"
load restart-measure --ready-topic "$name.ready.bench" --tag j --overdue "$RESTART_OVERDUE" \
  --start-ms "$started_ms" --log "$log"
phase_end restart
run_id_at_end="$(redis_run_id)"
emit "{\"figure\":\"stack\",\"redis_restarted\":$([[ "$run_id_at_start" == "$run_id_at_end" ]] && echo false || echo true),\"loadavg\":\"$(cut -d' ' -f1-3 /proc/loadavg)\"}"
[[ "$run_id_at_start" == "$run_id_at_end" ]] || say "Redis was restarted during the run (by another user of the stack): the figures include it"

# --- 3. report, 4. plots ---------------------------------------------------------------------
echo
"$load_bin" report --in "$raw" --out "$results/e2e.jsonl" --data-dir "$data" || true
if command -v gnuplot >/dev/null; then
  gnuplot -e "data='$data'; out='$results'; rates='${rate_list[*]}'; short='$short_cdf'" "$root/bench/plot-e2e.gp" &&
    say "plots: $results/lateness-cdf.png, $results/burst-throughput.png"
  if [[ -s "$data/whole-life.txt" ]]; then
    gnuplot -e "files='$data/whole-life.txt'; out='$results/whole-life.png'" "$root/bench/plot-whole-life.gp" &&
      say "plot: $results/whole-life.png"
  fi
else
  say "gnuplot not found: plots skipped (Debian package gnuplot-nox)"
fi

say "results: $results/e2e.jsonl ($((SECONDS - t_start)) s)"
if ((${#failed[@]})); then
  say "pipeline broken in: ${failed[*]}"
  exit 1
fi
say "pipeline whole: every job delivered, none early"
