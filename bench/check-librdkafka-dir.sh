#!/usr/bin/env bash
# The check behind the ctest bench.librdkafka_dir: the benchmarks' DELAYD_LIBRDKAFKA_DIR
# (bench/e2e-delayd.sh) makes every delayd they start load the librdkafka of that directory, and
# names the version it loaded; a directory without one is refused before anything runs.
#   BUILD_DIR=build bench/check-librdkafka-dir.sh
# Needs no stack: the delayd it "starts" is a stand-in that writes down its LD_LIBRARY_PATH; the
# real delayd of BUILD_DIR only answers --version, once on a copy of the librdkafka it links
# (ldd), in a directory of its own. Exit status 0 when every check holds.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
fail() { echo "librdkafka-dir: FAILED: $*" >&2; exit 1; }
: "${BUILD_DIR:?BUILD_DIR must name a build directory with apps/delayd and bench/e2e_load}"
real="$(cd "$BUILD_DIR" && pwd)/apps/delayd"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# find_binaries in a subshell of its own, with these settings; prints what it set, or dies (exit
# 1). With `launch` first, then launch_delayd (of a stand-in: it writes work/launched.log).
find_with() { # [launch] VAR=value...
  local launch=0
  [[ "$1" == launch ]] && { launch=1; shift; }
  (
    die() { echo "died: $*"; exit 1; }
    # shellcheck source=e2e-delayd.sh
    source bench/e2e-delayd.sh
    export "$@"
    find_binaries
    echo "dir=$librdkafka_dir version=$librdkafka_version"
    if ((launch)); then
      KAFKA_BOOTSTRAP=k REDIS_URL=r launch_delayd check "$work/launched.log"
      wait "$launched_pid"
    fi
  )
}

# 1. A directory without librdkafka.so.1 is refused, named.
out="$(find_with BUILD_DIR="$BUILD_DIR" DELAYD_LIBRDKAFKA_DIR="$work/none")" && fail "a directory without librdkafka was taken: $out"
[[ "$out" == *"DELAYD_LIBRDKAFKA_DIR=$work/none holds no librdkafka.so.1"* ]] || fail "refused without naming it: $out"

# 2. The directory reaches delayd: its --version and its start both see LD_LIBRARY_PATH.
mkdir -p "$work/lib"
: >"$work/lib/librdkafka.so.1"
cat >"$work/stand-in" <<'EOF'
#!/bin/sh
if [ "$1" = --version ]; then echo "delayd 0.0.0 (check), librdkafka from-${LD_LIBRARY_PATH:-nowhere}"; exit 0; fi
echo "started with LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
EOF
chmod +x "$work/stand-in"
out="$(find_with launch BUILD_DIR="$BUILD_DIR" DELAYD_BIN="$work/stand-in" DELAYD_LIBRDKAFKA_DIR="$work/lib")" ||
  fail "find_binaries refused a directory with librdkafka.so.1: $out"
[[ "$out" == "dir=$work/lib version=from-$work/lib" ]] || fail "the version was not read through the directory: $out"
grep -qx "started with LD_LIBRARY_PATH=$work/lib" "$work/launched.log" ||
  fail "delayd was started without it: $(cat "$work/launched.log")"
# Without the setting nothing is added.
out="$(find_with BUILD_DIR="$BUILD_DIR" DELAYD_BIN="$work/stand-in")" || fail "find_binaries failed: $out"
[[ "$out" == "dir= version=from-nowhere" ]] || fail "an LD_LIBRARY_PATH came from nowhere: $out"

# 3. The real delayd on a copy of its own librdkafka names the same version as without it.
for lib in librdkafka.so.1 librdkafka++.so.1; do
  path="$(ldd "$real" | awk -v l="$lib" '$1 == l { print $3 }')"
  [[ -f "$path" ]] || fail "ldd names no $lib for $real"
  cp "$path" "$work/lib/$lib"
done
linked="$("$real" --version | sed -n 's/.*librdkafka \([^ ,]*\).*/\1/p')"
out="$(find_with BUILD_DIR="$BUILD_DIR" DELAYD_LIBRDKAFKA_DIR="$work/lib")" || fail "find_binaries failed: $out"
[[ -n "$linked" && "$out" == "dir=$work/lib version=$linked" ]] || fail "delayd on the copy: '$out', linked: '$linked'"
echo "librdkafka-dir: refused without a library, passed to --version and to the start, librdkafka $linked read through the directory"
