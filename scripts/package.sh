#!/usr/bin/env bash
# Builds the Debian package of this tree, delayd_<version>_<arch>.deb (cmake/Package.cmake says
# what it holds; docs/operating/package.md how to install it and run delayd as a service).
#
#   scripts/package.sh                    a Release build in build-package/ (delayd and delayctl
#                                         only), the package into build-package/dist/
#   BUILD_DIR=build scripts/package.sh    the package of an existing build directory, whatever its
#                                         build type (tests/deploy/package_test.sh packages the
#                                         build ctest runs in: a Release build of its own would
#                                         cost the test minutes of compiling)
# Settings (environment): OUT_DIR (where the .deb goes; default <build>/dist), BUILD_JOBS
# (parallel compile jobs; default all cores), DELAYD_REVISION (the commit --version names, for a
# tree without .git, as the Dockerfile's build has; default git's HEAD).
# Needs what `scripts/install-deps.sh --run` installs (dpkg-dev and file among it: CPack's
# dependency list comes from dpkg-shlibdeps). Prints the package's path last.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

if [[ -n "${BUILD_DIR:-}" ]]; then
  build="$(cd "$BUILD_DIR" && pwd)"
else
  build="$ROOT/build-package"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDELAYD_BUILD_TESTS=OFF -DDELAYD_BUILD_BENCH=OFF \
    ${DELAYD_REVISION:+-DDELAYD_REVISION="$DELAYD_REVISION"} >/dev/null
fi
cmake --build "$build" -j "${BUILD_JOBS:-$(nproc)}" --target delayd delayctl
out="${OUT_DIR:-$build/dist}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
(cd "$build" && cpack -G DEB -B "$out" >"$out/cpack.log" 2>&1) || { cat "$out/cpack.log" >&2; exit 1; }
rm -rf "$out/_CPack_Packages"
deb="$(sed -n 's/^CPack: - package: \(.*\.deb\) generated\.$/\1/p' "$out/cpack.log" | tail -n 1)"
[[ -f "$deb" ]] || { cat "$out/cpack.log" >&2; echo "package: no .deb in $out" >&2; exit 1; }
echo "package: $deb"
