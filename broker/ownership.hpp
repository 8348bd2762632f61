// Ownership: the shards (ingest partitions) this instance owns, as the consumer group and the
// fences in Redis decide.
//
// Owns the rebalance listeners handed to the KafkaConsumer, the set of shards assigned but not
// fenced yet, and the count of rebalances. What each part does (broker/service.hpp, OWNERSHIP):
//   assigned   the shards are only noted (no I/O inside librdkafka's callback); the next turn's
//              take_assigned() takes each one's fence in Redis and only then lets the scheduler
//              load it. A take that fails (Redis down) throws and is retried next turn.
//   revoked    the fire path's outstanding records are awaited (up to kDrainMs) and settled, so
//              the next owner finds them ready; then each shard leaves the scheduler (its timers
//              and held jobs) and its fence is forgotten. The ingest path keeps nothing per
//              shard: its batches' offsets are committed or read again by the next owner.
//   fenced     a fenced call refused by Redis makes the fire path give the shard up itself
//              (FirePath::lose(), with its recheck of held records): not handled here.
// Invariants: a shard is loaded by the scheduler only once its fence is taken; a shard is in
// the assigned-not-fenced set only between its assignment and its take (or its revoke).
// Threading: the scheduling loop's thread. librdkafka calls the consumer's listeners on the
// ingest thread; they relay each rebalance to the loop's thread, which runs these listeners
// while the ingest thread waits (broker/handover.hpp).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "broker/fire_path.hpp"
#include "broker/scheduler.hpp"
#include "broker/wall_clock.hpp"
#include "connectors/kafka_consumer.hpp"
#include "connectors/kafka_producer.hpp"
#include "storage/job_store.hpp"

namespace delayd::broker {

class Ownership {
 public:
  // How long a revoke waits for the producer's outstanding records before letting the shards go.
  static constexpr int kDrainMs = 2000;

  // The parts a change of ownership touches; all must outlive this. Only partitions of
  // `ingest_topics` are shards (the status topic's come with the assignment too).
  Ownership(std::set<std::string, std::less<>> ingest_topics, const WallClock& clock, Scheduler& scheduler,
            storage::JobStore& store, FirePath& fire, connectors::KafkaProducer& producer);
  Ownership(const Ownership&) = delete;  // the listeners point at this
  Ownership& operator=(const Ownership&) = delete;

  // Makes the store fence every write of our shards under this member's name (host/pid).
  // Precondition: called once, before the first take_assigned().
  void enable_fencing();
  // The listeners for the consumer: assignments noted, revokes drained and dropped.
  connectors::KafkaConsumer::Listener listener();
  // Takes the fence of every shard assigned since the last turn, then lets the scheduler load
  // it. Throws storage errors; the shards not taken yet are taken next time.
  void take_assigned();
  // Assigned shards not loaded yet: fences not taken, or no refill done.
  std::vector<std::string> loading() const;
  // Assignments and revokes seen since start.
  std::uint64_t rebalances() const { return rebalances_; }

  // Names this broker in the shards' owner keys, for people: host and pid (no spaces).
  static std::string member_name();

 private:
  // Inside a revoke: waits up to kDrainMs for the producer's outstanding records and writes
  // their outcome. A failure only costs duplicates (the next owner produces them again), so it
  // is logged, not thrown.
  void drain_before_revoke();

  std::set<std::string, std::less<>> ingest_topics_;  // their partitions are the shards
  const WallClock& clock_;
  Scheduler& scheduler_;
  storage::JobStore& store_;
  FirePath& fire_;
  connectors::KafkaProducer& producer_;
  std::set<std::string> to_take_;  // assigned shards whose fence is not taken yet
  std::uint64_t rebalances_ = 0;
};

}  // namespace delayd::broker
