#!/usr/bin/env bash
# Shell helpers for tests that drive a real delayd with outside clients (kcat, Python): a world of
# its own on the local stack (topics, group and Redis prefix named after the run), and waits for
# what delayd creates. Sourced, not run:  source "$(dirname "$0")/../support/delayd_world.sh"
# Needs KAFKA_BOOTSTRAP and REDIS_URL (scripts/stack.sh env); set -euo pipefail is the caller's.

: "${KAFKA_BOOTSTRAP:?KAFKA_BOOTSTRAP is not set: start the stack (scripts/stack.sh up) and export its env}"
: "${REDIS_URL:?REDIS_URL is not set}"

# world_env NAME: sets `run` (NAME-<pid>-<ns>, unique) and `log` ($PWD/delayd-<run>.log), and
# exports the DELAYD_* settings of a world named after it: <run>.ingest, <run>.dlq,
# <run>.ready.{business}, group and Redis prefix <run>; delayd creates its topics.
world_env() {
  run="$1-$$-$(date +%s%N)"
  log="$PWD/delayd-$run.log"
  export DELAYD_KAFKA_BOOTSTRAP="$KAFKA_BOOTSTRAP" DELAYD_REDIS_URL="$REDIS_URL"
  export DELAYD_KAFKA_INGEST_TOPIC="$run.ingest" DELAYD_KAFKA_DLQ_TOPIC="$run.dlq"
  export DELAYD_KAFKA_READY_TOPIC_TEMPLATE="$run.ready.{business}" DELAYD_KAFKA_GROUP_ID="$run"
  export DELAYD_REDIS_PREFIX="$run" DELAYD_KAFKA_CREATE_TOPICS=true
}

# start_delayd PATH: starts delayd (output to $log), stops it when the script exits, and returns
# once it has partitions (60 s at most); exits 1 with its log if it dies or gets none. Sets `pid`.
start_delayd() {
  "$1" >"$log" 2>&1 &
  pid=$!
  trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
  for _ in $(seq 1 600); do
    grep -q assigned "$log" && break
    kill -0 "$pid" 2>/dev/null || { cat "$log"; echo "FAIL: delayd exited"; exit 1; }
    sleep 0.1
  done
  grep -q assigned "$log" || { cat "$log"; echo "FAIL: delayd got no partitions"; exit 1; }
}

# wait_for_topic TOPIC: until Kafka lists partition 0 of TOPIC (30 s at most). delayd creates a
# ready topic when it accepts the business's first job, and a consumer sees it only after that.
wait_for_topic() {
  for _ in $(seq 1 300); do
    kcat -L -b "$KAFKA_BOOTSTRAP" -t "$1" 2>/dev/null | grep -q "partition 0" && return 0
    sleep 0.1
  done
}
