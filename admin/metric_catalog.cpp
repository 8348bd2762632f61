#include "admin/metric_catalog.hpp"

#include <cstddef>
#include <iterator>

namespace delayd::admin {

namespace {

// clang-format off
constexpr MetricDef kMetricCatalog[] = {
  {Metric::jobs_accepted, "delayd_jobs_accepted_total", MetricType::counter, "",
   "Jobs accepted from the ingest topic and stored",
   ""},
  {Metric::jobs_delivered, "delayd_jobs_delivered_total", MetricType::counter, "",
   "Jobs whose ready record Kafka acknowledged",
   ""},
  {Metric::jobs_cancelled, "delayd_jobs_cancelled_total", MetricType::counter, "",
   "Jobs cancelled before they fired",
   ""},
  {Metric::jobs_failed, "delayd_jobs_failed_total", MetricType::counter, "",
   "Jobs given up after scheduler.max_attempts",
   ""},
  {Metric::jobs_duplicate, "delayd_jobs_duplicate_total", MetricType::counter, "",
   "Ingest records for a job id already stored (not stored again)",
   ""},
  {Metric::jobs_dead_lettered, "delayd_jobs_dead_lettered_total", MetricType::counter, "reason",
   "Records sent to the dead-letter topic, by reason (invalid_record, topic_refused, "
   "invalid_status, too_large, delivery_failed, topic_missing, reported_failed, ack_timeout)",
   "records sent to the dead-letter topic, by reason: `invalid_record` (an ingest record that "
   "breaks the contract), `topic_refused` (its business would need a ready topic beyond the "
   "cap), `invalid_status` (a malformed status record), `too_large` (a ready record Kafka "
   "refuses as too large), `delivery_failed` (Kafka refused the ready record `max_attempts` "
   "times), `topic_missing` (its ready topic did not exist for "
   "`kafka.missing_topic_timeout_ms`), `reported_failed` (reported failed on its last attempt), "
   "`ack_timeout` (no report within `ack_timeout_ms`, `max_process_attempts` times), `expired` "
   "(delayd reached it later than its `deliver-at` + `max-lateness-ms`)"},
  {Metric::dead_letter_retries, "delayd_dead_letter_retries_total", MetricType::counter, "",
   "Dead-letter produce attempts that had to be repeated",
   ""},
  {Metric::records_produced, "delayd_records_produced_total", MetricType::counter, "",
   "Ready records handed to Kafka",
   ""},
  {Metric::delivery_attempts, "delayd_delivery_attempts_total", MetricType::counter, "outcome",
   "Settled delivery attempts of ready records, by outcome",
   "settled delivery attempts: `delivered`, `retried`, `retried_outage`, `failed`, `set_aside`, "
   "`dropped_stale`, `fenced`, and `redelivered` (no report within `ack_timeout_ms`)"},
  {Metric::rebalances, "delayd_rebalances_total", MetricType::counter, "",
   "Shard assignments and revocations seen",
   ""},
  {Metric::reports, "delayd_reports_total", MetricType::counter, "status",
   "Consumers' reports read from the status topic, by what they did",
   "reports read from the status topic: `running`, `finished` and `failed` (applied), `ignored` "
   "(did not fit the job's state or attempt), `unknown` (no such job)"},
  {Metric::jobs_rescheduled, "delayd_jobs_rescheduled_total", MetricType::counter, "",
   "Jobs moved to a new time by a reschedule",
   ""},
  {Metric::jobs_upserted, "delayd_jobs_upserted_total", MetricType::counter, "",
   "Waiting jobs replaced by a newer version (op upsert, etf1, Chronos)",
   "waiting jobs replaced by a newer version (`op: upsert`, etf1, Chronos)"},
  {Metric::jobs_dropped, "delayd_jobs_dropped_total", MetricType::counter, "",
   "etf1 schedules dropped as past due when produced (etf1.past_due = drop)",
   ""},
  {Metric::jobs_repeated, "delayd_jobs_repeated_total", MetricType::counter, "",
   "Occurrences of repeating jobs scheduled after a delivery",
   ""},
  {Metric::occurrences_skipped, "delayd_occurrences_skipped_total", MetricType::counter, "",
   "Missed occurrences of repeats not delivered (repeat-catchup)",
   "missed occurrences of repeats not delivered after an outage (`repeat-catchup` latest or "
   "none)"},
  {Metric::jobs_recovered, "delayd_jobs_recovered_total", MetricType::counter, "",
   "Jobs a takeover found delivered by an earlier owner and settled without a second record",
   "`exactly_once`: jobs an earlier owner of their shard had in flight whose records a takeover "
   "found in Kafka (the shard's delivery log), settled without producing them again "
   "([Guarantees](../guarantees.md#exactly-once))"},
  {Metric::transactions, "delayd_transactions_total", MetricType::counter, "outcome",
   "The shards' Kafka transactions, by outcome (committed, aborted, rebuilt)",
   "`exactly_once`: the shards' Kafka transactions by outcome: `committed`, `aborted` (a record "
   "of it failed, or the coordinator aborted it), `rebuilt` (a failure that was no fence: a new "
   "producer took the shard's transactional id over)"},
  {Metric::records_purged, "delayd_records_purged_total", MetricType::counter, "",
   "Records purged unsent when a shard was lost (at_least_once)",
   "`at_least_once`: records the producer had not sent when a shard was lost (its session timed "
   "out): purged, so that nothing queued before the loss reaches Kafka after another member took "
   "the shard; each is produced again by whoever owns its shard"},
  {Metric::payloads_compressed, "delayd_payloads_compressed_total", MetricType::counter, "",
   "Payloads stored compressed in Redis (redis.compress_payloads_above_bytes)",
   "payloads (key, value and headers) longer than `redis.compress_payloads_above_bytes` that this "
   "process stored zstd-compressed; their bytes are `delayd_payload_bytes_total`"},
  {Metric::payload_bytes, "delayd_payload_bytes_total", MetricType::counter, "form",
   "Bytes of the payloads stored compressed: before compression (encoded) and as stored",
   "bytes of the payloads counted by `delayd_payloads_compressed_total`: `encoded` before "
   "compression, `stored` as written to Redis; `stored` over `encoded` is the ratio the "
   "compression achieves on your payloads (settings: [redis](configuration.md#redis))"},
  {Metric::shards_retaken, "delayd_shards_retaken_total", MetricType::counter, "",
   "Shards taken again after a fence gave them up while the group still assigned them",
   ""},
  {Metric::group_leaves, "delayd_group_leaves_total", MetricType::counter, "",
   "Consumer groups left because Redis was unreachable (redis.leave_group_after_ms)",
   "consumer groups left because Redis was unreachable for `redis.leave_group_after_ms`, so that "
   "an instance that reaches Redis took their partitions"},
  {Metric::trace_spans_exported, "delayd_trace_spans_exported_total", MetricType::counter, "",
   "Spans the OTLP collector accepted (tracing on: OTEL_EXPORTER_OTLP_ENDPOINT)",
   "spans the OTLP collector accepted; 0 while tracing is off ([Tracing](../operating/tracing.md))"},
  {Metric::trace_spans_dropped, "delayd_trace_spans_dropped_total", MetricType::counter, "reason",
   "Spans not exported, by reason (queue_full, export_failed)",
   "spans not exported: `queue_full` (`OTEL_BSP_MAX_QUEUE_SIZE` spans were waiting already: delayd "
   "drops rather than slow down), `export_failed` (the collector refused the batch or could not be "
   "reached)"},
  {Metric::jobs, "delayd_jobs", MetricType::gauge, "business,state",
   "Jobs per business and state, from Redis's counters (redelivered: times, not jobs)",
   "Redis's per-business counters of all shards (`<business>|<state>` of the stats hashes: jobs "
   "`delay`, `ready` or `running` now; `finished`, `failed`, `cancelled` since the start; "
   "`redelivered` and `repeated` count times, not jobs), read with `delayd_jobs_pending`"},
  {Metric::ingest_lag_records, "delayd_ingest_lag_records", MetricType::gauge, "partition",
   "Records of each assigned partition (ingest and status topics) not read yet",
   "records of each partition assigned to this instance (ingest and status topics, "
   "`<topic>:<partition>`) not read yet: the high watermark librdkafka last saw less the "
   "consumer's position, read once a second; a partition no longer assigned here is removed"},
  {Metric::lateness_seconds, "delayd_lateness_seconds", MetricType::histogram, "",
   "A ready record's produce time minus its deliver_at",
   "a ready record's produce time minus its `deliver_at`; buckets 1 ms … 60 s"},
  {Metric::redis_request_seconds, "delayd_redis_request_seconds", MetricType::histogram, "",
   "Round trips to Redis (a command or a pipeline)",
   "round trips of the loop and its stages to Redis (a command or a pipeline; an ingest batch posted ahead counts from its post to its replies); buckets 1 ms … 60 s"},
  {Metric::kafka_produce_seconds, "delayd_kafka_produce_seconds", MetricType::histogram, "",
   "A ready record's produce() to its delivery report",
   "a ready record's `produce()` to its delivery report; buckets 1 ms … 60 s"},
  {Metric::transaction_commit_seconds, "delayd_transaction_commit_seconds", MetricType::histogram, "",
   "exactly_once: how long each shard transaction's commit took",
   "`exactly_once`: each shard transaction's commit, from the call to Kafka's answer (the flush of "
   "its records and EndTxn, asked again until answered), whatever the outcome; it waits on Kafka "
   "alone, so slow commits on every shard at once are the brokers' (a GC pause, a slow disk); "
   "buckets 1 ms … 60 s"},
  {Metric::jobs_held, "delayd_jobs_held", MetricType::gauge, "",
   "Jobs held in memory (in the wheel or in flight)",
   ""},
  {Metric::wheel_timers, "delayd_wheel_timers", MetricType::gauge, "",
   "Jobs waiting for their timer in the wheel",
   ""},
  {Metric::jobs_in_flight, "delayd_jobs_in_flight", MetricType::gauge, "",
   "Ready records handed to Kafka, outcome not written yet",
   "ready records handed to Kafka whose outcome is not written yet"},
  {Metric::shards_owned, "delayd_shards_owned", MetricType::gauge, "",
   "Shards (ingest partitions) this instance owns",
   ""},
  {Metric::partitions_owned, "delayd_partitions_owned", MetricType::gauge, "topic",
   "Partitions of each topic delayd reads that its consumer group assigned to this instance",
   "partitions of each topic delayd reads (every ingest topic, and the status topic) that the "
   "topic's consumer group assigned to this instance, 0 for none: how the work spreads over the "
   "instances ([Scaling out](../operating/scaling.md#how-the-work-spreads)); the alert "
   "`DelaydInstanceIdle` fires when one owns none of a topic while another owns two or more"},
  {Metric::ready_topics_missing, "delayd_ready_topics_missing", MetricType::gauge, "",
   "Ready topics Kafka says do not exist while their jobs wait for them",
   "ready topics Kafka says do not exist while their jobs wait for them (deleted under delayd); "
   "`/healthz` says `degraded` naming them"},
  {Metric::compression_dictionary, "delayd_compression_dictionary", MetricType::gauge, "",
   "The id of the zstd dictionary new payloads are compressed with; 0: none",
   "the id of the zstd dictionary new payloads are compressed with (the one `delayd:zdict` holds, "
   "or the one this process trained from its first 1 000 compressed payloads); 0 while there is "
   "none yet, or with `redis.compression_dictionary` false"},
  {Metric::next_due_seconds, "delayd_next_due_seconds", MetricType::gauge, "",
   "Seconds until the next timer in the wheel (absent when the wheel is empty)",
   ""},
  {Metric::loop_max_turn_seconds, "delayd_loop_max_turn_seconds", MetricType::gauge, "",
   "Longest turn of the scheduling loop over the last 10 to 20 s",
   ""},
  {Metric::clock_offset_seconds, "delayd_clock_offset_seconds", MetricType::gauge, "",
   "This host's clock less Redis's (TIME), read once a minute; positive: jobs fire early by Redis's clock",
   "this host's wall clock less Redis's (`TIME`, the middle of the round trip), read once a minute "
   "(absent before the first reading, or where Redis refuses `TIME`); beyond 0.1 s either way "
   "`/healthz` is degraded naming it: jobs fire that much early (positive) or late by Redis's clock"},
  {Metric::clock_synchronized, "delayd_clock_synchronized", MetricType::gauge, "",
   "1 while the kernel says a time-sync client disciplines this host's clock, 0 while it says the clock is "
   "unsynchronized",
   "1 while the kernel says a time-sync client (chrony, ntpd, systemd-timesyncd) disciplines this host's clock, 0 "
   "while it says the clock is unsynchronized (`ntp_adjtime`, read once a minute; absent where the kernel does not "
   "answer). Jobs fire by this clock; `/healthz` is not degraded by it (alert `DelaydClockUnsynchronized`)"},
  {Metric::clock_max_error_seconds, "delayd_clock_max_error_seconds", MetricType::gauge, "",
   "The kernel's bound on this host's clock error (maxerror), read once a minute",
   "the kernel's bound on this host's clock error (`maxerror` of `ntp_adjtime`, kept by the time-sync client; "
   "16 s on a clock nobody disciplines), read once a minute; absent where the kernel does not answer. Above 1 s "
   "on a synchronized clock for 30 min: alert `DelaydClockErrorBoundLarge`"},
  {Metric::redis_may_drop_waiting_jobs, "delayd_redis_may_drop_waiting_jobs", MetricType::gauge, "",
   "1 while a Redis server may drop waiting jobs once full (a maxmemory with an allkeys-* policy)",
   "1 while a Redis server may drop waiting jobs once full (a `maxmemory` with an `allkeys-*` policy, set "
   "while delayd runs: at start it refuses), read every `redis.settings_check_interval_ms`; `/healthz` is "
   "degraded naming it. Set `maxmemory-policy noeviction`"},
  {Metric::outage, "delayd_outage", MetricType::gauge, "dependency",
   "1 while an outage of the dependency is being ridden out",
   "1 while an outage of `redis`, `kafka`, `kafka (access)`, `kafka (group)`, `kafka (deliveries)` or"
   " `delayd` is being ridden out, else 0"},
  {Metric::jobs_pending, "delayd_jobs_pending", MetricType::gauge, "shard",
   "Jobs waiting in Redis, by shard (refreshed every few seconds)",
   "jobs waiting in Redis per shard (`<ingest topic>:<partition>`), read from Redis at most "
   "every 5 s, by the endpoint's own client"},
  {Metric::admin_connections_closed, "delayd_admin_connections_closed_total", MetricType::counter, "reason",
   "Admin endpoint connections closed by its defences, by reason",
   "connections closed by the endpoint's defences: `evicted`, `refused`, `timeout`, `too_large`,"
   " `bad_request`"},
  {Metric::admin_connections_accepted, "delayd_admin_connections_accepted_total", MetricType::counter, "",
   "Admin endpoint connections accepted",
   "connections the admin endpoint accepted"},
  {Metric::admin_connections_open, "delayd_admin_connections_open", MetricType::gauge, "",
   "Admin endpoint connections open",
   "open connections to the admin endpoint"},
  {Metric::admin_actions, "delayd_admin_actions_total", MetricType::counter, "action,outcome",
   "Write actions asked of the admin endpoint, by action and outcome (refused: the read token "
   "asked)",
   "write actions asked of the admin endpoint ([audit log](../operating/admin.md#audit-log)): "
   "`action` `cancel`, `run-now`, `reschedule`, `retry`, `bulk-cancel`, `bulk-run-now`, "
   "`bulk-retry`, `stop-operation`, `redrive`, `other`; `outcome` `ok`, `pending`, `invalid`, "
   "`refused` (the read token asked), `not_found`, `conflict`, `stopped`, `error`"},
  {Metric::ready, "delayd_ready", MetricType::gauge, "",
   "1 while /readyz answers 200, 0 while it answers 503 (starting, outage, joining, loading, stopping)",
   "1 while `/readyz` answers 200, 0 while it answers 503"},
  {Metric::build_info, "delayd_build_info", MetricType::gauge, "version,revision,build_type",
   "delayd's version, the git revision it was built from and the build type; always 1",
   "always 1: the project version (CMake's `project()`), the git commit the build was "
   "configured at (`unknown` outside a git tree) and the build type (`Release`, `RelWithDebInfo`, ...)"},
  {Metric::process_cpu_seconds, "process_cpu_seconds_total", MetricType::counter, "",
   "Total user and system CPU time spent in seconds",
   "the process, from `/proc`"},
  {Metric::process_resident_memory_bytes, "process_resident_memory_bytes", MetricType::gauge, "",
   "Resident memory size in bytes",
   "the process, from `/proc`"},
  {Metric::process_virtual_memory_bytes, "process_virtual_memory_bytes", MetricType::gauge, "",
   "Virtual memory size in bytes",
   "the process, from `/proc`"},
  {Metric::process_start_time_seconds, "process_start_time_seconds", MetricType::gauge, "",
   "Start time of the process since unix epoch in seconds",
   "the process, from `/proc`"},
  {Metric::process_open_fds, "process_open_fds", MetricType::gauge, "",
   "Number of open file descriptors",
   "the process, from `/proc`"},
  {Metric::process_max_fds, "process_max_fds", MetricType::gauge, "",
   "Maximum number of open file descriptors",
   "the process, from `/proc`"},
  {Metric::process_threads, "process_threads", MetricType::gauge, "",
   "Number of OS threads in the process",
   "the process, from `/proc`"},
};
// clang-format on

constexpr bool ids_in_order() {
  for (std::size_t i = 0; i < std::size(kMetricCatalog); ++i) {
    if (kMetricCatalog[i].id != static_cast<Metric>(i)) return false;
  }
  return true;
}
static_assert(ids_in_order() && std::size(kMetricCatalog) == static_cast<std::size_t>(Metric::process_threads) + 1,
              "kMetricCatalog must list every Metric once, in the order of the enum (process_threads last)");

std::string_view type_name(MetricType t) {
  switch (t) {
    case MetricType::counter:
      return "counter";
    case MetricType::gauge:
      return "gauge";
    case MetricType::histogram:
      return "histogram";
  }
  return "";
}

// A Markdown table cell: `|` would end it.
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out.push_back(c);
  }
  return out;
}

std::string labels_of(std::string_view labels) {
  std::string out;
  while (!labels.empty()) {
    const auto comma = labels.find(',');
    if (!out.empty()) out += ", ";
    out += "`" + std::string(labels.substr(0, comma)) + "`";
    labels = comma == std::string_view::npos ? std::string_view() : labels.substr(comma + 1);
  }
  return out;
}

}  // namespace

std::span<const MetricDef> metric_catalog() { return kMetricCatalog; }

const MetricDef& metric_def(Metric id) { return kMetricCatalog[static_cast<std::size_t>(id)]; }

std::string render_metrics_reference() {
  std::string out =
      "# Metrics reference\n"
      "\n"
      "<!-- Generated by `delayd --print-reference metrics` from the metric table\n"
      "     (admin/metric_catalog.cpp); do not edit: change the table, then run\n"
      "     build/apps/delayd --print-reference metrics > docs/reference/metrics.md -->\n"
      "\n"
      "Every family `GET /metrics` serves, as [Metrics](../operating/metrics.md) describes; its `# HELP`\n"
      "line is the meaning here or a shorter form of it.\n"
      "\n"
      "| metric | type | labels | meaning |\n"
      "|---|---|---|---|\n";
  for (const auto& m : kMetricCatalog) {
    out += "| `" + std::string(m.name) + "` | " + std::string(type_name(m.type)) + " | " + labels_of(m.labels) + " | " +
           cell(m.doc.empty() ? m.help : m.doc) + " |\n";
  }
  return out;
}

}  // namespace delayd::admin
