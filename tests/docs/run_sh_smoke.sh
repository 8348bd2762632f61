#!/usr/bin/env bash
# scripts/run.sh as a new user meets it, against the running stack: `run.sh` starts delayd (the
# binaries of this build, DELAYD_BUILD_DIR, instead of a Release build of its own), then every
# command of its "try it" lines runs as printed (only the job id and the business made this run's
# own, and <shard> the shard delayctl names), each checked for what its comment promises; the
# admin addresses it prints answer; `run.sh status` says delayd is up; `run.sh stop` stops it and
# leaves the stack it did not start running.
#
#   run_sh_smoke.sh <repository> <build directory>
#
# Needs the stack (scripts/stack.sh up, KAFKA_BOOTSTRAP and REDIS_URL), kcat, redis-cli and curl:
# a missing tool skips the test (exit 77), or fails it under CI=true (tests/support/requires.sh).
# Skipped as well when a delayd of scripts/run.sh runs already (it would be this test's to stop).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../support/requires.sh"
repo="$(cd "$1" && pwd)" build="$(cd "$2" && pwd)"
require_tool kcat "scripts/install-deps.sh installs it"
require_tool redis-cli "scripts/install-deps.sh installs it"
require_tool curl "scripts/install-deps.sh installs it"
: "${KAFKA_BOOTSTRAP:?KAFKA_BOOTSTRAP is not set: start the stack (scripts/stack.sh up) and export its env}"
cd "$repo"
stack_dir="${DELAYD_STACK_DIR:-$repo/.stack}"
fail() {
  echo "FAIL: $*"
  exit 1
}
scripts/stack.sh status >/dev/null 2>&1 || fail "the stack is not up (scripts/stack.sh up)"
if [[ -f "$stack_dir/delayd.pid" ]] && kill -0 "$(cat "$stack_dir/delayd.pid")" 2>/dev/null; then
  echo "SKIPPED: a delayd of scripts/run.sh runs already (pid $(cat "$stack_dir/delayd.pid")); this test would stop it"
  exit 77
fi
[[ ! -f "$stack_dir/run-started-stack" ]] ||
  fail "$stack_dir/run-started-stack says scripts/run.sh started this stack; its stop would stop the stack under the tests"

# delayctl reads the stack's addresses as delayd does (on the stack's default ports it needs none).
export DELAYD_KAFKA_BOOTSTRAP="$KAFKA_BOOTSTRAP" DELAYD_REDIS_URL="$REDIS_URL"
admin="127.0.0.1:$(python3 -c 'import sys; sys.path.insert(0, "tests/support"); import checks; print(checks.free_port())')"
suffix="-$$-$(date +%s%N)"
cleanup() {
  local status=$?
  scripts/run.sh stop >/dev/null 2>&1 || true
  exit "$status"
}
trap cleanup EXIT
out="$(env -u DELAYD_CONFIG DELAYD_BUILD_DIR="$build" DELAYD_ADMIN_LISTEN="$admin" scripts/run.sh 2>&1)" ||
  { echo "$out"; fail "scripts/run.sh exited non-zero"; }
echo "$out" | tail -n 16

# What it says runs answers.
for path in healthz stats; do
  grep -qF "http://$admin/$path" <<<"$out" || fail "run.sh does not print http://$admin/$path"
  curl -sf -o /dev/null "http://$admin/$path" || fail "http://$admin/$path does not answer"
done
log="$(sed -n 's/^delayd log: *//p' <<<"$out")"
[[ -f "$log" ]] || fail "run.sh names the log $log, which does not exist"
# Read whole first: grep -q leaving early would end run.sh by SIGPIPE, a failure under pipefail.
status_out="$(scripts/run.sh status)"
grep -q "delayd up" <<<"$status_out" || fail "run.sh status does not say delayd is up: $status_out"

# The "try it" lines, in order, each as printed but for this run's names.
mapfile -t lines < <(sed -n '/^try it/,$p' <<<"$out" | sed -n 's/^  //p')
((${#lines[@]} >= 5)) || fail "run.sh printed ${#lines[@]} try-it lines"
job="hello-1$suffix" business="demo$suffix" shard=""
run_line() { # line: the command with this run's names; prints what it printed
  local line="$1"
  line="${line//hello-1/$job}"
  line="${line//business=demo/business=$business}"
  line="${line//ready.demo/ready.$business}"
  line="${line//<shard>/$shard}"
  printf '$ %s\n' "$line" >&2
  bash -c "set -euo pipefail; $line"
}
state_is() { "$build/apps/delayctl" get "$job" 2>/dev/null | grep "\"state\": \"$1\"" >/dev/null; }
for line in "${lines[@]}"; do
  case "$line" in
    *"kcat -P"*)
      run_line "$line"
      ;;
    *"delayctl get"*)
      for _ in $(seq 1 100); do state_is delay && break; sleep 0.1; done
      got="$(run_line "$line")" || fail "delayctl get failed"
      shard="$(sed -n 's/^ *"shard": "\([^"]*\)".*/\1/p' <<<"$got")"
      [[ -n "$shard" ]] || { echo "$got"; fail "delayctl get names no shard"; }
      echo "shard: $shard"
      ;;
    *"hget '"*":jobs'"*)
      got="$(run_line "$line" | head -n 1)"
      [[ "$got" == "delay "* ]] || fail "the waiting job's field in its shard's hash reads: $got"
      echo "$got"
      ;;
    *"kcat -C"*)
      for _ in $(seq 1 200); do state_is ready && break; sleep 0.1; done
      state_is ready || fail "$job is not ready 20 s after it was due"
      got="$(run_line "$line")"
      grep -qx hello <<<"$got" || fail "the ready topic reads: $got"
      echo "$got"
      ;;
    *" get '"*":job:"*)
      got="$(run_line "$line" | head -n 1)"
      [[ "$got" == "ready "* ]] || fail "the delivered job's key reads: $got"
      echo "$got"
      ;;
    *) fail "a try-it line this test does not know (add it here): $line" ;;
  esac
done

stopped="$(scripts/run.sh stop)"
echo "$stopped"
grep -q "delayd stopped" <<<"$stopped" || fail "run.sh stop did not stop delayd"
scripts/stack.sh status >/dev/null 2>&1 || fail "run.sh stop stopped the stack it had not started"
echo "run.sh: started delayd, its ${#lines[@]} try-it lines ran, stopped it; the stack left running"
