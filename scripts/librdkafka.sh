#!/usr/bin/env bash
# A librdkafka newer than Debian 12's 2.0.2, built once and kept, for delayd's exactly_once mode:
#
#   scripts/librdkafka.sh       prints the directory that holds its librdkafka.so.1 and
#                               librdkafka++.so.1, building them first if they are not there
#   scripts/librdkafka.sh --check DELAYD
#                               the same, then runs DELAYD --version on it: exit 0 only when it
#                               names this version (the ctest bench.librdkafka_build)
#   scripts/librdkafka.sh --install DIR
#                               the same, then copies the two libraries into DIR (made if
#                               missing) and prints DIR (the container image's build stage)
#   scripts/librdkafka.sh --run COMMAND [ARG...]
#                               the same, then runs COMMAND with that directory first in
#                               LD_LIBRARY_PATH, so that it and every delayd it starts load it
#                               (the ctests chaos.*.librdkafka_new)
#
#   LD_LIBRARY_PATH="$(scripts/librdkafka.sh)" build/apps/delayd       delayd on it
#   DELAYD_LIBRDKAFKA_DIR="$(scripts/librdkafka.sh)" bench/run-e2e.sh  a benchmark on it
#
# Why: before 2.4.0 a transactional producer's main thread spins through the last millisecond
# before each of its timers, and every transaction sets two, so each costs one to two
# milliseconds of CPU whatever it holds (confluentinc/librdkafka#4671). Where fires are sparse,
# each is a transaction of its own, and delayd on 2.0.2 pays about 1.3 ms of CPU a fire
# (docs/performance/scale.md, "Why delayd's CPU a job rises along a fill"). delayd is built against
# Debian's headers and runs on any later librdkafka.so.1 (the C ABI and the C++ wrapper's stay
# compatible); its first log line and `delayd --version` name the one it loaded.
#
# Where the source comes from: the Rust crate rdkafka-sys carries librdkafka's release tree (its
# librdkafka/ directory: the C library, the C++ wrapper and their configure), and crates.io is
# reachable wherever Debian's and the language registries are. The crate is checked against the
# SHA-256 the crates.io index gives for it (pinned here), then built with librdkafka's own
# configure against the system's OpenSSL, zlib, zstd, lz4 and Cyrus SASL (scripts/install-deps.sh
# installs them; libcurl too where its headers are, for OIDC): under a minute on two cores, once.
# SASL PLAIN, SCRAM and OAUTHBEARER are librdkafka's own; GSSAPI (Kerberos) needs Cyrus SASL's
# headers (libsasl2-dev) at build time, and is left out without them. Kept in .cache/librdkafka-<version>/ (git-ignored); concurrent callers wait for one build
# (a lock).
set -euo pipefail
check=""
install=""
run=()
if [[ "${1:-}" == --check ]]; then
  check="${2:?--check needs the delayd binary to run}"
elif [[ "${1:-}" == --install ]]; then
  install="${2:?--install needs the directory to copy the libraries into}"
elif [[ "${1:-}" == --run ]]; then
  shift
  (($# > 0)) || { echo "librdkafka: --run needs a command" >&2; exit 2; }
  run=("$@")
fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
crate="rdkafka-sys"
crate_version="4.10.0+2.12.1"  # librdkafka 2.12.1
crate_sha256="e234cf318915c1059d4921ef7f75616b5219b10b46e9f3a511a15eb4b56a3f77"
version="${crate_version#*+}"
dir="$ROOT/.cache/librdkafka-$version"
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
if [[ ! -f "$dir/librdkafka.so.1" || ! -f "$dir/librdkafka++.so.1" ]]; then
  work="$dir/build" log="$dir/build.log"
  rm -rf "$work"
  mkdir -p "$work"
  cleanup() { rm -rf "$work"; }
  trap cleanup EXIT
  echo "librdkafka: building $version in $work (log: $log; once)" >&2
  url="https://static.crates.io/crates/$crate/$crate-$crate_version.crate"
  curl -fsSL --retry 3 -o "$work/crate.tar.gz" "$url" ||
    { echo "librdkafka: cannot download $url" >&2; exit 1; }
  got="$(sha256sum "$work/crate.tar.gz" | cut -d' ' -f1)"
  [[ "$got" == "$crate_sha256" ]] ||
    { echo "librdkafka: $url has SHA-256 $got, not $crate_sha256: not used" >&2; exit 1; }
  tar -xzf "$work/crate.tar.gz" -C "$work"
  src="$work/$crate-$crate_version/librdkafka"
  (cd "$src" && ./configure --disable-debug-symbols && make -j "${BUILD_JOBS:-$(nproc)}" libs) >"$log" 2>&1 ||
    { echo "librdkafka: the build failed: $log" >&2; exit 1; }
  for lib in src/librdkafka.so.1 src-cpp/librdkafka++.so.1; do
    cp "$src/$lib" "$dir/$(basename "$lib").part"
    mv "$dir/$(basename "$lib").part" "$dir/$(basename "$lib")"
  done
fi
if [[ -n "$check" ]]; then
  said="$(LD_LIBRARY_PATH="$dir" "$check" --version)"
  echo "$said"
  [[ "$said" == *"librdkafka $version"* ]] || { echo "librdkafka: $check did not load $version from $dir" >&2; exit 1; }
fi
if [[ -n "$install" ]]; then
  mkdir -p "$install"
  cp "$dir/librdkafka.so.1" "$dir/librdkafka++.so.1" "$install/"
  echo "$install"
  exit 0
fi
if ((${#run[@]} > 0)); then
  exec 9>&-  # the lock is for the build, not for the command's whole run
  LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "${run[@]}"
fi
echo "$dir"
