#!/usr/bin/env bash
# Builds delayd, starts the local stack (unless it is already up), runs every test with ctest,
# stops the stack if this script started it, and exits non-zero on any failure.
#
#   scripts/test.sh                  build/ (RelWithDebInfo) and all tests
#   scripts/test.sh --sanitize       also build build-asan/ with ASan+UBSan and run the tests there
#                                    against the stack restarted with Redis TLS-only
#                                    (DELAYD_REDIS_TLS=1: every Redis connection of delayd and of
#                                    the tests over TLS; only when this script started the
#                                    stack), then the core end-to-end cases and the cluster case
#                                    (cluster-e2e) in build/ against a TLS Redis Cluster,
#                                    and build-tsan/ with ThreadSanitizer for the tests of the
#                                    concurrent parts (label concurrency: the ingest thread's
#                                    handover to the loop, the stages, the server watch) and run
#                                    those (the default when CI=true; --no-sanitize turns it off)
#   scripts/test.sh --fuzz           after the tests, fuzz the parsers with scripts/fuzz.sh
#                                    ($FUZZ_SECONDS per target, default 60, 5 with CI=true so
#                                    that CI stays under its 45 minutes; the default when
#                                    CI=true; --no-fuzz turns it off)
#   scripts/test.sh --cluster        against a Redis Cluster instead of the single Redis: the stack
#                                    with DELAYD_REDIS_CLUSTER=3 (3 primaries, 1 replica each), and
#                                    only the e2e and cluster labels (-L 'e2e|cluster', which
#                                    includes cluster-e2e: slots moved and a primary failed over
#                                    under delayd) unless ctest arguments are given. The default
#                                    run leaves cluster-e2e out (-LE cluster-e2e), and the
#                                    sanitizer run also the multi-instance cases (label scale)
#                                    and the runnable examples (label examples).
#   scripts/test.sh --sasl           only the Kafka security tests (label kafka-sasl: the contract's
#                                    delivery, cancel, time and report cases over SASL_SSL with delayd's
#                                    documented ACLs, and a wrong password and missing ACLs). They
#                                    need Kafka with DELAYD_KAFKA_SASL=1, so they run against a
#                                    second, short stack of their own (under .stack/sasl, Kafka
#                                    on 19192/19193, Redis on 16479; DELAYD_SASL_STACK_DIR,
#                                    DELAYD_SASL_KAFKA_PORT, DELAYD_SASL_KAFKA_CONTROLLER_PORT,
#                                    DELAYD_SASL_REDIS_PORT override), started and stopped here.
#                                    The default run runs them last (about a minute); the other
#                                    runs leave the label out.
#   scripts/test.sh --build-only     the builds alone (build/, and with --sanitize or CI=true
#                                    build-asan/ and build-tsan/, the earlier release of the
#                                    upgrade test and the fuzz targets), then exit: a compile
#                                    check, or the compiler cache (below) filled ahead of a run
#   scripts/test.sh -- -L unit       arguments after -- go to ctest (here: only unit tests)
#
# DELAYD_BUILD_DIR (build) names the build directory. A cluster stack and a single-Redis stack
# cannot share DELAYD_STACK_DIR: run `scripts/stack.sh down` first, or give the cluster run its
# own DELAYD_STACK_DIR and DELAYD_KAFKA_PORT / DELAYD_KAFKA_CONTROLLER_PORT.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

sanitize=0
fuzz=0
cluster=0
sasl=0
build_only=0
[[ "${CI:-}" == "true" ]] && sanitize=1 && fuzz=1
ctest_args=()
while (($#)); do
  case "$1" in
    --sanitize) sanitize=1 ;;
    --no-sanitize) sanitize=0 ;;
    --fuzz) fuzz=1 ;;
    --no-fuzz) fuzz=0 ;;
    --cluster) cluster=1 ;;
    --sasl) sasl=1 ;;
    --build-only) build_only=1 ;;
    --) shift; ctest_args=("$@"); break ;;
    *) echo "usage: scripts/test.sh [--sanitize|--no-sanitize] [--fuzz|--no-fuzz] [--cluster] [--sasl] [--build-only] [-- ctest args]" >&2; exit 2 ;;
  esac
  shift
done

jobs="${DELAYD_BUILD_JOBS:-$(nproc)}"
build_dir="${DELAYD_BUILD_DIR:-build}"
if ((cluster)); then
  export DELAYD_REDIS_CLUSTER="${DELAYD_REDIS_CLUSTER:-3}"
  ((${#ctest_args[@]})) || ctest_args=(-L 'e2e|cluster')
else
  # Tests that need the cluster stack (label cluster-e2e) run with --cluster only; those that
  # need Kafka with SASL and ACLs (label kafka-sasl) on a stack of their own (sasl_tests below);
  # the fault cases (label chaos) through scripts/chaos.sh after the others, as a reader runs them.
  default_excluded='cluster-e2e|kafka-sasl|chaos'
  ((${#ctest_args[@]})) || { ctest_args=(-LE "$default_excluded"); sasl_default=1; }
fi
# Under the sanitizers the multi-instance cases (label scale) are left out by default: they run
# the same code as the single-instance ones with more processes, for minutes, and CI must stay
# under 45 minutes. So is integration.stack_smoke: it checks the stack with plain hiredis on
# purpose (a client independent of delayd's), which has no TLS, and the sanitizer pass runs over
# TLS. So is the peer's benchmark smoke (label peer): BullMQ under node runs none of delayd's code.
# So are the partition cases (label partition: three instances, a minute each, like scale), the
# upgrade test (label upgrade: an earlier release's binary beside this one, for minutes) and the
# Debian package's test (label package: it packages the build it runs in, and the package is
# made of a plain build).
asan_args=("${ctest_args[@]}")
asan_excluded='cluster-e2e|kafka-sasl|scale|partition|upgrade|examples|peer|package'
[[ "${sasl_default:-0}" == 1 ]] && asan_args=(-LE "$asan_excluded" -E '^integration\.stack_smoke$')
werror=OFF
[[ "${CI:-}" == "true" ]] && werror=ON

scripts/install-deps.sh

# Under CI the plain build keeps line tables only (-g1, as the sanitizer builds do): file:line in
# every backtrace and report, and about 30 % less compile time than RelWithDebInfo's full -g
# (config.cpp 30.6 s -> 18.3 s, job_store_test.cpp 23.1 -> 16.4 s). The code is the same.
ci_flags=()
[[ "${CI:-}" == "true" ]] && ci_flags=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG")
# The compiler cache (ccache, from install-deps.sh), for every build below and those that
# fuzz.sh and old-release.sh configure: CMake takes CMAKE_<LANG>_COMPILER_LAUNCHER from the
# environment when it configures a build directory for the first time. Paths are hashed relative
# to this tree (CCACHE_BASEDIR, and not the build directory: CCACHE_NOHASHDIR), so a fresh clone
# of the same commits in another folder compiles only what differs; on a fresh machine the first
# run fills it (about the same time as without it). The build types and flags are part of every
# hash: the plain, sanitizer and fuzz builds never share an object.
if command -v ccache >/dev/null 2>&1 && [[ -z "${DELAYD_NO_CCACHE:-}" ]]; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-12G}"
fi
build() { # dir, extra cmake args...
  local dir="$1"; shift
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDELAYD_WERROR="$werror" \
    -DDELAYD_BUILD_BENCH=OFF "${ci_flags[@]}" "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
}

started_stack=0
stop_stack() {
  if ((started_stack)); then scripts/stack.sh down || true; fi
}
sasl_env=(DELAYD_STACK_DIR="${DELAYD_SASL_STACK_DIR:-$ROOT/.stack/sasl}" DELAYD_KAFKA_SASL=1
  DELAYD_KAFKA_PORT="${DELAYD_SASL_KAFKA_PORT:-19192}"
  DELAYD_KAFKA_CONTROLLER_PORT="${DELAYD_SASL_KAFKA_CONTROLLER_PORT:-19193}"
  DELAYD_REDIS_PORT="${DELAYD_SASL_REDIS_PORT:-16479}")
stop_sasl_stack() { env "${sasl_env[@]}" scripts/stack.sh down >/dev/null 2>&1 || true; }
# The partition tests (tests/chaos/network_cut.hpp) cut an instance off with iptables rules that
# carry this comment; each test heals its own, and this removes any a killed test left.
heal_cuts() {
  command -v iptables >/dev/null 2>&1 && [[ $(id -u) -eq 0 ]] || return 0
  local rules rule
  rules="$(iptables -w -S OUTPUT 2>/dev/null | grep -- 'delayd-test-cut' || true)"
  [[ -n "$rules" ]] || return 0
  while read -r rule; do eval "iptables -w ${rule/#-A /-D }" || true; done <<<"$rules"
}
# Each step guarded: under errexit a failing command in the trap would replace the script's own
# exit status (grep finding no rule left made every green run exit 1).
trap 'stop_stack || true; stop_sasl_stack || true; heal_cuts || true' EXIT

# The Kafka security tests (label kafka-sasl) against a stack started with DELAYD_KAFKA_SASL=1,
# in a subshell so that its settings do not leak into the other runs.
# Exports the running stack's addresses (and, over TLS, its client files), dropping those of a
# stack that ran before it: a TLS file setting left over beside a plain url is a configuration
# error for delayd.
export_stack_env() {
  unset DELAYD_REDIS_TLS_CA_FILE DELAYD_REDIS_TLS_CERT_FILE DELAYD_REDIS_TLS_KEY_FILE REDIS_CLI_TLS
  eval "$(scripts/stack.sh env | sed 's/^/export /')"
}

# Between passes, a stack this script started is started again empty (`scripts/stack.sh reset`,
# then `up` with the given settings): by the end of a pass the broker holds the thousands of
# partitions its tests made (2 887 after the sanitizer pass), and such a broker took 74 s to
# restart in chaos.kafka_restart and still timed out the first metadata request of the pass after
# it. Each test makes topics of its own names, so no pass needs an earlier one's data.
fresh_stack() { # VAR=value... (settings for `up`)
  scripts/stack.sh reset
  env "$@" scripts/stack.sh up
  export_stack_env
}

sasl_tests() {
  (
    export "${sasl_env[@]}"
    local started=$SECONDS
    scripts/stack.sh up
    export_stack_env
    echo "test: ctest -L kafka-sasl in $build_dir/ (KAFKA_BOOTSTRAP=$KAFKA_BOOTSTRAP, SASL_SSL with ACLs)"
    local ok=0
    ctest --test-dir "$build_dir" --output-on-failure --timeout 600 -L kafka-sasl || ok=1
    grep -hE "^kafka security: " "$build_dir/Testing/Temporary/LastTest.log" 2>/dev/null | sed 's/^/test: /' || true
    scripts/stack.sh down
    echo "test: the Kafka security tests took $((SECONDS - started)) s with their stack"
    exit $ok
  )
}

# The benchmarks are built in build/ only: their smoke run (bench.e2e_smoke) is a test there.
build "$build_dir" -DDELAYD_BUILD_BENCH=ON
# The tests of the concurrent parts, built with ThreadSanitizer (only their targets: TSan slows
# everything it instruments, and the rest is single-threaded).
tsan_targets=(handover_stress_test store_worker_test server_watch_test)
if ((sanitize)); then
  build "$build_dir-asan" -DDELAYD_SANITIZE=ON
  cmake -S . -B "$build_dir-tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDELAYD_WERROR="$werror" \
    -DDELAYD_BUILD_BENCH=OFF -DDELAYD_TSAN=ON >/dev/null
  cmake --build "$build_dir-tsan" -j "$jobs" --target "${tsan_targets[@]}"
fi

if ((build_only)); then
  scripts/old-release.sh >/dev/null
  if ((fuzz)); then FUZZ_BUILD_ONLY=1 scripts/fuzz.sh; fi
  echo "test: built (--build-only)"
  exit 0
fi

if ((sasl)); then
  status=0
  sasl_tests || status=1
  exit $status
fi

if ! scripts/stack.sh status >/dev/null 2>&1; then
  started_stack=1
  scripts/stack.sh up
fi
export_stack_env
echo "test: KAFKA_BOOTSTRAP=$KAFKA_BOOTSTRAP REDIS_URL=$REDIS_URL"

# The default passes run the unit tests (label unit: no servers, no other process, CPU only) two
# at a time (on two cores that halves their time: about 160 s to 90 s in the plain pass), then
# the rest two at a time as well: each test has a world of its own on the stack (topics, group
# and Redis prefix named after the run: tests/e2e/harness.hpp, tests/support/delayd_world.sh),
# most of their time is waiting for jobs to fall due, and a test that must have the machine or
# the stack to itself says so with RUN_SERIAL, which ctest honours under -j: the benchmarks'
# smokes, the fault cases, the package and upgrade tests, docs.run_sh, the cases that touch
# every client of the stack's Redis (tests/e2e/serial_tests.cmake: CLIENT PAUSE;
# tests/storage/serial_tests.cmake: SCRIPT FLUSH) and the max-lateness case (its bound read off
# record timestamps: tests/e2e/serial_tests.cmake). In a clean-clone CI run that took the plain
# pass's rest from 842 s to 671 s and the sanitizer pass's from 571 s to 368 s, the same tests.
# LastTest.log holds only the last run: figures() reads it after each.
split_ctest() { # dir, timeout, labels left out (a regex), more ctest args...
  local dir="$1" timeout="$2" excluded="$3" rc=0
  shift 3
  ctest --test-dir "$dir" --output-on-failure --timeout "$timeout" -j 2 -L '^unit$' -LE "$excluded" "$@" || rc=1
  figures "$dir"
  ctest --test-dir "$dir" --output-on-failure --timeout "$timeout" -j 2 -LE "^unit\$|$excluded" "$@" || rc=1
  figures "$dir"
  return $rc
}
# The figures the end-to-end tests print (lateness percentiles, duplicates after a crash, the
# admin endpoint's counters, limits and status page, the console's actions and redrives, the Java
# client's vectors, round trip and Spring example), and what the Debian package's test found.
figures() { # build dir
  grep -hE "^(lateness \(ms\)|crash test|java (vectors|roundtrip|spring example): |chaos: scale|admin: |twin ids: |sub-ms: |missing topic |record codec: |documented settings: |handover stress: |console: |console page: |dead letters: ([0-9]+ listed|a redrive) |package: |upgrade: )" "$1/Testing/Temporary/LastTest.log" 2>/dev/null | sed 's/^/test: /' || true
}

status=0
echo "test: ctest in $build_dir/"
if [[ "${sasl_default:-0}" == 1 ]]; then
  split_ctest "$build_dir" 600 "$default_excluded" || status=1
else
  ctest --test-dir "$build_dir" --output-on-failure --timeout 600 "${ctest_args[@]}" || status=1
  figures "$build_dir"
fi
if [[ "${sasl_default:-0}" == 1 ]]; then
  # The fault cases (each restarts Redis or Kafka, one at a time), and their table.
  ((started_stack)) && fresh_stack
  echo "test: scripts/chaos.sh in $build_dir/"
  DELAYD_CHAOS_NO_BUILD=1 DELAYD_BUILD_DIR="$build_dir" scripts/chaos.sh || status=1
fi
if ((sanitize)); then
  if ((started_stack)); then
    fresh_stack DELAYD_REDIS_TLS=1
  else
    echo "test: the stack was up before this script: the sanitizer pass uses it as it is"
  fi
  echo "test: ctest in $build_dir-asan/ (AddressSanitizer + UndefinedBehaviorSanitizer), REDIS_URL=$REDIS_URL"
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  if [[ "${sasl_default:-0}" == 1 ]]; then
    split_ctest "$build_dir-asan" 900 "$asan_excluded" -E '^integration\.stack_smoke$' || status=1
  else
    ctest --test-dir "$build_dir-asan" --output-on-failure --timeout 900 "${asan_args[@]}" || status=1
  fi
  unset ASAN_OPTIONS UBSAN_OPTIONS
  echo "test: ctest -L concurrency in $build_dir-tsan/ (ThreadSanitizer)"
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1" \
    ctest --test-dir "$build_dir-tsan" --output-on-failure --timeout 900 -L concurrency || status=1
  if ((started_stack)) && ((!cluster)); then
    # A Redis Cluster over TLS (3 primaries with a replica each): core deliveries and cancels,
    # and slots moved and a primary failed over under delayd.
    fresh_stack DELAYD_REDIS_TLS=1 DELAYD_REDIS_CLUSTER=3
    echo "test: core e2e and cluster cases in $build_dir/, REDIS_URL=$REDIS_URL"
    ctest --test-dir "$build_dir" --output-on-failure --timeout 600 -L 'e2e|cluster-e2e' \
      -R '^e2e\.(every job arrives|the same job-id twice|cluster: slots move)' || status=1
    grep -hE "^cluster test: " "$build_dir/Testing/Temporary/LastTest.log" 2>/dev/null | sed 's/^/test: /' || true
  fi
fi
if [[ "${sasl_default:-0}" == 1 ]]; then
  # A second Kafka beside the first would share two cores: the main stack stops first.
  stop_stack
  started_stack=0
  sasl_tests || status=1
fi
if ((fuzz)); then
  # The fuzzers need no servers: stop the stack first if this script started it.
  stop_stack
  started_stack=0
  # CI's budget is 45 minutes for everything; this many seconds per target (seven targets) keeps
  # it under. A longer campaign: scripts/fuzz.sh 600.
  [[ "${CI:-}" == "true" && -z "${FUZZ_SECONDS:-}" ]] && export FUZZ_SECONDS=5
  echo "test: scripts/fuzz.sh (libFuzzer, ${FUZZ_SECONDS:-60} s per target)"
  scripts/fuzz.sh || status=1
fi
exit $status
