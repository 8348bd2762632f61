#!/usr/bin/env bash
# The README's worker, examples/lifecycle_consumer.py, against a real delayd: kcat publishes four
# jobs of a business that keeps payloads and allows 2 attempts; the worker reports every second
# record failed and exits after 6 records; delayctl get must then show each job finished or failed
# as the worker's reports say, the dead-letter topic must hold the one job that failed twice, and
# the ready topic exactly the 6 deliveries.
#   usage: lifecycle_consumer_test.sh /path/to/delayd /path/to/delayctl /path/to/lifecycle_consumer.py
# Without kcat or a python3 that can import confluent_kafka: skipped (exit 77), or failed under
# CI=true (support/requires.sh).
set -euo pipefail
DELAYD="$1" DELAYCTL="$2" EXAMPLE="$3"
# shellcheck source=../support/requires.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/requires.sh"
require_tool kcat "Debian package kcat; scripts/install-deps.sh installs it"
# shellcheck source=../support/delayd_world.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/delayd_world.sh"

# Debian's python3-confluent-kafka is installed for /usr/bin/python3; a python3 of its own earlier
# on PATH (pyenv, a virtualenv) may not have it.
PY=""
for p in ${PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import confluent_kafka' 2>/dev/null; then PY="$p"; break; fi
done
[[ -n "$PY" ]] || missing_tool "no python3 can import confluent_kafka (Debian package python3-confluent-kafka; scripts/install-deps.sh installs it)"

world_env lifecycle
export DELAYD_KAFKA_STATUS_TOPIC="$run.status"
# A retry comes 1.5-3 s after its failed report, so the four first deliveries (all due at once)
# reach the worker before any retry: then records 2 and 4 fail at attempt 1, and of their two
# retries (records 5 and 6) the first finishes and the second fails for good.
export DELAYD_SCHEDULER_BUSINESS="demo.keep_payload=true,demo.max_process_attempts=2,demo.process_retry_base_ms=3000"

start_delayd "$DELAYD"

jobs=("$run-1" "$run-2" "$run-3" "$run-4")
deliver_at=$(($(date +%s%3N) + 2000))
for id in "${jobs[@]}"; do
  echo "work for $id" | kcat -P -b "$KAFKA_BOOTSTRAP" -t "$run.ingest" -k "$id" \
    -H "deliver-at=$deliver_at" -H business=demo -H job-id="$id"
done

wait_for_topic "$run.ready.demo"

out=$(timeout 120 "$PY" "$EXAMPLE" --bootstrap "$KAFKA_BOOTSTRAP" --ready-topic "$run.ready.demo" \
  --status-topic "$run.status" --group "$run.worker" --fail-every 2 --count 6 --work-ms 50) \
  || { echo "$out"; cat "$log"; echo "FAIL: the worker did not get 6 records"; exit 1; }
echo "worker:"; echo "$out"

# What the worker's lines say each job must end as: finished after a finished report, failed
# after a failed report at attempt 2 (the last one allowed).
declare -A expect
finished=0 dead=0
for id in "${jobs[@]}"; do
  lines=$(grep "^$id attempt=" <<<"$out" | cut -d' ' -f2- | paste -sd, -)
  case "$lines" in
    "attempt=1 finished") expect[$id]=finished ;;
    "attempt=1 failed,attempt=2 finished") expect[$id]=finished ;;
    "attempt=1 failed,attempt=2 failed") expect[$id]=failed ;;
    *) echo "FAIL: $id: the worker saw '$lines'"; exit 1 ;;
  esac
  [[ ${expect[$id]} == finished ]] && finished=$((finished + 1)) || dead=$((dead + 1))
done
((finished == 3 && dead == 1)) || { echo "FAIL: expected 3 finished and 1 failed, got $finished and $dead"; exit 1; }

field() { "$PY" -c 'import json,sys; j=json.load(sys.stdin); print(j.get(sys.argv[1], ""))' "$1"; }
events() { "$PY" -c 'import json,sys; print(" ".join(h["event"] for h in json.load(sys.stdin).get("history", [])))'; }
fail=0
for id in "${jobs[@]}"; do
  state=""
  for _ in $(seq 1 100); do  # reports are applied asynchronously: up to 20 s
    json=$("$DELAYCTL" get "$id" 2>/dev/null || true)
    state=$(field state <<<"$json" 2>/dev/null || true)
    [[ "$state" == "${expect[$id]}" ]] && break
    sleep 0.2
  done
  ev=$(events <<<"$json" 2>/dev/null || true)
  echo "$id: state=$state attempt=$(field attempt <<<"$json") history: $ev"
  if [[ "$state" != "${expect[$id]}" ]]; then
    echo "FAIL: $id is '$state', expected ${expect[$id]}"; echo "$json"; fail=1
  elif [[ "$state" == failed ]]; then
    err=$(field error <<<"$json")
    [[ "$err" == "reported failed after 2 attempts: pretend failure of record"* ]] \
      || { echo "FAIL: $id: error is '$err'"; fail=1; }
    [[ " $ev " == *" dead "* ]] || { echo "FAIL: $id: no 'dead' in its history"; fail=1; }
  elif grep -q "^$id attempt=1 failed" <<<"$out"; then
    [[ " $ev " == *" failed "* && " $ev " == *" finished "* ]] \
      || { echo "FAIL: $id: history lacks the failed attempt or the finish"; fail=1; }
  fi
done
((fail == 0)) || { cat "$log"; exit 1; }

# The dead-letter topic: the job that failed twice, with its value and the reason.
dlq=$(timeout 30 kcat -C -b "$KAFKA_BOOTSTRAP" -t "$run.dlq" -o beginning -e -q -f '%k|%s|%h\n' 2>/dev/null || true)
echo "dead letters: $dlq"
[[ $(grep -c . <<<"$dlq") == 1 ]] || { echo "FAIL: expected one dead letter"; exit 1; }
for id in "${jobs[@]}"; do
  [[ ${expect[$id]} == failed ]] || continue
  [[ "$dlq" == "$id|work for $id|"* ]] || { echo "FAIL: the dead letter is not $id's record"; exit 1; }
  [[ "$dlq" == *"error=reported failed after 2 attempts"* ]] || { echo "FAIL: the dead letter's error"; exit 1; }
done

# Finished and failed jobs are not delivered again: the ready topic holds exactly 6 records.
sleep 4
ready=$(timeout 30 kcat -C -b "$KAFKA_BOOTSTRAP" -t "$run.ready.demo" -o beginning -e -q -f '%k\n' 2>/dev/null | grep -c . || true)
[[ "$ready" == 6 ]] || { echo "FAIL: the ready topic holds $ready records, not 6"; exit 1; }
echo "1 passed, 0 failed"
