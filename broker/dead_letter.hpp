// Dead-letter copies that Kafka refuses as too large: how they are made smaller.
//
// A record that cannot be dead-lettered whole is dead-lettered without its value (a header
// `value-bytes` says how large the value was), and if even that is refused, without its key and
// every header but the ones a person needs to find the original (error, source-*, job-id,
// value-bytes). Both the ingest path (invalid records) and the fire path (jobs out of attempts)
// use it, so a dead-letter write can never be refused forever for its size.
// Threading: pure functions.
#pragma once

#include "connectors/record.hpp"

namespace delayd::broker {

inline constexpr std::string_view kHeaderValueBytes = "value-bytes";

// Makes `rec` smaller by one step (see above). Returns false, leaving it unchanged, when there is
// nothing left to drop.
bool shrink_dead_letter(connectors::OutRecord& rec);

}  // namespace delayd::broker
