// ProducerRecovery: the error model's rule for a producer in librdkafka's fatal state
// (broker/service.hpp): a new producer is the cure, unless fresh producers keep failing, which is
// the one kind of remote failure that is fatal.
// Invariants: `recoveries_` holds the replacement times of the last minute, oldest first.
// Threading: the thread that owns the producer (each producer has a ProducerRecovery of its own).
#pragma once

#include <spdlog/spdlog.h>

#include <chrono>
#include <deque>

#include "broker/outage.hpp"
#include "connectors/kafka_producer.hpp"

namespace delayd::broker {

class ProducerRecovery {
 public:
  // More than this many replacements within a minute: a fresh client cannot clear the fault.
  static constexpr int kMaxPerMinute = 5;

  // Replaces `producer` if it is in the fatal state (its outstanding records come back as
  // possibly written, so their jobs stay in flight and retry). Returns false when the fault is
  // fatal: the caller stops. `what` names the producer in the log ("ready", "dead-letter").
  // A producer fatal because Kafka refused it (KafkaProducer::fatal_refusal(): no ACL lets it get
  // a producer id) is not broken: it is replaced once per outage_backoff() step, never counted
  // towards the stop, and not logged here; its records fail as refused, which the deliveries'
  // outage says once.
  bool check(connectors::KafkaProducer& producer, const char* what) {
    const auto now = std::chrono::steady_clock::now();
    if (producer.fatal_refusal()) {
      if (now < next_refused_try_) return true;
      const auto reason = producer.recover_if_fatal();
      spdlog::debug("kafka {} producer refused ({}); replaced it", what, reason.value_or(""));
      next_refused_try_ = now + refused_backoff_.next();
      return true;
    }
    const auto reason = producer.recover_if_fatal();
    if (!reason) {
      refused_backoff_.reset();
      return true;
    }
    recoveries_.push_back(now);
    while (!recoveries_.empty() && now - recoveries_.front() > std::chrono::minutes(1)) recoveries_.pop_front();
    if (static_cast<int>(recoveries_.size()) > kMaxPerMinute) {
      spdlog::critical("kafka {} producer: fatal error keeps coming back on fresh producers ({}); stopping", what,
                       *reason);
      return false;
    }
    spdlog::error("kafka {} producer: fatal error ({}); replaced it with a new producer", what, *reason);
    return true;
  }

 private:
  std::deque<std::chrono::steady_clock::time_point> recoveries_;
  base::Backoff refused_backoff_ = outage_backoff();
  std::chrono::steady_clock::time_point next_refused_try_{};
};

}  // namespace delayd::broker
