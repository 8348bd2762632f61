#!/usr/bin/env bash
# Does browsing the console move delivery lateness? delayd (release build, admin endpoint on) holds
# PENDING far-future jobs of one business; then `e2e_load rate` publishes RATE jobs/s due
# DELAY_MS after publish for ROUND_SECONDS s and measures each one's lateness through the ready topic,
# ROUNDS times without and ROUNDS times with bench/console-browser.py paging GET /jobs at
# BROWSE_RATE pages/s (alternating, and the order of the two alternating from round to round, so
# that drift of the machine hits both alike). Prints one JSON
# object per line: e2e_load's lateness figures, tagged "browsing": true|false, and the browser's
# page latencies. Starts the stack if it is not up (and stops it again after).
# REDIS_FIRST=1: Redis runs first in line for the CPU (real-time priority, which its AOF rewrite
# child does not inherit) and rewrites its AOF before the rounds rather than during them: what a
# deployment that gives Redis a core of its own sees, on a machine where it shares two. Undone at
# the end.
#   RATE=5000 ROUND_SECONDS=30 ROUNDS=2 BROWSE_RATE=10 [REDIS_FIRST=1] bench/run-console-lateness.sh
#   SMOKE=1 BUILD_DIR=build bench/run-console-lateness.sh   one round of 2 s at 200 jobs/s over 500
#                                   pending, the binaries of BUILD_DIR (the ctest bench.console_lateness_smoke)
set -euo pipefail
if [[ "${SMOKE:-0}" == 1 ]]; then
  RATE="${RATE:-200}" ROUND_SECONDS="${ROUND_SECONDS:-2}" ROUNDS="${ROUNDS:-1}" BROWSE_RATE="${BROWSE_RATE:-5}"
  PENDING="${PENDING:-500}"
fi
RATE="${RATE:-5000}" SECONDS_PER_ROUND="${ROUND_SECONDS:-30}" ROUNDS="${ROUNDS:-2}" BROWSE_RATE="${BROWSE_RATE:-10}"
DELAY_MS="${DELAY_MS:-2000}" PENDING="${PENDING:-200000}"
# shellcheck source=bench/console-delayd.sh
. "$(dirname "${BASH_SOURCE[0]}")/console-delayd.sh" console-lat
browser=""
args=(--bootstrap "$KAFKA_BOOTSTRAP" --redis-url "$REDIS_URL" --ingest-topic "$run.ingest"
  --ready-topic "$run.ready.bench" --group "$run" --data-dir "$build")
# The jobs to browse: far in the future, so that they never fire during the rounds; published with
# kcat, then waited for in Redis (GET /overview).
far=$(($(date +%s%3N) + 86400000))
seq -f "far %08g" 1 "$PENDING" | kcat -P -b "$KAFKA_BOOTSTRAP" -t "$run.ingest" -H "deliver-at=$far" -H business=bench -X linger.ms=20
pending=$(bench_wait_pending "$PENDING")
echo "{\"figure\":\"pending_to_browse\",\"value\":$pending}"
if [[ "${REDIS_FIRST:-0}" == 1 ]]; then
  rcli=(redis-cli -u "$REDIS_URL")
  redis_pid=$("${rcli[@]}" INFO server | tr -d '\r' | sed -n 's/^process_id://p')
  rewrite_pct=$("${rcli[@]}" CONFIG GET auto-aof-rewrite-percentage | tail -n 1)
  redis_first_undo() {
    chrt -o -p 0 "$redis_pid" >/dev/null 2>&1 || true
    "${rcli[@]}" CONFIG SET auto-aof-rewrite-percentage "$rewrite_pct" >/dev/null 2>&1 || true
    bench_cleanup
  }
  trap redis_first_undo EXIT
  "${rcli[@]}" BGREWRITEAOF >/dev/null || true  # (an error if one is under way: then that one)
  while "${rcli[@]}" INFO persistence | tr -d '\r' | grep -Eq '^aof_rewrite_(in_progress|scheduled):1'; do sleep 0.5; done
  "${rcli[@]}" CONFIG SET auto-aof-rewrite-percentage 0 >/dev/null
  chrt -f -R -p 10 "$redis_pid"
  echo "{\"figure\":\"redis_first\",\"pid\":$redis_pid,\"policy\":\"$(chrt -p "$redis_pid" | head -n 1 | sed 's/.*: //')\"}"
fi
for round in $(seq 1 "$ROUNDS"); do
  # Odd rounds without browsing first, even rounds with: neither comes first always.
  order="false true"
  ((round % 2 == 0)) && order="true false"
  for browsing in $order; do
    if [[ "$browsing" == true ]]; then
      python3 bench/console-browser.py --port "$port" --rate "$BROWSE_RATE" \
        --filter 'state=delay&business=bench' --filter 'state=delay' --filter 'state=ready&business=bench' \
        >"$build/$run.browser" &
      browser=$!
      bench_extra_pid=$browser
    fi
    "$build/bench/e2e_load" rate "${args[@]}" --tag "r$round$browsing" --rate "$RATE" --seconds "$SECONDS_PER_ROUND" \
      --delay-ms "$DELAY_MS" --figure "lateness_${RATE}_per_s" | sed "s/^{/{\"browsing\":$browsing,\"round\":$round,/"
    if [[ -n "$browser" ]]; then
      kill -TERM "$browser"
      wait "$browser" || true
      browser="" bench_extra_pid=""
      sed "s/^{/{\"round\":$round,/" "$build/$run.browser"
    fi
  done
done
