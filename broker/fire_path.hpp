// FirePath: from "the wheel says it is due" to "Redis says ready".
//
//   fire_due()   take due jobs from the scheduler; claim them in Redis (one round trip: the
//                payload comes back, the attempt is counted, a cancel now answers in_flight);
//                hand each record to the producer. Jobs Redis no longer calls pending (ready,
//                cancelled, failed, missing) are dropped with their stale entries.
//   on_report()  the producer's report handler forwards reports of this path's tags here.
//   settle()     acknowledged records: mark ready and ZREM (one round trip for all); failed
//                ones: retry with exponential backoff, or, once max_attempts is reached, write
//                the job to the dead-letter topic and only then mark it failed.
//
// The ready record: the job's key and value, the producer's headers (less deliver-at, job-id and
// attempt), then job-id, deliver-at (epoch ms) and attempt (from 1).
//
// Outages: if Redis fails mid-way, nothing already acknowledged is forgotten: reports stay
// queued until settle() gets through, and jobs whose claim failed go back to the wheel. Every
// step may be repeated (see storage/job_store.hpp for the crash points).
// Threading: the scheduling loop's thread, like the scheduler and producer it uses.
#pragma once

#include "broker/delivery_tags.hpp"
#include "broker/scheduler.hpp"
#include "connectors/kafka_producer.hpp"
#include "storage/job_store.hpp"

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>

namespace delayd::broker {

struct FireOptions {
  int max_attempts = 10;
  std::int64_t retry_backoff_ms = 500;
  std::int64_t retry_backoff_max_ms = 30000;
  std::string dlq_topic = "delay-ingest.dlq";
};

struct FireCounters {
  std::uint64_t produced = 0;
  std::uint64_t delivered = 0;
  std::uint64_t retried = 0;
  std::uint64_t failed = 0;
  std::uint64_t dropped_stale = 0;
};

class FirePath {
 public:
  FirePath(Scheduler& scheduler, storage::JobStore& store, connectors::KafkaProducer& producer, FireOptions options);

  // Returns how many records were handed to the producer.
  std::size_t fire_due(std::int64_t now_ms);
  void on_report(const connectors::DeliveryReport& report);
  void settle(std::int64_t now_ms);

  // Records handed to Kafka whose outcome is not yet written to Redis.
  std::size_t unsettled() const { return in_flight_.size(); }
  const FireCounters& counters() const { return counters_; }

 private:
  struct InFlight {
    Scheduler::Slot slot;
    std::string job_id;
    int attempt = 0;
    connectors::OutRecord record;  // kept for the dead-letter copy if every attempt fails
    std::string reason;            // set once the job is on its way to the dead-letter topic
  };
  std::int64_t backoff(int attempt) const;
  void produce(InFlight entry, TagKind kind);
  void handle_failure(std::uint64_t tag, const connectors::DeliveryReport& report, std::int64_t now_ms);

  Scheduler& scheduler_;
  storage::JobStore& store_;
  connectors::KafkaProducer& producer_;
  FireOptions options_;
  std::unordered_map<std::uint64_t, InFlight> in_flight_;
  std::deque<connectors::DeliveryReport> reports_;
  std::uint64_t seq_ = 0;
  FireCounters counters_;
};

}  // namespace delayd::broker
