#!/usr/bin/env bash
# clients/python's README names examples/python/schedule_and_work.py: it runs here against a real
# delayd, as the README says to run it (its business, its topics given), and must end by itself
# once it has worked off its three jobs (a cancelled one never comes), within 60 s.
#   usage: python_example_test.sh /path/to/delayd /path/to/schedule_and_work.py
# Without a python3 that can import confluent_kafka: skipped (exit 77), or failed under CI=true.
set -euo pipefail
DELAYD="$1" EXAMPLE="$2"
# shellcheck source=../support/requires.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/requires.sh"
# shellcheck source=../support/delayd_world.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/delayd_world.sh"
PY=""
for p in ${PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import confluent_kafka' 2>/dev/null; then PY="$p"; break; fi
done
[[ -n "$PY" ]] || missing_tool "no python3 can import confluent_kafka (Debian package python3-confluent-kafka; scripts/install-deps.sh installs it)"

world_env python-example
export DELAYD_KAFKA_STATUS_TOPIC="$run.status"
start_delayd "$DELAYD"
out=$(timeout 60 "$PY" "$EXAMPLE" --bootstrap "$KAFKA_BOOTSTRAP" --business demo --ingest-topic "$run.ingest" \
  --status-topic "$run.status" --ready-topic "$run.ready.demo" 2>&1) ||
  { echo "$out"; cat "$log"; echo "FAIL: the example did not work off its jobs within 60 s"; exit 1; }
echo "$out"
n=$(grep -c " attempt 1: " <<<"$out" || true)
[[ "$n" == 3 ]] || { echo "FAIL: the example worked $n jobs, expected 3"; exit 1; }
echo "python example: 3 jobs scheduled, one cancelled, one moved, each worked off once"
