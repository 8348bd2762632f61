#!/usr/bin/env bash
# The console's job listing on a big store (bench/console_bench.cpp): 1 000 000 pending and
# 1 000 000 delivered jobs in the local stack's Redis, pages of 50 timed per filter, and the
# state indexes' bytes per job. Starts the stack if it is not up (and stops it again after).
# Prints one JSON object per line.
#   PENDING=1000000 FINISHED=1000000 bench/run-console.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="$root/build-release"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDELAYD_BUILD_TESTS=OFF -DDELAYD_BUILD_BENCH=ON >/dev/null
cmake --build "$build" -j "$(nproc)" --target console_bench >/dev/null
started=0
if ! scripts/stack.sh status >/dev/null 2>&1; then
  scripts/stack.sh up >/dev/null
  started=1
fi
trap '((started)) && scripts/stack.sh down >/dev/null || true' EXIT
eval "$(scripts/stack.sh env | sed 's/^/export /')"
"$build/bench/console_bench" --redis-url "$REDIS_URL" --pending "${PENDING:-1000000}" --finished "${FINISHED:-1000000}"
