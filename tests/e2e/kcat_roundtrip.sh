#!/usr/bin/env bash
# A client this project did not write: kcat publishes a delayed message and reads it back from
# the ready topic; redis-cli reads the job's state. delayd creates the topics itself here
# (kafka.create_topics = true), as in the README's quick start.
#   usage: kcat_roundtrip.sh /path/to/delayd
# Without kcat or redis-cli: skipped (exit 77), or failed under CI=true (support/requires.sh).
set -euo pipefail
DELAYD="$1"
# shellcheck source=../support/requires.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/requires.sh"
require_tool kcat "Debian package kcat; scripts/install-deps.sh installs it"
require_tool redis-cli "Debian package redis-tools; scripts/install-deps.sh installs it"
# shellcheck source=../support/delayd_world.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/delayd_world.sh"

world_env kcat
start_delayd "$DELAYD"

deliver_at=$(($(date +%s%3N) + 2000))
echo "hello from kcat" | kcat -P -b "$KAFKA_BOOTSTRAP" -t "$run.ingest" -k order-1 \
  -H "deliver-at=$deliver_at" -H business=demo -H job-id="$run-job"

wait_for_topic "$run.ready.demo"
# -c 1: exit after the first message.
out=$(timeout 60 kcat -C -b "$KAFKA_BOOTSTRAP" -t "$run.ready.demo" -o beginning -c 1 \
  -f 'key=%k value=%s ts=%T headers=%h\n' -m 30 2>/dev/null || true)
echo "ready record: $out"
[[ "$out" == *"value=hello from kcat"* ]] || { cat "$log"; echo "FAIL: no ready record"; exit 1; }
[[ "$out" == *"key=order-1"* ]] || { echo "FAIL: key not carried"; exit 1; }
[[ "$out" == *"job-id=$run-job"* ]] || { echo "FAIL: job-id header missing"; exit 1; }
ts=$(sed -E 's/.* ts=([0-9]+) .*/\1/' <<<"$out")
((ts >= deliver_at)) || { echo "FAIL: delivered early: ts $ts < deliver-at $deliver_at"; exit 1; }
echo "delivered $((ts - deliver_at)) ms after deliver-at"

# redis-cli takes redis:// and rediss:// urls; for a cluster (redis-cluster://h:p,h:p,...) it is
# pointed at every primary (from CLUSTER NODES of the first seed) with -c (follow redirects), and
# SCAN runs on each of them. Over TLS, REDIS_CLI_TLS (scripts/stack.sh env) holds its arguments.
# shellcheck disable=SC2086
rcli() { redis-cli ${REDIS_CLI_TLS:-} "$@"; }
cli_targets=()
if [[ "$REDIS_URL" == redis-cluster://* || "$REDIS_URL" == redis-cluster+tls://* ]]; then
  seed="${REDIS_URL#*://}"
  seed="${seed%%,*}"
  while read -r addr; do
    addr="${addr%@*}"
    cli_targets+=("-c -h ${addr%:*} -p ${addr##*:}")
  done < <(rcli -h "${seed%:*}" -p "${seed##*:}" cluster nodes | awk '$3 ~ /master/ && $3 !~ /fail/ {print $2}')
else
  cli_targets=("-u $REDIS_URL")
fi
state=""
for _ in $(seq 1 50); do
  # The documented look-up without delayctl: find the job's key in whichever shard holds it,
  # then the record's first word is its state.
  key=""
  for t in "${cli_targets[@]}"; do
    # shellcheck disable=SC2086
    key=$(rcli $t --scan --pattern "$run:{*}:job:$run-job" | head -n 1)
    [[ -n "$key" ]] && break
  done
  state=""
  # shellcheck disable=SC2086
  [[ -n "$key" ]] && state=$(rcli ${cli_targets[0]} getrange "$key" 0 40 | head -n 1 | cut -d' ' -f1)
  [[ "$state" == ready ]] && break
  sleep 0.1
done
[[ "$state" == ready ]] || { echo "FAIL: state is '$state', not ready"; exit 1; }
echo "1 passed, 0 failed"
