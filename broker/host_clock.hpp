// HostClock: what the kernel says of this host's clock, and the log of its changes.
//
// "Never early" is judged against this host's wall clock (wall_clock.hpp). ClockSkew compares
// that clock with Redis's, which catches two hosts that disagree but not two that are wrong
// alike: a Redis on the same host, or two hosts that lost their time source together. The kernel
// knows more: a time-sync client (chrony, ntpd, systemd-timesyncd) that disciplines the clock
// tells it so, and keeps its error bound (maxerror) current; a clock nobody disciplines is marked
// unsynchronized and its bound left to grow (to 16 s). Reading that state (ntp_adjtime() with no
// modes) needs no privilege and no network; in a container it is the host's kernel's.
// What delayd does with it, read with the Redis clock comparison (duty::kClockCheck, a minute):
//   gauges   delayd_clock_synchronized (1 or 0) and delayd_clock_max_error_seconds (the bound);
//            absent where the kernel does not answer
//   log      one warning when the clock is found unsynchronized (at start, or later), one line
//            when it is synchronized again
//   alerts   DelaydClockUnsynchronized (deploy/prometheus/alerts.yml), after 30 minutes; and
//            DelaydClockErrorBoundLarge, a bound past 1 s for 30 minutes on a clock still called
//            synchronized (the kernel grows the bound 0.5 ms a second while nobody updates it, and
//            calls the clock unsynchronized only at 16 s: nine hours after its client stopped)
// /healthz is not degraded by it: many hosts run without a time-sync client (a laptop, a CI
// container) and keep good time, and the Redis comparison degrades it when a difference shows.
// Invariants: unsynchronized() is true from a reading that says so until the first that does not.
// Threading: one owner thread (the server watch's, server_watch.hpp).
#pragma once

#include <cstdint>
#include <optional>

namespace delayd::broker {

// One reading of the kernel's clock state.
struct HostClockSync {
  bool synchronized = false;      // a time-sync client disciplines the clock (no STA_UNSYNC, not TIME_ERROR)
  std::int64_t max_error_us = 0;  // the kernel's bound on the clock's error (maxerror), microseconds, >= 0
};

// The reading that ntp_adjtime()'s answer makes: its return (the clock state: TIME_OK, ...,
// TIME_ERROR), the status bits and maxerror (microseconds). A state the kernel names an error, or
// STA_UNSYNC, is not synchronized; a negative maxerror reads as 0.
HostClockSync host_clock_sync(int state, int status, long max_error_us);

// Asks the kernel (ntp_adjtime() with no modes: reads only, needs no privilege). nullopt where it
// refuses (a seccomp profile that forbids it, say).
std::optional<HostClockSync> read_host_clock_sync();

class HostClock {
 public:
  // Notes a reading: logs a warning when the clock becomes unsynchronized (the first reading
  // included), an info line when it is synchronized again; nothing while the state stays.
  void note(const HostClockSync& s);
  // The last reading; nullopt before the first.
  const std::optional<HostClockSync>& last() const { return last_; }
  // True while the last reading says unsynchronized.
  bool unsynchronized() const { return last_ && !last_->synchronized; }

 private:
  std::optional<HostClockSync> last_;
};

}  // namespace delayd::broker
