#include "broker/ingest_stage.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>

#include "base/thread_name.hpp"
#include "broker/loop_settings.hpp"
#include "broker/outage.hpp"
#include "connectors/kafka_error.hpp"
#include "redis/connection.hpp"
#include "storage/key_schema.hpp"

namespace delayd::broker {

IngestStage::IngestStage(const config::Config& c, storage::JobStore& store, redis::RedisClient& redis,
                         const DurationHistogram& redis_latency, Handover& handover, TopicCreator* topics,
                         telemetry::Tracer* tracer)
    : c_(c),
      handover_(handover),
      redis_latency_(redis_latency),
      producer_(producer_properties(c), [this](const connectors::DeliveryReport& r) { ingest_.on_report(r); }),
      ingest_(handover, store, producer_, topics, ingest_options(c, redis, tracer)),
      consumer_(consumer_properties(c), relaying()) {
  // The status topic's partitions come with the group's assignment like the ingest topic's,
  // but they are not shards: reports apply to jobs wherever they are (IngestPath).
  std::vector<std::string> read;
  for (const auto& t : config::ingest_topics(c)) read.push_back(t.topic);
  if (!c.kafka.status_topic.empty()) read.push_back(c.kafka.status_topic);
  consumer_.subscribe(read);
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
  base::name_this_thread("ingest");
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
connectors::KafkaConsumer::Listener IngestStage::relaying() {
  connectors::KafkaConsumer::Listener l;
  l.assigned = [this](const std::vector<connectors::TopicPartition>& tps) {
    ++rebalances_;
    settle_quietly();
    handover_.relay(Handover::Rebalance::assigned, tps);
  };
  l.revoked = [this](const std::vector<connectors::TopicPartition>& tps) {
    ++rebalances_;
    settle_quietly();
    handover_.relay(Handover::Rebalance::revoked, tps);
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

void IngestStage::turn() {
  try {
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
    if (todo == 0) {
      auto next = consumer_.poll_batch(static_cast<std::size_t>(c_.scheduler.ingest_batch),
                                       ingest_.in_flight() > 0 ? 0 : static_cast<int>(poll_wait_ms()));
      if (next.empty()) {
        ingest_.settle();
        kept_.clear();  // all were posted, and are collected now
      } else {
        kept_.push_back(std::move(next));
        todo = 1;
      }
    }
    // Each batch whole: IngestPath writes its jobs of every shard in one pipelined round trip.
    for (std::size_t i = kept_.size() - todo; i < kept_.size(); ++i) ingest_.process(kept_[i], clock_.now_ms());
    while (kept_.size() > ingest_.in_flight()) kept_.pop_front();
    if (commit_every_.due()) consumer_.commit_async(ingest_.take_committable());
    outages_.turn_done(std::nullopt);
  } catch (const redis::RedisIoError& e) {
    failed();
    nap(outages_.failed(OutageTracker::Failure::redis, e.what()), stop_);
  } catch (const redis::RedisCommandError& e) {
    failed();
    nap(outages_.failed(OutageTracker::Failure::redis, std::string("refused: ") + e.what()), stop_);
  } catch (const connectors::KafkaError& e) {
    failed();
    nap(outages_.failed(OutageTracker::Failure::kafka, e.what()), stop_);
  } catch (const std::exception& e) {
    failed();
    nap(outages_.failed(OutageTracker::Failure::other, e.what()), stop_);
  }
  outages_.refusal(consumer_.refusal());
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

void IngestStage::finish() {
  settle_quietly();
  try {
    // Batches whose dead-letter copies are acknowledged by now are committed before leaving,
    // so that the next owner does not read (and dead-letter) them again.
    producer_.flush(static_cast<int>(std::min<std::int64_t>(c_.scheduler.shutdown_timeout_ms, 2000)));
    consumer_.commit(ingest_.take_committable());
  } catch (const std::exception& e) {
    spdlog::warn("committing at shutdown: {}", e.what());
  }
  try {
    consumer_.close();  // the revoke is relayed to the loop's thread, which serves it
  } catch (const std::exception& e) {
    spdlog::warn("leaving the consumer group: {}", e.what());
  }
  producer_.flush(1000);
}

void IngestStage::publish_status() {
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
}

}  // namespace delayd::broker
