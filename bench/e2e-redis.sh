# The end-to-end benchmark's Redis, one home for how its runners reach it: sourced by
# bench/run-e2e.sh and bench/run-bullmq.sh (after REDIS_URL is set), not run. Needs die().
# Sets redis_host and redis_port from REDIS_URL (a redis:// URL) and defines:
#   rcli ARGS...  redis-cli on that Redis
#   compact_aof   rewrites Redis's AOF and waits (up to 60 s) until it is done, so that a phase
#                 starts on a compacted AOF instead of meeting the rewrite's fork half-way (on
#                 two cores that fork competes with everything else for a few seconds)
[[ "$REDIS_URL" =~ ^redis://([^@/]*@)?([^:/]+)(:([0-9]+))? ]] ||
  die "cannot read host and port from REDIS_URL=$REDIS_URL (a redis:// URL)"
redis_host="${BASH_REMATCH[2]}" redis_port="${BASH_REMATCH[4]:-6379}"
rcli() { redis-cli -h "$redis_host" -p "$redis_port" "$@"; }
compact_aof() {
  rcli BGREWRITEAOF >/dev/null 2>&1 || true
  for _ in $(seq 1 600); do
    rcli INFO persistence | tr -d '\r' | grep -qE '^aof_rewrite_(in_progress|scheduled):1' || break
    sleep 0.1
  done
}
