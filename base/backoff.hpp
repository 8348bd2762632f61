// Exponential backoff, the one home of "start at a base, double each time, stop at a cap".
//
// Two shapes of the same rule:
//   doubling(base, cap, n)  the wait before retry n (n >= 1) when the count of failures is known
//                           (a job's attempt number): base * 2^(n-1), at most cap;
//   Backoff                 the same sequence for a caller that only knows "it failed again"
//                           (a dependency, a topic, a dead-letter copy): next() returns base,
//                           2 base, 4 base ... up to cap; reset() after a success starts over.
// Doubling stops at the cap before it could overflow, whatever n is.
//
// Used by: the fire path's delivery retries and the lifecycle's report retries (doubling), the
// loop's outages, the dead-letter retries and the topic creator (Backoff).
// Threading: doubling() is pure; a Backoff belongs to one owner thread.
#pragma once

#include <algorithm>
#include <chrono>

namespace delayd::base {

// base * 2^(n-1), capped at cap; base for n <= 1. Precondition: 0 <= base <= cap.
constexpr std::chrono::milliseconds doubling(std::chrono::milliseconds base, std::chrono::milliseconds cap, int n) {
  std::chrono::milliseconds d = base;
  for (int i = 1; i < n && d < cap; ++i) d *= 2;
  return std::min(d, cap);
}
static_assert(doubling(std::chrono::milliseconds(500), std::chrono::milliseconds(30000), 1).count() == 500);
static_assert(doubling(std::chrono::milliseconds(500), std::chrono::milliseconds(30000), 4).count() == 4000);
static_assert(doubling(std::chrono::milliseconds(500), std::chrono::milliseconds(30000), 1000).count() == 30000);

class Backoff {
 public:
  // Precondition: 0 < base <= cap.
  constexpr Backoff(std::chrono::milliseconds base, std::chrono::milliseconds cap)
      : base_(base), cap_(cap), next_(base) {}

  // The wait before this retry; the one after it doubles, up to the cap.
  constexpr std::chrono::milliseconds next() {
    const std::chrono::milliseconds d = next_;
    next_ = std::min(next_ * 2, cap_);
    return d;
  }
  // After a success: the next failure waits base again.
  constexpr void reset() { next_ = base_; }

 private:
  std::chrono::milliseconds base_;  // the first wait
  std::chrono::milliseconds cap_;   // no wait is longer
  std::chrono::milliseconds next_;  // what next() returns
};

}  // namespace delayd::base
