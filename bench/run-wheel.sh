#!/usr/bin/env bash
# Builds the timer benchmark in Release (build-bench/, only the wheel and the benchmark) and runs
# the whole matrix: impl wheel|heap|heap4 x workload schedule|cancel|expire|steady x n 1M|10M x
# deadlines uniform|clustered, each in a fresh process so that resident-memory growth is honest.
# Prints one JSON object per line as results arrive, then a Markdown table with the wheel/heap
# ratios. The JSON lines are also kept in build-bench/wheel-bench.jsonl.
#
#   bench/run-wheel.sh                  everything (about five minutes on two cores)
#   SIZES="1000000" bench/run-wheel.sh  one size only
#   DISTS="uniform" bench/run-wheel.sh  one distribution only
#   BUILD_DIR=... BUILD_JOBS=1          where to build (default build-bench/), with how many jobs (2)
# The ctest bench.wheel_smoke runs it with SIZES=10000 DISTS=uniform (bench/CMakeLists.txt).
#
# Runs are serial on purpose: two benchmarks at once would measure each other.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build-bench}"
sizes="${SIZES:-1000000 10000000}"
dists="${DISTS:-uniform clustered}"
impls="wheel heap heap4"
workloads="schedule cancel expire steady"

cmake -S "$root/bench" -B "$build" -DCMAKE_BUILD_TYPE=Release -DDELAYD_WERROR=ON >/dev/null
cmake --build "$build" -j "${BUILD_JOBS:-2}" --target wheel_bench >/dev/null

results="$build/wheel-bench.jsonl"
: >"$results"
for dist in $dists; do
  for n in $sizes; do
    for workload in $workloads; do
      for impl in $impls; do
        "$build/wheel_bench" --impl "$impl" --workload "$workload" --n "$n" --dist "$dist" | tee -a "$results"
      done
    done
  done
done

echo
python3 - "$results" <<'PY'
import json, sys

rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
by = {(r["impl"], r["workload"], r["n"], r["dist"]): r for r in rows}
keys = sorted({(r["workload"], r["n"], r["dist"]) for r in rows},
              key=lambda k: (k[2] != "uniform", k[1],
                             ["schedule", "cancel", "expire", "steady", "bytes_per_timer"].index(k[0])))

def mops(r):
    return f'{r["ops_per_s"] / 1e6:.2f}' if r and r["ops_per_s"] is not None else "-"

def ratio(a, b, field):
    if not a or not b or a[field] is None or b[field] is None:
        return "-"
    return f"{a[field] / b[field]:.2f}x"

print("| deadlines | n | workload | wheel | heap | heap4 | wheel/heap | wheel/heap4 |")
print("|---|---:|---|---:|---:|---:|---:|---:|")
for workload, n, dist in keys:
    w, h, q = (by.get((impl, workload, n, dist)) for impl in ("wheel", "heap", "heap4"))
    size = f"{n // 1_000_000}M" if n % 1_000_000 == 0 else str(n)
    if workload == "bytes_per_timer":
        cells = [f'{r["bytes_per_timer"]:.1f} B' if r else "-" for r in (w, h, q)]
        # Fewer bytes is better: the ratio says what fraction of the heap's memory the wheel needs.
        print(f"| {dist} | {size} | bytes/timer | {cells[0]} | {cells[1]} | {cells[2]} | "
              f"{ratio(w, h, 'bytes_per_timer')} | {ratio(w, q, 'bytes_per_timer')} |")
    else:
        print(f"| {dist} | {size} | {workload} (M ops/s) | {mops(w)} | {mops(h)} | {mops(q)} | "
              f"{ratio(w, h, 'ops_per_s')} | {ratio(w, q, 'ops_per_s')} |")
PY
