#include "connectors/kafka_error.hpp"

#include <utility>

#include "connectors/rdkafka_config.hpp"

namespace delayd::connectors {
namespace {

std::string config_message(const std::string& property, const std::string& value,
                           const std::string& reason) {
  if (property.empty()) return "kafka configuration: " + reason;
  return "kafka property '" + property + "' = '" + printable_value(property, value) + "': " + reason;
}

}  // namespace

KafkaConfigError::KafkaConfigError(std::string property_name, const std::string& value,
                                   std::string why)
    : KafkaError(config_message(property_name, value, why)),
      property(std::move(property_name)),
      reason(std::move(why)) {}

}  // namespace delayd::connectors
