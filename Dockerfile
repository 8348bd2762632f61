# delayd and delayctl in a small Debian image, built as the release is: the Debian package of
# scripts/package.sh (a Release build of delayd and delayctl), installed in the runtime stage.
#
#   docker build --build-arg DELAYD_REVISION=$(git rev-parse --short HEAD) -t delayd:0.4.0 .
#   (or: docker compose up -d --build, see docker-compose.yml)
#
# Stage 1 compiles with the same Debian packages as scripts/install-deps.sh (tests/deploy checks
# that the two lists agree, and that this file builds the release as scripts/package.sh does).
# Stage 2 installs the package, whose Depends bring exactly the shared libraries the two binaries
# load. The version below is project()'s in CMakeLists.txt (tests/deploy checks it).
#
# The image runs delayd on a later librdkafka than Debian 12's 2.0.2: in exactly_once (the
# default) 2.0.2 keeps a thread spinning through every transaction, and in a group of several
# instances one of them leaving can take the others' shards too (docs/operating/package.md,
# "librdkafka"). Stage 1 builds it with scripts/librdkafka.sh (the version that script names, from
# crates.io, checked against its SHA-256), without libcurl as Debian builds 2.0.2, so that the
# libraries 2.0.2's package brings are the ones it needs; stage 2 keeps it in
# /usr/local/lib/delayd, first in LD_LIBRARY_PATH.

FROM debian:bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      g++ cmake ninja-build pkg-config dpkg-dev file \
      librdkafka-dev libhiredis-dev libboost-dev nlohmann-json3-dev catch2 \
      libtoml11-dev libcli11-dev libspdlog-dev prometheus-cpp-dev \
      libhowardhinnant-date-dev libjemalloc-dev libzstd-dev \
      ca-certificates curl make libssl-dev zlib1g-dev liblz4-dev libsasl2-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN BUILD_JOBS="$(nproc)" scripts/librdkafka.sh --install /opt/librdkafka
# The build context has no .git (.dockerignore): the commit that --version and delayd_build_info
# name comes from here, else it is "unknown".
ARG DELAYD_REVISION=unknown
RUN DELAYD_REVISION="$DELAYD_REVISION" OUT_DIR=/src/dist scripts/package.sh

FROM debian:bookworm-slim
LABEL org.opencontainers.image.title="delayd" \
      org.opencontainers.image.description="A delayed-message broker on Kafka and Redis" \
      org.opencontainers.image.version="0.4.0"
COPY --from=build /src/dist/*.deb /tmp/
COPY --from=build /opt/librdkafka/ /usr/local/lib/delayd/
ENV LD_LIBRARY_PATH=/usr/local/lib/delayd
# The user first, with the uid the Helm chart runs as (runAsUser 10001): the package's postinst
# keeps a user delayd that exists. No systemd runs here; the unit file is unused.
RUN useradd --system --uid 10001 --user-group --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin delayd \
 && apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends /tmp/delayd_*.deb ca-certificates \
 && rm -rf /var/lib/apt/lists/* /tmp/delayd_*.deb
# Fail the build, not the first start, if a shared library is missing from the package's Depends,
# or if delayd does not load the librdkafka above.
RUN ! ldd /usr/bin/delayd /usr/bin/delayctl /usr/local/lib/delayd/*.so.1 | grep 'not found' \
 && ldd /usr/bin/delayd | grep -q '=> /usr/local/lib/delayd/librdkafka\.so\.1 '
USER delayd
ENTRYPOINT ["delayd"]
