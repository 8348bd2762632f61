// Outage and outage_backoff(): how the service rides out a dependency that is down.
//
// Outage remembers whether a dependency (redis, kafka, ...) is failing and why, so that an
// outage is logged once when it starts (with the first reason) and once when it ends (with its
// length), however many retries it takes in between. outage_backoff() spaces those retries: 100 ms,
// doubling to 1 s, back to 100 ms after a success. A retry costs one connection attempt or one
// round trip, so trying every second is cheap, and it keeps the lateness an outage adds to
// within a second of the outage's own length.
// Threading: one owner thread.
#pragma once

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "base/backoff.hpp"

namespace delayd::broker {

// The retries while a dependency is down: 100 ms doubling to 1 s, back to 100 ms after a
// success (see the top of this file for why).
inline base::Backoff outage_backoff() { return base::Backoff(std::chrono::milliseconds(100), std::chrono::seconds(1)); }

// Sleeps `ms` (a backoff's wait), waking early when `stop` is set: at most 20 ms late for a stop.
inline void nap(std::int64_t ms, const std::atomic<bool>& stop) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!stop && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<std::int64_t>(ms, 20)));
  }
}

class Outage {
 public:
  explicit Outage(std::string dependency) : dependency_(std::move(dependency)) {}

  // A failure: logs a warning only if this starts an outage (one line per outage, naming the
  // first failure's reason); problem() gives the latest reason while it lasts.
  void failed(const std::string& reason) {
    if (!active_) {
      active_ = true;
      since_ = std::chrono::steady_clock::now();
      spdlog::warn("{} unavailable: {}; delayd keeps retrying and will say when it is back", dependency_, reason);
    }
    reason_ = reason;
  }
  // A success: logs the end of the outage, if there was one.
  void recovered() {
    if (!active_) return;
    active_ = false;
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - since_);
    spdlog::info("{} is back after {} ms", dependency_, ms.count());
  }
  bool active() const { return active_; }
  const std::string& dependency() const { return dependency_; }
  // "<dependency> unavailable: <reason>" while active; empty otherwise.
  std::string problem() const { return active_ ? dependency_ + " unavailable: " + reason_ : std::string(); }

 private:
  std::string dependency_;
  std::string reason_;
  bool active_ = false;
  std::chrono::steady_clock::time_point since_;
};

}  // namespace delayd::broker
