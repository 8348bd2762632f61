#!/usr/bin/env bash
# The two delivery modes through the same end-to-end benchmark, back to back on the same stack
# and the same delayd: kafka.delivery = at_least_once (one idempotent producer), then
# exactly_once (a transactional producer per shard; docs/guarantees.md). Both are measured by
# bench/run-e2e.sh and e2e_load, each run measuring the machine's limits again, so that only the
# mode differs; then the main figures side by side (e2e_load compare: "before" is
# at_least_once, "after" exactly_once), and the ratio the issue asks for, the fire capacity with
# transactions over that without.
#
#   bench/compare-delivery.sh                          Release build in build-release/
#   SMOKE=1 BUILD_DIR=build bench/compare-delivery.sh  tiny sizes (run-e2e.sh's SMOKE), this build
#                                                      (the ctest bench.compare_delivery_smoke)
# Settings: RESULTS_DIR (bench/results/delivery; with SMOKE=1 <build dir>/delivery-smoke),
#   EXACTLY_ONCE_RESULTS (a directory holding an exactly_once run's e2e.jsonl, run-e2e.sh's
#   default mode, to compare with instead of running it again: the smoke uses bench.e2e_smoke's),
#   and everything run-e2e.sh reads (the sizes, BUILD_DIR, KEEP_DATA). Starts the stack if it is
#   not up (and stops it again then). About 15 minutes.
# Writes RESULTS_DIR/at_least_once/ and RESULTS_DIR/exactly_once/ (each run's e2e.jsonl and plots).
# Exit status: 0 when both runs were whole (every job delivered, none early); 1 otherwise.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
say() { echo "compare-delivery: $*" >&2; }
die() { say "error: $*"; exit 1; }
unset LABEL DELAYD_BIN DELAYD_KAFKA_DELIVERY

# shellcheck source=e2e-stack.sh
source "$root/bench/e2e-stack.sh"
use_stack
trap leave_stack EXIT

if [[ -n "${BUILD_DIR:-}" ]]; then build="$(cd "$BUILD_DIR" && pwd)"; else build="$root/build-release"; fi
if [[ "${SMOKE:-0}" == 1 ]]; then out="${RESULTS_DIR:-$build/delivery-smoke}"; else out="${RESULTS_DIR:-$root/bench/results/delivery}"; fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"
unset RESULTS_DIR

status=0
declare -A dir=([at_least_once]="$out/at_least_once" [exactly_once]="$out/exactly_once")
if [[ -n "${EXACTLY_ONCE_RESULTS:-}" ]]; then
  dir[exactly_once]="$(cd "$EXACTLY_ONCE_RESULTS" && pwd)"
  [[ -s "${dir[exactly_once]}/e2e.jsonl" ]] || die "no e2e.jsonl in EXACTLY_ONCE_RESULTS=$EXACTLY_ONCE_RESULTS"
fi
for mode in at_least_once exactly_once; do
  if [[ "$mode" == exactly_once && -n "${EXACTLY_ONCE_RESULTS:-}" ]]; then
    say "$mode: the run in ${dir[$mode]}"
    continue
  fi
  say "$mode: results in $out/$mode"
  rm -f "$out/$mode/e2e.jsonl"
  env DELAYD_KAFKA_DELIVERY="$mode" LABEL="$mode" RESULTS_DIR="$out/$mode" bench/run-e2e.sh || status=1
  [[ -s "$out/$mode/e2e.jsonl" ]] || die "the $mode run wrote no report"
  [[ -n "${BUILD_DIR:-}" ]] || export BUILD_DIR="$build"  # built by the first run
done

echo
"$build/bench/e2e_load" compare --before "${dir[at_least_once]}/e2e.jsonl" --after "${dir[exactly_once]}/e2e.jsonl" || true
# The ratio: fire capacity (the burst phase) with transactions over that without.
value() { grep -F "\"figure\":\"$2\"" "$1" | head -n 1 | sed -n 's/.*"value":\(-\{0,1\}[0-9][0-9.]*\).*/\1/p'; }
alo="$(value "${dir[at_least_once]}/e2e.jsonl" fire_jobs_per_s)"
eo="$(value "${dir[exactly_once]}/e2e.jsonl" fire_jobs_per_s)"
if [[ -n "$alo" && -n "$eo" ]]; then
  awk -v a="$alo" -v e="$eo" 'BEGIN { printf "fire capacity: exactly_once %.0f jobs/s, at_least_once %.0f jobs/s, ratio %.2f\n", e, a, e / a }'
fi
exit "$status"
