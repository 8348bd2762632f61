#!/usr/bin/env bash
# examples/java-spring (Spring Boot 3.5, Spring Kafka, delayd's Java client) against a real
# delayd: the example's own test (OrderRemindersTest, under Maven Surefire) schedules five
# reminders and cancels a sixth through its KafkaTemplate, and checks that its @KafkaListener sends
# each of the five once and never early and reports it, that the status topic holds the reports,
# and that delayctl get shows the five finished and the sixth cancelled. This script starts
# delayd in a world of its own (tests/support/delayd_world.sh), installs the current client
# (clients/java) into the local repository, and runs the test with the world's topics.
#   usage: java_spring_test.sh <delayd> <delayctl> <output dir>
# Maven runs through scripts/maven.sh (.cache/m2, offline once fetched). Without java, javac or
# mvn: skipped (exit 77), or failed under CI=true (support/requires.sh).
set -euo pipefail
DELAYD="$1" DELAYCTL="$2" OUT="$3/java-spring"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
# shellcheck source=../support/requires.sh
source "$HERE/../support/requires.sh"
require_tool java "Debian package openjdk-17-jre-headless; scripts/install-deps.sh installs it"
require_tool javac "Debian package openjdk-17-jdk-headless; scripts/install-deps.sh installs it"
require_tool mvn "Debian package maven; scripts/install-deps.sh installs it"
# shellcheck source=../support/delayd_world.sh
source "$HERE/../support/delayd_world.sh"

mkdir -p "$OUT"
cd "$OUT"
world_env spring
export DELAYD_KAFKA_STATUS_TOPIC="$run.status" DELAYD_ADMIN_LISTEN=""
start_delayd "$DELAYD"

"$ROOT/scripts/maven.sh" -q -f "$ROOT/clients/java/pom.xml" -Ddelayd.build.dir="$OUT/client" install -DskipTests
mvn_log="$OUT/mvn-test-$run.log"
if ! "$ROOT/scripts/maven.sh" -f "$ROOT/examples/java-spring/pom.xml" -Ddelayd.build.dir="$OUT/example" test \
  -Dspring.kafka.bootstrap-servers="$KAFKA_BOOTSTRAP" -Dspring.kafka.consumer.group-id="$run.reminders" \
  -Dreminders.ingest-topic="$run.ingest" -Dreminders.status-topic="$run.status" \
  -Dreminders.ready-topic="$run.ready.reminders" -Dreminders.test.delayctl="$DELAYCTL" >"$mvn_log" 2>&1; then
  cat "$mvn_log"
  tail -50 "$log"
  echo "FAIL: the example's test (mvn test in examples/java-spring)"
  exit 1
fi
grep -E '(Tests run:|^java spring example: )' "$mvn_log"
grep -q '^java spring example: ' "$mvn_log" || { cat "$mvn_log"; echo "FAIL: the example's test did not run"; exit 1; }
echo "1 passed, 0 failed"
