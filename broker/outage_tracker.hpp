// OutageTracker: the outages the scheduling loop rides out, and what /healthz says of them.
//
// Owns one Outage (broker/outage.hpp) per thing that can fail a turn: Redis, Kafka, anything
// else a turn threw ("delayd"), Kafka's deliveries as the fire path sees them ("kafka
// (deliveries)": records failing for Kafka's sake while the loop itself goes on), Kafka refusing
// the ingest consumer ("kafka (access)": its login failed, or an ACL on the group or a topic it
// reads is missing; connectors::KafkaConsumer::refusal()), Kafka not letting the ingest consumer
// into its group ("kafka (group)": subscribed and still no member id, IngestStage's join bound), plus the
// Backoff that spaces the retries of failed turns. The loop reports each turn's end to it: a
// failure by class (failed()), or a whole turn done (turn_done()).
// Invariants: an outage starts at the first failure of its dependency and ends at the next
// turn that completes (delivery outages: at the first turn whose fire path has delivered
// again; access outages: once the consumer's refusal is gone; group outages: once the consumer
// has joined); each start and end is logged
// once (Outage). The backoff grows only through failed
// turns and is reset by a completed one. problem() names the first active outage in the order
// redis, kafka, kafka (access), kafka (group), delayd, kafka (deliveries), then a paused ingest.
// Threading: the scheduling loop's thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "broker/outage.hpp"

namespace delayd::broker {

class OutageTracker {
 public:
  // What failed a turn (the error model's transient classes, broker/service.hpp).
  enum class Failure {
    redis,  // redis::RedisIoError or RedisCommandError
    kafka,  // connectors::KafkaError
    other,  // anything else a turn threw
  };

  // Notes a failed turn: starts (or goes on with) that outage. Returns how long to wait before
  // the next turn, in ms (100 doubling to 1000).
  std::int64_t failed(Failure what, const std::string& reason);
  // Notes a completed turn: ends the redis, kafka and other outages and resets the backoff;
  // `delivery_outage` (FirePath::delivery_outage()) starts, goes on with or ends that one.
  void turn_done(const std::optional<std::string>& delivery_outage);
  // The consumer's refusal (connectors::KafkaConsumer::refusal()), noted every turn: starts, goes
  // on with or ends the "kafka (access)" outage. Records wait in Kafka meanwhile; nothing is lost.
  void refusal(const std::optional<std::string>& refused);
  // Whether the consumer is kept out of its group (IngestStage: subscribed, not joined within its
  // bound), noted every turn: starts, goes on with or ends the "kafka (group)" outage. Nothing is
  // read meanwhile; the records wait in Kafka.
  void not_joined(const std::optional<std::string>& why);

  // Per dependency ("redis", "kafka", "kafka (access)", "kafka (group)", "delayd", "kafka
  // (deliveries)"): whether
  // its outage is on.
  std::map<std::string, bool> outages() const;
  // What /healthz says is wrong: the first active outage's problem, else the pause's sentence
  // when `ingest_paused`, else empty.
  std::string problem(bool ingest_paused) const;

 private:
  Outage redis_{"redis"};
  Outage kafka_{"kafka"};
  Outage access_{"kafka (access)"};        // Kafka refuses the consumer: its login, or an ACL
  Outage group_{"kafka (group)"};          // the consumer is not let into its group: no coordinator answers
  Outage other_{"delayd"};                 // anything else a turn threw
  Outage delivery_{"kafka (deliveries)"};  // records failing for Kafka's sake, not their own
  base::Backoff backoff_ = outage_backoff();
};

}  // namespace delayd::broker
