// WallClock: the broker's only source of time. deliver-at is wall-clock time and "never early"
// is judged against the wall clock, so delayd reads the system clock as it is, steps and all:
// a clock that refused to go back would stay pinned ahead after a forward step is corrected and
// fire early everything due in between. Keeping the wheel's own time monotonic is the
// scheduler's job (scheduler.hpp, "Time"). The source is injectable, so tests can step it.
//
// Threading: one owner thread (the scheduling loop).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

namespace delayd::broker {

inline std::int64_t system_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class WallClock {
 public:
  using Source = std::function<std::int64_t()>;
  explicit WallClock(Source source = system_now_ms) : source_(std::move(source)) {}

  // Epoch milliseconds; may be less than a value returned before (the clock stepped back).
  std::int64_t now_ms() const { return source_(); }

 private:
  Source source_;
};

}  // namespace delayd::broker
