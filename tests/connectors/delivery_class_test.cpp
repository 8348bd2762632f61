// The classification of delivery reports (connectors/delivery_class.hpp), without a broker:
// librdkafka's error codes and persistence states as its reports carry them.
#include "connectors/delivery_class.hpp"

#include <catch2/catch.hpp>
#include <cstdint>

using delayd::connectors::classify;
using delayd::connectors::classify_report;
using delayd::connectors::DeliveryError;
using Status = RdKafka::Message::Status;

TEST_CASE("a success with an offset is a success, with any acks", "[delivery]") {
  CHECK(classify_report(RdKafka::ERR_NO_ERROR, Status::MSG_STATUS_PERSISTED, 0, true) == DeliveryError::none);
  CHECK(classify_report(RdKafka::ERR_NO_ERROR, Status::MSG_STATUS_PERSISTED, 41, false) == DeliveryError::none);
}

TEST_CASE("a success without an offset is possibly written when acks return offsets", "[delivery]") {
  // RD_KAFKA_OFFSET_INVALID: what librdkafka reports after DUPLICATE_SEQUENCE_NUMBER.
  const std::int64_t kNoOffset = RdKafka::Topic::OFFSET_INVALID;
  CHECK(classify_report(RdKafka::ERR_NO_ERROR, Status::MSG_STATUS_PERSISTED, kNoOffset, true) ==
        DeliveryError::possibly_persisted);
  // acks=0: Kafka never answers with an offset, so there is nothing to doubt.
  CHECK(classify_report(RdKafka::ERR_NO_ERROR, Status::MSG_STATUS_POSSIBLY_PERSISTED, kNoOffset, false) ==
        DeliveryError::none);
}

TEST_CASE("a failure keeps its class whatever the offset", "[delivery]") {
  CHECK(classify_report(RdKafka::ERR_MSG_SIZE_TOO_LARGE, Status::MSG_STATUS_NOT_PERSISTED, -1, true) ==
        DeliveryError::too_large);
  CHECK(classify_report(RdKafka::ERR__MSG_TIMED_OUT, Status::MSG_STATUS_NOT_PERSISTED, -1, true) ==
        DeliveryError::transient);
  CHECK(classify_report(RdKafka::ERR__MSG_TIMED_OUT, Status::MSG_STATUS_POSSIBLY_PERSISTED, -1, true) ==
        DeliveryError::possibly_persisted);
  CHECK(classify(RdKafka::ERR_TOPIC_AUTHORIZATION_FAILED, Status::MSG_STATUS_NOT_PERSISTED) == DeliveryError::refused);
  CHECK(classify(RdKafka::ERR__FATAL, Status::MSG_STATUS_POSSIBLY_PERSISTED) == DeliveryError::fatal);
}
