# The sizes of the end-to-end benchmark's phases, one home for their defaults: sourced by
# bench/run-e2e.sh (delayd) and bench/run-bullmq.sh (BullMQ through the same phases), not run.
# Each may be set in the environment; SMOKE=1 gives the tiny sizes of the ctests (in brackets in
# run-e2e.sh's header). Sets SMOKE and every size below.
SMOKE="${SMOKE:-0}"
if [[ "$SMOKE" == 1 ]]; then
  N_INGEST="${N_INGEST:-2000}" INGEST_DUE_MS="${INGEST_DUE_MS:-3000}"
  N_BURST="${N_BURST:-2000}" RATES="${RATES:-200:2 500:2}" SHORT_SECONDS="${SHORT_SECONDS:-2}"
  RESTART_FAR="${RESTART_FAR:-1800}" RESTART_OVERDUE="${RESTART_OVERDUE:-200}"
  RESTART_MARGIN_MS="${RESTART_MARGIN_MS:-3000}" REDIS_BENCH_CALLS="${REDIS_BENCH_CALLS:-4}"
fi
N_INGEST="${N_INGEST:-200000}"
INGEST_DUE_MS="${INGEST_DUE_MS:-60000}"
N_BURST="${N_BURST:-100000}"
BURST_SPREAD_MS="${BURST_SPREAD_MS:-2000}"
RATES="${RATES:-1000:20 5000:20 10000:30 20000:30 30000:20 40000:20}"
if [[ -n "${SWEEP_SECONDS:-}" ]]; then
  sweep=""
  for spec in $RATES; do sweep+="${sweep:+ }${spec%%:*}:$SWEEP_SECONDS"; done
  RATES="$sweep"
fi
RATE_DELAY_MS="${RATE_DELAY_MS:-2000}"
SHORT_RATE="${SHORT_RATE:-100}"
SHORT_SECONDS="${SHORT_SECONDS:-20}"
SHORT_DELAY_MS="${SHORT_DELAY_MS:-20}"
RESTART_FAR="${RESTART_FAR:-900000}"
RESTART_OVERDUE="${RESTART_OVERDUE:-100000}"
RESTART_MARGIN_MS="${RESTART_MARGIN_MS:-10000}"
REDIS_BENCH_CALLS="${REDIS_BENCH_CALLS:-400}"
KAFKA_LIMIT_N="${KAFKA_LIMIT_N:-$N_INGEST}"
