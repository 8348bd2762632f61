#!/usr/bin/env bash
# Installs what delayd needs to build, test and run, and only what is missing.
# Idempotent: with everything present it costs a dpkg query and a file check.
#   Debian packages: compiler, CMake, the libraries of the design card, Howard Hinnant's date/tz
#                    and the tz database it reads (cron schedules in IANA zones), redis-server, kcat,
#                    Java 17 and Maven (for the Kafka server), docker-compose (config check only),
#                    gnuplot (the plots of bench/run-e2e.sh), prometheus (for promtool, which
#                    checks /metrics in the admin tests), chromium (headless, renders the admin
#                    status page in its test; test-only, not in the image), chromium-driver and
#                    python3-selenium (drive the console in its browser test; test-only), python3-confluent-kafka
#                    (the example worker examples/lifecycle_consumer.py and its test, and the Python
#                    client clients/python with its round trip tests/clients; not in the image),
#                    python3-croniter (the independent cron implementation tests/cron/croniter_diff.py
#                    compares against; test-only), openssl (the certificates of the stack with
#                    DELAYD_KAFKA_SASL=1; test-only), nodejs and npm (the TypeScript client clients/ts,
#                    its tests tests/clients/ts and examples/ts; test-only; npm only when no npm is
#                    on PATH, as a nodejs of its own may bring one), curl (README's tour, run by its
#                    test; test-only), openjdk-17-jdk-headless (javac: the Java client clients/java,
#                    its round trip and examples/java-spring; test-only), dpkg-dev and file
#                    (scripts/package.sh: the Debian package's dependency list), systemd (only for
#                    systemd-analyze, which checks the package's unit in its test; test-only).
#   npm registry:    the TypeScript client's packages (clients/ts/package-lock.json), installed
#                    by its tests (tests/clients/ts_test.sh: npm ci), not here.
#   Maven Central:   Apache Kafka and its runtime jars, into .cache/kafka-libs (git-ignored); the
#                    Java client's and the Spring example's packages and Maven plugins (test-only),
#                    into .cache/m2 (git-ignored) by scripts/maven.sh fetch, once per content of
#                    their poms, so that their tests run offline after it.
#   Go module proxy: helm (test-only: the Kubernetes chart's tests), built with go install, and
#                    the Go client's modules (test-only: tests/clients/go_client.sh).
#   PyPI:            kubernetes-validate (test-only: the Kubernetes JSON schemas, offline); the
#                    OpenTelemetry SDK, its OTLP exporter, the confluent-kafka instrumentation and
#                    opentelemetry-proto in a venv of their own (test-only: the trace tests;
#                    tests/support/otel_venv.py says where and which versions); mkdocs-material
#                    (test-only: builds the documentation site docs/ in its test).
#   --run            only what building and running need (scripts/run.sh): none of the test-only
#                    tools (docker-compose, python3-confluent-kafka, gnuplot, prometheus, chromium,
#                    chromium-driver, python3-selenium, python3-croniter, helm, kubernetes-validate,
#                    mkdocs-material, the OpenTelemetry venv, openssl, nodejs, npm, curl,
#                    openjdk-17-jdk-headless, systemd, the Maven packages of .cache/m2).
#   --fuzz           also clang 14 with its libFuzzer and sanitizer runtimes (scripts/fuzz.sh);
#                    plain builds use g++ and never install these.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# What building delayd and running it on the local stack need.
PACKAGES=(
  g++ cmake ninja-build pkg-config make
  librdkafka-dev libhiredis-dev libboost-dev nlohmann-json3-dev catch2
  libtoml11-dev libcli11-dev libspdlog-dev prometheus-cpp-dev
  libhowardhinnant-date-dev tzdata
  libjemalloc-dev  # delayd's malloc (DELAYD_JEMALLOC in CMakeLists.txt)
  libzstd-dev  # payloads kept compressed in Redis (storage/payload_compression.hpp)
  redis-server redis-tools kcat
  openjdk-17-jre-headless maven
  procps iproute2 python3
  dpkg-dev file  # scripts/package.sh: CPack's Debian package lists its Depends with dpkg-shlibdeps
  # scripts/librdkafka.sh (and the Dockerfile's build stage): a later librdkafka, fetched from
  # crates.io and built against these (curl: also the README's tour, tests/docs)
  curl ca-certificates libssl-dev zlib1g-dev liblz4-dev libsasl2-dev
)
# What the tests and benchmarks add.
TEST_PACKAGES=(
  docker-compose
  python3-confluent-kafka  # examples/, clients/python and their tests (tests/examples, tests/clients)
  gnuplot-nox
  prometheus
  chromium chromium-driver python3-selenium
  python3-croniter  # tests/cron/croniter_diff.py: delayd's cron against croniter (brings pytz, dateutil)
  openssl  # scripts/stack.sh with DELAYD_KAFKA_SASL=1: the stack's CA and Kafka's certificate
  python3-venv  # tests/support/otel_venv.py: the trace tests' OpenTelemetry packages, apart from Debian's
  python3-pip  # kubernetes-validate and mkdocs-material from PyPI (below): Debian's python3 has no pip
  nodejs  # clients/ts, its tests (tests/clients/ts_test.sh) and examples/ts
  iptables  # the partition tests cut an instance off with an owner match (tests/chaos/network_cut.hpp)
  openjdk-17-jdk-headless  # javac: clients/java, its round trip and examples/java-spring (scripts/maven.sh)
  systemd  # systemd-analyze verify of the package's unit (tests/deploy/package_test.sh); nothing starts it
  ccache  # scripts/test.sh's builds: clones of the same tree on one machine share their compiles
  clang-format-14  # tests/style: every .cpp and .hpp as the repository's .clang-format says
)
# Debian 12's clang: libFuzzer and the sanitizer runtimes live in libclang-rt-14-dev, which
# clang-14 only recommends; llvm-14 brings llvm-symbolizer for readable crash reports.
FUZZ_PACKAGES=(clang-14 libclang-rt-14-dev llvm-14)

run_only=0
for arg in "$@"; do
  case "$arg" in
    --fuzz) PACKAGES+=("${FUZZ_PACKAGES[@]}") ;;
    --run) run_only=1 ;;
    *) echo "usage: scripts/install-deps.sh [--run] [--fuzz]" >&2; exit 2 ;;
  esac
done
((run_only)) || PACKAGES+=("${TEST_PACKAGES[@]}")
# Debian's nodejs comes without npm (its package npm); another nodejs package (NodeSource's) brings
# its own npm and conflicts with Debian's.
((run_only)) || command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)

missing=()
for p in "${PACKAGES[@]}"; do
  # dpkg-query answers for installed packages only; anything else counts as missing.
  status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
  [[ "$status" == ii* ]] || missing+=("$p")
done
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Kafka jars: fetched once; the marker names the pom's checksum so a version bump refetches.
LIBS="$ROOT/.cache/kafka-libs"
POM="$ROOT/scripts/kafka/pom.xml"
stamp="$(sha256sum "$POM" | cut -c1-16)"
if [[ ! -f "$LIBS/.complete-$stamp" ]]; then
  echo "install-deps: fetching Apache Kafka jars from Maven Central"
  rm -rf "$LIBS"
  mkdir -p "$LIBS"
  mvn -q -B -Dstyle.color=never -f "$POM" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$LIBS"
  touch "$LIBS/.complete-$stamp"
fi

# Test-only tools that are no Debian package (not with --run), for tests/deploy/check_k8s.py:
#   helm                 renders and lints the chart deploy/helm/delayd; built from the Go module
#                        proxy with `go install` into $HELM_BIN_DIR (about 5 minutes on 2 cores,
#                        once); skipped when helm is on PATH or already there.
#   kubernetes-validate  (PyPI) the Kubernetes JSON schemas, offline, for the python3 on PATH (the
#                        one CMake finds for the tests).
#   mkdocs-material      (PyPI) MkDocs and its Material theme, for tests/docs (mkdocs build --strict
#                        of the site in docs/, configured by mkdocs.yml).
HELM_VERSION=v3.19.5
HELM_BIN_DIR=/usr/local/bin
KUBERNETES_VALIDATE_VERSION=1.37.0
MKDOCS_MATERIAL_VERSION=9.8.2
if ((!run_only)); then
  if ! command -v helm >/dev/null 2>&1 && [[ ! -x "$HELM_BIN_DIR/helm" ]]; then
    GO="$(command -v go || echo /usr/local/go/bin/go)"
    if [[ -x "$GO" ]]; then
      echo "install-deps: building helm $HELM_VERSION with go install (a few minutes, once)"
      $SUDO env GOBIN="$HELM_BIN_DIR" "$GO" install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
    else
      echo "install-deps: no Go toolchain, so no helm: the chart's tests skip (fail under CI=true)" >&2
    fi
  fi
  # The Java client's and the Spring example's packages into .cache/m2 (a no-op once fetched), for
  # tests/clients/java_client.sh and tests/examples/java_spring_test.sh.
  "$ROOT/scripts/maven.sh" fetch
  # The Go client's modules (franz-go) into Go's module cache, for tests/clients/go_client.sh.
  [[ ! -x "${GO:=$(command -v go || echo /usr/local/go/bin/go)}" ]] || (cd "$ROOT/clients/go" && "$GO" mod download)
  if ! python3 -c 'import kubernetes_validate' 2>/dev/null; then
    echo "install-deps: installing kubernetes-validate $KUBERNETES_VALIDATE_VERSION from PyPI"
    # Debian's own python3 refuses pip without --break-system-packages (PEP 668).
    python3 -m pip install --quiet "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" 2>/dev/null ||
      python3 -m pip install --quiet --break-system-packages "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"
  fi
  if ! python3 -c 'import material, mkdocs' 2>/dev/null; then
    echo "install-deps: installing mkdocs-material $MKDOCS_MATERIAL_VERSION from PyPI"
    python3 -m pip install --quiet "mkdocs-material==$MKDOCS_MATERIAL_VERSION" 2>/dev/null ||
      python3 -m pip install --quiet --break-system-packages "mkdocs-material==$MKDOCS_MATERIAL_VERSION"
  fi
  # The trace tests' Python side (tests/telemetry, bench/run-trace-cost.sh): a no-op once made.
  $SUDO /usr/bin/python3 "$ROOT/tests/support/otel_venv.py"
fi
