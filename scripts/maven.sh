#!/usr/bin/env bash
# Maven for the Java client (clients/java) and the Spring Kafka example (examples/java-spring),
# with its downloads in the project's cache folder, .cache/m2 (git-ignored), not in ~/.m2:
#   scripts/maven.sh fetch            fetches what their builds and tests use from Maven Central,
#                                     once: builds and tests the client (no Kafka needed) and
#                                     installs it into .cache/m2, compiles the example and runs
#                                     Surefire over it with its stack test disabled. A stamp names
#                                     the poms' checksum, so a version bump fetches again.
#                                     scripts/install-deps.sh runs it.
#   scripts/maven.sh <mvn arguments>  mvn -B with that local repository; offline (-o) once fetch
#                                     has completed for these poms, so that tests never wait for
#                                     the network.
# Runs hold a lock on .cache/m2, so that two at once (the build and sanitizer passes of ctest, a
# developer's run beside them) do not write it together.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
M2="$ROOT/.cache/m2"
POMS=("$ROOT/clients/java/pom.xml" "$ROOT/examples/java-spring/pom.xml")
mkdir -p "$M2"
stamp="$M2/.complete-$(cat "${POMS[@]}" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-16)"
exec 7>"$M2/.lock"
flock 7

# Maven 3.8 writes colour resets even in batch mode with -q: they are taken out, so that a test's
# figures start their lines (scripts/test.sh picks them out of ctest's log).
mvn_() {
  local offline=()
  [[ -f "$stamp" ]] && offline=(-o)
  mvn -B -ntp -Dstyle.color=never -Dmaven.repo.local="$M2" "${offline[@]}" "$@" 2>&1 | sed 's/\x1b\[[0-9;]*m//g'
}

if [[ "${1:-}" != fetch ]]; then
  mvn_ "$@"
  exit
fi
[[ -f "$stamp" ]] && exit 0
echo "maven: fetching the Java client's and the Spring example's packages from Maven Central into $M2"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
mvn_ -q -f "${POMS[0]}" -Ddelayd.build.dir="$scratch/client" install dependency:build-classpath \
  -Dmdep.outputFile="$scratch/classpath" -Dmdep.includeScope=test
mvn_ -q -f "${POMS[1]}" -Ddelayd.build.dir="$scratch/example" -Ddelayd.fetchOnly=true test
rm -f "$M2"/.complete-*
touch "$stamp"
echo "maven: fetched ($(du -sh "$M2" | cut -f1))"
