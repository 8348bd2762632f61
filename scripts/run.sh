#!/usr/bin/env bash
# Installs what is missing, builds delayd (Release), starts the local stack and delayd in the
# background, and says where everything is.
#
#   scripts/run.sh          start (idempotent: what already runs is left running)
#   scripts/run.sh stop     stop delayd, then the stack if this script started it
#   scripts/run.sh status   what runs
# Extra delayd settings: put them in a TOML file and set DELAYD_CONFIG, or use DELAYD_* variables
# (see docs/operating/configuration.md and docs/reference/configuration.md).
# DELAYD_BUILD_DIR runs the delayd and delayctl of an existing build directory instead of building
# build-release/ (tests/docs/run_sh_smoke.sh runs this script so, and the commands it prints).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

BUILD="$ROOT/build-release"
[[ -z "${DELAYD_BUILD_DIR:-}" ]] || BUILD="$(cd "$DELAYD_BUILD_DIR" && pwd)"
STACK_DIR="${DELAYD_STACK_DIR:-$ROOT/.stack}"
PIDFILE="$STACK_DIR/delayd.pid"
STARTED_STACK="$STACK_DIR/run-started-stack"  # this script started the stack: stop stops it too
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
    if [[ -f "$STARTED_STACK" ]]; then
      scripts/stack.sh down
      rm -f "$STARTED_STACK"
    else
      echo "run: the stack was up before scripts/run.sh started; left running (scripts/stack.sh down stops it)"
    fi
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
if [[ -z "${DELAYD_BUILD_DIR:-}" ]]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDELAYD_BUILD_TESTS=OFF -DDELAYD_BUILD_BENCH=OFF >/dev/null
  cmake --build "$BUILD" --target delayd delayctl -j "$(nproc)"
fi
if ! scripts/stack.sh status >/dev/null 2>&1; then
  scripts/stack.sh up
  mkdir -p "$STACK_DIR"
  touch "$STARTED_STACK"
fi
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
try it: a job due in 3 s, looked up while it waits, then read from its ready topic
  kcat -P -b $KAFKA_BOOTSTRAP -t delay-ingest -k hello-1 -H deliver-at=\$((\$(date +%s%3N)+3000)) -H business=demo -H job-id=hello-1 <<< 'hello'
  $BUILD/apps/delayctl get hello-1                              # the job as JSON: its "state", and the "shard" that holds it
  redis-cli -u $REDIS_URL hget 'delayd:{<shard>}:jobs' hello-1  # while it waits: its record, a field of its shard's hash
  kcat -C -b $KAFKA_BOOTSTRAP -t ready.demo -e                  # once due: its ready record
  redis-cli -u $REDIS_URL get 'delayd:{<shard>}:job:hello-1'    # once delivered: its record, a key of its own
EOF
