// WallClock: the broker's only source of time. deliver-at is wall-clock time and "never early"
// is judged against the wall clock, so delayd reads the system clock, but never lets its own
// notion of now run backwards: a step back of the system clock holds now() still until the
// clock catches up (nothing fires early, nothing fires twice); a step forward fires what is due
// by the new wall time, which is by definition not early.
//
// Threading: one owner thread (the scheduling loop).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

namespace delayd::broker {

inline std::int64_t system_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class WallClock {
 public:
  using Source = std::function<std::int64_t()>;
  explicit WallClock(Source source = system_now_ms) : source_(std::move(source)) {}

  // Postcondition: never less than any value returned before.
  std::int64_t now_ms() {
    const std::int64_t t = source_();
    if (t > last_) last_ = t;
    return last_;
  }

 private:
  Source source_;
  std::int64_t last_ = 0;
};

}  // namespace delayd::broker
