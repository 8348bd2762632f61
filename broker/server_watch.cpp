#include "broker/server_watch.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "base/thread_name.hpp"
#include "redis/connection.hpp"

namespace delayd::broker {

ServerWatch::ServerWatch(Looks looks, Periods periods, const RedisSettingsFindings& at_start)
    : looks_(std::move(looks)), periods_(periods), settings_watch_(at_start) {
  published_.redis_settings_problem = settings_watch_.problem();
  thread_ = std::thread([this] { run(); });
}

ServerWatch::~ServerWatch() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

ServerFindings ServerWatch::findings() const {
  std::lock_guard lock(mutex_);
  return published_;
}

void ServerWatch::run() {
  base::name_this_thread("watch");
  auto next_clock = Clock::now();
  std::optional<Clock::time_point> next_settings;
  if (periods_.settings) next_settings = Clock::now() + *periods_.settings;
  std::unique_lock lock(mutex_);
  while (!stop_) {
    lock.unlock();
    const auto now = Clock::now();
    if (now >= next_clock) {
      look_at_clock();
      next_clock = Clock::now() + periods_.clock;
    }
    if (next_settings && now >= *next_settings) {
      look_at_settings();
      next_settings = Clock::now() + *periods_.settings;
    }
    lock.lock();
    published_.clock_problem = clock_skew_.problem();
    published_.clock_offset_s = clock_skew_.offset_seconds();
    published_.host_clock = host_clock_.last();
    published_.redis_settings_problem = settings_watch_.problem();
    ++published_.rounds;
    const auto until = next_settings ? std::min(next_clock, *next_settings) : next_clock;
    wake_.wait_until(lock, until, [this] { return stop_; });
  }
}

void ServerWatch::look_at_clock() {
  if (const auto sync = looks_.host_clock()) host_clock_.note(*sync);
  try {
    const std::int64_t before = looks_.now_us();
    const std::optional<std::int64_t> redis_us = looks_.redis_time_us();
    const std::int64_t after = looks_.now_us();
    if (redis_us) clock_skew_.note(clock_reading(before, *redis_us, after));
    last_failure_.clear();
  } catch (const redis::RedisIoError&) {
  } catch (const std::exception& e) {
    failed("comparing this host's clock with Redis's", e.what());
  }
}

void ServerWatch::look_at_settings() {
  try {
    settings_watch_.note(looks_.redis_settings());
    last_failure_.clear();
  } catch (const redis::RedisIoError&) {
  } catch (const std::exception& e) {
    failed("reading the Redis servers' settings", e.what());
  }
}

void ServerWatch::failed(const char* look, const std::string& what) {
  std::string line = std::string(look) + " failed: " + what + "; tried again at its next period";
  if (line == last_failure_) return;
  spdlog::warn("{}", line);
  last_failure_ = std::move(line);
}

}  // namespace delayd::broker
