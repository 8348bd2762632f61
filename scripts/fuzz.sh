#!/usr/bin/env bash
# Fuzzes the parsers that read untrusted bytes (tests/fuzz) with libFuzzer, for a bounded time.
# Installs clang if missing (scripts/install-deps.sh --fuzz), builds build-fuzz/ with clang++-14
# and -DDELAYD_FUZZ=ON, then runs each target in turn, starting from its seeds in
# tests/fuzz/corpus/<target>/. The seeds are only read: what the fuzzer adds goes to a temporary
# directory that is deleted at exit, so the committed corpus never grows by itself.
#
#   scripts/fuzz.sh [seconds-per-target] [target...]   default 60 s ($FUZZ_SECONDS), all targets
#   FUZZ_BUILD_ONLY=1 scripts/fuzz.sh                  builds the targets and exits
#
# Prints one line per target, "fuzz: <target>: <N> executions in <S> s, <C> crashes", and exits
# non-zero if any target crashed, hung or broke a sanitizer. The input that did it is kept in
# build-fuzz/fuzz-artifacts/<target>/ (printed), the fuzzer's output in build-fuzz/fuzz-logs/.
# Reproduce with: build-fuzz/tests/fuzz/fuzz_<target> <crash file>
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

ALL_TARGETS=(ingest_parse time_format header_codec redis_url admin_request console_query cron_expr)

seconds="${FUZZ_SECONDS:-60}"
if (($#)) && [[ "$1" =~ ^[0-9]+$ ]]; then
  seconds="$1"
  shift
fi
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || ((seconds < 1)); then
  echo "usage: scripts/fuzz.sh [seconds-per-target] [target...]  (targets: ${ALL_TARGETS[*]})" >&2
  exit 2
fi
targets=("$@")
((${#targets[@]})) || targets=("${ALL_TARGETS[@]}")
for t in "${targets[@]}"; do
  if [[ ! " ${ALL_TARGETS[*]} " =~ " $t " ]]; then
    echo "fuzz: unknown target '$t' (targets: ${ALL_TARGETS[*]})" >&2
    exit 2
  fi
done

scripts/install-deps.sh --fuzz

BUILD=build-fuzz
jobs="${DELAYD_BUILD_JOBS:-$(nproc)}"
werror=OFF
[[ "${CI:-}" == "true" ]] && werror=ON
echo "fuzz: building $BUILD/ with clang++-14"
build_start=$SECONDS
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDELAYD_FUZZ=ON -DDELAYD_BUILD_TESTS=OFF -DDELAYD_BUILD_BENCH=OFF -DDELAYD_WERROR="$werror" >/dev/null
cmake --build "$BUILD" -j "$jobs" --target "${targets[@]/#/fuzz_}"
echo "fuzz: build took $((SECONDS - build_start)) s"
# FUZZ_BUILD_ONLY=1: the build alone (scripts/test.sh --build-only).
[[ -n "${FUZZ_BUILD_ONLY:-}" ]] && exit 0

symbolizer=/usr/lib/llvm-14/bin/llvm-symbolizer
[[ -x "$symbolizer" ]] && export ASAN_SYMBOLIZER_PATH="$symbolizer"
export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

work="$(mktemp -d)"
pid=""
cleanup() {
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$BUILD/fuzz-logs"
status=0
for t in "${targets[@]}"; do
  bin="$BUILD/tests/fuzz/fuzz_$t"
  artifacts="$BUILD/fuzz-artifacts/$t"
  log="$BUILD/fuzz-logs/$t.log"
  rm -rf "$artifacts"
  mkdir -p "$artifacts" "$work/$t"
  args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="$artifacts/")
  [[ -f tests/fuzz/dict/$t.dict ]] && args+=(-dict="tests/fuzz/dict/$t.dict")
  # -max_total_time ends the run; timeout(1) is only the backstop should the fuzzer wedge.
  start=$(date +%s%N)
  rc=0
  timeout -k 10 $((seconds + 120)) "$bin" "${args[@]}" "$work/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1 &
  pid=$!
  wait "$pid" || rc=$?
  pid=""
  elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  [[ -n "$execs" ]] || execs=$(grep -oE '^#[0-9]+' "$log" | tail -n 1 | tr -d '#')
  crash_files=("$artifacts"/*)
  [[ -e "${crash_files[0]}" ]] || crash_files=()
  crashes=${#crash_files[@]}
  ((rc == 0 || crashes > 0)) || crashes=1  # died without leaving an input: count it all the same
  printf 'fuzz: %s: %s executions in %d.%d s, %d crashes\n' \
    "$t" "${execs:-0}" $((elapsed / 1000)) $((elapsed % 1000 / 100)) "$crashes"
  if ((crashes)); then
    status=1
    for f in "${crash_files[@]}"; do echo "fuzz: $t: input: $f (reproduce: $bin $f)"; done
    ((rc != 124 && rc != 137)) || echo "fuzz: $t: the fuzzer did not stop on time (exit $rc)"
    grep -E 'ERROR: |runtime error|fuzz check failed|SUMMARY: ' "$log" | head -n 5 | sed "s/^/fuzz: $t: /" || true
    echo "fuzz: $t: full output: $log"
  fi
done
exit $status
