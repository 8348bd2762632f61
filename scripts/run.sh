#!/usr/bin/env bash
# Installs what is missing, builds delayd (Release), starts the local stack and delayd in the
# background, and says where everything is.
#
#   scripts/run.sh          start (idempotent: what already runs is left running)
#   scripts/run.sh stop     stop delayd, then the stack
#   scripts/run.sh status   what runs
# Extra delayd settings: put them in a TOML file and set DELAYD_CONFIG, or use DELAYD_* variables
# (see docs/operating/configuration.md and docs/reference/configuration.md).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

BUILD="$ROOT/build-release"
STACK_DIR="${DELAYD_STACK_DIR:-$ROOT/.stack}"
PIDFILE="$STACK_DIR/delayd.pid"
LOG="$STACK_DIR/delayd.log"
ADMIN="${DELAYD_ADMIN_LISTEN:-127.0.0.1:19464}"  # delayd's /healthz and /stats

delayd_pid() {
  local pid
  [[ -f "$PIDFILE" ]] || return 1
  pid="$(cat "$PIDFILE")"
  kill -0 "$pid" 2>/dev/null && grep -q "delayd" "/proc/$pid/cmdline" 2>/dev/null || return 1
  echo "$pid"
}

stop_delayd() {
  local pid
  if ! pid="$(delayd_pid)"; then
    rm -f "$PIDFILE"
    echo "run: delayd not running"
    return
  fi
  kill -TERM "$pid"
  for _ in $(seq 1 150); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "run: delayd (pid $pid) did not stop within 15 s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$PIDFILE"
  echo "run: delayd stopped"
}

case "${1:-start}" in
  stop)
    stop_delayd
    scripts/stack.sh down
    exit 0
    ;;
  status)
    if pid="$(delayd_pid)"; then echo "run: delayd up (pid $pid, log $LOG)"; else echo "run: delayd down"; fi
    scripts/stack.sh status
    exit $?
    ;;
  start) ;;
  *) echo "usage: scripts/run.sh [start|stop|status]" >&2; exit 2 ;;
esac

scripts/install-deps.sh --run  # not the test-only tools
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDELAYD_BUILD_TESTS=OFF -DDELAYD_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD" --target delayd delayctl -j "$(nproc)"
scripts/stack.sh up
eval "$(scripts/stack.sh env | sed 's/^/export /')"

if pid="$(delayd_pid)"; then
  echo "run: delayd already running (pid $pid)"
else
  mkdir -p "$STACK_DIR"
  log_start=$(($(stat -c %s "$LOG" 2>/dev/null || echo 0) + 1))
  DELAYD_KAFKA_BOOTSTRAP="$KAFKA_BOOTSTRAP" DELAYD_REDIS_URL="$REDIS_URL" DELAYD_ADMIN_LISTEN="$ADMIN" \
    setsid nohup "$BUILD/apps/delayd" >>"$LOG" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$PIDFILE"
  # Up means: the consumer joined the group and got its partitions (or delayd died trying).
  # Only liveness here: until exec completes, the child's command line is still the shell's.
  for _ in $(seq 1 300); do
    kill -0 "$pid" 2>/dev/null || { tail -n 20 "$LOG" >&2; echo "run: error: delayd exited at start-up (log: $LOG)" >&2; exit 1; }
    tail -c "+$log_start" "$LOG" | grep -q "assigned" && break
    sleep 0.1
  done
  echo "run: delayd started (pid $pid)"
fi

cat <<EOF
KAFKA_BOOTSTRAP=$KAFKA_BOOTSTRAP
REDIS_URL=$REDIS_URL
delayd log:  $LOG
admin:       http://$ADMIN/healthz  http://$ADMIN/stats
delayctl:    $BUILD/apps/delayctl
stop:        scripts/run.sh stop
try it:
  kcat -P -b $KAFKA_BOOTSTRAP -t delay-ingest -H deliver-at=\$((\$(date +%s%3N)+3000)) -H business=demo -H job-id=hello-1 <<< 'hello'
  kcat -C -b $KAFKA_BOOTSTRAP -t ready.demo -e
  $BUILD/apps/delayctl get hello-1
  redis-cli -u $REDIS_URL --scan --pattern 'delayd:{*}:job:hello-1'    # its key, then GET it
EOF
