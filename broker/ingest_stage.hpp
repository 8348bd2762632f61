// IngestStage: an ingest thread. Reads one topic in one of delayd's consumer groups
// (config::consumer_groups(): an ingest topic's records, or the status topic's reports), makes
// them durable in Redis over a connection of its own, dead-letters what breaks the contract
// through a producer of its own, commits offsets, and tells the wheel's owner what it wrote
// through the Handover. The service runs one stage per group (IngestStages below), so that each
// group balances the partitions of one topic over the instances.
//
// One turn of the thread:
//   0. until it is a member: start its group from the offsets 0.3's single group committed, if
//      it has none of its own (connectors/offset_seed.hpp), then subscribe to its topic. Once
//      Redis has been unreachable for redis.leave_group_after_ms (by this thread's calls or the
//      loop's: Handover::redis_down_since()), leave the group instead, so that an instance that
//      reaches Redis takes the partitions (the revoke is relayed and drained as any other); then
//      only serve the consumer and ask Redis (PING) once a second, and join again once it answers.
//      Unless the group has no other member (asked of its coordinator, DescribeGroups, at
//      most every kMembersRecheckMs; when Kafka cannot be asked, it leaves): nobody could take a
//      lone member's partitions, and leaving would only add a takeover after Redis answers again
//      (a single instance through a Redis restart: the shards taken over again a second after).
//      It keeps them, and says so once an outage.
//      Subscribed is not joined: the group has this instance as a member once its coordinator
//      answered (the member id, with the first JoinGroup answer, KIP-394). Until then status()
//      lists the group as joining (/readyz is 503: an instance that has not joined does no work,
//      and a rolling update must not take it for one that does), and once that has lasted
//      kJoinBoundMs, or at once when Kafka did not answer start-up's own questions either, it is
//      the "kafka (group)" outage (/healthz degraded naming it) until the member id comes. Not
//      while Kafka refuses the consumer: that refusal is the outage said.
//      An outage is counted from no earlier than the last join: the loop's mark may still carry
//      the outage just ended (it clears on the loop's next good turn, which may wait out a
//      backoff), and must not make it leave again at once (a leave-join storm: every join undone
//      within a millisecond, nothing read, seen under a Redis Cluster failover), nor from
//      earlier than the last turn whose batches this thread wrote to Redis (the loop's mark once
//      outlived a Redis restart by half a second while reports were being written again, and the
//      instance gave up every shard just after Redis was back). A thread with nothing to read
//      makes no Redis call, and decides on the loop's mark alone. A WAIT that too few replicas
//      acknowledged (RedisNotDurable) is Redis answering: it is retried, not counted
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
// Static membership (kafka.group_instance_id, KIP-345): the consumer joins with the instance's
// id, and a member that dies without leaving (kill -9, a crash, an OOM kill) keeps its
// partitions in the group until its session ends, as any member does, but an instance that
// starts again with the same id replaces it at once: the group hands it the same partitions
// without waiting out the dead member's session (10 s by default), and its shards are taken
// over as at any assignment (ownership.hpp; with exactly_once each shard's producer fences the
// dead one's transactions). A static member sends no LeaveGroup when its consumer closes, so a
// stop leaves the group explicitly first (unsubscribe(): the revoke is relayed as any other),
// and the others take the shards at once, as without an id. Two instances with one id: the
// group fences the member that joined first out (librdkafka's fatal error FENCED_INSTANCE_ID,
// its partitions revoked as lost); that stage then reads nothing until the process is
// restarted, and says so, naming the setting, as an outage of its own (/healthz degraded):
// joining again would only fence the other in turn.
// Threading: the public methods from the loop's thread; the rest on the ingest thread. Several
// stages run side by side, sharing only the Handover and the TopicCreator (both thread-safe).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
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
#include "connectors/kafka_admin.hpp"
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
  // Partitions of its topic the group assigned to this instance, as of the last snapshot.
  std::map<std::string, std::size_t> partitions;  // topic -> count
  std::uint64_t groups_left = 0;                  // times it left its group because Redis was unreachable
  // Its group while it has not joined it (subscribed or about to, no member id yet): /readyz waits.
  std::vector<std::string> joining;
};

class IngestStage {
 public:
  // Reads `group`'s topic in that group. `store` and `redis_latency` belong to this stage's own
  // Redis client (`redis`: WAIT is sent on it); `topics` may be null. All must outlive the stage.
  // Throws if a Kafka client cannot be built; joins the group once its thread runs. `tracer`
  // (null: off) gets the accept spans. `kafka_silent`: start-up's questions to Kafka went
  // unanswered (broker/service.cpp), so a join that does not come at once is an outage at once.
  IngestStage(const config::Config& c, config::ConsumerGroup group, storage::JobStore& store, redis::RedisClient& redis,
              const DurationHistogram& redis_latency, Handover& handover, TopicCreator* topics,
              telemetry::Tracer* tracer, bool kafka_silent);
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
  // Step 0 of a turn: seeds the group's offsets if it needs to, then subscribes. False if Kafka
  // refused the seed (seed_refusal_ says what); throws KafkaError for other failures (the turn's
  // outage). Either way it is tried again next turn.
  bool join_group();
  static constexpr std::int64_t kRefusedRetryMs = 1000;
  // Notes the member id once the consumer has one; while it has none, the "kafka (group)"
  // outage's sentence once the join has lasted join_bound_ms_ (else nullopt).
  std::optional<std::string> not_joined();
  // How long a join may take before it is an outage, in ms: a round trip to the coordinator,
  // plus the broker's group.initial.rebalance.delay.ms (3 s by default) for a group's first
  // member, with room for a slow day.
  static constexpr std::int64_t kJoinBoundMs = 10000;
  // Step 0's other half: whether Redis has been down long enough to leave; leaving; and, once
  // left, serving the consumer and asking Redis whether it answers again.
  bool redis_cut_long() const;
  // Whether the group has a member besides this one, from the coordinator's description at most
  // kMembersRecheckMs old; true when Kafka cannot be asked (so the stage leaves, as without it).
  bool others_in_group();
  static constexpr std::int64_t kMembersRecheckMs = 5000;
  void leave_group();
  void while_left();
  static constexpr std::int64_t kLeftProbeMs = 1000;
  // Leaves as request_stop() says. Logs failures; never throws.
  void finish();
  // At a stop with kafka.group_instance_id: leaves the group before the consumer closes.
  void leave_static_group();
  void publish_status();
  std::int64_t poll_wait_ms() const;
  // The consumer's listeners (relayed to the loop's thread; see the .cpp).
  connectors::KafkaConsumer::Listener relaying();
  // Moves the offsets of the batches done (IngestPath::take_committable()) into committable_.
  void collect_committable();
  // IngestPath::settle(), its failure left to the next turn (which processes the batch again).
  void settle_quietly() noexcept;
  // After a failed turn: nothing stays posted, and the batches done are not kept.
  void failed() noexcept;

  const config::Config& c_;
  const config::ConsumerGroup group_;
  redis::RedisClient& redis_;  // this stage's connection: the PING while it is out of its group
  bool subscribed_ = false;
  bool member_ = false;             // the consumer has had a member id since the last subscribe: joined
  std::int64_t subscribed_at_ = 0;  // steady ms of the last subscribe, or of the last refusal seen after it; 0: never
  std::int64_t join_bound_ms_;      // kJoinBoundMs, or 0 while Kafka has been silent since start-up
  bool left_ = false;               // out of the group while Redis is unreachable
  std::uint64_t groups_left_ = 0;
  std::int64_t redis_down_since_ = 0;              // steady ms of this thread's first failed Redis call; 0: up
  std::int64_t joined_at_ = 0;                     // steady ms of the last join after a leave; 0: never left
  std::int64_t answered_at_ = 0;                   // steady ms of the last turn that wrote batches to Redis; 0: none
  std::optional<std::string> seed_refusal_;        // Kafka refused the seed: its sentence
  std::unique_ptr<connectors::KafkaAdmin> admin_;  // others_in_group()'s, made at its first question
  std::int64_t members_asked_at_ = 0;              // steady ms of others_in_group()'s last question; 0: never
  bool others_ = true;                             // its last answer
  bool kept_alone_said_ = false;                   // this outage's "keeping them" was logged
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
  std::chrono::steady_clock::time_point quiet_until_{};             // no commit before (kCommitQuietAfterRebalance)
  std::map<connectors::TopicPartition, std::int64_t> committable_;  // done, not committed yet: next offsets
  std::map<std::string, std::int64_t> lag_;

  std::atomic<bool> stop_{false};
  std::atomic<bool> finished_{false};
  std::atomic<bool> fatal_{false};
  mutable std::mutex status_mutex_;
  IngestStatus status_;  // guarded by status_mutex_
  std::thread thread_;
};

// IngestStages: one IngestStage per consumer group of config::consumer_groups(), started and
// stopped together, their statuses summed into one.
// Threading: as IngestStage's public methods: the loop's thread.
class IngestStages {
 public:
  // What each stage talks to Redis through: its own client, store and round-trip histogram.
  struct RedisParts {
    storage::JobStore* store = nullptr;
    redis::RedisClient* redis = nullptr;
    const DurationHistogram* latency = nullptr;
  };
  // Precondition: redis.size() == config::consumer_groups(c).size(), in that order.
  // `kafka_silent`: as IngestStage's.
  IngestStages(const config::Config& c, const std::vector<RedisParts>& redis, Handover& handover, TopicCreator* topics,
               telemetry::Tracer* tracer, bool kafka_silent);

  void start();
  void request_stop();
  bool finished() const;  // every stage's thread is done
  void join();
  bool fatal() const;  // any stage's
  // Summed: counters added, lag, partitions and histograms merged, an outage on if any stage's
  // is, paused if any is; the problem of the first stage that has one; the groups joining listed.
  IngestStatus status() const;

 private:
  std::vector<std::unique_ptr<IngestStage>> stages_;
};

}  // namespace delayd::broker
