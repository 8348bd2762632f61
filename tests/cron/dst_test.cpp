// next_after in time zones with daylight saving: the spring gap fires at the first instant after
// it (occurrences that land there are one delivery), the autumn overlap fires once, at its first
// instant (cron/cron_expr.hpp, "Time zones and daylight saving"). Europe/Berlin and
// America/New_York move by an hour, Australia/Lord_Howe by 30 minutes; Asia/Tokyo not at all.
#include <string>
#include <vector>

#include "tests/cron/cron_test_support.hpp"

using namespace delayd::cron;
using delayd::cron::testing::at;
using delayd::cron::testing::cron;
using delayd::cron::testing::next_utc;
using delayd::cron::testing::zone;
using Strings = std::vector<std::string>;

// Europe/Berlin 2026: 2026-03-29 02:00 CET -> 03:00 CEST at 01:00Z; 2026-10-25 03:00 CEST ->
// 02:00 CET at 01:00Z.
TEST_CASE("Berlin, spring gap: 02:30 does not exist and fires at 03:00 CEST", "[unit][cron][dst]") {
  CHECK(next_utc("30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", 3) ==
        Strings{"2026-03-29T01:00:00.000Z", "2026-03-30T00:30:00.000Z", "2026-03-31T00:30:00.000Z"});
  // Written as RFC 3339 with the local offset: the header's example.
  const CronExpr e = cron("30 2 * * *");
  const date::time_zone* berlin = zone("Europe/Berlin");
  CHECK(next_after(e, at("2026-03-28T12:00:00Z"), berlin) == at("2026-03-29T03:00:00+02:00"));
  // Right up to the gap's end, and from it.
  CHECK(next_after(e, at("2026-03-29T00:59:59.999Z"), berlin) == at("2026-03-29T01:00:00Z"));
  CHECK(next_after(e, at("2026-03-29T01:00:00Z"), berlin) == at("2026-03-30T02:30:00+02:00"));
  // With seconds.
  CHECK(next_utc("30 30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", 2) ==
        Strings{"2026-03-29T01:00:00.000Z", "2026-03-30T00:30:30.000Z"});
}

TEST_CASE("Berlin, spring gap: occurrences that land on one instant are one delivery", "[unit][cron][dst]") {
  // 02:00, 02:15, 02:30, 02:45 all become 03:00 CEST.
  CHECK(next_utc("*/15 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", 3) ==
        Strings{"2026-03-29T01:00:00.000Z", "2026-03-30T00:00:00.000Z", "2026-03-30T00:15:00.000Z"});
  // Hourly: 01:00 CET, then 02:00 (gap) and 03:00 CEST are one instant, then 04:00 CEST.
  CHECK(next_utc("0 * * * *", "Europe/Berlin", "2026-03-28T23:30:00Z", 3) ==
        Strings{"2026-03-29T00:00:00.000Z", "2026-03-29T01:00:00.000Z", "2026-03-29T02:00:00.000Z"});
  // Every minute runs on through the gap without a pause or a burst.
  CHECK(next_utc("* * * * *", "Europe/Berlin", "2026-03-29T00:58:00Z", 3) ==
        Strings{"2026-03-29T00:59:00.000Z", "2026-03-29T01:00:00.000Z", "2026-03-29T01:01:00.000Z"});
}

TEST_CASE("Berlin, autumn overlap: 02:30 happens twice and fires once, at the first", "[unit][cron][dst]") {
  CHECK(next_utc("30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", 2) ==
        Strings{"2026-10-25T00:30:00.000Z", "2026-10-26T01:30:00.000Z"});
  const CronExpr e = cron("30 2 * * *");
  const date::time_zone* berlin = zone("Europe/Berlin");
  CHECK(next_after(e, at("2026-10-24T12:00:00Z"), berlin) == at("2026-10-25T02:30:00+02:00"));
  // From inside the second pass (02:10 CET), 02:30 CET is not an occurrence: the next is tomorrow.
  CHECK(next_after(e, at("2026-10-25T01:10:00Z"), berlin) == at("2026-10-26T02:30:00+01:00"));
  // From inside the first pass (02:10 CEST), 02:30 CEST is.
  CHECK(next_after(e, at("2026-10-25T00:10:00Z"), berlin) == at("2026-10-25T02:30:00+02:00"));
}

TEST_CASE("Berlin, autumn overlap: frequent schedules skip the repeated hour", "[unit][cron][dst]") {
  // 02:00 CEST, then 03:00 CET: 02:00 CET (01:00Z) is 02:00 again.
  CHECK(next_utc("0 * * * *", "Europe/Berlin", "2026-10-24T23:30:00Z", 3) ==
        Strings{"2026-10-25T00:00:00.000Z", "2026-10-25T02:00:00.000Z", "2026-10-25T03:00:00.000Z"});
  CHECK(next_utc("*/20 * * * *", "Europe/Berlin", "2026-10-25T00:30:00Z", 3) ==
        Strings{"2026-10-25T00:40:00.000Z", "2026-10-25T02:00:00.000Z", "2026-10-25T02:20:00.000Z"});
  // Started inside the second pass: on to its end.
  CHECK(next_utc("*/10 * * * *", "Europe/Berlin", "2026-10-25T01:05:00Z", 2) ==
        Strings{"2026-10-25T02:00:00.000Z", "2026-10-25T02:10:00.000Z"});
  CHECK(next_utc("* * * * * *", "Europe/Berlin", "2026-10-25T01:00:00Z", 1) == Strings{"2026-10-25T02:00:00.000Z"});
}

// America/New_York 2026: 2026-03-08 02:00 EST -> 03:00 EDT at 07:00Z; 2026-11-01 02:00 EDT ->
// 01:00 EST at 06:00Z.
TEST_CASE("New York: the same rules", "[unit][cron][dst]") {
  CHECK(next_utc("30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z", 2) ==
        Strings{"2026-03-08T07:00:00.000Z", "2026-03-09T06:30:00.000Z"});
  CHECK(next_utc("30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z", 2) ==
        Strings{"2026-11-01T05:30:00.000Z", "2026-11-02T06:30:00.000Z"});
  CHECK(next_after(cron("30 1 * * *"), at("2026-10-31T12:00:00Z"), zone("America/New_York")) ==
        at("2026-11-01T01:30:00-04:00"));
  // The US rule as a cron expression: the second Sunday of March at 02:00, inside its own gap.
  CHECK(next_utc("0 2 * 3 0#2", "America/New_York", "2026-01-01T00:00:00Z", 2) ==
        Strings{"2026-03-08T07:00:00.000Z", "2027-03-14T07:00:00.000Z"});
}

// Australia/Lord_Howe: +10:30 in winter, +11:00 in summer. 2026-04-05 02:00 -> 01:30 at
// 2026-04-04T15:00Z; 2026-10-04 02:00 -> 02:30 at 2026-10-03T15:30Z.
TEST_CASE("Lord Howe: a 30-minute gap and a 30-minute overlap", "[unit][cron][dst]") {
  CHECK(next_utc("15 2 * * *", "Australia/Lord_Howe", "2026-10-03T12:00:00Z", 2) ==
        Strings{"2026-10-03T15:30:00.000Z", "2026-10-04T15:15:00.000Z"});
  CHECK(next_after(cron("15 2 * * *"), at("2026-10-03T12:00:00Z"), zone("Australia/Lord_Howe")) ==
        at("2026-10-04T02:30:00+11:00"));
  CHECK(next_utc("*/15 * * * *", "Australia/Lord_Howe", "2026-10-03T14:50:00Z", 4) ==
        Strings{"2026-10-03T15:00:00.000Z", "2026-10-03T15:15:00.000Z", "2026-10-03T15:30:00.000Z",
                "2026-10-03T15:45:00.000Z"});

  CHECK(next_utc("45 1 * * *", "Australia/Lord_Howe", "2026-04-04T12:00:00Z", 2) ==
        Strings{"2026-04-04T14:45:00.000Z", "2026-04-05T15:15:00.000Z"});
  CHECK(next_after(cron("45 1 * * *"), at("2026-04-04T12:00:00Z"), zone("Australia/Lord_Howe")) ==
        at("2026-04-05T01:45:00+11:00"));
  // 01:30 and 01:45 come twice: the second pass (15:00Z, 15:15Z) is skipped.
  CHECK(next_utc("*/15 * * * *", "Australia/Lord_Howe", "2026-04-04T14:20:00Z", 4) ==
        Strings{"2026-04-04T14:30:00.000Z", "2026-04-04T14:45:00.000Z", "2026-04-04T15:30:00.000Z",
                "2026-04-04T15:45:00.000Z"});
}

TEST_CASE("Tokyo: no daylight saving, every day 24 hours", "[unit][cron][dst]") {
  CHECK(next_utc("0 9 * * *", "Asia/Tokyo", "2026-03-28T12:00:00Z", 3) ==
        Strings{"2026-03-29T00:00:00.000Z", "2026-03-30T00:00:00.000Z", "2026-03-31T00:00:00.000Z"});
  CHECK(next_utc("30 2 * * *", "Asia/Tokyo", "2026-10-24T12:00:00Z", 2) ==
        Strings{"2026-10-24T17:30:00.000Z", "2026-10-25T17:30:00.000Z"});
  const auto days = next_n(cron("0 9 * * *"), at("2026-01-01T00:00:00Z"), zone("Asia/Tokyo"), 730);
  REQUIRE(days.size() == 730);
  for (std::size_t i = 1; i < days.size(); ++i) CHECK(days[i] - days[i - 1] == std::chrono::hours{24});
}

TEST_CASE("a year of Berlin days: 23 and 25 hours on the two Sundays, 24 otherwise", "[unit][cron][dst]") {
  // 09:00 every day of 2026: both changes happen at night, so 09:00 always exists once.
  const auto days = next_n(cron("0 9 * * *"), at("2026-01-01T00:00:00Z"), zone("Europe/Berlin"), 365);
  REQUIRE(days.size() == 365);
  int short_days = 0, long_days = 0;
  for (std::size_t i = 1; i < days.size(); ++i) {
    const auto gap = days[i] - days[i - 1];
    if (gap == std::chrono::hours{23})
      ++short_days;
    else if (gap == std::chrono::hours{25})
      ++long_days;
    else
      CHECK(gap == std::chrono::hours{24});
  }
  CHECK(short_days == 1);
  CHECK(long_days == 1);
}
