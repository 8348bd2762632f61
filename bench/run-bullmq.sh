#!/usr/bin/env bash
# BullMQ, the peer users compare delayd with, through the phases of bench/run-e2e.sh with the
# same sizes (bench/e2e-sizes.sh), on the same Redis: its durable ingest, Redis bytes per pending
# job, fire capacity (a burst due over 2 s), whole-life sweep and short delays, measured by
# bench/bullmq/peer_load.mjs (its header says how each is taken). bench/compare-e2e.sh runs it
# after its two delayd runs, so that its figures sit in the same table, from the same hour.
#
#   bench/run-bullmq.sh                          the full run (about 5 minutes)
#   SMOKE=1 BUILD_DIR=build bench/run-bullmq.sh  tiny sizes (the ctest bench.bullmq_smoke)
#
#   1. installs bench/bullmq's packages (BullMQ and ioredis at the versions of its
#      package-lock.json; scripts/npm-ci.sh), compacts Redis's AOF as run-e2e.sh does before a phase;
#   2. runs peer_load.mjs on a queue prefix of its own (bullmq-bench-<run>, removed at the end);
#   3. e2e_load report: adds whole_life_max_rate (the same p99 bound as delayd's), writes
#      RESULTS_DIR/e2e.jsonl and data/whole-life.txt (bench/plot-whole-life.gp draws it beside
#      delayd's curves), prints the table.
# Settings (environment): the sizes of bench/e2e-sizes.sh (RATES past what BullMQ holds are cut
# short: the sweep stops after a rate whose p50 is over 2 s), BULLMQ_CONCURRENCY (the Worker's
# concurrency, 200), RESULTS_DIR (bench/results/bullmq [BUILD_DIR/bullmq-smoke]), BUILD_DIR (where
# bench/e2e_load is; default build-release/, built by run-e2e.sh), REDIS_URL (default the stack's,
# which must be up).
# Exit status: 0 when every job of every phase was processed (an early one is BullMQ's behaviour,
# reported in the checks); 1 otherwise; under SMOKE=1 without node or npm, the rule of
# tests/support/requires.sh (skipped, 77; failed under CI).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# shellcheck source=e2e-sizes.sh
source "$root/bench/e2e-sizes.sh"
say() { echo "bullmq: $*" >&2; }
die() { say "error: $*"; exit 1; }

for tool in node npm; do
  command -v "$tool" >/dev/null 2>&1 && continue
  if [[ "$SMOKE" == 1 ]]; then
    # shellcheck source=../tests/support/requires.sh
    source tests/support/requires.sh
    missing_tool "$tool not found (Debian packages nodejs and npm)"
  fi
  die "$tool not found (Debian packages nodejs and npm)"
done
if [[ -n "${BUILD_DIR:-}" ]]; then build="$(cd "$BUILD_DIR" && pwd)"; else build="$root/build-release"; fi
load_bin="$build/bench/e2e_load"
[[ -x "$load_bin" ]] || die "no $load_bin: run bench/run-e2e.sh first, or set BUILD_DIR"
results="${RESULTS_DIR:-$root/bench/results/bullmq}"
[[ "$SMOKE" != 1 ]] || results="${RESULTS_DIR:-$build/bullmq-smoke}"
data="$results/data"
mkdir -p "$data"
if [[ -z "${REDIS_URL:-}" ]]; then
  scripts/stack.sh status >/dev/null 2>&1 || die "the stack is not up: start it (scripts/stack.sh up) or set REDIS_URL"
  eval "$(scripts/stack.sh env | sed 's/^/export /')"
fi
# shellcheck source=e2e-redis.sh
source "$root/bench/e2e-redis.sh"

scripts/npm-ci.sh bench/bullmq
compact_aof  # as before each of run-e2e.sh's phases

raw="$data/raw.jsonl"
status=0
node bench/bullmq/peer_load.mjs --redis-url "$REDIS_URL" --tag "b$$" --n-ingest "$N_INGEST" \
  --n-burst "$N_BURST" --spread-ms "$BURST_SPREAD_MS" --rates "$RATES" --rate-delay-ms "$RATE_DELAY_MS" \
  --short "$SHORT_RATE:$SHORT_SECONDS" --short-delay-ms "$SHORT_DELAY_MS" \
  --concurrency "${BULLMQ_CONCURRENCY:-200}" >"$raw" || status=$?
((status == 0 || status == 1)) || die "peer_load.mjs failed (status $status)"
[[ -s "$raw" ]] || die "peer_load.mjs wrote no figures"
echo
# The report's own status speaks of delayd's rule (none early); BullMQ's checks are printed by it,
# and this script's status is peer_load's: every job processed.
"$load_bin" report --in "$raw" --out "$results/e2e.jsonl" --data-dir "$data" || true
say "results: $results/e2e.jsonl"
((status == 0)) || say "BullMQ did not process every job (see the checks)"
exit "$status"
