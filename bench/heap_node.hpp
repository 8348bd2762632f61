// HeapNode: what both heap baselines store per timer, and the order they keep.
//
// 32 bytes: the wheel's 24-byte entry plus the schedule sequence that breaks ties, so that equal
// deadlines come out in schedule order from a heap too (the wheel gets that from its FIFO slots).
#pragma once

#include <cstdint>

#include "wheel/timing_wheel.hpp"

namespace delayd::bench {

struct HeapNode {
  std::uint64_t deadline;
  std::uint64_t seq;
  std::uint64_t payload;
  std::uint32_t index;
  std::uint32_t generation;

  [[nodiscard]] wheel::Expired expired() const {
    return wheel::Expired{wheel::TimerHandle{index, generation}, deadline, payload};
  }
};

// Strict weak order: a fires before b.
inline bool fires_before(const HeapNode& a, const HeapNode& b) {
  return a.deadline != b.deadline ? a.deadline < b.deadline : a.seq < b.seq;
}

}  // namespace delayd::bench
