// What the kernel says of this host's clock (broker/host_clock.hpp): the reading from
// ntp_adjtime()'s answer, the kernel's own answer here, and the lines logged as the state changes.
#include "broker/host_clock.hpp"

#include <sys/timex.h>

#include <catch2/catch.hpp>

#include "support/captured_log.hpp"

using namespace delayd::broker;
using delayd::testing::CapturedLog;

TEST_CASE("the kernel's clock state reads as synchronized only without STA_UNSYNC and outside TIME_ERROR", "[clock]") {
  CHECK(host_clock_sync(TIME_OK, STA_PLL, 12'000).synchronized);
  CHECK(host_clock_sync(TIME_OK, STA_PLL, 12'000).max_error_us == 12'000);
  CHECK(host_clock_sync(TIME_INS, 0, 5).synchronized);  // a leap second announced: still disciplined
  CHECK_FALSE(host_clock_sync(TIME_OK, STA_UNSYNC, 16'000'000).synchronized);
  CHECK_FALSE(host_clock_sync(TIME_ERROR, 0, 16'000'000).synchronized);
  CHECK(host_clock_sync(TIME_OK, 0, -3).max_error_us == 0);
}

TEST_CASE("this host's kernel answers a read of its clock state, and the answer is its own", "[clock]") {
  const auto s = read_host_clock_sync();
  REQUIRE(s.has_value());
  struct timex t {};
  const int state = ntp_adjtime(&t);
  REQUIRE(state != -1);
  CHECK(s->synchronized == host_clock_sync(state, t.status, t.maxerror).synchronized);
  CHECK(s->max_error_us >= 0);
}

TEST_CASE("an unsynchronized clock is said once at its start and once at its end", "[clock]") {
  CapturedLog log("%l: %v");
  HostClock clock;
  CHECK_FALSE(clock.last());
  CHECK_FALSE(clock.unsynchronized());
  clock.note({true, 20'000});
  CHECK(log.take().empty());
  clock.note({false, 16'000'000});
  CHECK(clock.unsynchronized());
  CHECK(log.take() ==
        "warning: the kernel says this host's clock is not synchronized (no time-sync client disciplines it, or it "
        "lost its source; error bound 16.000 s): jobs fire by this clock, so run one (chrony, systemd-timesyncd); "
        "delayd still compares it with Redis's once a minute\n");
  clock.note({false, 16'000'000});
  CHECK(log.take().empty());
  clock.note({true, 35'000});
  CHECK_FALSE(clock.unsynchronized());
  CHECK(clock.last()->max_error_us == 35'000);
  CHECK(log.take() == "info: the kernel says this host's clock is synchronized again (error bound 0.035 s)\n");

  HostClock from_start;  // unsynchronized from the first reading: said then
  from_start.note({false, 16'000'000});
  CHECK(log.take().find("warning: the kernel says this host's clock is not synchronized") == 0);
}
