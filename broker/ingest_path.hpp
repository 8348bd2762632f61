// IngestPath: makes one batch of ingest records durable, in record order.
//
//   schedule  accepted in Redis (job hash, then pending entry; see storage/job_store.hpp), then
//             offered to the scheduler, which holds it at once if it is due within the shard's
//             loaded horizon (the ingest half of the horizon invariant, scheduler.hpp).
//   cancel    cancelled in Redis if still pending and not in flight, then dropped from the wheel.
//             A cancel for an id Redis does not know is logged and ignored.
//   invalid   copied to the dead-letter topic with an `error` header saying why, plus
//             source-topic, source-partition and source-offset headers.
// process() returns only when all of that is acknowledged (Redis replies, dead-letter records
// reported ok); only then may the caller commit the batch's offsets. On an outage it throws and
// the caller retries the same batch later: every step is idempotent (job-id), so the only cost
// of a retry is a possible duplicate dead-letter record.
//
// Ready topics: when create_topics is on, a business's ready topic is created the first time a
// job for it is accepted (one admin round trip per new business, then cached).
// Threading: the scheduling loop's thread.
#pragma once

#include "broker/ingest_parse.hpp"
#include "broker/scheduler.hpp"
#include "connectors/kafka_admin.hpp"
#include "connectors/kafka_producer.hpp"
#include "storage/job_store.hpp"

#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace delayd::broker {

struct IngestOptions {
  IngestRules rules;
  std::string dlq_topic = "delay-ingest.dlq";
  bool create_topics = false;
  int topic_partitions = 4;
  int topic_replication = 1;
  int dlq_timeout_ms = 30000;  // how long process() waits for the dead-letter acknowledgements
};

struct IngestCounters {
  std::uint64_t accepted = 0;    // new jobs
  std::uint64_t duplicates = 0;  // job-ids seen before
  std::uint64_t cancelled = 0;
  std::uint64_t dead_lettered = 0;
};

class IngestPath {
 public:
  // admin may be null when create_topics is off.
  IngestPath(Scheduler& scheduler, storage::JobStore& store, connectors::KafkaProducer& producer,
             connectors::KafkaAdmin* admin, IngestOptions options);

  void process(const std::vector<connectors::Record>& batch, std::int64_t now_ms);
  void on_report(const connectors::DeliveryReport& report);
  const IngestCounters& counters() const { return counters_; }

 private:
  void flush_accepts(std::int64_t now_ms);
  void cancel(const std::string& job_id, std::int64_t now_ms);
  void dead_letter(const connectors::Record& rec, const std::string& reason);
  void ensure_topic(const std::string& topic);
  void await_dead_letters();

  Scheduler& scheduler_;
  storage::JobStore& store_;
  connectors::KafkaProducer& producer_;
  connectors::KafkaAdmin* admin_;
  IngestOptions options_;
  std::vector<storage::NewJob> accepts_;  // the batch's schedules since the last cancel
  std::unordered_map<std::uint64_t, bool> dlq_waiting_;  // tag -> reported
  std::vector<std::string> dlq_errors_;
  std::set<std::string> known_topics_;
  std::uint64_t seq_ = 0;
  IngestCounters counters_;
};

}  // namespace delayd::broker
