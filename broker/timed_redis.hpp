// TimedRedisClient: a RedisClient that times every round trip into a histogram and passes it on.
// The service wraps its client in one, so the Redis latency the loop sees (including the time
// spent on a failed call) is on /metrics without the storage room knowing about metrics.
// Threading: as the client it wraps (one thread at a time); the histogram is the caller's and
// is read on the same thread.
#pragma once

#include <chrono>
#include <deque>
#include <vector>

#include "broker/snapshot.hpp"
#include "redis/client.hpp"
#include "redis/connection.hpp"

namespace delayd::broker {

class TimedRedisClient final : public redis::RedisClient {
 public:
  // Both must outlive this object.
  TimedRedisClient(redis::RedisClient& inner, DurationHistogram& histogram) : inner_(inner), histogram_(histogram) {}

  // The inner client's command(), timed; exceptions pass through (and are timed too).
  redis::RedisReply command(const redis::Command& argv) override {
    const Timer t(histogram_);
    return inner_.command(argv);
  }
  // The inner client's pipeline(), timed as one round trip.
  std::vector<redis::RedisReply> pipeline(const std::vector<redis::Command>& commands) override {
    const Timer t(histogram_);
    return inner_.pipeline(commands);
  }
  // The inner client's command_on_every_server(), timed as one round trip.
  std::vector<redis::RedisReply> command_on_every_server(const redis::Command& argv) override {
    const Timer t(histogram_);
    return inner_.command_on_every_server(argv);
  }
  // The inner client's wait_replicas(), timed.
  void wait_replicas(int replicas, int timeout_ms) override {
    const Timer t(histogram_);
    inner_.wait_replicas(replicas, timeout_ms);
  }
  // A post() is timed as one round trip, from the post to the end of its collect(); a failed
  // one is observed when it fails.
  void post(const std::vector<redis::Command>& commands) override {
    const auto started = std::chrono::steady_clock::now();
    try {
      inner_.post(commands);
    } catch (...) {
      observe_since(started);
      posted_.clear();
      throw;
    }
    posted_.push_back(started);
  }
  std::vector<redis::RedisReply> collect() override {
    const auto started = posted_.empty() ? std::chrono::steady_clock::now() : posted_.front();
    if (!posted_.empty()) posted_.pop_front();
    try {
      auto replies = inner_.collect();
      observe_since(started);
      return replies;
    } catch (const redis::RedisIoError&) {
      observe_since(started);
      posted_.clear();  // the inner client forgot them too
      throw;
    }
  }
  void abandon() noexcept override {
    inner_.abandon();
    posted_.clear();
  }

 private:
  // Observes the time from its construction to its destruction.
  struct Timer {
    explicit Timer(DurationHistogram& h) : histogram(h) {}
    ~Timer() { histogram.observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()); }
    Timer(const Timer&) = delete;
    Timer& operator=(const Timer&) = delete;
    DurationHistogram& histogram;
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  };
  void observe_since(std::chrono::steady_clock::time_point started) {
    histogram_.observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  redis::RedisClient& inner_;
  DurationHistogram& histogram_;
  std::deque<std::chrono::steady_clock::time_point> posted_;  // when each outstanding post() was made
};

}  // namespace delayd::broker
