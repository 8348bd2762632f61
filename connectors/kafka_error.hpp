// Properties handed to librdkafka, and the exceptions the Kafka connectors throw.
//
// Invariants: every failure the connectors cannot report through a normal channel (a delivery
// report, an empty poll) is a KafkaError; a property librdkafka refuses, or a required one that
// is missing, is the more specific KafkaConfigError, which names the property so that an
// operator can fix the configuration file without reading librdkafka's source.
// Threading: plain values; no shared state.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace delayd::connectors {

// librdkafka properties (name, value), applied in order, so a later entry overrides an earlier
// one of the same name, exactly as repeated rd_kafka_conf_set() calls would.
using Properties = std::vector<std::pair<std::string, std::string>>;

struct KafkaError : std::runtime_error {
  using runtime_error::runtime_error;
};

struct KafkaConfigError : KafkaError {
  // `property` is empty when librdkafka refused the configuration as a whole (for example two
  // properties that contradict each other), which it reports only when the client is created.
  KafkaConfigError(std::string property, const std::string& value, std::string reason);

  std::string property;
  std::string reason;  // librdkafka's own words
};

}  // namespace delayd::connectors
