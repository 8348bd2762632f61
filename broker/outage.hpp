// Outage and outage_backoff(): how the service rides out a dependency that is down.
//
// Outage remembers whether a dependency (redis, kafka, ...) is failing and why, so that an
// outage is logged once when it starts (with the first reason) and once when it ends (with its
// length), however many retries it takes in between. outage_backoff() spaces those retries: 100 ms,
// doubling to 1 s, back to 100 ms after a success. A retry costs one connection attempt or one
// round trip, so trying every second is cheap, and it keeps the lateness an outage adds to
// within a second of the outage's own length.
// Several stages (each consumer group's ingest thread, the loop) track their own outages, and a
// fault they share is said once: an outage whose dependency and first sentence (the reason up to
// its first ':', e.g. "Kafka refused the login of user delayd (SASL SCRAM-SHA-512)") another
// Outage already said is kept quiet, start and end (SaidOutages).
// Threading: each Outage has one owner thread; SaidOutages is shared, under its mutex.
#pragma once

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "base/backoff.hpp"

namespace delayd::broker {

// The retries while a dependency is down: 100 ms doubling to 1 s, back to 100 ms after a
// success (see the top of this file for why).
inline base::Backoff outage_backoff() { return base::Backoff(std::chrono::milliseconds(100), std::chrono::seconds(1)); }

// The steady clock in milliseconds, never 0 (callers keep 0 for "not since any time"): when an
// outage began, for rules that act on how long it has lasted.
inline std::int64_t steady_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
             .count() +
         1;
}

// Sleeps `ms` (a backoff's wait), waking early when `stop` is set: at most 20 ms late for a stop.
inline void nap(std::int64_t ms, const std::atomic<bool>& stop) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!stop && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<std::int64_t>(ms, 20)));
  }
}

// The outages said and not over yet, process-wide: "<dependency>|<first sentence>".
class SaidOutages {
 public:
  // True (and noted) when no other Outage is saying `key` now.
  static bool claim(const std::string& key) {
    const std::lock_guard lock(mutex());
    return said().insert(key).second;
  }
  static void release(const std::string& key) {
    const std::lock_guard lock(mutex());
    said().erase(key);
  }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::set<std::string>& said() {
    static std::set<std::string> s;
    return s;
  }
};

class Outage {
 public:
  explicit Outage(std::string dependency) : dependency_(std::move(dependency)) {}
  ~Outage() {
    if (!said_.empty()) SaidOutages::release(said_);
  }
  Outage(const Outage&) = delete;
  Outage& operator=(const Outage&) = delete;

  // A failure: logs a warning only if this starts an outage (one line per outage, naming the
  // first failure's reason) that no other Outage is saying; problem() gives the latest reason
  // while it lasts.
  void failed(const std::string& reason) {
    if (!active_) {
      active_ = true;
      since_ = std::chrono::steady_clock::now();
      const std::string key = dependency_ + "|" + reason.substr(0, reason.find(':'));
      if (SaidOutages::claim(key)) {
        said_ = key;
        spdlog::warn("{} unavailable: {}; delayd keeps retrying and will say when it is back", dependency_, reason);
      }
    }
    reason_ = reason;
  }
  // A success: logs the end of the outage, if there was one and this Outage said it.
  void recovered() {
    if (!active_) return;
    active_ = false;
    if (said_.empty()) return;
    SaidOutages::release(said_);
    said_.clear();
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
  std::string said_;  // the SaidOutages key this Outage said, while it lasts; empty otherwise
  bool active_ = false;
  std::chrono::steady_clock::time_point since_;
};

}  // namespace delayd::broker
