#!/usr/bin/env bash
# README's screenshots of the console's Jobs and Dead letters views, taken while delayd is under
# load: delayd (release build, admin endpoint on) holds PENDING jobs of three businesses spread
# over the next day and DEAD dead letters (refused records of business "imports"), and `e2e_load
# rate` publishes RATE jobs/s due DELAY_MS after publish while bench/console-screenshots.py opens
# the page in headless Chromium, searches, opens a job, lists the dead letters and dry-runs their
# redrive. Writes docs/console-jobs.png and docs/console-dead-letters.png. Starts the stack if it
# is not up (and stops it again after).
#   RATE=2000 PENDING=30000 DEAD=300 bench/console-screenshots.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
RATE="${RATE:-2000}" PENDING="${PENDING:-30000}" DEAD="${DEAD:-300}" DELAY_MS="${DELAY_MS:-2000}"
build="$root/build-release"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDELAYD_BUILD_TESTS=OFF -DDELAYD_BUILD_BENCH=ON >/dev/null
cmake --build "$build" -j "$(nproc)" --target delayd e2e_load >/dev/null
started=0
if ! scripts/stack.sh status >/dev/null 2>&1; then
  scripts/stack.sh up >/dev/null
  started=1
fi
eval "$(scripts/stack.sh env | sed 's/^/export /')"
run="console-shots-$$"
port=$((20000 + $$ % 20000))
pid="" load=""
cleanup() {
  [[ -n "$load" ]] && kill -TERM "$load" 2>/dev/null && wait "$load" 2>/dev/null || true
  [[ -n "$pid" ]] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  "$build/bench/e2e_load" cleanup --bootstrap "$KAFKA_BOOTSTRAP" --redis-url "$REDIS_URL" --topic-prefix "$run" \
    --groups "$run" --redis-match "$run*" >/dev/null 2>&1 || true
  ((started)) && scripts/stack.sh down >/dev/null || true
}
trap cleanup EXIT
log="$build/$run.log"
env DELAYD_KAFKA_BOOTSTRAP="$KAFKA_BOOTSTRAP" DELAYD_REDIS_URL="$REDIS_URL" \
  DELAYD_KAFKA_INGEST_TOPIC="$run.ingest" DELAYD_KAFKA_DLQ_TOPIC="$run.dlq" \
  DELAYD_KAFKA_READY_TOPIC_TEMPLATE="$run.ready.{business}" DELAYD_KAFKA_GROUP_ID="$run" \
  DELAYD_REDIS_PREFIX="$run" DELAYD_KAFKA_CREATE_TOPICS=true DELAYD_LOG_LEVEL=info \
  DELAYD_ADMIN_LISTEN="127.0.0.1:$port" "$build/apps/delayd" >"$log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do grep -q assigned "$log" && break; sleep 0.1; done
grep -q assigned "$log" || { tail -n 20 "$log" >&2; exit 1; }
now=$(date +%s%3N)
# Ten deliver-at times per business over the next day (kcat sets one header value per run).
for business in orders mail billing; do
  for h in $(seq 1 10); do
    seq -f "$business-$h-%06g" 1 $((PENDING / 30)) |
      kcat -P -b "$KAFKA_BOOTSTRAP" -t "$run.ingest" -H business="$business" \
        -H "deliver-at=$((now + h * 8000000 + RANDOM))" -X linger.ms=20
  done
done
seq -f "import %06g" 1 "$DEAD" |
  kcat -P -b "$KAFKA_BOOTSTRAP" -t "$run.ingest" -H business=imports -H "deliver-at=tomorrow" -X linger.ms=20
for _ in $(seq 1 600); do
  pending=$(curl -s "http://127.0.0.1:$port/overview" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("pending", 0))' || echo 0)
  ((pending >= PENDING * 9 / 10)) && break
  sleep 0.5
done
"$build/bench/e2e_load" rate --bootstrap "$KAFKA_BOOTSTRAP" --redis-url "$REDIS_URL" --ingest-topic "$run.ingest" \
  --ready-topic "$run.ready.bench" --group "$run" --data-dir "$build" --tag shots --rate "$RATE" --seconds 60 \
  --delay-ms "$DELAY_MS" >"$build/$run.load" 2>&1 &
load=$!
sleep 10  # the load reaches its steady state
python3 bench/console-screenshots.py --port "$port" --business orders --dl-business imports --out docs
curl -s "http://127.0.0.1:$port/stats" | python3 -c 'import json,sys; s=json.load(sys.stdin); print("under load:", s["counters"]["delivered"], "delivered,", s["counters"]["accepted"], "accepted so far")'
