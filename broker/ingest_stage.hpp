// IngestStage: the ingest thread. Reads ingest (and status) records, makes them durable in Redis
// over a connection of its own, dead-letters what breaks the contract through a producer of its
// own, commits offsets, and tells the wheel's owner what it wrote through the Handover.
//
// One turn of the thread:
//   1. replace its producer if librdkafka says it is fatal (ProducerRecovery)
//   2. serve its producer's reports (dead-letter copies), send again the copies whose backoff
//      passed and the status reports that waited for their job's delivery to settle
//   3. pause or resume reading (IngestPause: the fire side's state comes from the Handover)
//   4. read a batch (or go on with those an outage interrupted), waiting at most 100 ms (none
//      while a batch is posted: with nothing at hand, the posted one is collected now), and
//      process it whole (IngestPath::process: its accepts of every shard in one pipelined round
//      trip, posted so that Redis runs them while this thread reads and parses the next batch,
//      and collected when that one is posted; ingest_path.hpp, "Send-ahead")
//   5. start committing the offsets of every batch that is done (every duty::kIngestCommit)
// A failed turn is an outage of this thread's own (OutageTracker): retried with backoff, the
// batches not processed kept (a posted one included: forgotten, then processed again);
// status() carries it to /healthz.
//
// It owns: the KafkaConsumer (so librdkafka runs the rebalance listeners on this thread; each is
// relayed to the loop's thread and awaited, broker/handover.hpp), the IngestPath, its JobStore
// and Redis client (given by the service, used only here), a KafkaProducer for dead-letter
// copies, IngestPause. It shares: the Handover (thread-safe), the TopicCreator (thread-safe).
//
// Start and stop: start() starts the thread. request_stop() asks it to end: it finishes the
// batch in hand (or drops it during an outage: uncommitted, so it is read again), flushes its
// dead-letter copies (up to 2 s), commits what is done, and leaves the group (close(): the revoke
// is relayed, so the loop's thread must go on serving the Handover until finished()). join()
// waits for the thread.
// Threading: the public methods from the loop's thread; the rest on the ingest thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "broker/handover.hpp"
#include "broker/ingest_path.hpp"
#include "broker/ingest_pause.hpp"
#include "broker/outage_tracker.hpp"
#include "broker/periodic.hpp"
#include "broker/producer_recovery.hpp"
#include "broker/snapshot.hpp"
#include "broker/wall_clock.hpp"
#include "config/config.hpp"
#include "connectors/kafka_consumer.hpp"
#include "connectors/kafka_producer.hpp"
#include "storage/job_store.hpp"

namespace delayd::broker {

// What the ingest thread shows of itself, copied out under a lock (snapshot()).
struct IngestStatus {
  IngestCounters counters;
  std::string problem;                      // its outage, while it lasts; or the pause's sentence
  std::map<std::string, bool> outages;      // as OutageTracker::outages()
  bool paused = false;                      // reading paused (back-pressure)
  std::map<std::string, std::int64_t> lag;  // per "<topic>:<partition>", as of the last second
  DurationHistogram redis_request;          // its Redis round trips
};

class IngestStage {
 public:
  // `store` and `redis_latency` belong to this stage's own Redis client (`redis`: WAIT is sent
  // on it); `topics` may be null. All must outlive the stage. Subscribes the consumer; throws
  // if a Kafka client cannot be built. `tracer` (null: off) gets the accept spans.
  IngestStage(const config::Config& c, storage::JobStore& store, redis::RedisClient& redis,
              const DurationHistogram& redis_latency, Handover& handover, TopicCreator* topics,
              telemetry::Tracer* tracer);
  ~IngestStage();  // requests a stop and joins, if the thread still runs
  IngestStage(const IngestStage&) = delete;
  IngestStage& operator=(const IngestStage&) = delete;

  void start();
  void request_stop();
  bool finished() const { return finished_.load(); }
  void join();
  // A fatal error (ProducerRecovery) ended the thread: the service stops.
  bool fatal() const { return fatal_.load(); }
  IngestStatus status() const;

 private:
  void run();
  void turn();
  // Leaves as request_stop() says. Logs failures; never throws.
  void finish();
  void publish_status();
  std::int64_t poll_wait_ms() const;
  // The consumer's listeners (relayed to the loop's thread; see the .cpp).
  connectors::KafkaConsumer::Listener relaying();
  // IngestPath::settle(), its failure left to the next turn (which processes the batch again).
  void settle_quietly() noexcept;
  // After a failed turn: nothing stays posted, and the batches done are not kept.
  void failed() noexcept;

  const config::Config& c_;
  Handover& handover_;
  const DurationHistogram& redis_latency_;
  WallClock clock_;
  std::uint64_t rebalances_ = 0;  // the consumer's, seen by this thread (before consumer_: its listeners count here)
  connectors::KafkaProducer producer_;  // dead-letter copies of ingest and status records
  IngestPath ingest_;
  connectors::KafkaConsumer consumer_;
  IngestPause pause_;
  OutageTracker outages_;
  ProducerRecovery recovery_;
  std::deque<std::vector<connectors::Record>> kept_;  // read, not processed yet (the last may be posted)
  Every status_every_{duty::kSnapshot};
  Every lag_every_{duty::kLagReading};
  Every commit_every_{duty::kIngestCommit};
  std::map<std::string, std::int64_t> lag_;

  std::atomic<bool> stop_{false};
  std::atomic<bool> finished_{false};
  std::atomic<bool> fatal_{false};
  mutable std::mutex status_mutex_;
  IngestStatus status_;  // guarded by status_mutex_
  std::thread thread_;
};

}  // namespace delayd::broker
