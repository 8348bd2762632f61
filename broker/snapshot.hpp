// LoopSnapshot: what the scheduling loop shows of itself, about five times a second, to whoever
// watches it (the admin endpoint). A plain value: the loop builds it, the watcher copies it.
// Threading: a value type; handed from the loop's thread to the watcher's under its lock.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "broker/duration_histogram.hpp"
#include "broker/loop_counters.hpp"
#include "storage/payload_compression.hpp"
#include "telemetry/exporter.hpp"

namespace delayd::broker {

struct LoopSnapshot {
  // Gauges: how things stand now.
  std::size_t held = 0;                  // jobs held in memory (waiting in the wheel or in flight)
  std::size_t in_wheel = 0;              // of those, waiting for their timer
  std::size_t in_flight = 0;             // records handed to Kafka whose outcome is not written yet
  std::vector<std::string> shards;       // owned shards
  std::optional<std::int64_t> next_due;  // epoch ms of the next timer
  // The longest turn of the last 10 to 20 s, without the idle wait for ingest records.
  std::chrono::milliseconds max_turn{0};
  // Totals since start, as the ingest and fire paths keep them.
  LoopCounters counters;
  DeliveryCounters delivery;  // transactions, purges, re-takes, groups left
  // Payloads the process stored compressed, their bytes before and after, the dictionary in use.
  storage::CompressionTotals compression;
  std::string problem;  // the last outage, while it lasts; empty when all is well
  // Per dependency ("redis", "kafka", "kafka (deliveries)", "delayd"): whether an outage is on.
  std::map<std::string, bool> outages;
  std::uint64_t rebalances = 0;     // assignments and revokes seen since start
  DurationHistogram lateness;       // a ready record's produce time - its deliver_at
  DurationHistogram redis_request;  // each round trip to Redis (a command or a pipeline)
  DurationHistogram kafka_produce;  // a ready record's produce() to its delivery report
  // Records not read yet per assigned partition ("<topic>:<partition>", ingest and status
  // topics), as of the last second (KafkaConsumer::lag()).
  std::map<std::string, std::int64_t> ingest_lag;
  // Partitions the consumer groups assigned to this instance, per topic read (every ingest topic
  // and the status topic, 0 when none): how the groups spread the work (docs/operating/scaling.md).
  std::map<std::string, std::size_t> partitions;
  // Shards assigned to this instance whose jobs are not loaded yet (their fence not taken, or
  // their first refill not done): /readyz is 503 while there are any.
  std::vector<std::string> loading;
  // Consumer groups this instance is not a member of yet (subscribed, no member id from the
  // coordinator; IngestStage): /readyz is 503 while there are any.
  std::vector<std::string> joining;
  // Ready topics Kafka says do not exist while their jobs wait (FirePath::missing_topics()), and
  // the sentence about them: /healthz is degraded naming them, /readyz stays ready (one
  // business's topic is not this instance's fault).
  std::vector<std::string> missing_topics;
  std::string missing_topics_problem;
  // This host's clock against Redis's (ClockSkew): the sentence while they are further apart than
  // its bound (/healthz is degraded naming it, /readyz stays ready), and the last offset in
  // seconds (this host's less Redis's; nullopt before the first reading).
  std::string clock_problem;
  std::optional<double> clock_offset_s;
  // What the kernel says of this host's clock (HostClock): whether a time-sync client disciplines
  // it, and its error bound in seconds; nullopt before the first reading or where it does not say.
  std::optional<bool> clock_synchronized;
  std::optional<double> clock_max_error_s;
  // A Redis server that may drop waiting jobs once full (RedisSettingsWatch, seen while running):
  // the sentence (/healthz is degraded naming it, /readyz stays ready; the gauge
  // delayd_redis_may_drop_waiting_jobs is 1); empty when none may.
  std::string redis_settings_problem;
  // The span exporter's totals since start (all zero with tracing off).
  telemetry::ExporterCounters traces;
};

}  // namespace delayd::broker
