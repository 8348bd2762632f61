// The time stamp that starts each line of delayd's text log, and its reading back.
//
// delayd's text log (log.format = text, apps/delayd/main.cpp) starts each line with the moment it
// was written: ISO 8601 with milliseconds and the UTC offset, then the level, then the message
// ("2026-12-08T01:40:55.256+00:00 info shard ... assigned (epoch 3)"). The tests and the
// benchmarks read it back to place a line in time; this is the one home of that format.
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <optional>
#include <string>

namespace delayd::base {

// spdlog's pattern for the text log's lines (spdlog::set_pattern()).
inline constexpr const char* kLogPattern = "%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v";

// The epoch milliseconds of the time stamp a log line starts with; nullopt when it starts with
// none. Takes the offset as spdlog's %z writes it ("+00:00") and without the colon ("+0000").
inline std::optional<std::int64_t> log_line_time_ms(const std::string& line) {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0, millis = 0, off_h = 0, off_m = 0, used = 0;
  char sign = 0;
  if (std::sscanf(line.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3d%c%n", &year, &month, &day, &hour, &minute, &second,
                  &millis, &sign, &used) != 8 ||
      (sign != '+' && sign != '-')) {
    return std::nullopt;
  }
  const char* zone = line.c_str() + used;
  if (std::sscanf(zone, "%2d:%2d", &off_h, &off_m) != 2 && std::sscanf(zone, "%2d%2d", &off_h, &off_m) != 2) {
    return std::nullopt;
  }
  std::tm t{};
  t.tm_year = year - 1900;
  t.tm_mon = month - 1;
  t.tm_mday = day;
  t.tm_hour = hour;
  t.tm_min = minute;
  t.tm_sec = second;
  const std::int64_t offset_s = (sign == '+' ? 1 : -1) * (off_h * 3600 + off_m * 60);
  return (static_cast<std::int64_t>(::timegm(&t)) - offset_s) * 1000 + millis;
}

}  // namespace delayd::base
