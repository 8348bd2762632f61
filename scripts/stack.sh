#!/usr/bin/env bash
# The local stack: one Apache Kafka node (KRaft, broker+controller) and one redis-server,
# both on loopback, on non-standard ports so that a user's own Kafka (9092) or Redis (6379)
# never clashes. Logs and data live under .stack/ (git-ignored).
# With DELAYD_REDIS_CLUSTER=N (N >= 3), a Redis Cluster of N primaries, each with
# DELAYD_REDIS_CLUSTER_REPLICAS replicas (default 1), takes the place of the single redis-server:
# ports DELAYD_REDIS_CLUSTER_PORT (17001) upwards (primaries first), data under
# .stack/redis-cluster/<port>/, and `env` prints REDIS_URL=redis-cluster://host:port,... .
#
#   scripts/stack.sh up       start both (idempotent: what is already up is left alone)
#   scripts/stack.sh down     stop both, wait until they are gone
#   scripts/stack.sh status   say what runs; exit 0 only if both answer
#   scripts/stack.sh env      print KAFKA_BOOTSTRAP=host:port and REDIS_URL=redis://host:port
#   scripts/stack.sh reset    down, then delete the data (topics, offsets, Redis AOF)
#   scripts/stack.sh restart redis|kafka
#                             stop that one server (if it runs) and start it again with the same
#                             ports and data dir; returns once it answers (Redis replays its AOF
#                             first and answers LOADING meanwhile). For the fault tests.
#
# Settings (environment, read by `up`; later commands reuse what `up` recorded):
#   DELAYD_KAFKA_PORT (19092)  DELAYD_KAFKA_CONTROLLER_PORT (19093)  DELAYD_REDIS_PORT (16379)
#   DELAYD_KAFKA_AUTO_CREATE (false): Kafka's auto.create.topics.enable
#   DELAYD_KAFKA_HEAP (512m)   DELAYD_STACK_DIR (.stack)   DELAYD_STACK_TIMEOUT (120 seconds)
#   DELAYD_REDIS_EXTRA_ARGS: more redis-server arguments for this start only (`up`, `restart`),
#     for the fault tests, e.g. "--key-load-delay 100" to make its LOADING phase last
#   DELAYD_KAFKA_JVM_EXTRA: more JVM options for the Kafka server, for this start only (`up`,
#     `restart`), e.g. "-XX:ParallelGCThreads=1 -Xlog:gc:file=/tmp/kafka-gc.log" for a benchmark
#   DELAYD_REDIS_CLUSTER (unset: one redis-server)  DELAYD_REDIS_CLUSTER_REPLICAS (1)
#   DELAYD_REDIS_CLUSTER_PORT (17001): the first cluster port (cluster bus: port + 10000)
#   DELAYD_REDIS_TLS (unset): with 1, Redis (single or cluster) speaks TLS only (--port 0
#     --tls-port, client certificates required, the cluster bus and replication over TLS too),
#     with certificates made by scripts/tls-certs.sh under $DELAYD_STACK_DIR/tls at `up`; `env`
#     then prints a rediss:// (or redis-cluster+tls://) REDIS_URL and DELAYD_REDIS_TLS_CA_FILE,
#     DELAYD_REDIS_TLS_CERT_FILE, DELAYD_REDIS_TLS_KEY_FILE, the settings delayd and the tests
#     read, and REDIS_CLI_TLS, redis-cli's arguments for the same
#   DELAYD_KAFKA_SASL (unset: PLAINTEXT): with 1, Kafka's client port speaks SASL_SSL with
#     SCRAM-SHA-512 and authorizes with ACLs (StandardAuthorizer; User:admin is a super user).
#     At the first start the script makes, under $STACK_DIR/kafka-sasl/, a CA and a server
#     certificate for 127.0.0.1/localhost (openssl), random passwords, and two SCRAM users:
#     admin (super user) and delayd (no ACLs: a test grants what it needs). The controller
#     listener stays PLAINTEXT on loopback (its principal, User:ANONYMOUS, is a super user too).
#     `env` then prints, besides KAFKA_BOOTSTRAP:
#       KAFKA_SECURITY_PROTOCOL=SASL_SSL   KAFKA_SASL_MECHANISM=SCRAM-SHA-512
#       KAFKA_SASL_USERNAME=admin          KAFKA_SASL_PASSWORD=<admin's password>
#       KAFKA_SSL_CA_LOCATION=<CA certificate, PEM>
#       KAFKA_DELAYD_USERNAME=delayd       KAFKA_DELAYD_PASSWORD_FILE=<file holding its password>
#     (librdkafka: security.protocol, sasl.mechanism, sasl.username, sasl.password,
#     ssl.ca.location). `scripts/stack.sh acl ARGS...` runs Kafka's ACL tool (kafka-acls.sh)
#     as admin, e.g. `acl --add --allow-principal User:delayd --operation Read --topic t`;
#     `scripts/stack.sh scram USER PASSWORD` creates a SCRAM user or sets its password.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STACK_DIR="${DELAYD_STACK_DIR:-$ROOT/.stack}"
RECORDED="$STACK_DIR/stack.env"
HOST=127.0.0.1

die() { echo "stack: error: $*" >&2; exit 1; }
say() { echo "stack: $*"; }

# `up` records its ports so that `env`, `status` and `down` speak of the same servers even
# when called without the variables that `up` saw.
if [[ -f "$RECORDED" && "${1:-}" != "up" ]]; then
  # shellcheck disable=SC1090
  source "$RECORDED"
fi
KAFKA_PORT="${DELAYD_KAFKA_PORT:-${KAFKA_PORT:-19092}}"
CONTROLLER_PORT="${DELAYD_KAFKA_CONTROLLER_PORT:-${CONTROLLER_PORT:-19093}}"
REDIS_PORT="${DELAYD_REDIS_PORT:-${REDIS_PORT:-16379}}"
AUTO_CREATE="${DELAYD_KAFKA_AUTO_CREATE:-false}"
HEAP="${DELAYD_KAFKA_HEAP:-512m}"
TIMEOUT="${DELAYD_STACK_TIMEOUT:-120}"
CLUSTER="${DELAYD_REDIS_CLUSTER:-${CLUSTER:-}}"
CLUSTER_REPLICAS="${DELAYD_REDIS_CLUSTER_REPLICAS:-${CLUSTER_REPLICAS:-1}}"
CLUSTER_PORT="${DELAYD_REDIS_CLUSTER_PORT:-${CLUSTER_PORT:-17001}}"
REDIS_TLS="${DELAYD_REDIS_TLS:-${REDIS_TLS:-}}"
[[ -z "$REDIS_TLS" || "$REDIS_TLS" == 1 ]] || die "DELAYD_REDIS_TLS must be 1 or unset (got '$REDIS_TLS')"
SASL="${DELAYD_KAFKA_SASL:-${SASL:-}}"
[[ -z "$SASL" || "$SASL" == 1 ]] || die "DELAYD_KAFKA_SASL must be 1 or unset (got '$SASL')"
if [[ -n "$CLUSTER" ]]; then
  [[ "$CLUSTER" =~ ^[0-9]+$ && "$CLUSTER" -ge 3 ]] || die "DELAYD_REDIS_CLUSTER must be a number of primaries, at least 3 (got '$CLUSTER')"
  [[ "$CLUSTER_REPLICAS" =~ ^[0-9]+$ ]] || die "DELAYD_REDIS_CLUSTER_REPLICAS must be a number (got '$CLUSTER_REPLICAS')"
fi

KAFKA_DIR="$STACK_DIR/kafka"
REDIS_DIR="$STACK_DIR/redis"
KAFKA_PID="$KAFKA_DIR/kafka.pid"
REDIS_PID="$REDIS_DIR/redis.pid"
KAFKA_LIBS="$ROOT/.cache/kafka-libs"
CLUSTER_DIR="$STACK_DIR/redis-cluster"
TLS_DIR="$STACK_DIR/tls"

# redis-cli and redis-server arguments for TLS (empty without DELAYD_REDIS_TLS).
cli_tls=()
server_tls=()
if [[ -n "$REDIS_TLS" ]]; then
  cli_tls=(--tls --cacert "$TLS_DIR/ca.crt" --cert "$TLS_DIR/client.crt" --key "$TLS_DIR/client.key")
  server_tls=(--tls-cert-file "$TLS_DIR/server.crt" --tls-key-file "$TLS_DIR/server.key"
    --tls-ca-cert-file "$TLS_DIR/ca.crt" --tls-auth-clients yes)
fi
rcli() { redis-cli "${cli_tls[@]}" "$@"; }
# The listening arguments of a node on port $1: plain, or TLS only.
listen_args() {
  if [[ -n "$REDIS_TLS" ]]; then
    echo --port 0 --tls-port "$1" "${server_tls[@]}"
  else
    echo --port "$1"
  fi
}
SASL_DIR="$STACK_DIR/kafka-sasl"
SASL_MECHANISM=SCRAM-SHA-512

port_in_use() {
  if command -v ss >/dev/null; then
    [[ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]]
  else
    (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null
  fi
}

# A pid file counts only if its process is alive and is the server we started.
running_pid() { # file pattern
  local pid
  [[ -f "$1" ]] || return 1
  pid="$(cat "$1")"
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 1
  grep -q -- "$2" "/proc/$pid/cmdline" 2>/dev/null || return 1
  echo "$pid"
}

# kcat's -X options for the client port: none, or SASL_SSL as admin.
kcat_security() {
  [[ -n "$SASL" ]] || return 0
  printf '%s\n' -X security.protocol=SASL_SSL -X "sasl.mechanism=$SASL_MECHANISM" -X sasl.username=admin \
    -X "sasl.password=$(cat "$SASL_DIR/admin.password")" -X "ssl.ca.location=$SASL_DIR/ca.pem"
}
kafka_answers() {
  local sec=()
  mapfile -t sec < <(kcat_security)
  kcat -b "$HOST:$KAFKA_PORT" "${sec[@]}" -L -m 3 >/dev/null 2>&1
}
redis_answers() { [[ "$(rcli -h "$HOST" -p "$REDIS_PORT" ping 2>/dev/null)" == "PONG" ]]; }

wait_until() { # what check pidfile pattern logfile
  local what="$1" check="$2" pidfile="$3" pattern="$4" log="$5" deadline=$((SECONDS + TIMEOUT))
  until "$check"; do
    if ! running_pid "$pidfile" "$pattern" >/dev/null; then
      echo "---- last lines of $log ----" >&2
      tail -n 30 "$log" >&2 || true
      die "$what exited during start-up (log: $log)"
    fi
    ((SECONDS < deadline)) || die "$what did not answer within ${TIMEOUT}s (log: $log)"
    sleep 0.3
  done
}

redis_up() {
  if pid="$(running_pid "$REDIS_PID" redis-server)"; then
    redis_answers || die "redis-server (pid $pid) runs but does not answer PING on $HOST:$REDIS_PORT"
    say "redis already up on $HOST:$REDIS_PORT (pid $pid)"
    return
  fi
  command -v redis-server >/dev/null || die "redis-server not found: run scripts/install-deps.sh (Debian package redis-server)"
  port_in_use "$REDIS_PORT" && die "port $REDIS_PORT is already in use by another process; set DELAYD_REDIS_PORT to a free port"
  mkdir -p "$REDIS_DIR"
  local extra=()
  read -r -a extra <<<"${DELAYD_REDIS_EXTRA_ARGS:-}"
  # AOF with fsync every second: a job acknowledged by Redis survives a crash of Redis itself
  # except for at most the last second, the usual production trade-off.
  # DEBUG (for DEBUG SLEEP in the fault tests) is allowed from loopback connections only.
  [[ -z "$REDIS_TLS" ]] || "$ROOT/scripts/tls-certs.sh" "$TLS_DIR" >/dev/null
  local listen=()
  read -r -a listen <<<"$(listen_args "$REDIS_PORT")"
  redis-server --bind "$HOST" "${listen[@]}" --protected-mode yes \
    --dir "$REDIS_DIR" --appendonly yes --appendfsync everysec --save "" \
    --enable-debug-command local "${extra[@]}" \
    --daemonize yes --pidfile "$REDIS_PID" --logfile "$REDIS_DIR/redis.log" \
    || die "redis-server failed to start (log: $REDIS_DIR/redis.log)"
  local deadline=$((SECONDS + 10))
  until [[ -s "$REDIS_PID" ]]; do
    ((SECONDS < deadline)) || die "redis-server wrote no pid file (log: $REDIS_DIR/redis.log)"
    sleep 0.1
  done
  wait_until redis redis_answers "$REDIS_PID" redis-server "$REDIS_DIR/redis.log"
  say "redis up on $HOST:$REDIS_PORT (pid $(cat "$REDIS_PID"))"
}

# ---- Redis Cluster (DELAYD_REDIS_CLUSTER) ----
cluster_ports() { # all nodes, primaries first
  local n=$((CLUSTER * (1 + CLUSTER_REPLICAS))) i
  for ((i = 0; i < n; i++)); do echo $((CLUSTER_PORT + i)); done
}
cluster_url() {
  local seeds=() i
  for ((i = 0; i < CLUSTER; i++)); do seeds+=("$HOST:$((CLUSTER_PORT + i))"); done
  local IFS=,
  echo "redis-cluster://${seeds[*]}"
}
node_pid() { echo "$CLUSTER_DIR/$1/redis.pid"; }
node_answers() { [[ "$(rcli -h "$HOST" -p "$1" ping 2>/dev/null)" == "PONG" ]]; }
starting_node_answers() { node_answers "$STARTING_NODE"; }  # for wait_until, which takes a name
cluster_ok() { # every node says cluster_state:ok
  local p
  for p in $(cluster_ports); do
    rcli -h "$HOST" -p "$p" cluster info 2>/dev/null | grep -q '^cluster_state:ok' || return 1
  done
}
cluster_node_up() { # port
  local p="$1" dir="$CLUSTER_DIR/$1" pid
  if pid="$(running_pid "$(node_pid "$p")" redis-server)"; then
    node_answers "$p" || die "redis-server (pid $pid) runs but does not answer PING on $HOST:$p"
    return
  fi
  port_in_use "$p" && die "port $p is already in use by another process; set DELAYD_REDIS_CLUSTER_PORT to a free range"
  port_in_use $((p + 10000)) && die "cluster bus port $((p + 10000)) is already in use; set DELAYD_REDIS_CLUSTER_PORT to a free range"
  mkdir -p "$dir"
  local extra=()
  read -r -a extra <<<"${DELAYD_REDIS_EXTRA_ARGS:-}"
  # As the single server: AOF every second. cluster-node-timeout 2000: a failed primary is
  # replaced by its replica within a few seconds.
  local listen=()
  read -r -a listen <<<"$(listen_args "$p")"
  [[ -z "$REDIS_TLS" ]] || listen+=(--tls-cluster yes --tls-replication yes)
  redis-server --bind "$HOST" "${listen[@]}" --protected-mode yes --dir "$dir" \
    --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000 \
    --appendonly yes --appendfsync everysec --save "" --enable-debug-command local "${extra[@]}" \
    --daemonize yes --pidfile "$(node_pid "$p")" --logfile "$dir/redis.log" \
    || die "redis-server on $p failed to start (log: $dir/redis.log)"
  local deadline=$((SECONDS + 10))
  until [[ -s "$(node_pid "$p")" ]]; do
    ((SECONDS < deadline)) || die "redis-server on $p wrote no pid file (log: $dir/redis.log)"
    sleep 0.1
  done
  STARTING_NODE="$p"
  wait_until "redis node $p" starting_node_answers "$(node_pid "$p")" redis-server "$dir/redis.log"
}

cluster_up() {
  command -v redis-server >/dev/null || die "redis-server not found: run scripts/install-deps.sh (Debian package redis-server)"
  local p nodes=()
  for p in $(cluster_ports); do
    cluster_node_up "$p"
    nodes+=("$HOST:$p")
  done
  # A new cluster is created once; after `down` and `up` the nodes rejoin from their nodes.conf.
  if [[ "$(rcli -h "$HOST" -p "$CLUSTER_PORT" cluster info | tr -d '\r' | sed -n 's/^cluster_slots_assigned://p')" == 0 ]]; then
    say "creating a Redis Cluster: $CLUSTER primaries, $CLUSTER_REPLICAS replica(s) each"
    timeout "$TIMEOUT" redis-cli "${cli_tls[@]}" --cluster create "${nodes[@]}" --cluster-replicas "$CLUSTER_REPLICAS" --cluster-yes \
      >"$CLUSTER_DIR/create.log" 2>&1 || { tail -n 30 "$CLUSTER_DIR/create.log" >&2; die "redis-cli --cluster create failed (log: $CLUSTER_DIR/create.log)"; }
  fi
  local deadline=$((SECONDS + TIMEOUT))
  until cluster_ok; do
    ((SECONDS < deadline)) || die "the Redis Cluster did not reach cluster_state:ok within ${TIMEOUT}s (logs: $CLUSTER_DIR/*/redis.log)"
    sleep 0.3
  done
  say "redis cluster up on $HOST:$CLUSTER_PORT-$((CLUSTER_PORT + ${#nodes[@]} - 1)) (${#nodes[@]} nodes, cluster_state:ok)"
}

cluster_down() {
  local p
  for p in $(cluster_ports); do stop_pid "redis node $p" "$(node_pid "$p")" redis-server; done
}

cluster_status() {
  local p pid down=0
  for p in $(cluster_ports); do
    if ! { pid="$(running_pid "$(node_pid "$p")" redis-server)" && node_answers "$p"; }; then
      say "redis node $p down"; down=1
    fi
  done
  if ((down == 0)) && cluster_ok; then
    say "redis cluster up: $(cluster_url) ($(cluster_ports | wc -l) nodes, cluster_state:ok)"
    return 0
  fi
  ((down)) || say "redis cluster nodes run but the cluster is not ok"
  return 3
}

kafka_config() {
  if [[ -n "$SASL" ]]; then
    echo "# Generated by scripts/stack.sh (DELAYD_KAFKA_SASL=1): one KRaft node that is broker and controller."
    kafka_sasl_listeners
  else
    echo "# Generated by scripts/stack.sh: one KRaft node that is broker and controller."
    cat <<EOF
listeners=PLAINTEXT://$HOST:$KAFKA_PORT,CONTROLLER://$HOST:$CONTROLLER_PORT
advertised.listeners=PLAINTEXT://$HOST:$KAFKA_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
EOF
  fi
  # What both variants share: the node, its data, and a single broker's topic defaults.
  cat <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$HOST:$CONTROLLER_PORT
log.dirs=$KAFKA_DIR/data
auto.create.topics.enable=$AUTO_CREATE
num.partitions=4
default.replication.factor=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
group.initial.rebalance.delay.ms=0
log.retention.hours=24
EOF
}

# With DELAYD_KAFKA_SASL=1: the client (and inter-broker) listener is SASL_SSL with SCRAM; the
# controller listener stays PLAINTEXT on loopback. ACLs by KRaft's StandardAuthorizer.
kafka_sasl_listeners() {
  local admin_password
  admin_password="$(cat "$SASL_DIR/admin.password")"
  cat <<EOF
listeners=SASL_SSL://$HOST:$KAFKA_PORT,CONTROLLER://$HOST:$CONTROLLER_PORT
advertised.listeners=SASL_SSL://$HOST:$KAFKA_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=SASL_SSL
listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT
sasl.enabled.mechanisms=$SASL_MECHANISM
sasl.mechanism.inter.broker.protocol=$SASL_MECHANISM
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$admin_password";
ssl.keystore.type=PEM
ssl.keystore.location=$SASL_DIR/server.pem
ssl.truststore.type=PEM
ssl.truststore.location=$SASL_DIR/ca.pem
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin;User:ANONYMOUS
allow.everyone.if.no.acl.found=false
EOF
}

# The CA and the server's certificate (127.0.0.1 and localhost) of scripts/tls-certs.sh, as
# Kafka's PEM key store and trust store, and the users' passwords, made once per stack dir.
sasl_material() {
  [[ -f "$SASL_DIR/server.pem" && -f "$SASL_DIR/delayd.password" ]] && return
  command -v openssl >/dev/null || die "openssl not found: DELAYD_KAFKA_SASL=1 makes certificates with it (Debian package openssl)"
  mkdir -p "$SASL_DIR"
  "$ROOT/scripts/tls-certs.sh" "$TLS_DIR" >/dev/null || die "making the stack's certificates failed"
  cp "$TLS_DIR/ca.crt" "$SASL_DIR/ca.pem"
  cat "$TLS_DIR/server.key" "$TLS_DIR/server.crt" >"$SASL_DIR/server.pem"
  openssl rand -hex 16 >"$SASL_DIR/admin.password"
  openssl rand -hex 16 >"$SASL_DIR/delayd.password"
  chmod 600 "$SASL_DIR"/*.password "$SASL_DIR/server.pem"
}

# Properties for Kafka's own tools (kafka-acls.sh and friends) to log in as admin.
sasl_tool_config() {
  cat <<EOF
security.protocol=SASL_SSL
sasl.mechanism=$SASL_MECHANISM
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$(cat "$SASL_DIR/admin.password")";
ssl.truststore.type=PEM
ssl.truststore.location=$SASL_DIR/ca.pem
EOF
}

kafka_up() {
  if pid="$(running_pid "$KAFKA_PID" kafka.Kafka)"; then
    wait_until kafka kafka_answers "$KAFKA_PID" kafka.Kafka "$KAFKA_DIR/logs/server.log"
    say "kafka already up on $HOST:$KAFKA_PORT (pid $pid)"
    return
  fi
  command -v java >/dev/null || die "java not found: Kafka needs Java 17 (Debian package openjdk-17-jre-headless; scripts/install-deps.sh installs it)"
  command -v kcat >/dev/null || die "kcat not found: run scripts/install-deps.sh (Debian package kcat)"
  if ! ls "$KAFKA_LIBS"/.complete-* >/dev/null 2>&1; then
    command -v mvn >/dev/null || die "Kafka jars are not fetched and mvn is not found: run scripts/install-deps.sh (Debian package maven)"
    "$ROOT/scripts/install-deps.sh"
  fi
  local p
  for p in "$KAFKA_PORT" "$CONTROLLER_PORT"; do
    port_in_use "$p" && die "port $p is already in use by another process; set DELAYD_KAFKA_PORT / DELAYD_KAFKA_CONTROLLER_PORT to free ports"
  done
  mkdir -p "$KAFKA_DIR/data" "$KAFKA_DIR/logs"
  if [[ -n "$SASL" ]]; then
    sasl_material
    sasl_tool_config >"$SASL_DIR/admin.properties"
  fi
  kafka_config >"$KAFKA_DIR/server.properties"
  local cp="$KAFKA_LIBS/*"
  local jvm=(-Xms"$HEAP" -Xmx"$HEAP" -XX:+UseG1GC -Djava.awt.headless=true
    -Dlog4j.configuration="file:$ROOT/scripts/stack/log4j.properties"
    -Dkafka.logs.dir="$KAFKA_DIR/logs")
  if [[ ! -f "$KAFKA_DIR/data/meta.properties" ]]; then
    local cluster_id
    cluster_id="$(java "${jvm[@]}" -cp "$cp" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)"
    [[ -n "$cluster_id" ]] || die "kafka.tools.StorageTool random-uuid printed nothing (log: $KAFKA_DIR/logs/server.log)"
    local scram=() user
    if [[ -n "$SASL" ]]; then
      for user in admin delayd; do
        scram+=(--add-scram "$SASL_MECHANISM=[name=$user,password=$(cat "$SASL_DIR/$user.password")]")
      done
    fi
    java "${jvm[@]}" -cp "$cp" kafka.tools.StorageTool format -t "$cluster_id" \
      -c "$KAFKA_DIR/server.properties" --ignore-formatted "${scram[@]}" >"$KAFKA_DIR/logs/format.log" 2>&1 \
      || die "formatting Kafka storage failed (log: $KAFKA_DIR/logs/format.log)"
  fi
  local extra_jvm
  read -r -a extra_jvm <<<"${DELAYD_KAFKA_JVM_EXTRA:-}"
  # setsid: the server must outlive the shell that started it, but not share its signals.
  setsid nohup java "${jvm[@]}" "${extra_jvm[@]}" -cp "$cp" kafka.Kafka "$KAFKA_DIR/server.properties" \
    >"$KAFKA_DIR/logs/stdout.log" 2>&1 </dev/null &
  echo $! >"$KAFKA_PID"
  wait_until kafka kafka_answers "$KAFKA_PID" kafka.Kafka "$KAFKA_DIR/logs/server.log"
  say "kafka up on $HOST:$KAFKA_PORT (pid $(cat "$KAFKA_PID"), auto.create.topics.enable=$AUTO_CREATE${SASL:+, SASL_SSL $SASL_MECHANISM with ACLs})"
}

stop_pid() { # name pidfile pattern
  local pid deadline
  if ! pid="$(running_pid "$2" "$3")"; then
    rm -f "$2"
    say "$1 not running"
    return
  fi
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$((SECONDS + 45))
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS >= deadline)); then
      say "$1 (pid $pid) ignored SIGTERM for 45s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    sleep 0.2
  done
  rm -f "$2"
  say "$1 stopped"
}

cmd_up() {
  mkdir -p "$STACK_DIR"
  printf 'KAFKA_PORT=%s\nCONTROLLER_PORT=%s\nREDIS_PORT=%s\n' \
    "$KAFKA_PORT" "$CONTROLLER_PORT" "$REDIS_PORT" >"$RECORDED.new"
  if [[ -n "$CLUSTER" ]]; then
    printf 'CLUSTER=%s\nCLUSTER_REPLICAS=%s\nCLUSTER_PORT=%s\n' \
      "$CLUSTER" "$CLUSTER_REPLICAS" "$CLUSTER_PORT" >>"$RECORDED.new"
  fi
  [[ -z "$REDIS_TLS" ]] || printf 'REDIS_TLS=%s\n' "$REDIS_TLS" >>"$RECORDED.new"
  [[ -z "$SASL" ]] || printf 'SASL=%s\n' "$SASL" >>"$RECORDED.new"
  # Ports of a running stack cannot change under it.
  if [[ -f "$RECORDED" ]] && ! cmp -s "$RECORDED" "$RECORDED.new" &&
    { running_pid "$KAFKA_PID" kafka.Kafka >/dev/null || running_pid "$REDIS_PID" redis-server >/dev/null ||
      running_pid "$(node_pid "$CLUSTER_PORT")" redis-server >/dev/null; }; then
    rm -f "$RECORDED.new"
    die "the stack already runs with other ports ($(tr '\n' ' ' <"$RECORDED")); run scripts/stack.sh down first"
  fi
  mv "$RECORDED.new" "$RECORDED"
  [[ -z "$REDIS_TLS" ]] || "$ROOT/scripts/tls-certs.sh" "$TLS_DIR" >/dev/null
  if [[ -n "$CLUSTER" ]]; then cluster_up; else redis_up; fi
  kafka_up
}

cmd_down() {
  stop_pid kafka "$KAFKA_PID" kafka.Kafka
  if [[ -n "$CLUSTER" ]]; then cluster_down; else stop_pid redis "$REDIS_PID" redis-server; fi
}

cmd_status() {
  local ok=0 pid
  if pid="$(running_pid "$KAFKA_PID" kafka.Kafka)" && kafka_answers; then
    say "kafka up on $HOST:$KAFKA_PORT (pid $pid)"
  else
    say "kafka down"; ok=3
  fi
  if [[ -n "$CLUSTER" ]]; then
    cluster_status || ok=3
  elif pid="$(running_pid "$REDIS_PID" redis-server)" && redis_answers; then
    say "redis up on $HOST:$REDIS_PORT (pid $pid)"
  else
    say "redis down"; ok=3
  fi
  return $ok
}

cmd_env() {
  echo "KAFKA_BOOTSTRAP=$HOST:$KAFKA_PORT"
  if [[ -n "$SASL" ]]; then
    echo "KAFKA_SECURITY_PROTOCOL=SASL_SSL"
    echo "KAFKA_SASL_MECHANISM=$SASL_MECHANISM"
    echo "KAFKA_SASL_USERNAME=admin"
    echo "KAFKA_SASL_PASSWORD=$(cat "$SASL_DIR/admin.password")"
    echo "KAFKA_SSL_CA_LOCATION=$SASL_DIR/ca.pem"
    echo "KAFKA_DELAYD_USERNAME=delayd"
    echo "KAFKA_DELAYD_PASSWORD_FILE=$SASL_DIR/delayd.password"
  fi
  local url
  if [[ -n "$CLUSTER" ]]; then url="$(cluster_url)"; else url="redis://$HOST:$REDIS_PORT"; fi
  if [[ -n "$REDIS_TLS" ]]; then
    url="${url/#redis:/rediss:}"
    url="${url/#redis-cluster:/redis-cluster+tls:}"
    echo "REDIS_URL=$url"
    echo "DELAYD_REDIS_TLS_CA_FILE=$TLS_DIR/ca.crt"
    echo "DELAYD_REDIS_TLS_CERT_FILE=$TLS_DIR/client.crt"
    echo "DELAYD_REDIS_TLS_KEY_FILE=$TLS_DIR/client.key"
    echo "REDIS_CLI_TLS='${cli_tls[*]}'"
  else
    echo "REDIS_URL=$url"
  fi
}

# One server down (SIGTERM: Redis fsyncs its AOF, Kafka shuts down cleanly) and up again, on the
# ports `up` recorded.
cmd_restart() {
  [[ -f "$RECORDED" ]] || die "no recorded stack in $STACK_DIR: run scripts/stack.sh up first"
  case "${1:-}" in
    redis)
      if [[ -n "$CLUSTER" ]]; then
        cluster_down; cluster_up
      else
        stop_pid redis "$REDIS_PID" redis-server; redis_up
      fi ;;
    kafka) stop_pid kafka "$KAFKA_PID" kafka.Kafka; kafka_up ;;
    *) echo "usage: scripts/stack.sh restart redis|kafka" >&2; exit 2 ;;
  esac
}

# Kafka's ACL tool (kafka-acls.sh: kafka.admin.AclCommand) as admin against the client port.
cmd_acl() {
  [[ -n "$SASL" ]] || die "acl: the stack runs without DELAYD_KAFKA_SASL=1 (no ACLs)"
  java -Xmx256m -Dlog4j.configuration="file:$ROOT/scripts/stack/log4j.properties" -Dkafka.logs.dir="$KAFKA_DIR/logs" \
    -cp "$KAFKA_LIBS/*" kafka.admin.AclCommand --bootstrap-server "$HOST:$KAFKA_PORT" \
    --command-config "$SASL_DIR/admin.properties" "$@"
}

# A SCRAM user's password (kafka-configs.sh: kafka.admin.ConfigCommand) as admin: creates the
# user, or changes its password.
cmd_scram() {
  [[ -n "$SASL" ]] || die "scram: the stack runs without DELAYD_KAFKA_SASL=1 (no SASL)"
  [[ $# -eq 2 ]] || die "usage: scripts/stack.sh scram USER PASSWORD"
  java -Xmx256m -Dlog4j.configuration="file:$ROOT/scripts/stack/log4j.properties" -Dkafka.logs.dir="$KAFKA_DIR/logs" \
    -cp "$KAFKA_LIBS/*" kafka.admin.ConfigCommand --bootstrap-server "$HOST:$KAFKA_PORT" \
    --command-config "$SASL_DIR/admin.properties" --alter --entity-type users --entity-name "$1" \
    --add-config "$SASL_MECHANISM=[password=$2]"
}

case "${1:-}" in
  up) cmd_up ;;
  acl) shift; cmd_acl "$@" ;;
  scram) shift; cmd_scram "$@" ;;
  restart) cmd_restart "${2:-}" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) cmd_env ;;
  reset) cmd_down; rm -rf "$KAFKA_DIR" "$REDIS_DIR" "$CLUSTER_DIR" "$SASL_DIR"; say "data removed" ;;
  *) echo "usage: scripts/stack.sh up|down|status|env|reset|restart redis|kafka|acl ARGS...|scram USER PASSWORD" >&2; exit 2 ;;
esac
