# The stack the end-to-end benchmarks run on, one home for it: sourced by bench/run-e2e.sh and
# bench/run-scaleout.sh, not run. Needs the repository's root as the working directory. Defines:
#   use_stack          with KAFKA_BOOTSTRAP and REDIS_URL unset: starts the local stack if it is
#                      not up (sets stack_started=1 then) and exports its env; with them set, uses
#                      those servers as they are
#   server_cpu_pids    "redis:PID,kafka:PID" for e2e_load's --cpu-pids (a server whose pid cannot
#                      be found is left out; needs rcli from bench/e2e-redis.sh)
#   remove_run RUN MATCH GROUP...
#                      deletes the run's topics (named RUN...), these consumer groups and the Redis
#                      keys of MATCH (globs, comma-separated) with e2e_load cleanup ($load_bin);
#                      its errors go to $data/logs/cleanup-RUN.log and one line through say();
#                      with KEEP_DATA=1 it removes nothing and says what it kept (to read a
#                      failing run's jobs and topics afterwards: delayctl with DELAYD_REDIS_PREFIX=RUN)
#   leave_stack        stops the stack if use_stack started it
stack_started=0
use_stack() {
  [[ -z "${KAFKA_BOOTSTRAP:-}" || -z "${REDIS_URL:-}" ]] || return 0
  if ! scripts/stack.sh status >/dev/null 2>&1; then
    scripts/stack.sh up >/dev/null
    stack_started=1
  fi
  eval "$(scripts/stack.sh env | sed 's/^/export /')"
}
server_cpu_pids() {
  local list="" redis kafka
  redis="$(rcli INFO server | tr -d '\r' | awk -F: '$1 == "process_id" { print $2 }')"
  kafka="$(scripts/stack.sh status 2>/dev/null | sed -n 's/.*kafka up on .* (pid \([0-9][0-9]*\)).*/\1/p')"
  [[ "$redis" =~ ^[0-9]+$ ]] && list+="redis:$redis,"
  [[ "$kafka" =~ ^[0-9]+$ ]] && kill -0 "$kafka" 2>/dev/null && list+="kafka:$kafka,"
  echo "${list%,}"
}
remove_run() {
  local run="$1" match="$2" joined
  shift 2
  if [[ "${KEEP_DATA:-0}" == 1 ]]; then
    say "KEEP_DATA=1: kept the topics $run*, the consumer groups $*, the Redis keys $match"
    return 0
  fi
  joined="$(IFS=,; echo "$*")"
  "$load_bin" cleanup --bootstrap "$KAFKA_BOOTSTRAP" --redis-url "$REDIS_URL" --topic-prefix "$run" \
    --groups "$joined" --redis-match "$match" >/dev/null 2>"$data/logs/cleanup-$run.log" ||
    say "cleanup of $run failed: $(tail -n 1 "$data/logs/cleanup-$run.log")"
}
leave_stack() {
  if ((stack_started)); then scripts/stack.sh down >/dev/null || true; fi
}
