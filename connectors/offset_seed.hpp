// seed_offsets: a consumer group that has committed nothing for a topic starts where another
// group left it. delayd 0.4 reads each topic in a group of its own (config/ingest_topics.hpp);
// up to 0.3 one group read them all, so without this an upgrade would read the status topic
// and every extra ingest topic again from the start (auto.offset.reset earliest): old reports
// applied again, schedules already delivered accepted again.
//
//   1. the topic's partitions (fresh metadata); no topic: nothing to do
//   2. the target group's committed offsets of them; any: it has its own, nothing to do
//   3. the source group's; none: nothing to copy
//   4. committed into the target group as a consumer outside the group (no member id), which
//      Kafka accepts only while the group has no members: a group another instance has joined
//      meanwhile refuses, and that instance seeded it first, so this is not an error either.
// Safe to run at every start and from several instances at once: each step only reads, or
// writes what any of them would write.
// Errors: a missing ACL or a failed login throws KafkaRefused (its sentence names what was
// refused); Kafka unreachable or failing otherwise (but for the group having members) KafkaError.
// Threading: any thread; makes two short-lived librdkafka clients of its own.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "connectors/kafka_error.hpp"
#include "connectors/record.hpp"

namespace delayd::connectors {

struct SeedOutcome {
  enum class Kind {
    no_topic,         // the topic does not exist (yet)
    had_own,          // the target group has committed offsets of the topic
    nothing_to_copy,  // neither group has any
    seeded,           // the source group's offsets are now the target group's
    group_active,     // the target group has members now: one of them seeded it
  };
  Kind kind = Kind::no_topic;
  std::size_t partitions = 0;  // seeded: how many partitions' offsets were copied
};

// `props`: a consumer's properties, with group.id the target group. `timeout`: for each request.
SeedOutcome seed_offsets(const Properties& props, const std::string& from_group, const std::string& topic,
                         std::chrono::milliseconds timeout = std::chrono::seconds(5));

}  // namespace delayd::connectors
