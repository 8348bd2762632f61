// How a librdkafka delivery report becomes a DeliveryError (record.hpp): the one place where
// librdkafka's error codes become the decisions callers take. Internal to the connectors (it
// includes librdkafka's headers); KafkaProducer applies it to every report.
//
// A success without an offset. With acks=1 or acks=all, Kafka answers a written record with its
// offset. librdkafka reports success with the offset unknown (RD_KAFKA_OFFSET_INVALID, -1001)
// when the broker answers DUPLICATE_SEQUENCE_NUMBER: the idempotent producer takes that as "an
// earlier try of this batch was written". That is not always so: a 1 MB record was once reported
// this way and was never in its partition (librdkafka 2.0.2 against Kafka in KRaft mode; twice in
// some tens of runs of a test, not reproduced on purpose). A ready record reported ok is marked
// `ready` and never sent again, so such a report is taken as possibly_persisted: the record is
// sent again, and at worst is in the topic twice (at-least-once), never zero times. With acks=0
// no offset ever comes back, so there a success is a success.
#pragma once

#include <librdkafka/rdkafkacpp.h>

#include <cstdint>

#include "connectors/record.hpp"

namespace delayd::connectors {

// What a report with librdkafka error `err` and persistence `status` means for its record.
DeliveryError classify(RdKafka::ErrorCode err, RdKafka::Message::Status status);

// classify(), and a success at `offset` < 0 is possibly_persisted when `acks_return_offsets`
// (the producer's acks is not 0).
DeliveryError classify_report(RdKafka::ErrorCode err, RdKafka::Message::Status status, std::int64_t offset,
                              bool acks_return_offsets);

// The error a report classified possibly_persisted by its missing offset carries.
inline constexpr const char* kNoOffsetError =
    "acknowledged without an offset (a duplicate sequence number by librdkafka's account); the record may "
    "not be in the log, so it counts as possibly written";

}  // namespace delayd::connectors
