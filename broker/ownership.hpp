// Ownership: the shards (ingest partitions) this instance owns, as the consumer groups, the fences
// in Redis and the record sink decide.
//
// Owns the rebalance listeners handed to the ingest stages' consumers, the shards on their way in
// (assigned, fence not taken; fence taken, records' stream opening), and the shards given up by a
// fence while the group still says they are ours. What each event does (broker/service.hpp,
// OWNERSHIP):
//   assigned   the shards are only noted (no I/O inside librdkafka's callback); the next turn's
//              take_assigned() takes each one's fence in Redis (a larger epoch), reads its
//              in-flight entries of earlier epochs (exactly_once), and opens its records' stream
//              (RecordSink::open(): the transactional id taken over, the delivery log read); once
//              the stream is open, the fire path learns which of those entries were delivered
//              (FirePath::recover()) and the scheduler loads the shard. A take that fails (Redis
//              down) throws and is retried next turn.
//   revoked    the sink's outstanding records are awaited (up to kDrainMs: committed, for
//              exactly_once) and settled, so the next owner finds them ready; then each shard
//              leaves the scheduler (its timers and held jobs), its fence is forgotten and its
//              stream closed.
//   lost       taken away without a revoke (session timeout): another member may own the shards
//              already, so nothing is drained: each stream is closed at once (exactly_once: its
//              open transaction abandoned, and the new owner's producer aborts it;
//              at_least_once: the producer's unsent records purged), then as revoked.
//   left       revoked because this member left its group by itself, cut off from Redis
//              (IngestStage): nothing can be drained (settling needs Redis), so the shards go as
//              lost ones do, and are logged as left, not as taken away.
//   fenced     a call refused by Redis, or a stream that Kafka fenced, makes the fire path give
//              the shard up itself (FirePath::lose()). If the group still says the shard is ours
//              retake_after later (time for the group to tell of a loss), it is taken again, as if
//              just assigned: a fence taken by a member the group had already expelled (a zombie)
//              must not leave the shard with nobody. A shard given up while its stream was still
//              opening leaves opening_ at once (its stream is closed) and is retaken the same way.
// Invariants: a shard is loaded by the scheduler only once its fence is taken and its stream is
// open; a shard is in to_take_ or opening_ only between its assignment (or re-take) and its load
// (or its revoke).
// Threading: the scheduling loop's thread. librdkafka calls the consumers' listeners on the
// ingest threads; they relay each rebalance to the loop's thread, which runs these listeners
// while the ingest thread waits (broker/handover.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "broker/fire_path.hpp"
#include "broker/handover.hpp"
#include "broker/record_sink.hpp"
#include "broker/scheduler.hpp"
#include "broker/wall_clock.hpp"
#include "connectors/kafka_consumer.hpp"
#include "storage/job_store.hpp"

namespace delayd::broker {

class Ownership {
 public:
  // How long a revoke waits for the sink's outstanding records before letting the shards go.
  static constexpr int kDrainMs = 2000;

  struct Options {
    // Their partitions are the shards (the status topic's come with no shards).
    std::set<std::string, std::less<>> ingest_topics;
    // Read the in-flight entries of earlier epochs when taking a shard (exactly_once: the
    // takeover asks the delivery log about them).
    bool takeover_reads = false;
    // A shard given up by a fence is taken again this long after, if the group still says it is
    // ours (the consumer's session timeout and a margin).
    std::chrono::milliseconds retake_after{12'000};
  };

  // The parts a change of ownership touches; all must outlive this.
  Ownership(Options options, const WallClock& clock, Scheduler& scheduler, storage::JobStore& store, FirePath& fire,
            RecordSink& sink);
  Ownership(const Ownership&) = delete;  // the listeners point at this
  Ownership& operator=(const Ownership&) = delete;

  // Makes the store fence every write of our shards under this member's name (host/pid).
  // Precondition: called once, before the first take_assigned().
  void enable_fencing();
  // The listeners the handover runs (Handover::serve()): assignments noted, revokes drained,
  // losses and leaves not.
  Handover::Listener listener();
  // Takes the fence of every shard assigned (or to be re-taken) since the last turn and opens its
  // stream, then loads the shards whose streams are open. Throws storage errors; what is not
  // done yet is done next time.
  void take_assigned();
  // Assigned shards not loaded yet: fences not taken, streams not open, or no refill done.
  std::vector<std::string> loading() const;
  // Why a shard's stream does not open, while one does not ("" when none waits on a failure).
  std::string loading_problem() const { return loading_problem_; }
  // Assignments, revokes and losses seen since start.
  std::uint64_t rebalances() const { return rebalances_; }
  // Shards taken again after a fence gave them up, since start.
  std::uint64_t retaken() const { return retaken_; }

  // Names this broker in the shards' owner keys, for people: host and pid (no spaces).
  static std::string member_name();

 private:
  // Inside a revoke: waits up to kDrainMs for the sink's outstanding records and writes their
  // outcome. A failure only costs duplicates (at_least_once: the next owner produces them again;
  // exactly_once: its takeover finds them), so it is logged, not thrown.
  void drain_before_revoke();
  // How a shard stops being ours: drained (revoked), or not (lost, left).
  enum class GiveUp : unsigned char { revoked, lost, left };
  // A shard given up leaves everything here; `why` decides whether its stream is drained and
  // what the log says.
  void give_up(const std::string& shard, GiveUp why);

  using Clock = std::chrono::steady_clock;
  Options options_;
  const WallClock& clock_;
  Scheduler& scheduler_;
  storage::JobStore& store_;
  FirePath& fire_;
  RecordSink& sink_;
  std::set<std::string> assigned_;                   // the groups say these are ours
  std::set<std::string> to_take_;                    // assigned shards whose fence is not taken yet
  std::map<std::string, std::size_t> opening_;       // fence taken, stream opening: in-flight entries asked about
  std::map<std::string, Clock::time_point> retake_;  // given up by a fence: when to take it again
  std::string loading_problem_;
  std::uint64_t rebalances_ = 0;
  std::uint64_t retaken_ = 0;
};

}  // namespace delayd::broker
