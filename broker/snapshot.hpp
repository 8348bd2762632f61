// LoopSnapshot: what the scheduling loop shows of itself, about five times a second, to whoever
// watches it (the admin endpoint). A plain value: the loop builds it, the watcher copies it.
// Threading: a value type; handed from the loop's thread to the watcher's under its lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace delayd::broker {

struct LoopSnapshot {
  std::size_t held = 0;       // jobs held in memory (waiting in the wheel or in flight)
  std::size_t in_wheel = 0;   // of those, waiting for their timer
  std::size_t in_flight = 0;  // records handed to Kafka whose outcome is not written yet
  std::vector<std::string> shards;        // owned shards
  std::optional<std::int64_t> next_due;   // epoch ms of the next timer
  std::map<std::string, std::uint64_t> counters;  // since start
  std::string problem;  // the last outage, while it lasts; empty when all is well
};

}  // namespace delayd::broker
