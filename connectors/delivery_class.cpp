#include "connectors/delivery_class.hpp"

namespace delayd::connectors {

DeliveryError classify(RdKafka::ErrorCode err, RdKafka::Message::Status status) {
  switch (err) {
    case RdKafka::ERR_NO_ERROR:
      return DeliveryError::none;
    case RdKafka::ERR__FATAL:
      return DeliveryError::fatal;
    case RdKafka::ERR_MSG_SIZE_TOO_LARGE:
    case RdKafka::ERR_RECORD_LIST_TOO_LARGE:
    case RdKafka::ERR_INVALID_MSG_SIZE:
      return DeliveryError::too_large;
    case RdKafka::ERR__UNKNOWN_TOPIC:
    case RdKafka::ERR_UNKNOWN_TOPIC_OR_PART:
    case RdKafka::ERR__UNKNOWN_PARTITION:  // a deleted topic's partitions vanish before the topic
      return DeliveryError::unknown_topic;
    case RdKafka::ERR_TOPIC_AUTHORIZATION_FAILED:
    case RdKafka::ERR_CLUSTER_AUTHORIZATION_FAILED:
    case RdKafka::ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
    case RdKafka::ERR_SASL_AUTHENTICATION_FAILED:
    case RdKafka::ERR__AUTHENTICATION:
      return DeliveryError::refused;
    case RdKafka::ERR_TOPIC_EXCEPTION:
    case RdKafka::ERR_INVALID_RECORD:
    case RdKafka::ERR_INVALID_MSG:
    case RdKafka::ERR_POLICY_VIOLATION:
    case RdKafka::ERR__INVALID_ARG:
      return DeliveryError::permanent;
    default:
      return status == RdKafka::Message::MSG_STATUS_NOT_PERSISTED ? DeliveryError::transient
                                                                  : DeliveryError::possibly_persisted;
  }
}

DeliveryError classify_report(RdKafka::ErrorCode err, RdKafka::Message::Status status, std::int64_t offset,
                              bool acks_return_offsets) {
  const DeliveryError c = classify(err, status);
  if (c == DeliveryError::none && offset < 0 && acks_return_offsets) return DeliveryError::possibly_persisted;
  return c;
}

}  // namespace delayd::connectors
