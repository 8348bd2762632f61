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

namespace {

// The consumer's listeners: each rebalance is relayed to the loop's thread (Ownership runs it
// there) and awaited; `count` is the ingest thread's own tally, for IngestPause.
connectors::KafkaConsumer::Listener relaying(Handover& handover, std::uint64_t& count) {
  connectors::KafkaConsumer::Listener l;
  l.assigned = [&handover, &count](const std::vector<connectors::TopicPartition>& tps) {
    ++count;
    handover.relay(Handover::Rebalance::assigned, tps);
  };
  l.revoked = [&handover, &count](const std::vector<connectors::TopicPartition>& tps) {
    ++count;
    handover.relay(Handover::Rebalance::revoked, tps);
  };
  return l;
}

}  // namespace

IngestStage::IngestStage(const config::Config& c, storage::JobStore& store, redis::RedisClient& redis,
                         const DurationHistogram& redis_latency, Handover& handover, TopicCreator* topics,
                         telemetry::Tracer* tracer)
    : c_(c),
      handover_(handover),
      redis_latency_(redis_latency),
      producer_(producer_properties(c), [this](const connectors::DeliveryReport& r) { ingest_.on_report(r); }),
      ingest_(handover, store, producer_, topics, ingest_options(c, redis, tracer)),
      consumer_(consumer_properties(c), relaying(handover, rebalances_)) {
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
    if (!batch_) {
      batch_ =
          consumer_.poll_batch(static_cast<std::size_t>(c_.scheduler.ingest_batch), static_cast<int>(poll_wait_ms()));
    }
    // The whole batch: IngestPath sends each shard's jobs in one pipelined round trip, and
    // resumes a batch an outage interrupted by its first record.
    if (!batch_->empty()) ingest_.process(*batch_, clock_.now_ms());
    batch_.reset();
    consumer_.commit_async(ingest_.take_committable());
    outages_.turn_done(std::nullopt);
  } catch (const redis::RedisIoError& e) {
    nap(outages_.failed(OutageTracker::Failure::redis, e.what()), stop_);
  } catch (const redis::RedisCommandError& e) {
    nap(outages_.failed(OutageTracker::Failure::redis, std::string("refused: ") + e.what()), stop_);
  } catch (const connectors::KafkaError& e) {
    nap(outages_.failed(OutageTracker::Failure::kafka, e.what()), stop_);
  } catch (const std::exception& e) {
    nap(outages_.failed(OutageTracker::Failure::other, e.what()), stop_);
  }
  outages_.refusal(consumer_.refusal());
}

// How long the consumer may wait for records: short while something of ours waits for a retry
// or an acknowledgement (their offsets are held), else 100 ms so a stop is seen soon.
std::int64_t IngestStage::poll_wait_ms() const {
  if (ingest_.waiting_dead_letters() > 0) return 10;
  return 100;
}

void IngestStage::finish() {
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
