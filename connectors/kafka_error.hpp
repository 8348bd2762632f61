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

// A broker's refusal, as the connectors classify librdkafka's error codes: the login failed
// (authentication: a wrong password, an unknown user, a mechanism the listener does not offer) or
// an ACL is missing (authorization: topic, group, cluster, transactional id). Both are fixed
// outside delayd, by whoever runs Kafka, while delayd waits and retries; neither is a record's
// fault, so no job spends an attempt on them and nothing is dead-lettered for them.
enum class Refusal { none, authentication, authorization };

// The class of an rd_kafka_resp_err_t (its numeric value, so that callers need not include
// librdkafka).
Refusal refusal_of(int rd_kafka_error_code);

// Who the client logs in as, from its properties: "user delayd (SASL SCRAM-SHA-512)", or
// "the client (no SASL login)" when sasl.username is not set.
std::string principal_of(const Properties& props);

// The one sentence that names a refusal: what was refused (`operation` on `resource`, e.g.
// "Write" and "topic ready.pay"; both empty when unknown) to whom, and librdkafka's words.
//   authentication: "Kafka refused the login of user delayd (SASL SCRAM-SHA-512): <detail>"
//   authorization:  "Kafka refused Write on topic ready.pay to user delayd (SASL SCRAM-SHA-512):
//                    <detail> (an ACL is missing)"
std::string refusal_sentence(Refusal kind, const std::string& principal, const std::string& operation,
                             const std::string& resource, const std::string& detail);

// A request Kafka refused for one of the reasons above; what() is the refusal_sentence().
struct KafkaRefused : KafkaError {
  using KafkaError::KafkaError;
};

// A consumer's fatal error because another member joined its group with the same
// group.instance.id (FENCED_INSTANCE_ID): this consumer is out of the group for good.
struct KafkaFencedMember : KafkaError {
  using KafkaError::KafkaError;
};

struct KafkaConfigError : KafkaError {
  // `property` is empty when librdkafka refused the configuration as a whole (for example two
  // properties that contradict each other), which it reports only when the client is created.
  KafkaConfigError(std::string property, const std::string& value, std::string reason);

  std::string property;
  std::string reason;  // librdkafka's own words
};

}  // namespace delayd::connectors
