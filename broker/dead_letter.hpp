// Dead-letter copies that Kafka refuses as too large: how they are made smaller.
//
// A record that cannot be dead-lettered whole is dead-lettered without its value (a header
// `value-bytes` says how large the value was), and if even that is refused, without its key and
// every header but the ones a person (and the console's list) needs to find the original (error,
// reason, source-*, job-id, business, redrive-count, value-bytes). Both the ingest path (invalid records) and the fire
// path (jobs out of attempts) use it, so a dead-letter write can never be refused forever for its size. Threading: pure
// functions.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

#include "connectors/record.hpp"

namespace delayd::broker {

// Why a record went to the dead-letter topic, in a word: the reason label of
// delayd_jobs_dead_lettered_total (its `error` header says it in full).
enum class DeadLetterReason {
  invalid_record,   // an ingest record that breaks the contract
  topic_refused,    // its business's ready topic may not be created
  invalid_status,   // a status-topic record without job-id or with an unknown status
  too_large,        // a ready record Kafka refuses as too large
  delivery_failed,  // Kafka refused the ready record for good, max_attempts times
  topic_missing,    // its ready topic did not exist for kafka.missing_topic_timeout_ms
  reported_failed,  // the consumer reported it failed on its last attempt
  ack_timeout,      // no report within ack_timeout_ms, max_process_attempts times
  expired,          // delayd reached it later than its deliver-at + max-lateness-ms
};
constexpr std::string_view to_string(DeadLetterReason r) {
  switch (r) {
    case DeadLetterReason::invalid_record:
      return "invalid_record";
    case DeadLetterReason::topic_refused:
      return "topic_refused";
    case DeadLetterReason::invalid_status:
      return "invalid_status";
    case DeadLetterReason::too_large:
      return "too_large";
    case DeadLetterReason::delivery_failed:
      return "delivery_failed";
    case DeadLetterReason::topic_missing:
      return "topic_missing";
    case DeadLetterReason::reported_failed:
      return "reported_failed";
    case DeadLetterReason::ack_timeout:
      return "ack_timeout";
    case DeadLetterReason::expired:
      return "expired";
  }
  return "unknown";
}
// Every reason, in declaration order: kDeadLetterReasons[i] is the reason whose index is i.
inline constexpr std::array kDeadLetterReasons = {
    DeadLetterReason::invalid_record,  DeadLetterReason::topic_refused,   DeadLetterReason::invalid_status,
    DeadLetterReason::too_large,       DeadLetterReason::delivery_failed, DeadLetterReason::topic_missing,
    DeadLetterReason::reported_failed, DeadLetterReason::ack_timeout,     DeadLetterReason::expired};
static_assert(
    [] {
      for (std::size_t i = 0; i < kDeadLetterReasons.size(); ++i) {
        if (static_cast<std::size_t>(kDeadLetterReasons[i]) != i) return false;
      }
      return to_string(static_cast<DeadLetterReason>(kDeadLetterReasons.size())) == "unknown";
    }(),
    "kDeadLetterReasons lists every DeadLetterReason, in order");

inline constexpr std::string_view kHeaderValueBytes = "value-bytes";

// Makes `rec` smaller by one step (see above). Returns false, leaving it unchanged, when there is
// nothing left to drop.
bool shrink_dead_letter(connectors::OutRecord& rec);

}  // namespace delayd::broker
