# How the end-to-end benchmarks find and start delayd, one home for it: sourced by
# bench/run-e2e.sh and bench/run-scaleout.sh, not run. Needs die() and the repository's root as
# the working directory. Defines:
#   find_binaries      sets build (BUILD_DIR, else build-release/ built here in Release for
#                      e2e_load and delayd), load_bin (its e2e_load) and delayd_bin (DELAYD_BIN,
#                      else its delayd; DELAYD_BIN is unset after, as delayd would warn of it);
#                      librdkafka_dir (DELAYD_LIBRDKAFKA_DIR, unset after likewise: a directory
#                      holding another librdkafka.so.1, and librdkafka++.so.1 with it, that every
#                      delayd started here loads through LD_LIBRARY_PATH: to measure exactly_once
#                      on librdkafka 2.4.0 or later where the distribution has an older one; dies
#                      if the directory has none) and librdkafka_version (the one delayd loads,
#                      from `delayd --version`)
# and, once KAFKA_BOOTSTRAP, REDIS_URL and delayd_bin are set:
#   launch_delayd NAME LOG  starts delayd in the background on topics NAME.ingest, NAME.dlq,
#                           NAME.ready.{business}, group NAME and Redis prefix NAME (topics created
#                           by delayd; the status topic is the default's, unused), its admin
#                           endpoint on a free port, its output into LOG at DELAYD_LOG_LEVEL
#                           (info); sets launched_pid
#   wait_assigned NAME LOG PID
#                           waits (up to 60 s) until LOG says delayd got partitions of
#                           NAME.ingest; dies (die()) if PID exits first or the time runs out
#   admin_port_of LOG       the admin port LOG says delayd listens on (nothing yet: empty)
#   admin_get PORT PATH     GET PATH from 127.0.0.1:PORT over bash's /dev/tcp (no HTTP client
#                           needed); the whole response, nothing when it cannot be read within 5 s
launch_delayd() {
  local name="$1" log="$2"
  env ${librdkafka_dir:+LD_LIBRARY_PATH="$librdkafka_dir"} \
    DELAYD_KAFKA_BOOTSTRAP="$KAFKA_BOOTSTRAP" DELAYD_REDIS_URL="$REDIS_URL" \
    DELAYD_KAFKA_INGEST_TOPIC="$name.ingest" DELAYD_KAFKA_DLQ_TOPIC="$name.dlq" \
    DELAYD_KAFKA_READY_TOPIC_TEMPLATE="$name.ready.{business}" DELAYD_KAFKA_GROUP_ID="$name" \
    DELAYD_REDIS_PREFIX="$name" DELAYD_KAFKA_CREATE_TOPICS=true DELAYD_LOG_LEVEL="${DELAYD_LOG_LEVEL:-info}" \
    DELAYD_ADMIN_LISTEN=127.0.0.1:0 "$delayd_bin" >"$log" 2>&1 &
  launched_pid=$!
}
wait_assigned() {
  local name="$1" log="$2" pid="$3"
  for _ in $(seq 1 1200); do
    grep -q ": assigned $name.ingest\[" "$log" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || { tail -n 20 "$log" >&2; die "delayd ($name) exited during start-up"; }
    sleep 0.05
  done
  die "delayd ($name) got no partitions within 60 s (log: $log)"
}
admin_port_of() {
  sed -n 's/.* admin endpoint on 127\.0\.0\.1:\([0-9][0-9]*\) .*/\1/p' "$1" | head -n 1
}
admin_get() {
  timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" "$2" >&3 && cat <&3' \
    _ "$1" "$2" 2>/dev/null || true
}
find_binaries() {
  if [[ -n "${BUILD_DIR:-}" ]]; then
    build="$(cd "$BUILD_DIR" && pwd)"
  else
    build="$PWD/build-release"
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDELAYD_BUILD_TESTS=OFF -DDELAYD_BUILD_BENCH=ON >/dev/null
    cmake --build "$build" -j "${BUILD_JOBS:-$(nproc)}" --target e2e_load delayd >/dev/null
  fi
  load_bin="$build/bench/e2e_load"
  delayd_bin="$(realpath -m "${DELAYD_BIN:-$build/apps/delayd}")"
  unset DELAYD_BIN
  [[ -x "$load_bin" && -x "$delayd_bin" ]] || die "no $load_bin or $delayd_bin: build the targets e2e_load and delayd"
  librdkafka_dir=""
  if [[ -n "${DELAYD_LIBRDKAFKA_DIR:-}" ]]; then
    librdkafka_dir="$(realpath -m "$DELAYD_LIBRDKAFKA_DIR")"
    [[ -f "$librdkafka_dir/librdkafka.so.1" ]] ||
      die "DELAYD_LIBRDKAFKA_DIR=$DELAYD_LIBRDKAFKA_DIR holds no librdkafka.so.1 (build one: docs/performance/cost.md, \"Which librdkafka\")"
  fi
  unset DELAYD_LIBRDKAFKA_DIR
  # A delayd older than 0.4 (compare-e2e.sh's "before") does not name it: "unknown".
  librdkafka_version="$(env ${librdkafka_dir:+LD_LIBRARY_PATH="$librdkafka_dir"} "$delayd_bin" --version |
    sed -n 's/.*librdkafka \([^ ,]*\).*/\1/p')"
  librdkafka_version="${librdkafka_version:-unknown}"
}
