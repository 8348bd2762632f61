#!/usr/bin/env bash
# Compressed payloads: what redis.compress_payloads_above_bytes saves in Redis and costs in CPU,
# on realistic values (docs/performance/compression.md, "Compressed payloads"). A corpus of JSON documents
# of about 1 KiB (bench/json_corpus.py: order timeouts and reminders) is published as N jobs due
# DUE_MS after publish, through bench/e2e_load's ingest phase, against three delayds, each on
# topics, a group and a Redis prefix of its own, alternated for ROUNDS rounds: one that
# compresses nothing (variant "none": redis.compress_payloads_above_bytes 0), one that compresses
# each payload alone ("alone": 512, redis.compression_dictionary false) and one with the defaults
# ("dictionary": 512, a dictionary trained from its first 1 000 payloads). Per run: Redis bytes per pending job, the
# accept rate, CPU per accepted job (delayd, Redis, Kafka), and every job delivered once, none
# early, each ready record's value the one published ("altered": 0).
#
#   bench/run-compression.sh                          Release build in build-release/, N=50000
#   SMOKE=1 BUILD_DIR=build bench/run-compression.sh  2 000 jobs, one round (the ctest
#                                                     bench.compression_smoke): fails only when a
#                                                     job is lost, early or altered
# Settings: N (50000 [2000]), DUE_MS (30000 [5000]), ROUNDS (2 [1]), CORPUS (2000 distinct
#   documents), VARIED (0; 1: json_corpus.py --varied, values that share less), BUILD_DIR,
#   RESULTS_DIR (bench/results/compression [BUILD_DIR/compression-smoke]).
# Writes RESULTS_DIR/compression.jsonl (e2e_load's lines with "variant", "threshold" and "round"
# added) and prints a table: per variant the medians, and each compressed one over "none".
# Exit status: 0 when every job of every run was delivered once, none early, none altered.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
say() { echo "compression: $*" >&2; }
die() { say "error: $*"; exit 1; }

SMOKE="${SMOKE:-0}"
if [[ "$SMOKE" == 1 ]]; then N="${N:-2000}" DUE_MS="${DUE_MS:-5000}" ROUNDS="${ROUNDS:-1}"; fi
N="${N:-50000}" DUE_MS="${DUE_MS:-30000}" ROUNDS="${ROUNDS:-2}" CORPUS="${CORPUS:-2000}" VARIED="${VARIED:-0}"

# shellcheck source=e2e-delayd.sh
source "$root/bench/e2e-delayd.sh"
find_binaries
if [[ "$SMOKE" == 1 ]]; then results="${RESULTS_DIR:-$build/compression-smoke}"; else results="${RESULTS_DIR:-$root/bench/results/compression}"; fi
data="$results/data"
mkdir -p "$data/logs"
out="$results/compression.jsonl"
: >"$out"
run="z$$"
corpus="$data/corpus.jsonl"
corpus_args=("$CORPUS")
[[ "$VARIED" == 1 ]] && corpus_args+=(1 --varied)
python3 "$root/bench/json_corpus.py" "${corpus_args[@]}" >"$corpus"
say "corpus: $CORPUS documents, $(awk '{ n += length($0) } END { printf "%.0f", n / NR }' "$corpus") bytes on average"

# shellcheck source=e2e-stack.sh
source "$root/bench/e2e-stack.sh"
use_stack
# shellcheck source=e2e-redis.sh
source "$root/bench/e2e-redis.sh"

pid="" names=()
stop_delayd() {
  [[ -n "$pid" ]] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=""
}
cleanup() {
  local status=$? name
  stop_delayd
  for name in "${names[@]}"; do remove_run "$name" "$name*" "$name" "$name.delay-status"; done
  leave_stack
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_delayd NAME THRESHOLD DICTIONARY: one delayd with redis.compress_payloads_above_bytes
# THRESHOLD and redis.compression_dictionary DICTIONARY; returns once its ingest consumer has
# partitions.
start_delayd() {
  local name="$1" threshold="$2" dictionary="$3" log="$data/logs/$1.log"
  DELAYD_REDIS_COMPRESS_PAYLOADS_ABOVE_BYTES="$threshold" DELAYD_REDIS_COMPRESSION_DICTIONARY="$dictionary" \
    launch_delayd "$name" "$log"
  pid=$launched_pid
  names+=("$name")
  wait_assigned "$name" "$log" "$pid"
}

# check_metrics NAME LABEL THRESHOLD ROUND: what delayd's /metrics says it compressed (payloads,
# their bytes before and as stored, the dictionary's id), recorded as the figure
# metrics_compression; a variant that compresses must show fewer bytes stored than encoded (and
# the dictionary variant a dictionary), the one that does not, no payload: else the run fails.
check_metrics() {
  local name="$1" label="$2" threshold="$3" round="$4" text payloads encoded stored dict
  text="$(admin_get "$(admin_port_of "$data/logs/$name.log")" /metrics | tr -d '\r')"
  sample() { awk -v s="$1" '$1 == s { printf "%.0f", $2 + 0; found = 1 } END { if (!found) printf "-1" }' <<<"$text"; }
  payloads="$(sample delayd_payloads_compressed_total)" dict="$(sample delayd_compression_dictionary)"
  encoded="$(sample 'delayd_payload_bytes_total{form="encoded"}')" stored="$(sample 'delayd_payload_bytes_total{form="stored"}')"
  printf '{"variant":"%s","threshold":%s,"round":%s,"figure":"metrics_compression","payloads":%s,"encoded_bytes":%s,"stored_bytes":%s,"dictionary":%s}\n' \
    "$label" "$threshold" "$round" "$payloads" "$encoded" "$stored" "$dict" | tee -a "$out"
  case "$label" in
    none) ((payloads == 0)) ;;
    alone) ((payloads > 0 && stored > 0 && stored < encoded && dict == 0)) ;;
    dictionary) ((payloads > 0 && stored > 0 && stored < encoded && dict > 0)) ;;
  esac || { say "round $round, $label: /metrics does not show what this variant compressed"; failed=1; }
}

failed=0
for ((round = 1; round <= ROUNDS; round++)); do
  for variant in none:0:false alone:512:false dictionary:512:true; do
    IFS=: read -r label threshold dictionary <<<"$variant"
    name="$run-$label-r$round"
    say "round $round: $label (redis.compress_payloads_above_bytes = $threshold, redis.compression_dictionary = $dictionary), $N jobs"
    start_delayd "$name" "$threshold" "$dictionary"
    status=0
    "$load_bin" ingest --bootstrap "$KAFKA_BOOTSTRAP" --redis-url "$REDIS_URL" --data-dir "$data" \
      --ingest-topic "$name.ingest" --ready-topic "$name.ready.bench" --group "$name" --tag j \
      --n "$N" --due-ms "$DUE_MS" --stats-match "$name:*stats" --values "$corpus" \
      --cpu-pids "$(server_cpu_pids),delayd:$pid" >"$data/last.jsonl" || status=$?
    sed "s/^{/{\"variant\":\"$label\",\"threshold\":$threshold,\"round\":$round,/" "$data/last.jsonl" | tee -a "$out"
    ((status == 0)) || { say "round $round, $label: e2e_load ingest failed (status $status)"; failed=1; }
    check_metrics "$name" "$label" "$threshold" "$round"
    stop_delayd
    remove_run "$name" "$name*" "$name" "$name.delay-status"
    compact_aof
  done
done

# The table: medians over the rounds, per variant, and each compressed variant's over none's.
echo
awk '
  function num(line, key,   m) { if (match(line, "\"" key "\":-?[0-9.e+]+")) { m = substr(line, RSTART, RLENGTH); sub(/^[^:]*:/, "", m); return m + 0 } return "" }
  function median(name, t,   n, i, j, a, x) {
    n = cnt[name, t]; for (i = 1; i <= n; i++) a[i] = val[name, t, i]
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  function add(name, t, v) { if (v != "") val[name, t, ++cnt[name, t]] = v }
  {
    if (!match($0, /"variant":"[a-z]+"/)) next
    t = substr($0, RSTART + 11, RLENGTH - 12)
    if ($0 ~ /"figure":"redis_bytes_per_pending_job"/) add("bytes", t, num($0, "value"))
    if ($0 ~ /"figure":"ingest_jobs_per_s"/) add("rate", t, num($0, "value"))
    if ($0 ~ /"figure":"ingest_cpu"/) {
      add("delayd", t, num($0, "delayd_us_per_job")); add("redis", t, num($0, "redis_us_per_job"))
      add("kafka", t, num($0, "kafka_us_per_job"))
    }
  }
  END {
    split("bytes rate delayd redis kafka", names, " ")
    label["bytes"] = "Redis bytes per pending job"; label["rate"] = "accept rate, jobs/s"
    label["delayd"] = "delayd CPU per accepted job, us"; label["redis"] = "Redis CPU per accepted job, us"
    label["kafka"] = "Kafka CPU per accepted job, us"
    printf "%-34s %10s %10s %10s %8s %8s\n", "figure (medians)", "none", "alone", "dictionary", "alone/", "dict/"
    for (i = 1; i <= 5; i++) {
      k = names[i]; if (!cnt[k, "none"] || !cnt[k, "alone"] || !cnt[k, "dictionary"]) continue
      a = median(k, "none"); b = median(k, "alone"); c = median(k, "dictionary")
      printf "%-34s %10.1f %10.1f %10.1f %8.2f %8.2f\n", label[k], a, b, c, a ? b / a : 0, a ? c / a : 0
    }
  }' "$out" | tee "$results/table.txt"
((failed == 0)) || { say "a run lost, altered or delivered early some jobs: see $out"; exit 1; }
