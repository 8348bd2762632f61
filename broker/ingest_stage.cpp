#include "broker/ingest_stage.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "base/thread_name.hpp"
#include "broker/loop_settings.hpp"
#include "broker/outage.hpp"
#include "connectors/kafka_error.hpp"
#include "connectors/offset_seed.hpp"
#include "redis/connection.hpp"
#include "storage/key_schema.hpp"

namespace delayd::broker {

IngestStage::IngestStage(const config::Config& c, config::ConsumerGroup group, storage::JobStore& store,
                         redis::RedisClient& redis, const DurationHistogram& redis_latency, Handover& handover,
                         TopicCreator* topics, telemetry::Tracer* tracer, bool kafka_silent)
    : c_(c),
      group_(std::move(group)),
      redis_(redis),
      join_bound_ms_(kafka_silent ? 0 : kJoinBoundMs),
      handover_(handover),
      redis_latency_(redis_latency),
      producer_(producer_properties(c), [this](const connectors::DeliveryReport& r) { ingest_.on_report(r); }),
      ingest_(handover, store, producer_, topics, ingest_options(c, redis, tracer)),
      consumer_(consumer_properties(c, group_), relaying()) {
  // Until its thread says otherwise; with Kafka silent at start-up, out of reach from the first
  // snapshot on.
  outages_.not_joined(not_joined());
  status_.joining = {group_.group_id};
  status_.problem = outages_.problem(false);
  status_.outages = outages_.outages();
}

IngestStage::~IngestStage() {
  request_stop();
  join();
}

void IngestStage::start() {
  thread_ = std::thread([this] { run(); });
}

void IngestStage::request_stop() { stop_ = true; }

void IngestStage::join() {
  if (thread_.joinable()) thread_.join();
}

IngestStatus IngestStage::status() const {
  std::lock_guard lock(status_mutex_);
  return status_;
}

void IngestStage::run() {
  // The status topic's stage reads reports, which apply to jobs wherever they are (IngestPath):
  // its partitions are not shards.
  base::name_this_thread(group_.reports ? "status" : "ingest");
  while (!stop_ && !fatal_) {
    turn();
    if (status_every_.due()) publish_status();
  }
  finish();
  publish_status();
  finished_ = true;
  handover_.notify();
}

// The consumer's listeners: each rebalance is relayed to the loop's thread (Ownership runs it
// there) and awaited; rebalances_ is this thread's own tally, for IngestPause. Each first
// collects the posted batch, so that its offers reach the owner before the rebalance does (one
// queue, one order): for a revoke, before the shard leaves the wheel.
// The status topic's stage relays no rebalance: its partitions are no shards. (The timers its
// reports move still reach this instance's wheel through the Handover's moves, and other
// instances' through the wake lists.)
connectors::KafkaConsumer::Listener IngestStage::relaying() {
  connectors::KafkaConsumer::Listener l;
  l.assigned = [this](const std::vector<connectors::TopicPartition>& tps) {
    ++rebalances_;
    quiet_until_ = std::chrono::steady_clock::now() + duty::kCommitQuietAfterRebalance;
    settle_quietly();
    if (!group_.reports) handover_.relay(Handover::Rebalance::assigned, tps);
  };
  l.revoked = [this](const std::vector<connectors::TopicPartition>& tps) {
    ++rebalances_;
    quiet_until_ = std::chrono::steady_clock::now() + duty::kCommitQuietAfterRebalance;
    // Their offsets not committed yet are another member's to commit now (it reads those records
    // again: idempotent); a late commit of ours could set it back.
    for (const auto& tp : tps) committable_.erase(tp);
    settle_quietly();
    // Leaving for want of Redis, nothing can be drained (the marks need Redis): the shards go at
    // once, as lost ones do, and their next owner's takeover settles what was in flight.
    if (!group_.reports) handover_.relay(left_ ? Handover::Rebalance::left : Handover::Rebalance::revoked, tps);
  };
  l.lost = [this](const std::vector<connectors::TopicPartition>& tps) {
    ++rebalances_;
    quiet_until_ = std::chrono::steady_clock::now() + duty::kCommitQuietAfterRebalance;
    // Their offsets not committed yet are another member's to commit now (it reads those records
    // again: idempotent); a late commit of ours could set it back.
    for (const auto& tp : tps) committable_.erase(tp);
    settle_quietly();
    if (!group_.reports) handover_.relay(Handover::Rebalance::lost, tps);
  };
  return l;
}

void IngestStage::settle_quietly() noexcept {
  try {
    ingest_.settle();
  } catch (const std::exception& e) {
    // Forgotten (settle() abandons on failure): the kept batches are processed again by the
    // next turn, which meets the outage and reports it.
    spdlog::debug("collecting the posted ingest batch before a rebalance: {}", e.what());
  }
}

bool IngestStage::join_group() {
  if (!group_.seed_from.empty()) {
    try {
      const auto seeded = connectors::seed_offsets(consumer_properties(c_, group_), group_.seed_from, group_.topic);
      if (seeded.kind == connectors::SeedOutcome::Kind::seeded) {
        spdlog::info("consumer group {} starts {} where group {} left it ({} partitions' offsets copied)",
                     group_.group_id, group_.topic, group_.seed_from, seeded.partitions);
      }
    } catch (const connectors::KafkaRefused& e) {
      seed_refusal_ = e.what();
      return false;
    }
  }
  seed_refusal_.reset();
  consumer_.subscribe({group_.topic});
  subscribed_ = true;
  member_ = false;
  subscribed_at_ = steady_now_ms();
  return true;
}

std::optional<std::string> IngestStage::not_joined() {
  if (member_ || left_) return std::nullopt;
  const std::int64_t waited = subscribed_ ? steady_now_ms() - subscribed_at_ : 0;
  if (subscribed_) {
    if (const std::string id = consumer_.member_id(); !id.empty()) {
      member_ = true;
      spdlog::info("consumer group {} joined after {} ms (member {})", group_.group_id, waited, id);
      return std::nullopt;
    }
  }
  if (waited < join_bound_ms_) return std::nullopt;
  const std::string why = join_bound_ms_ == 0
                              ? "Kafka has not answered since start-up"
                              : "no group coordinator has answered for " + std::to_string(waited / 1000) + " s";
  return "consumer group " + group_.group_id + " not joined: " + why + "; records wait in Kafka";
}

bool IngestStage::redis_cut_long() const {
  const std::int64_t after = c_.redis.leave_group_after_ms;
  if (after <= 0 || !subscribed_) return false;
  std::int64_t since = redis_down_since_;
  const std::int64_t loop = handover_.redis_down_since();
  if (since == 0 || (loop != 0 && loop < since)) since = loop;
  if (since == 0) return false;
  // An outage that began before the last join, or before Redis last answered this thread's
  // calls, counts from then.
  since = std::max({since, joined_at_, answered_at_});
  return steady_now_ms() - since >= after;
}

bool IngestStage::others_in_group() {
  const std::int64_t now = steady_now_ms();
  if (members_asked_at_ != 0 && now - members_asked_at_ < kMembersRecheckMs) return others_;
  members_asked_at_ = now;
  try {
    if (!admin_) {
      admin_ = std::make_unique<connectors::KafkaAdmin>(config::kafka_properties(c_, config::KafkaClient::admin));
    }
    const std::string me = consumer_.member_id();
    const auto members = admin_->group_members(group_.group_id, 2000);
    others_ =
        me.empty() || std::any_of(members.begin(), members.end(),
                                  [&](const connectors::KafkaAdmin::GroupMember& m) { return m.member_id != me; });
  } catch (const std::exception& e) {
    spdlog::debug("consumer group {}: its members could not be asked ({}); leaving as if it had others",
                  group_.group_id, e.what());
    others_ = true;
  }
  return others_;
}

void IngestStage::leave_group() {
  spdlog::warn(
      "redis unreachable for {} ms or more: leaving consumer group {} so that an instance that reaches Redis "
      "takes {}'s partitions; joining again once Redis answers",
      c_.redis.leave_group_after_ms, group_.group_id, group_.topic);
  failed();  // what was read and not written is read again by the next owner
  kept_.clear();
  consumer_.unsubscribe();
  left_ = true;
  subscribed_ = false;
  outages_.not_joined(std::nullopt);  // out by its own choice now
  ++groups_left_;
}

void IngestStage::while_left() {
  // The consumer is served (the revoke of the whole assignment, relayed and drained as any other);
  // whatever it still hands over is dropped, uncommitted: the next owner reads it.
  (void)consumer_.poll_batch(static_cast<std::size_t>(c_.scheduler.ingest_batch), 0);
  try {
    redis_.command({"PING"});
  } catch (const std::exception&) {
    nap(kLeftProbeMs, stop_);
    return;
  }
  spdlog::info("redis answers again: consumer group {} joined again", group_.group_id);
  redis_down_since_ = 0;
  joined_at_ = steady_now_ms();
  left_ = false;
  if (!join_group()) spdlog::warn("consumer group {}: {}", group_.group_id, seed_refusal_.value_or(""));
}

void IngestStage::turn() {
  try {
    if (left_) {
      while_left();
      return;
    }
    if (!redis_cut_long()) {
      kept_alone_said_ = false;
    } else if (others_in_group()) {
      leave_group();
      return;
    } else if (!std::exchange(kept_alone_said_, true)) {
      spdlog::warn(
          "redis unreachable for {} ms or more, but consumer group {} has no other member that could take {}'s "
          "partitions: keeping them (leaving would only add a takeover once Redis answers)",
          c_.redis.leave_group_after_ms, group_.group_id, group_.topic);
    }
    if (!subscribed_ && !join_group()) {
      // Refused (an ACL, the login): reported as the consumer's refusals are, asked again shortly.
      outages_.refusal(seed_refusal_);
      nap(kRefusedRetryMs, stop_);
      return;
    }
    if (!recovery_.check(producer_, "dead-letter")) {
      fatal_ = true;
      return;
    }
    producer_.poll(0);
    ingest_.retry_dead_letters();
    ingest_.retry_waiting(clock_.now_ms());
    pause_.apply(handover_.fire_stuck(), handover_.unsettled(), ingest_, rebalances_, consumer_);
    // kept_: the batches read and not processed yet, oldest first; the last may be posted
    // (send-ahead, ingest_path.hpp). The others are processed first (after an outage: again,
    // resumed by their first record); else a new batch is read, and while one is posted only
    // what the consumer has at hand: with nothing new, the posted batch is collected now.
    std::size_t todo = kept_.size() - ingest_.in_flight();
    bool idle = false;
    if (todo == 0) {
      auto next = consumer_.poll_batch(static_cast<std::size_t>(c_.scheduler.ingest_batch),
                                       ingest_.in_flight() > 0 ? 0 : static_cast<int>(poll_wait_ms()));
      if (next.empty()) {
        ingest_.settle();
        kept_.clear();  // all were posted, and are collected now
        idle = true;
      } else {
        kept_.push_back(std::move(next));
        todo = 1;
      }
    }
    // Each batch whole: IngestPath writes its jobs of every shard in one pipelined round trip.
    for (std::size_t i = kept_.size() - todo; i < kept_.size(); ++i) ingest_.process(kept_[i], clock_.now_ms());
    while (kept_.size() > ingest_.in_flight()) kept_.pop_front();
    // The batches done are taken every turn (so that they do not pile up into a backlog), their
    // offsets committed every kIngestCommit under load, and at once when the topic has nothing
    // more to read (the end of a burst is committed without waiting out the period); never just
    // after a rebalance.
    collect_committable();
    if (!committable_.empty() && std::chrono::steady_clock::now() >= quiet_until_ && (commit_every_.due() || idle)) {
      consumer_.commit_async(
          std::vector<std::pair<connectors::TopicPartition, std::int64_t>>(committable_.begin(), committable_.end()));
      committable_.clear();
    }
    outages_.turn_done(std::nullopt);
    redis_down_since_ = 0;
    if (todo > 0) answered_at_ = steady_now_ms();  // its batches were written: Redis answered
  } catch (const redis::RedisNotDurable& e) {
    // Redis answered; its replicas lag (a failover, a resync): no reason to hand the shards over.
    redis_down_since_ = 0;
    failed();
    nap(outages_.failed(OutageTracker::Failure::redis, e.what()), stop_);
  } catch (const redis::RedisIoError& e) {
    if (redis_down_since_ == 0) redis_down_since_ = steady_now_ms();
    failed();
    nap(outages_.failed(OutageTracker::Failure::redis, e.what()), stop_);
  } catch (const redis::RedisCommandError& e) {
    failed();
    nap(outages_.failed(OutageTracker::Failure::redis, std::string("refused: ") + e.what()), stop_);
  } catch (const connectors::KafkaFencedMember& e) {
    failed();
    nap(outages_.failed(OutageTracker::Failure::kafka,
                        "another instance joined consumer group " + group_.group_id +
                            " with the same kafka.group_instance_id \"" + c_.kafka.group_instance_id +
                            "\" and fenced this one out; each instance needs an id of its own: this one reads " +
                            group_.topic + " no more until it is restarted (" + e.what() + ")"),
        stop_);
  } catch (const connectors::KafkaError& e) {
    failed();
    nap(outages_.failed(OutageTracker::Failure::kafka, e.what()), stop_);
  } catch (const std::exception& e) {
    failed();
    nap(outages_.failed(OutageTracker::Failure::other, e.what()), stop_);
  }
  const std::optional<std::string> refused = subscribed_ ? consumer_.refusal() : seed_refusal_;
  outages_.refusal(refused);
  // A refusal is the outage said while it lasts (and an answer from Kafka): the join's bound
  // counts from its end.
  if (refused) {
    subscribed_at_ = steady_now_ms();
    join_bound_ms_ = kJoinBoundMs;
  }
  outages_.not_joined(refused ? std::nullopt : not_joined());
}

void IngestStage::failed() noexcept {
  ingest_.abandon();
  while (!kept_.empty() && ingest_.processed(kept_.front())) kept_.pop_front();
}

// How long the consumer may wait for records: short while something of ours waits for a retry
// or an acknowledgement (their offsets are held), else 100 ms so a stop is seen soon.
std::int64_t IngestStage::poll_wait_ms() const {
  if (ingest_.waiting_dead_letters() > 0) return 10;
  return 100;
}

void IngestStage::collect_committable() {
  for (const auto& [tp, next] : ingest_.take_committable()) {
    auto& at = committable_[tp];
    at = std::max(at, next);
  }
}

void IngestStage::finish() {
  settle_quietly();
  try {
    // Batches whose dead-letter copies are acknowledged by now are committed before leaving,
    // so that the next owner does not read (and dead-letter) them again.
    producer_.flush(static_cast<int>(std::min<std::int64_t>(c_.scheduler.shutdown_timeout_ms, 2000)));
    collect_committable();
    consumer_.commit(
        std::vector<std::pair<connectors::TopicPartition, std::int64_t>>(committable_.begin(), committable_.end()));
    committable_.clear();
  } catch (const std::exception& e) {
    spdlog::warn("committing at shutdown: {}", e.what());
  }
  try {
    if (subscribed_ && !c_.kafka.group_instance_id.empty()) leave_static_group();
    consumer_.close();  // the revoke is relayed to the loop's thread, which serves it
  } catch (const std::exception& e) {
    spdlog::warn("leaving the consumer group: {}", e.what());
  }
  producer_.flush(1000);
}

void IngestStage::leave_static_group() {
  // A static member's close() sends no LeaveGroup (KIP-345), and librdkafka sends the one an
  // unsubscribe() asks for only once the revoke is served: so leave, and serve the consumer (what
  // it still hands over is dropped, uncommitted: the next owner reads it) until the assignment is
  // gone, for up to the dead-letter flush's 2 s; the others then take the shards now, not after
  // this member's session.
  consumer_.unsubscribe();
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2000);
  while (!consumer_.assignment().empty() && std::chrono::steady_clock::now() < until) {
    (void)consumer_.poll_batch(static_cast<std::size_t>(c_.scheduler.ingest_batch), 50);
  }
}

void IngestStage::publish_status() {
  std::map<std::string, std::size_t> partitions{{group_.topic, 0}};
  try {
    if (subscribed_) partitions[group_.topic] = consumer_.assignment().size();
  } catch (const connectors::KafkaError&) {
    // closed: none
  }
  if (lag_every_.due()) {
    lag_.clear();
    try {
      for (const auto& [tp, n] : consumer_.lag()) lag_[storage::shard_id(tp.topic, tp.partition)] = n;
    } catch (const connectors::KafkaError&) {
      // closed or failing: no figures this time
    }
  }
  std::lock_guard lock(status_mutex_);
  status_.counters = ingest_.counters();
  status_.problem = outages_.problem(pause_.paused());
  status_.outages = outages_.outages();
  status_.paused = pause_.paused();
  status_.lag = lag_;
  status_.redis_request = redis_latency_;
  status_.partitions = std::move(partitions);
  status_.groups_left = groups_left_;
  status_.joining.clear();
  if (!member_ && !left_) status_.joining.push_back(group_.group_id);
}

IngestStages::IngestStages(const config::Config& c, const std::vector<RedisParts>& redis, Handover& handover,
                           TopicCreator* topics, telemetry::Tracer* tracer, bool kafka_silent) {
  const auto groups = config::consumer_groups(c);
  for (std::size_t i = 0; i < groups.size(); ++i) {
    stages_.push_back(std::make_unique<IngestStage>(c, groups[i], *redis.at(i).store, *redis.at(i).redis,
                                                    *redis.at(i).latency, handover, topics, tracer, kafka_silent));
  }
}

void IngestStages::start() {
  for (auto& s : stages_) s->start();
}

void IngestStages::request_stop() {
  for (auto& s : stages_) s->request_stop();
}

bool IngestStages::finished() const {
  return std::all_of(stages_.begin(), stages_.end(), [](const auto& s) { return s->finished(); });
}

void IngestStages::join() {
  for (auto& s : stages_) s->join();
}

bool IngestStages::fatal() const {
  return std::any_of(stages_.begin(), stages_.end(), [](const auto& s) { return s->fatal(); });
}

IngestStatus IngestStages::status() const {
  IngestStatus sum;
  for (const auto& stage : stages_) {
    const IngestStatus s = stage->status();
    sum.counters += s.counters;
    if (sum.problem.empty()) sum.problem = s.problem;
    for (const auto& [dependency, on] : s.outages) sum.outages[dependency] = sum.outages[dependency] || on;
    sum.paused = sum.paused || s.paused;
    sum.lag.insert(s.lag.begin(), s.lag.end());
    sum.redis_request.add(s.redis_request);
    for (const auto& [topic, n] : s.partitions) sum.partitions[topic] += n;
    sum.groups_left += s.groups_left;
    sum.joining.insert(sum.joining.end(), s.joining.begin(), s.joining.end());
  }
  return sum;
}

}  // namespace delayd::broker
