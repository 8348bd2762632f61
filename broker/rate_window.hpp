// RateWindow: how many events a second something saw over its last whole window: a rate that
// a thread reads to tell a busy spell from a sparse one (ShardStream: whether a transaction
// lingers), without a clock of its own (the caller passes `now`).
// Invariants: per_second() is 0 until a window has ended; a window ends at the first call at or
// after window_ms from its start, and the rate is its events over its actual length (a call
// long after the end spreads them over that longer time: a quiet spell reads as quiet).
// Threading: not shared; one thread's.
#pragma once

#include <chrono>
#include <cstddef>

namespace delayd::broker {

class RateWindow {
 public:
  using Clock = std::chrono::steady_clock;
  // Pre: window > 0.
  explicit RateWindow(std::chrono::milliseconds window) : window_(window) {}

  // Counts n events at `now` (rolling the window first if it ended).
  void add(std::size_t n, Clock::time_point now) {
    roll(now);
    count_ += n;
  }
  // Events a second over the last window that ended (rolling the current one if it ended).
  double per_second(Clock::time_point now) {
    roll(now);
    return rate_;
  }

 private:
  void roll(Clock::time_point now) {
    if (start_ == Clock::time_point{}) {
      start_ = now;
      return;
    }
    const auto length = now - start_;
    if (length < window_) return;
    rate_ = static_cast<double>(count_) / std::chrono::duration<double>(length).count();
    count_ = 0;
    start_ = now;
  }

  const std::chrono::milliseconds window_;
  Clock::time_point start_{};  // the current window's start (the epoch: none yet)
  std::size_t count_ = 0;      // events in the current window
  double rate_ = 0.0;          // events a second over the last whole window
};

}  // namespace delayd::broker
