#include "connectors/kafka_error.hpp"

#include <librdkafka/rdkafka.h>

#include <utility>

#include "connectors/rdkafka_config.hpp"

namespace delayd::connectors {
namespace {

std::string config_message(const std::string& property, const std::string& value, const std::string& reason) {
  if (property.empty()) return "kafka configuration: " + reason;
  return "kafka property '" + property + "' = '" + printable_value(property, value) + "': " + reason;
}

}  // namespace

Refusal refusal_of(int code) {
  switch (static_cast<rd_kafka_resp_err_t>(code)) {
    case RD_KAFKA_RESP_ERR__AUTHENTICATION:
    case RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED:
    case RD_KAFKA_RESP_ERR_UNSUPPORTED_SASL_MECHANISM:
    case RD_KAFKA_RESP_ERR_ILLEGAL_SASL_STATE:
      return Refusal::authentication;
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_DELEGATION_TOKEN_AUTHORIZATION_FAILED:
      return Refusal::authorization;
    default:
      return Refusal::none;
  }
}

std::string principal_of(const Properties& props) {
  const auto user = find_property(props, "sasl.username");
  if (!user || user->empty()) return "the client (no SASL login)";
  auto mechanism = find_property(props, "sasl.mechanism");
  if (!mechanism) mechanism = find_property(props, "sasl.mechanisms");
  return "user " + *user + " (SASL " + (mechanism && !mechanism->empty() ? *mechanism : "GSSAPI") + ")";
}

std::string refusal_sentence(Refusal kind, const std::string& principal, const std::string& operation,
                             const std::string& resource, const std::string& detail) {
  if (kind == Refusal::authentication) return "Kafka refused the login of " + principal + ": " + detail;
  const std::string what = operation.empty() ? "access" : operation + (resource.empty() ? "" : " on " + resource);
  return "Kafka refused " + what + " to " + principal + ": " + detail + " (an ACL is missing)";
}

KafkaConfigError::KafkaConfigError(std::string property_name, const std::string& value, std::string why)
    : KafkaError(config_message(property_name, value, why)),
      property(std::move(property_name)),
      reason(std::move(why)) {}

}  // namespace delayd::connectors
