# delayd and delayctl in a small Debian image.
#
#   docker build -t delayd .          (or: docker compose up -d --build, see docker-compose.yml)
#
# Stage 1 compiles with the same Debian packages as scripts/install-deps.sh (tests/deploy checks
# that the two lists agree). Stage 2 carries only the shared libraries the two binaries load.

FROM debian:bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      g++ cmake ninja-build pkg-config \
      librdkafka-dev libhiredis-dev libboost-dev nlohmann-json3-dev catch2 \
      libtoml11-dev libcli11-dev libspdlog-dev prometheus-cpp-dev \
      libhowardhinnant-date-dev libjemalloc-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DDELAYD_BUILD_TESTS=OFF -DDELAYD_BUILD_BENCH=OFF -DCMAKE_RUNTIME_OUTPUT_DIRECTORY=/src/bin \
 && cmake --build build --target delayd delayctl \
 && strip /src/bin/delayd /src/bin/delayctl

FROM debian:bookworm-slim
# Header-only at run time: Boost.Asio, nlohmann/json, toml11, CLI11. Shared: librdkafka (C and
# C++), hiredis, spdlog and the fmt it is built on, prometheus-cpp (core), date/tz with the
# system tz database it reads (cron time zones), jemalloc (delayd's malloc).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      librdkafka++1 libhiredis0.14 libspdlog1.10 libfmt9 libprometheus-cpp-core1.0 libdate-tz3 libjemalloc2 tzdata \
      ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin delayd
COPY --from=build /src/bin/delayd /src/bin/delayctl /usr/local/bin/
# Fail the build, not the first start, if a shared library is missing from the list above.
RUN ! ldd /usr/local/bin/delayd /usr/local/bin/delayctl | grep 'not found'
USER delayd
ENTRYPOINT ["delayd"]
