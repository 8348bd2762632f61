#include "connectors/log.hpp"

#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace delayd::connectors {
namespace {

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::debug:
      return "debug";
    case LogLevel::info:
      return "info";
    case LogLevel::warning:
      return "warning";
    case LogLevel::error:
      return "error";
  }
  return "?";
}

void log_to_stderr(LogLevel level, std::string_view message) {
  // One write per line so that lines from librdkafka's threads do not interleave mid-line.
  std::string line = "kafka ";
  line += level_name(level);
  line += ": ";
  line += message;
  line += '\n';
  std::cerr << line << std::flush;
}

// A shared_ptr swapped under the mutex lets log() call the hook without holding the lock, so a
// slow hook does not serialise librdkafka's threads and a hook that itself logs cannot deadlock.
std::mutex hook_mutex;
std::shared_ptr<const LogHook> current_hook;

std::shared_ptr<const LogHook> hook() {
  std::lock_guard lock(hook_mutex);
  return current_hook;
}

}  // namespace

void set_log_hook(LogHook new_hook) {
  std::shared_ptr<const LogHook> next;
  if (new_hook) next = std::make_shared<const LogHook>(std::move(new_hook));
  std::lock_guard lock(hook_mutex);
  current_hook = std::move(next);
}

void log(LogLevel level, std::string_view message) noexcept {
  try {
    if (auto h = hook()) {
      (*h)(level, message);
    } else {
      log_to_stderr(level, message);
    }
  } catch (...) {
    // Nowhere left to report it; dropping the line is the only safe choice on a librdkafka thread.
  }
}

LogLevel level_from_syslog(int syslog_level) noexcept {
  if (syslog_level <= 3) return LogLevel::error;
  if (syslog_level == 4) return LogLevel::warning;
  if (syslog_level <= 6) return LogLevel::info;
  return LogLevel::debug;
}

}  // namespace delayd::connectors
