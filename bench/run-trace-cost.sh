#!/usr/bin/env bash
# What traces cost: bench/run-e2e.sh twice on the same stack, back to back, with the same delayd:
# first with tracing off, then with every span sampled (OTEL_TRACES_SAMPLER=always_on) and
# exported to a plain OTLP/HTTP receiver on this machine (tests/support/otlp_sink.py, counting
# spans). Then the two side by side (e2e_load compare: each figure with the machine limit of its
# own run and the fraction of it), and the receiver's count of spans and delayd's drops.
#
#   bench/run-trace-cost.sh                      ingest, fire capacity, lateness at 10 000/s and
#                                                short delays (sizes below), about 6 minutes
#   SMOKE=1 BUILD_DIR=build bench/run-trace-cost.sh   tiny sizes (run-e2e.sh's SMOKE)
#
# Sizes (environment, passed to both runs): N_INGEST (100000), N_BURST (100000), RATES
#   ("10000:20"), SHORT_SECONDS (10), RESTART_FAR (20000), RESTART_OVERDUE (20000); any other
#   run-e2e.sh setting goes through as well (BUILD_DIR, DELAYD_BIN, ...).
# Results: RESULTS_DIR (bench/results/trace-cost; with SMOKE=1 <build dir>/trace-cost-smoke)/off/
#   and .../on/ (each run's e2e.jsonl), the receiver's counts in .../sink.txt.
# Needs the OpenTelemetry venv (python3 tests/support/otel_venv.py, made by install-deps) for the
# receiver. Exit status: 0 when both runs were whole and the receiver decoded every request.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

SMOKE="${SMOKE:-0}"
if [[ "$SMOKE" != 1 ]]; then
  export N_INGEST="${N_INGEST:-100000}" N_BURST="${N_BURST:-100000}" RATES="${RATES:-10000:20}"
  export SHORT_SECONDS="${SHORT_SECONDS:-10}" RESTART_FAR="${RESTART_FAR:-20000}"
  export RESTART_OVERDUE="${RESTART_OVERDUE:-20000}"
  out="${RESULTS_DIR:-bench/results/trace-cost}"
else
  out="${RESULTS_DIR:-${BUILD_DIR:-build}/trace-cost-smoke}"
fi
mkdir -p "$out"
venv_python="$(/usr/bin/python3 -c 'import sys; sys.path.insert(0, "tests/support"); import otel_venv; print(otel_venv.python() or "")')"
[[ -n "$venv_python" ]] || { echo "run-trace-cost: no OpenTelemetry venv (python3 tests/support/otel_venv.py)" >&2; exit 1; }

port="$("$venv_python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$venv_python" tests/support/otlp_sink.py --port "$port" >"$out/sink.txt" 2>&1 &
sink=$!
trap 'kill -TERM $sink 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do grep -q "otlp sink on" "$out/sink.txt" && break; sleep 0.1; done

status=0
echo "== tracing off"
(unset OTEL_EXPORTER_OTLP_ENDPOINT OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
 RESULTS_DIR="$out/off" LABEL="traces-off" bench/run-e2e.sh) || status=1
echo "== tracing on: every span sampled, exported to 127.0.0.1:$port"
(export OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$port" OTEL_TRACES_SAMPLER=always_on
 RESULTS_DIR="$out/on" LABEL="traces-on" bench/run-e2e.sh) || status=1

kill -TERM "$sink"
wait "$sink" || true
trap - EXIT
echo "== the receiver"
cat "$out/sink.txt"
grep -q "errors 0" "$out/sink.txt" || status=1
build="${BUILD_DIR:-build-release}"
echo "== off (before) and on (after), each with its own run's limits"
"$build/bench/e2e_load" compare --before "$out/off/e2e.jsonl" --after "$out/on/e2e.jsonl" || status=1
exit "$status"
