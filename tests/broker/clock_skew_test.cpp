// This host's clock against Redis's (broker/clock_skew.hpp): the reading's arithmetic, the bound
// with the round trip's half taken off, the sentence each way, and its end.
#include "broker/clock_skew.hpp"

#include <catch2/catch.hpp>

using namespace delayd::broker;

TEST_CASE("a clock reading compares the middle of the round trip with Redis's answer", "[clock]") {
  const ClockReading r = clock_reading(1'000'000, 997'000, 1'004'000);  // a 4 ms round trip
  CHECK(r.offset_us == 5'000);
  CHECK(r.uncertainty_us == 2'000);
  CHECK(clock_reading(10, 10, 10).offset_us == 0);
  CHECK(clock_reading(0, 2'500'000, 0).offset_us == -2'500'000);
}

TEST_CASE("clock skew: a problem beyond 100 ms once the round trip's half is off, either way, until it agrees",
          "[clock]") {
  ClockSkew skew;
  CHECK_FALSE(skew.offset_seconds());
  skew.note({90'000, 0});
  CHECK(skew.problem().empty());
  CHECK(*skew.offset_seconds() == Approx(0.09));
  skew.note({150'000, 60'000});  // 150 ms, known to within 60: maybe 90
  CHECK(skew.problem().empty());
  skew.note({2'310'000, 1'000});
  CHECK(skew.problem() ==
        "this host's clock is 2.31 s ahead of Redis's (TIME): jobs fire that much early by Redis's clock; check the "
        "time sync (NTP) of both hosts");
  skew.note({-1'500'000, 1'000});
  CHECK(skew.problem() ==
        "this host's clock is 1.50 s behind Redis's (TIME): jobs fire that much late by Redis's clock; check the time "
        "sync (NTP) of both hosts");
  CHECK(*skew.offset_seconds() == Approx(-1.5));
  skew.note({3'000, 500});
  CHECK(skew.problem().empty());
}
