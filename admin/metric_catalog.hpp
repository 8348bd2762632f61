// The one table of delayd's Prometheus metrics: for each, its name, type, label names, the help
// text /metrics shows, and what the metrics reference page says of it. admin/metrics.cpp
// registers every metric from here (by its Metric id), and `delayd --print-reference metrics`
// renders the table as docs/reference/metrics.md, so a metric added here is at once served and
// documented (tests/docs/check_reference.py fails when the committed page is older).
//
// Invariants: the table lists every Metric once, in the enum's order (metric_def(id).id == id),
// which is the order /metrics lists the families; process_threads is the last.
// Threading: immutable; read it from any thread.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace delayd::admin {

enum class MetricType { counter, gauge, histogram };

enum class Metric {
  jobs_accepted,
  jobs_delivered,
  jobs_cancelled,
  jobs_failed,
  jobs_duplicate,
  jobs_dead_lettered,
  dead_letter_retries,
  records_produced,
  delivery_attempts,
  rebalances,
  reports,
  jobs_rescheduled,
  jobs_upserted,
  jobs_dropped,
  jobs_repeated,
  occurrences_skipped,
  jobs_recovered,
  transactions,
  records_purged,
  payloads_compressed,
  payload_bytes,
  shards_retaken,
  group_leaves,
  trace_spans_exported,
  trace_spans_dropped,
  jobs,
  ingest_lag_records,
  lateness_seconds,
  redis_request_seconds,
  kafka_produce_seconds,
  transaction_commit_seconds,
  jobs_held,
  wheel_timers,
  jobs_in_flight,
  shards_owned,
  partitions_owned,
  ready_topics_missing,
  compression_dictionary,
  next_due_seconds,
  loop_max_turn_seconds,
  clock_offset_seconds,
  clock_synchronized,
  clock_max_error_seconds,
  redis_may_drop_waiting_jobs,
  outage,
  jobs_pending,
  admin_connections_closed,
  admin_connections_accepted,
  admin_connections_open,
  admin_actions,
  ready,
  build_info,
  process_cpu_seconds,
  process_resident_memory_bytes,
  process_virtual_memory_bytes,
  process_start_time_seconds,
  process_open_fds,
  process_max_fds,
  process_threads,
};

struct MetricDef {
  Metric id;
  std::string_view name;
  MetricType type;
  std::string_view labels;  // label names, comma-separated; empty for none
  std::string_view help;    // the HELP line of /metrics
  // Markdown for the reference page, links relative to it; empty where the help says it all.
  std::string_view doc;
};

// Every metric, in the order of the Metric ids.
std::span<const MetricDef> metric_catalog();
const MetricDef& metric_def(Metric id);

// The metrics reference page (docs/reference/metrics.md) as Markdown.
std::string render_metrics_reference();

}  // namespace delayd::admin
