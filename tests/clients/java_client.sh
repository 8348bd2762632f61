#!/usr/bin/env bash
# The Java client (clients/java), as tests/clients checks the other clients:
#   java_client.sh vectors <output dir>
#       mvn test of the client: every shared test vector (clients/vectors) through its record
#       builders, and its unit tests (Instant and Duration, the partitioner, the ready-record
#       reader and its deduplication, read_committed consumers). No Kafka needed.
#   java_client.sh roundtrip <output dir> <delayd> <delayctl>
#       tests/clients/java/RoundTrip.java against a real delayd (needs KAFKA_BOOTSTRAP, REDIS_URL):
#       the client compiled by Maven, the round trip by javac against it, then run with java.
# Maven runs through scripts/maven.sh: its downloads in .cache/m2, offline once fetched
# (scripts/install-deps.sh fetches them); the build goes to <output dir>/java. A missing java,
# javac or mvn skips, or fails under CI=true (tests/support/requires.sh).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
source "$HERE/../support/requires.sh"
require_tool java "Debian package openjdk-17-jre-headless; scripts/install-deps.sh installs it"
require_tool javac "Debian package openjdk-17-jdk-headless; scripts/install-deps.sh installs it"
require_tool mvn "Debian package maven; scripts/install-deps.sh installs it"

mode="${1:-}" out="${2:?usage: java_client.sh vectors|roundtrip <output dir> ...}/java"
mkdir -p "$out"
client=(-f "$ROOT/clients/java/pom.xml" -Ddelayd.build.dir="$out/client" -Ddelayd.vectors="$ROOT/clients/vectors")

case "$mode" in
  vectors)
    # The whole Maven output on a failure; else Surefire's lines and the vectors' own count.
    log="$out/mvn-test.log"
    if ! "$ROOT/scripts/maven.sh" "${client[@]}" test >"$log" 2>&1; then
      cat "$log"
      echo "FAIL: mvn test of clients/java"
      exit 1
    fi
    grep -E '(Tests run:|^java vectors: )' "$log"
    ;;
  roundtrip)
    "$ROOT/scripts/maven.sh" -q "${client[@]}" compile dependency:build-classpath \
      -Dmdep.outputFile="$out/classpath" -Dmdep.includeScope=test
    cp="$out/client/classes:$(cat "$out/classpath")"
    rm -rf "$out/roundtrip"
    javac -Xlint:all -Werror -d "$out/roundtrip" -cp "$cp" "$HERE/java/RoundTrip.java"
    exec java -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$out/roundtrip:$cp" RoundTrip "${@:3}" "$out"
    ;;
  *)
    echo "usage: java_client.sh vectors <output dir> | roundtrip <output dir> <delayd> <delayctl>" >&2
    exit 2
    ;;
esac
