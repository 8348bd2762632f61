// IngestPause: the back-pressure rule of the scheduling loop, which stops reading ingest while
// what was read cannot be got out.
//
// Owns whether the consumer is paused. The rule: reading pauses while the fire side cannot get
// records out (FirePath::stuck(): too many await Kafka's reports) or too many ingest batches
// wait for their dead-letter acknowledgements (IngestPath::backlogged()), and resumes once
// neither holds. Each pause and each resume is logged once.
// Invariants: paused() is what was last asked of the consumer; since librdkafka assigns
// partitions unpaused, a pause is asked again after every rebalance (counted by Ownership)
// until it is lifted.
// Threading: the ingest thread (broker/ingest_stage.hpp), which owns the consumer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "broker/ingest_path.hpp"
#include "connectors/kafka_consumer.hpp"

namespace delayd::broker {

class IngestPause {
 public:
  // Pauses or resumes `consumer` as the rule says for the fire side (`fire_stuck`: FirePath::stuck(),
  // `unsettled`: FirePath::unsettled(), as the loop last published them) and `ingest` now;
  // `rebalances` counts the consumer's rebalances (a pause is applied again after one). May
  // throw KafkaError.
  void apply(bool fire_stuck, std::size_t unsettled, const IngestPath& ingest, std::uint64_t rebalances,
             connectors::KafkaConsumer& consumer);
  // Whether reading is paused (/healthz says so when nothing else is wrong).
  bool paused() const { return paused_; }

 private:
  bool paused_ = false;
  std::uint64_t paused_at_rebalance_ = 0;  // rebalances() when the pause was last applied
};

}  // namespace delayd::broker
