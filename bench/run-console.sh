#!/usr/bin/env bash
# The console's job listing on a big store (bench/console_bench.cpp): 1 000 000 pending and
# 1 000 000 delivered jobs in the local stack's Redis, pages of 50 timed per filter, and the
# state indexes' bytes per job. Starts the stack if it is not up (and stops it again after).
# Prints one JSON object per line.
#   PENDING=1000000 FINISHED=1000000 bench/run-console.sh
#   SMOKE=1 BUILD_DIR=build bench/run-console.sh   2 000 of each, console_bench of BUILD_DIR (the
#                                                  ctest bench.console_smoke); nothing built
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [[ "${SMOKE:-0}" == 1 ]]; then PENDING="${PENDING:-2000}" FINISHED="${FINISHED:-2000}"; fi
if [[ -n "${BUILD_DIR:-}" ]]; then
  build="$(cd "$BUILD_DIR" && pwd)"
else
  build="$root/build-release"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDELAYD_BUILD_TESTS=OFF -DDELAYD_BUILD_BENCH=ON >/dev/null
  cmake --build "$build" -j "$(nproc)" --target console_bench >/dev/null
fi
started=0
if ! scripts/stack.sh status >/dev/null 2>&1; then
  scripts/stack.sh up >/dev/null
  started=1
fi
trap '((started)) && scripts/stack.sh down >/dev/null || true' EXIT
eval "$(scripts/stack.sh env | sed 's/^/export /')"
"$build/bench/console_bench" --redis-url "$REDIS_URL" --pending "${PENDING:-1000000}" --finished "${FINISHED:-1000000}"
