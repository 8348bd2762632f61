# shellcheck shell=bash
# Sourced by the console's benchmarks (run-console-lateness.sh, console-screenshots.sh): builds the
# release delayd and e2e_load (or, with BUILD_DIR, takes that build's and builds nothing), starts
# the stack if it is not up, and starts one delayd with the admin endpoint on, in a world of its
# own ("$run": topics, group and Redis prefix). Sets build, run, port, pid and log; bench_cleanup
# (on EXIT) stops what it started and, first, the process whose pid is in $bench_extra_pid, if any.
#   . bench/console-delayd.sh <name>
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 1
if [[ -n "${BUILD_DIR:-}" ]]; then
  build="$(cd "$BUILD_DIR" && pwd)"
else
  build="$root/build-release"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDELAYD_BUILD_TESTS=OFF -DDELAYD_BUILD_BENCH=ON >/dev/null
  cmake --build "$build" -j "$(nproc)" --target delayd e2e_load >/dev/null
fi
started=0
if ! scripts/stack.sh status >/dev/null 2>&1; then
  scripts/stack.sh up >/dev/null
  started=1
fi
eval "$(scripts/stack.sh env | sed 's/^/export /')"
run="$1-$$"
port=""
pid=""
bench_extra_pid=""
bench_cleanup() {
  [[ -n "$bench_extra_pid" ]] && kill -TERM "$bench_extra_pid" 2>/dev/null && wait "$bench_extra_pid" 2>/dev/null || true
  [[ -n "$pid" ]] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  "$build/bench/e2e_load" cleanup --bootstrap "$KAFKA_BOOTSTRAP" --redis-url "$REDIS_URL" --topic-prefix "$run" \
    --groups "$run" --redis-match "$run*" >/dev/null 2>&1 || true
  ((started)) && scripts/stack.sh down >/dev/null || true
}
trap bench_cleanup EXIT
log="$build/$run.log"
env DELAYD_KAFKA_BOOTSTRAP="$KAFKA_BOOTSTRAP" DELAYD_REDIS_URL="$REDIS_URL" \
  DELAYD_KAFKA_INGEST_TOPIC="$run.ingest" DELAYD_KAFKA_DLQ_TOPIC="$run.dlq" \
  DELAYD_KAFKA_READY_TOPIC_TEMPLATE="$run.ready.{business}" DELAYD_KAFKA_GROUP_ID="$run" \
  DELAYD_REDIS_PREFIX="$run" DELAYD_KAFKA_CREATE_TOPICS=true DELAYD_LOG_LEVEL=info \
  DELAYD_ADMIN_LISTEN=127.0.0.1:0 "$build/apps/delayd" >"$log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do grep -q assigned "$log" && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
grep -q assigned "$log" || { tail -n 20 "$log" >&2; exit 1; }
# The admin endpoint listens on a port the kernel chose (no race with other processes' ports).
port="$(sed -n 's/.* admin endpoint on 127\.0\.0\.1:\([0-9][0-9]*\) .*/\1/p' "$log" | head -n 1)"
[[ -n "$port" ]] || { tail -n 20 "$log" >&2; exit 1; }

# Waits until GET /overview counts at least $1 pending jobs (5 min at most); prints the count.
bench_wait_pending() {
  local pending=0
  for _ in $(seq 1 600); do
    pending=$(curl -s "http://127.0.0.1:$port/overview" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("pending", 0))' || echo 0)
    ((pending >= $1)) && break
    sleep 0.5
  done
  echo "$pending"
}
