#include "broker/clock_skew.hpp"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>

namespace delayd::broker {

ClockReading clock_reading(std::int64_t before_us, std::int64_t redis_us, std::int64_t after_us) {
  const std::int64_t middle = before_us + (after_us - before_us) / 2;
  return {middle - redis_us, (after_us - before_us) / 2};
}

void ClockSkew::note(const ClockReading& r) {
  offset_s_ = static_cast<double>(r.offset_us) / 1e6;
  const std::int64_t beyond = std::llabs(r.offset_us) - r.uncertainty_us;
  if (beyond <= std::chrono::duration_cast<std::chrono::microseconds>(kSkewBound).count()) {
    if (!problem_.empty()) {
      spdlog::info("this host's clock agrees with Redis's again (within {} ms)", kSkewBound.count());
      problem_.clear();
    }
    return;
  }
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.2f", std::llabs(r.offset_us) / 1e6);
  const bool ahead = r.offset_us > 0;
  const bool said = !problem_.empty();
  problem_ = std::string("this host's clock is ") + seconds + " s " + (ahead ? "ahead of" : "behind") +
             " Redis's (TIME): jobs fire that much " + (ahead ? "early" : "late") +
             " by Redis's clock; check the time sync (NTP) of both hosts";
  if (!said) spdlog::warn("{}", problem_);
}

}  // namespace delayd::broker
