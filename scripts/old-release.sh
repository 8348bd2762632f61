#!/usr/bin/env bash
# A delayd of an earlier release, built once and kept, for the upgrade test (tests/upgrade) and
# for rehearsing an upgrade by hand:
#
#   scripts/old-release.sh [COMMIT]     prints the path of that commit's delayd (default 7be43d9,
#                                       the 0.3.0 release), building it first if it is not there
#
# The binary is kept in .cache/delayd-<commit>/delayd (git-ignored, like Kafka's jars in
# .cache/kafka-libs), built from a temporary git worktree of the commit (removed afterwards) with
# only the target delayd, at -O1 (it runs for its behaviour, not its speed, and compiles faster
# than at -O2): a few minutes on two cores, once. Concurrent
# callers wait for one build (a lock). Needs the commit in this clone's history and the build
# dependencies of scripts/install-deps.sh --run.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
commit="${1:-7be43d9}"
full="$(git -C "$ROOT" rev-parse --verify --quiet "$commit^{commit}")" ||
  { echo "old-release: no commit $commit in this clone (a shallow clone? git fetch --unshallow)" >&2; exit 1; }
short="$(git -C "$ROOT" rev-parse --short=7 "$full")"
dir="$ROOT/.cache/delayd-$short"
bin="$dir/delayd"
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
if [[ ! -x "$bin" ]]; then
  src="$dir/src" build="$dir/build" log="$dir/build.log"
  git -C "$ROOT" worktree remove --force "$src" >/dev/null 2>&1 || true
  rm -rf "$src" "$build"
  echo "old-release: building delayd of $short in $build (log: $log; once)" >&2
  git -C "$ROOT" worktree add --force --detach "$src" "$full" >"$log" 2>&1
  cleanup() { git -C "$ROOT" worktree remove --force "$src" >/dev/null 2>&1 || true; rm -rf "$src" "$build"; }
  trap cleanup EXIT
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 -DDELAYD_BUILD_TESTS=OFF \
    -DDELAYD_BUILD_BENCH=OFF >>"$log" 2>&1 || { echo "old-release: configuring $short failed: $log" >&2; exit 1; }
  cmake --build "$build" -j "${BUILD_JOBS:-$(nproc)}" --target delayd >>"$log" 2>&1 ||
    { echo "old-release: building $short failed: $log" >&2; exit 1; }
  cp "$build/apps/delayd" "$bin.part"
  mv "$bin.part" "$bin"
fi
echo "$bin"
