#!/usr/bin/env bash
# Two versions of delayd through the same end-to-end benchmark, back to back on the same stack:
# the delayd of BEFORE_REV, then the one of AFTER_REV (default: this working tree). Both are
# measured by this tree's bench/run-e2e.sh and e2e_load, so that only delayd differs, and each
# run measures the machine's limits again (compare fractions, not rates: the limits move between
# runs on a shared machine).
#
#   bench/compare-e2e.sh BEFORE_REV [AFTER_REV]
#   SMOKE=1 BUILD_DIR=build bench/compare-e2e.sh HEAD~1   tiny sizes (run-e2e.sh's SMOKE), this
#                                                         tree's binaries from BUILD_DIR
#   SMOKE=1 BUILD_DIR=build PEER=none BEFORE_BIN=build/apps/delayd AFTER_RESULTS=build/e2e-smoke \
#     bench/compare-e2e.sh HEAD                           the ctest bench.compare_e2e_smoke: no
#                                                         build, one run, bench.e2e_smoke's as after
#
#   1. builds delayd of BEFORE_REV (Release, the target delayd only) in a temporary worktree under
#      build-before/ (removed afterwards; the binary stays as build-before/delayd-<commit>, and a
#      later comparison with the same commit reuses it); AFTER_REV too when it is given;
#   2. runs bench/run-e2e.sh with that delayd (DELAYD_BIN, LABEL), results in RESULTS_DIR/before/,
#      then with the other, results in RESULTS_DIR/after/; the first run builds this tree's
#      delayd and e2e_load in build-release/ as usual (nothing is built with BUILD_DIR);
#   3. runs BullMQ through the same phases on the same Redis (bench/run-bullmq.sh), results in
#      RESULTS_DIR/bullmq/, unless PEER=none or node or npm is missing (then said, and left out);
#   4. draws RESULTS_DIR/whole-life-lateness.png (bench/plot-whole-life.gp: p99 and p50 lateness
#      against offered whole-life rate, one curve per version and one for BullMQ) and prints the
#      main figures side by side with each run's machine limit and fraction, BullMQ's beside them,
#      and after's fire capacity and ingest as multiples of BullMQ's (e2e_load compare).
#
# Settings (environment): PEER (bullmq, the default, or none), RESULTS_DIR (bench/results; with
#   SMOKE=1 <build dir>/compare-smoke),
#   BEFORE_LABEL, AFTER_LABEL (the curves' and table's names; default the short commits), BUILD_JOBS
#   (for the builds; default nproc), BEFORE_BIN (a delayd to measure as BEFORE_REV's instead of
#   building it), AFTER_RESULTS (without AFTER_REV: a directory holding this tree's run, its
#   e2e.jsonl and data/, to compare with instead of running it again). Everything else (SMOKE, the sizes, BUILD_DIR, KEEP_DATA) goes
#   through to both runs of run-e2e.sh; see its header. Needs the stack up (KAFKA_BOOTSTRAP and
#   REDIS_URL, or scripts/stack.sh's): both runs share it, so this script neither starts nor stops
#   it. The full comparison takes about 15 minutes besides the builds.
# Raw data stays in before/data/ and after/data/ (ignored, as bench/results/data/ is); the
# e2e.jsonl and PNGs of both runs and whole-life-lateness.png can be committed.
# Exit status: 0 when both runs were whole (every job delivered, none early); 1 otherwise.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

say() { echo "compare: $*" >&2; }
die() { say "error: $*"; exit 1; }

(($# >= 1 && $# <= 2)) || die "usage: bench/compare-e2e.sh BEFORE_REV [AFTER_REV]"
before_rev="$1" after_rev="${2:-}"
jobs="${BUILD_JOBS:-$(nproc)}"
# The runs get their own; a LABEL, DELAYD_BIN or RESULTS_DIR meant for one run must not reach both.
unset LABEL DELAYD_BIN

if [[ -z "${KAFKA_BOOTSTRAP:-}" || -z "${REDIS_URL:-}" ]]; then
  scripts/stack.sh status >/dev/null 2>&1 ||
    die "the stack is not up: start it (scripts/stack.sh up) or set KAFKA_BOOTSTRAP and REDIS_URL"
  eval "$(scripts/stack.sh env | sed 's/^/export /')"
fi

if [[ -n "${BUILD_DIR:-}" ]]; then build="$(cd "$BUILD_DIR" && pwd)"; else build="$root/build-release"; fi
if [[ "${SMOKE:-0}" == 1 ]]; then out="${RESULTS_DIR:-$build/compare-smoke}"; else out="${RESULTS_DIR:-$root/bench/results}"; fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"
unset RESULTS_DIR

# --- delayd of a commit ----------------------------------------------------------------------
stash="$root/build-before"
worktrees=()
cleanup() {
  local w
  for w in "${worktrees[@]}"; do
    git worktree remove --force "$w" >/dev/null 2>&1 || say "could not remove the worktree $w"
    rm -rf "$w" "$w.build"
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# delayd_of REV: sets bin to a Release delayd built from REV (build-before/delayd-<commit>),
# building it unless it is there already, and label to REV's short commit.
delayd_of() {
  local commit src log
  commit="$(git rev-parse --verify --quiet "$1^{commit}")" || die "no commit $1"
  bin="$stash/delayd-$commit" label="$(git rev-parse --short "$commit")"
  [[ -x "$bin" ]] && return 0
  src="$stash/src-$commit" log="$stash/build-$commit.log"
  mkdir -p "$stash"
  git worktree remove --force "$src" >/dev/null 2>&1 || true  # left by an interrupted comparison
  rm -rf "$src" "$src.build"
  # --force: a worktree of that path may still be registered, its directory gone
  git worktree add --force --detach "$src" "$commit" >"$log" 2>&1 || die "git worktree add failed: $log"
  worktrees+=("$src")
  say "building delayd of $1 ($label) in $src.build (log: $log)"
  cmake -S "$src" -B "$src.build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDELAYD_BUILD_TESTS=OFF \
    -DDELAYD_BUILD_BENCH=OFF >>"$log" 2>&1 || die "the configuration of $1 failed: $log"
  cmake --build "$src.build" -j "$jobs" --target delayd >>"$log" 2>&1 || die "the build of $1 failed: $log"
  [[ -x "$src.build/apps/delayd" ]] || die "$1 built no apps/delayd"
  cp "$src.build/apps/delayd" "$bin.part"
  mv "$bin.part" "$bin"
}

if [[ -n "${BEFORE_BIN:-}" ]]; then
  bin="$(realpath "$BEFORE_BIN")" label="$(git rev-parse --short "$before_rev")"
  [[ -x "$bin" ]] || die "BEFORE_BIN=$BEFORE_BIN is no executable"
else
  delayd_of "$before_rev"
fi
before_bin="$bin" before_label="${BEFORE_LABEL:-$label}"
if [[ -n "$after_rev" ]]; then
  delayd_of "$after_rev"
  after_bin="$bin" after_label="${AFTER_LABEL:-$label}"
else
  # this tree's, built by the first run unless BUILD_DIR is given; run-e2e.sh names it
  after_bin="$build/apps/delayd" after_label="${AFTER_LABEL:-}"
fi
cleanup
worktrees=()

# --- the two runs ----------------------------------------------------------------------------
status=0
# run SIDE BIN [LABEL]: run-e2e.sh with that delayd, results in $out/SIDE.
run() {
  local side="$1" bin="$2" label="${3:-}"
  say "$side: delayd ${label:-of this tree} ($bin), results in $out/$side"
  local settings=(DELAYD_BIN="$bin" RESULTS_DIR="$out/$side")
  [[ -z "$label" ]] || settings+=(LABEL="$label")
  rm -f "$out/$side/e2e.jsonl"
  env "${settings[@]}" bench/run-e2e.sh || status=1
  [[ -s "$out/$side/e2e.jsonl" ]] || die "the $side run wrote no report"
}
run before "$before_bin" "$before_label"
[[ -n "${BUILD_DIR:-}" ]] || export BUILD_DIR="$build"  # built by the first run
after_dir="$out/after"
if [[ -n "${AFTER_RESULTS:-}" && -z "$after_rev" ]]; then
  after_dir="$(cd "$AFTER_RESULTS" && pwd)"
  [[ -s "$after_dir/e2e.jsonl" ]] || die "no e2e.jsonl in AFTER_RESULTS=$AFTER_RESULTS"
  say "after: the run in $after_dir"
else
  run after "$after_bin" "$after_label"
fi

# --- the peer, on the same stack -------------------------------------------------------------
peer_args=()
sweeps=("$out/before/data/whole-life.txt" "$after_dir/data/whole-life.txt")
case "${PEER:-bullmq}" in
  none) ;;
  bullmq)
    if command -v node >/dev/null && command -v npm >/dev/null; then
      say "peer: BullMQ through the same phases, results in $out/bullmq"
      rm -f "$out/bullmq/e2e.jsonl"
      RESULTS_DIR="$out/bullmq" bench/run-bullmq.sh || say "BullMQ did not process every job (its checks say which)"
      if [[ -s "$out/bullmq/e2e.jsonl" ]]; then
        peer_args=(--peer "$out/bullmq/e2e.jsonl")
        sweeps+=("$out/bullmq/data/whole-life.txt")
      fi
    else
      say "peer: node or npm not found (Debian packages nodejs and npm): BullMQ left out"
    fi
    ;;
  *) die "PEER must be bullmq or none, not ${PEER}" ;;
esac

# --- plot and table --------------------------------------------------------------------------
echo
if command -v gnuplot >/dev/null; then
  files=""
  for f in "${sweeps[@]}"; do [[ -s "$f" ]] && files+="${files:+ }\"$f\""; done
  if [[ -s "${sweeps[0]}" && -s "${sweeps[1]}" ]]; then
    gnuplot -e "files='$files'; out='$out/whole-life-lateness.png'" \
      "$root/bench/plot-whole-life.gp" && say "plot: $out/whole-life-lateness.png"
  fi
else
  say "gnuplot not found: plot skipped (Debian package gnuplot-nox)"
fi
"$build/bench/e2e_load" compare --before "$out/before/e2e.jsonl" --after "$after_dir/e2e.jsonl" "${peer_args[@]}"
((status == 0)) || say "a run found the pipeline broken (see its pipeline checks)"
exit "$status"
