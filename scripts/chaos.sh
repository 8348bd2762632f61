#!/usr/bin/env bash
# The fault tests (ctest label `chaos`, tests/chaos/): builds delayd and chaos_test, starts the
# local stack unless it is already up, runs `ctest -L chaos`, brings back any server a case left
# down, stops the stack if this script started it, and prints a table made of the cases'
# "chaos: ..." summary lines. Exits non-zero if any case failed.
#
#   scripts/chaos.sh                     every case
#   scripts/chaos.sh --long              also the long runs (DELAYD_CHAOS_LONG=1), e.g. the
#                                        three-instance run of docs/operating/scaling.md's "Scaling out" (~2 min)
#   scripts/chaos.sh -- -R kafka         arguments after -- go to ctest
#
# Settings (environment):
#   DELAYD_BUILD_DIR (build)  DELAYD_BUILD_JOBS (nproc)  DELAYD_CHAOS_NO_BUILD=1 skips the build
#   DELAYD_STACK_DIR and DELAYD_KAFKA_PORT / DELAYD_KAFKA_CONTROLLER_PORT / DELAYD_REDIS_PORT
#   choose the stack as for scripts/stack.sh. The cases restart that stack's Redis and Kafka, so
#   give them a stack of their own when someone else uses the default one, e.g.
#     DELAYD_STACK_DIR=/tmp/chaos-stack DELAYD_KAFKA_PORT=29092 DELAYD_KAFKA_CONTROLLER_PORT=29093 \
#       DELAYD_REDIS_PORT=26379 scripts/chaos.sh
#
# scripts/test.sh runs these cases too (it runs every label). Each is RUN_SERIAL with the ctest
# resource lock delayd_stack_servers, so even `ctest -j` runs nothing beside a case that restarts
# a server.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

ctest_args=()
while (($#)); do
  case "$1" in
    --long) export DELAYD_CHAOS_LONG=1 ;;
    --) shift; ctest_args=("$@"); break ;;
    *) echo "usage: scripts/chaos.sh [--long] [-- ctest args]" >&2; exit 2 ;;
  esac
  shift
done

build_dir="${DELAYD_BUILD_DIR:-build}"
jobs="${DELAYD_BUILD_JOBS:-$(nproc)}"

if [[ "${DELAYD_CHAOS_NO_BUILD:-}" != "1" ]]; then
  scripts/install-deps.sh
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDELAYD_BUILD_BENCH=OFF >/dev/null
  cmake --build "$build_dir" -j "$jobs" --target delayd chaos_test
fi

started_stack=0
ran=0
finish() {
  # A case brings back what it stopped, but a case killed by its timeout cannot.
  local s
  if ((ran)); then
    local st
    st="$(scripts/stack.sh status 2>/dev/null || true)"
    for s in redis kafka; do
      if ! grep -q "^stack: $s up" <<<"$st"; then
        echo "chaos: $s is down after the run; restarting it"
        scripts/stack.sh restart "$s" || true
      fi
    done
  fi
  if ((started_stack)); then scripts/stack.sh down || true; fi
}
trap finish EXIT

if ! scripts/stack.sh status >/dev/null 2>&1; then
  started_stack=1
  scripts/stack.sh up
fi
eval "$(scripts/stack.sh env | sed 's/^/export /')"
echo "chaos: KAFKA_BOOTSTRAP=$KAFKA_BOOTSTRAP REDIS_URL=$REDIS_URL DELAYD_STACK_DIR=${DELAYD_STACK_DIR:-$ROOT/.stack}"

out="$(mktemp)"
status=0
ran=1
# The long runs (label long) only with --long: left out of the list, not shown as skipped.
long_args=(-LE '^long$')
[[ "${DELAYD_CHAOS_LONG:-}" == "1" ]] && long_args=()
if ! ctest --test-dir "$build_dir" -L chaos "${long_args[@]}" --output-on-failure "${ctest_args[@]}" 2>&1 | tee "$out"; then
  status=1
fi

# The table: one row per case ctest ran, from its result line and the case's summary line.
log="$build_dir/Testing/Temporary/LastTest.log"
echo
awk -v logfile="$log" '
  function field(line, name,   i, parts, n) {
    n = split(line, parts, ", ")
    for (i = 1; i <= n; i++) if (index(parts[i], name " ") == 1) return substr(parts[i], length(name) + 2)
    return "-"
  }
  function notes(line,   i, parts, n, out, known) {
    n = split(line, parts, ", ")
    out = ""
    for (i = 1; i <= n; i++) {
      known = parts[i] ~ /^(sent|delivered|lost|early|duplicates|delayd up|max late ms) [0-9]/
      if (!known) out = out (out == "" ? "" : "; ") parts[i]
    }
    return out
  }
  BEGIN {
    while ((getline l < logfile) > 0) {
      if (l ~ /^chaos: [A-Za-z0-9_.]+: /) {
        name = l; sub(/^chaos: /, "", name); sub(/:.*/, "", name)
        rest = l; sub(/^chaos: [A-Za-z0-9_.]+: /, "", rest)
        line[name] = rest
      }
    }
  }
  match($0, /Test +#[0-9]+: chaos\.[A-Za-z0-9_.]+ /) {
    name = substr($0, RSTART, RLENGTH); sub(/.*chaos\./, "", name); sub(/ $/, "", name)
    result = $0; sub(/.*chaos\.[A-Za-z0-9_.]+ \.* */, "", result); sub(/^\*\*\*/, "", result)
    secs = "-"
    if (match(result, /[0-9.]+ sec/)) secs = substr(result, RSTART, RLENGTH - 4)
    sub(/ .*/, "", result)
    order[++n] = name; res[name] = result; took[name] = secs
  }
  END {
    fmt = "%-36s %-8s %6s %5s %6s %5s %5s %5s  %-26s %8s  %s\n"
    printf fmt, "case", "result", "secs", "sent", "deliv", "lost", "early", "dup", "delayd up", "late ms", "notes"
    for (i = 1; i <= n; i++) {
      c = order[i]
      if (!(c in line)) { printf fmt, c, res[c], took[c], "-", "-", "-", "-", "-", "-", "-", "no summary line"; continue }
      l = line[c]
      printf fmt, c, res[c], took[c], field(l, "sent"), field(l, "delivered"), field(l, "lost"), field(l, "early"),
        field(l, "duplicates"), field(l, "delayd up"), field(l, "max late ms"), notes(l)
    }
  }
' "$out" | sed 's/^/chaos: /'
rm -f "$out"
exit $status
