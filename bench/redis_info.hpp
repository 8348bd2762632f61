// Reading and clearing the Redis a benchmark runs against, shared by broker_bench,
// console_bench and redis_fill_bench (each links delayd's Redis client).
#pragma once

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <set>
#include <string>
#include <thread>

#include "redis/client.hpp"

namespace delayd::bench {

// A field of INFO's `section`, as a number; 0 when Redis does not report it.
inline double info_number(redis::RedisClient& redis, const char* section, const std::string& field) {
  auto r = redis.command({"INFO", section});
  const std::string text(r.view().str());
  const auto at = text.find("\n" + field + ":");
  return at == std::string::npos ? 0.0 : std::stod(text.substr(at + field.size() + 2));
}

// Microseconds of CPU Redis's main thread has used since it started (Redis 7: INFO cpu's
// used_cpu_*_main_thread): its commands and scripts, replies and the AOF's writes.
inline double redis_main_cpu_usec(redis::RedisClient& redis) {
  return 1e6 * (info_number(redis, "cpu", "used_cpu_sys_main_thread") +
                info_number(redis, "cpu", "used_cpu_user_main_thread"));
}

// Unlinks every key matching `pattern` (SCAN MATCH), then waits up to 60 s until Redis has freed
// them (lazyfree), so that what runs next starts on the memory it would have without them.
inline void unlink_matching(redis::RedisClient& redis, const std::string& pattern) {
  std::string cursor = "0";
  do {
    auto r = redis.command({"SCAN", cursor, "MATCH", pattern, "COUNT", "5000"});
    cursor = std::string(r.view()[0].str());
    redis::Command unlink{"UNLINK"};
    for (size_t i = 0; i < r.view()[1].size(); ++i) unlink.emplace_back(r.view()[1][i].str());
    if (unlink.size() > 1) redis.command(unlink);
  } while (cursor != "0");
  for (int i = 0; i < 600 && info_number(redis, "memory", "lazyfree_pending_objects") > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

// The key prefix of this run of a benchmark, `<name><pid>`. First unlinks the keys that earlier
// runs of it left behind (killed before their own cleanup: the pid their prefix names no longer
// runs; a pid taken again by another process keeps its keys), and ignores SIGPIPE, so that a
// reader that closes this run's output (`| head`) makes its writes fail instead of killing it
// before it cleans up. Keys are `<name><pid>` followed by ':' or '-'.
inline std::string run_prefix(redis::RedisClient& redis, const std::string& name) {
  std::signal(SIGPIPE, SIG_IGN);
  std::set<std::string> stale;
  std::string cursor = "0";
  do {
    auto r = redis.command({"SCAN", cursor, "MATCH", name + "[0-9]*", "COUNT", "5000"});
    cursor = std::string(r.view()[0].str());
    for (size_t i = 0; i < r.view()[1].size(); ++i) {
      const std::string key(r.view()[1][i].str());
      const auto end = key.find_first_not_of("0123456789", name.size());
      if (end == std::string::npos || (key[end] != ':' && key[end] != '-')) continue;
      const long pid = std::stol(key.substr(name.size(), end - name.size()));
      if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) stale.insert(key.substr(0, end));
    }
  } while (cursor != "0");
  for (const auto& prefix : stale) {
    unlink_matching(redis, prefix + ":*");
    unlink_matching(redis, prefix + "-*");
  }
  return name + std::to_string(::getpid());
}

}  // namespace delayd::bench
