#!/usr/bin/env bash
# README's screenshots of the console's Jobs and Dead letters views, taken while delayd is under
# load: delayd (release build, admin endpoint on) holds PENDING jobs of three businesses spread
# over the next day and DEAD dead letters (refused records of business "imports"), and `e2e_load
# rate` publishes RATE jobs/s due DELAY_MS after publish while bench/console-screenshots.py opens
# the page in headless Chromium, searches, opens a job, lists the dead letters and dry-runs their
# redrive. Writes docs/console-jobs.png and docs/console-dead-letters.png. Starts the stack if it
# is not up (and stops it again after).
#   RATE=2000 PENDING=30000 DEAD=300 bench/console-screenshots.sh
#   SMOKE=1 BUILD_DIR=build OUT_DIR=/tmp/shots bench/console-screenshots.sh
#                       300 pending, 30 dead letters, 200 jobs/s, the binaries of BUILD_DIR, the
#                       screenshots into OUT_DIR (the ctest bench.console_screenshots_smoke)
# Settings: OUT_DIR (docs), SETTLE_S (10 [2]: seconds of load before the screenshots).
set -euo pipefail
if [[ "${SMOKE:-0}" == 1 ]]; then
  RATE="${RATE:-200}" PENDING="${PENDING:-300}" DEAD="${DEAD:-30}" SETTLE_S="${SETTLE_S:-2}"
  for tool in chromium chromedriver; do
    command -v "$tool" >/dev/null 2>&1 && continue
    # shellcheck source=../tests/support/requires.sh
    source "$(dirname "${BASH_SOURCE[0]}")/../tests/support/requires.sh"
    missing_tool "$tool not found (Debian packages chromium and chromium-driver)"
  done
fi
RATE="${RATE:-2000}" PENDING="${PENDING:-30000}" DEAD="${DEAD:-300}" DELAY_MS="${DELAY_MS:-2000}"
OUT_DIR="${OUT_DIR:-docs}" SETTLE_S="${SETTLE_S:-10}"
# shellcheck source=bench/console-delayd.sh
. "$(dirname "${BASH_SOURCE[0]}")/console-delayd.sh" console-shots
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
bench_wait_pending $((PENDING * 9 / 10)) >/dev/null
"$build/bench/e2e_load" rate --bootstrap "$KAFKA_BOOTSTRAP" --redis-url "$REDIS_URL" --ingest-topic "$run.ingest" \
  --ready-topic "$run.ready.bench" --group "$run" --data-dir "$build" --tag shots --rate "$RATE" --seconds 60 \
  --delay-ms "$DELAY_MS" >"$build/$run.load" 2>&1 &
bench_extra_pid=$!
sleep "$SETTLE_S"  # the load reaches its steady state
mkdir -p "$OUT_DIR"
python3 bench/console-screenshots.py --port "$port" --business orders --dl-business imports --out "$OUT_DIR"
curl -s "http://127.0.0.1:$port/stats" | python3 -c 'import json,sys; s=json.load(sys.stdin); print("under load:", s["counters"]["delivered"], "delivered,", s["counters"]["accepted"], "accepted so far")'
