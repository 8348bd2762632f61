#include "broker/host_clock.hpp"

#include <spdlog/spdlog.h>
#include <sys/timex.h>

#include <algorithm>

namespace delayd::broker {

HostClockSync host_clock_sync(int state, int status, long max_error_us) {
  HostClockSync s;
  s.synchronized = state != -1 && state != TIME_ERROR && (status & STA_UNSYNC) == 0;
  s.max_error_us = std::max<long>(max_error_us, 0);
  return s;
}

std::optional<HostClockSync> read_host_clock_sync() {
  struct timex t {};  // modes 0: read only
  const int state = ::ntp_adjtime(&t);
  if (state == -1) return std::nullopt;
  return host_clock_sync(state, t.status, t.maxerror);
}

void HostClock::note(const HostClockSync& s) {
  const bool was_unsynchronized = unsynchronized();
  const bool first = !last_;
  last_ = s;
  if (!s.synchronized && (first || !was_unsynchronized)) {
    spdlog::warn(
        "the kernel says this host's clock is not synchronized (no time-sync client disciplines it, or it lost its "
        "source; error bound {:.3f} s): jobs fire by this clock, so run one (chrony, systemd-timesyncd); delayd "
        "still compares it with Redis's once a minute",
        static_cast<double>(s.max_error_us) / 1e6);
  } else if (s.synchronized && was_unsynchronized) {
    spdlog::info("the kernel says this host's clock is synchronized again (error bound {:.3f} s)",
                 static_cast<double>(s.max_error_us) / 1e6);
  }
}

}  // namespace delayd::broker
