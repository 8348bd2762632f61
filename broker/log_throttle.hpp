// LogThrottle: at most one log line per period for one kind of event, and that line carries how
// many events it stands for, so that a failure hitting many jobs for one cause is said once
// with a count instead of once per job.
//
// Invariant: every note() is counted in exactly one returned total (the next one due).
// No I/O; the caller passes the time (steady clock) and writes the line.
// Threading: one owner thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <utility>

namespace delayd::broker {

class LogThrottle {
 public:
  using Clock = std::chrono::steady_clock;

  explicit LogThrottle(Clock::duration period) : period_(period) {}

  // Counts one event at `now`. Returns the events to report in a line written now (this one and
  // those swallowed since the last line), or 0 when the period since the last line is not over.
  std::uint64_t note(Clock::time_point now = Clock::now()) {
    ++pending_;
    if (now < next_) return 0;
    next_ = now + period_;
    return std::exchange(pending_, 0);
  }

 private:
  Clock::duration period_;
  Clock::time_point next_{};   // no line before this
  std::uint64_t pending_ = 0;  // events not reported in a line yet
};

}  // namespace delayd::broker
