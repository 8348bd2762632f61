// ClockSkew: how far this host's wall clock is from Redis's, and what /healthz says of it.
//
// "Never early" is judged against this host's wall clock (wall_clock.hpp): a host whose clock
// runs 2 s ahead fires every job 2 s before its deliver-at by everyone else's clock, and no check
// of delayd's can see that from its own clock alone. Redis's clock is one that every instance
// reads alike, so once a minute the server watch (server_watch.hpp) asks it (TIME) and compares: the offset is this
// host's clock at the middle of the round trip less Redis's answer, known to within half the round trip. An offset
// beyond kSkewBound, after that half is taken off, is a problem /healthz names (degraded: a restart would not mend a
// clock) and the log says once, with its start and its end; /readyz is not affected (the instance works, by its own
// clock), and the offset is the gauge delayd_clock_offset_seconds. Which of the two clocks is wrong it cannot tell: the
// sentence says to check both. Invariants: problem() is empty until a reading beyond the bound, and again after the
// first reading within it. Threading: one owner thread (the server watch's); no I/O.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace delayd::broker {

// One comparison of this host's clock with Redis's.
struct ClockReading {
  std::int64_t offset_us = 0;       // this host's clock less Redis's (positive: this host is ahead)
  std::int64_t uncertainty_us = 0;  // half the round trip: the offset is known to within this
};

// The reading from this host's clock just before the request and just after the answer, and
// Redis's time in the answer (all epoch microseconds). Precondition: before_us <= after_us.
ClockReading clock_reading(std::int64_t before_us, std::int64_t redis_us, std::int64_t after_us);

class ClockSkew {
 public:
  // How far apart the clocks may be before it is a problem: jobs firing this much early or late
  // by Redis's clock. NTP keeps hosts within a few milliseconds.
  static constexpr std::chrono::milliseconds kSkewBound{100};

  // Notes a reading: starts (logging a warning), goes on with or ends (logging its end) the problem.
  void note(const ClockReading& r);
  // What /healthz says ("this host's clock is 2.31 s ahead of Redis's ..."); empty when all is well.
  const std::string& problem() const { return problem_; }
  // The last reading's offset, in seconds; nullopt before the first.
  std::optional<double> offset_seconds() const { return offset_s_; }

 private:
  std::string problem_;
  std::optional<double> offset_s_;
};

}  // namespace delayd::broker
