// next_after in UTC: the calendar (leap years, L, LW, nW at month edges, nL, n#k), Vixie's OR
// rule, macros, "strictly after" at millisecond resolution, the 400-year bound and the year 9999.
#include <chrono>
#include <limits>
#include <string>
#include <vector>

#include "tests/cron/cron_test_support.hpp"

using namespace delayd::cron;
using delayd::cron::testing::at;
using delayd::cron::testing::cron;
using delayd::cron::testing::next_utc;
using Strings = std::vector<std::string>;

TEST_CASE("strictly after, at millisecond resolution", "[unit][cron]") {
  const CronExpr every_second = cron("* * * * * *");
  CHECK(next_after(every_second, at("2026-05-01T10:00:00.000Z"), nullptr) == at("2026-05-01T10:00:01Z"));
  CHECK(next_after(every_second, at("2026-05-01T10:00:00.999Z"), nullptr) == at("2026-05-01T10:00:01Z"));
  CHECK(next_after(every_second, at("2026-05-01T09:59:59.001Z"), nullptr) == at("2026-05-01T10:00:00Z"));

  const CronExpr quarter = cron("*/15 * * * *");
  CHECK(next_after(quarter, at("2026-05-01T10:15:00.000Z"), nullptr) == at("2026-05-01T10:30:00Z"));
  CHECK(next_after(quarter, at("2026-05-01T10:14:59.999Z"), nullptr) == at("2026-05-01T10:15:00Z"));
  CHECK(next_after(quarter, at("2026-05-01T23:50:00Z"), nullptr) == at("2026-05-02T00:00:00Z"));
  CHECK(next_after(quarter, at("2026-12-31T23:45:00Z"), nullptr) == at("2027-01-01T00:00:00Z"));
}

TEST_CASE("every field carries into the next", "[unit][cron]") {
  CHECK(next_utc("30 15 10 * * *", "UTC", "2026-05-01T10:15:30Z", 3) ==
        Strings{"2026-05-02T10:15:30.000Z", "2026-05-03T10:15:30.000Z", "2026-05-04T10:15:30.000Z"});
  CHECK(next_utc("0,30 0 9-17/4 * * MON-FRI", "UTC", "2026-05-01T16:59:00Z", 5) ==
        Strings{"2026-05-01T17:00:00.000Z", "2026-05-01T17:00:30.000Z", "2026-05-04T09:00:00.000Z",
                "2026-05-04T09:00:30.000Z", "2026-05-04T13:00:00.000Z"});
  CHECK(next_utc("0 0 1 JAN,JUL *", "UTC", "2026-02-01T00:00:00Z", 3) ==
        Strings{"2026-07-01T00:00:00.000Z", "2027-01-01T00:00:00.000Z", "2027-07-01T00:00:00.000Z"});
  CHECK(next_utc("59 23 31 12 *", "UTC", "2026-12-31T23:59:00Z", 1) == Strings{"2027-12-31T23:59:00.000Z"});
}

TEST_CASE("leap years: Feb 29 every four years, not in 2100", "[unit][cron]") {
  CHECK(next_utc("0 0 29 2 *", "UTC", "2026-01-01T00:00:00Z", 3) ==
        Strings{"2028-02-29T00:00:00.000Z", "2032-02-29T00:00:00.000Z", "2036-02-29T00:00:00.000Z"});
  CHECK(next_utc("0 0 29 2 *", "UTC", "2096-03-01T00:00:00Z", 1) == Strings{"2104-02-29T00:00:00.000Z"});
  CHECK(next_utc("0 0 29 2 *", "UTC", "2399-01-01T00:00:00Z", 1) == Strings{"2400-02-29T00:00:00.000Z"});
  CHECK(next_utc("0 0 L 2 *", "UTC", "2027-03-01T00:00:00Z", 2) ==
        Strings{"2028-02-29T00:00:00.000Z", "2029-02-28T00:00:00.000Z"});
  // A fifth Monday in February needs a leap year starting on a Monday: 40 years across 2100.
  CHECK(next_utc("0 0 * 2 1#5", "UTC", "2026-01-01T00:00:00Z", 3) ==
        Strings{"2044-02-29T00:00:00.000Z", "2072-02-29T00:00:00.000Z", "2112-02-29T00:00:00.000Z"});
}

TEST_CASE("a date that never comes: nullopt after the 400-year search", "[unit][cron]") {
  const auto from = at("2026-01-01T00:00:00Z");
  CHECK_FALSE(next_after(cron("0 0 30 2 *"), from, nullptr));
  CHECK_FALSE(next_after(cron("0 0 31 4,6,9,11 *"), from, nullptr));
  CHECK_FALSE(next_after(cron("0 0 31W 4 *"), from, nullptr));
  CHECK_FALSE(next_after(cron("0 0 30,31 FEB ?"), from, nullptr));
  CHECK(next_n(cron("0 0 30 2 *"), from, nullptr, 5).empty());
  // With day-of-week restricted too, Vixie's rule makes it "Feb 30 or any Monday in February".
  CHECK(next_utc("0 0 30 2 MON", "UTC", "2026-01-01T00:00:00Z", 1) == Strings{"2026-02-02T00:00:00.000Z"});
}

TEST_CASE("L: the last day of the month", "[unit][cron]") {
  CHECK(next_utc("0 12 L * *", "UTC", "2026-01-01T00:00:00Z", 4) ==
        Strings{"2026-01-31T12:00:00.000Z", "2026-02-28T12:00:00.000Z", "2026-03-31T12:00:00.000Z",
                "2026-04-30T12:00:00.000Z"});
  CHECK(next_utc("0 0 1,15,L * *", "UTC", "2026-02-14T00:00:00Z", 4) ==
        Strings{"2026-02-15T00:00:00.000Z", "2026-02-28T00:00:00.000Z", "2026-03-01T00:00:00.000Z",
                "2026-03-15T00:00:00.000Z"});
}

TEST_CASE("LW: the last weekday of the month", "[unit][cron]") {
  // Jan 31 2026 is a Saturday, Feb 28 a Saturday, Mar 31 a Tuesday, May 31 a Sunday.
  CHECK(next_utc("0 0 LW * *", "UTC", "2026-01-01T00:00:00Z", 5) ==
        Strings{"2026-01-30T00:00:00.000Z", "2026-02-27T00:00:00.000Z", "2026-03-31T00:00:00.000Z",
                "2026-04-30T00:00:00.000Z", "2026-05-29T00:00:00.000Z"});
}

TEST_CASE("nW: the nearest weekday, never across the month", "[unit][cron]") {
  // Aug 1 2026 is a Saturday: 1W is Monday the 3rd, not Friday July 31. Sep 1 is a Tuesday.
  CHECK(next_utc("0 0 1W * *", "UTC", "2026-07-31T00:00:00Z", 2) ==
        Strings{"2026-08-03T00:00:00.000Z", "2026-09-01T00:00:00.000Z"});
  // Nov 1 2026 is a Sunday: Monday the 2nd.
  CHECK(next_utc("0 0 1W 11 *", "UTC", "2026-01-01T00:00:00Z", 1) == Strings{"2026-11-02T00:00:00.000Z"});
  // Jan 31 2026 is a Saturday: Friday the 30th. May 31 is a Sunday and the last day: Friday the
  // 29th, not Monday June 1. February has no 31st; March 31 is a Tuesday.
  CHECK(next_utc("0 0 31W * *", "UTC", "2026-01-01T00:00:00Z", 4) ==
        Strings{"2026-01-30T00:00:00.000Z", "2026-03-31T00:00:00.000Z", "2026-05-29T00:00:00.000Z",
                "2026-07-31T00:00:00.000Z"});
  // Feb 15 2026 is a Sunday: Monday the 16th; Aug 15 a Saturday: Friday the 14th.
  CHECK(next_utc("0 0 15W 2,8 *", "UTC", "2026-01-01T00:00:00Z", 2) ==
        Strings{"2026-02-16T00:00:00.000Z", "2026-08-14T00:00:00.000Z"});
  // Feb 28 2027 is a Sunday and the last day: Friday the 26th.
  CHECK(next_utc("0 0 28W 2 *", "UTC", "2027-01-01T00:00:00Z", 1) == Strings{"2027-02-26T00:00:00.000Z"});
}

TEST_CASE("nL: the last weekday n of the month", "[unit][cron]") {
  // Last Fridays of 2026: Jan 30, Feb 27, Mar 27, Apr 24.
  CHECK(next_utc("0 0 * * 5L", "UTC", "2026-01-01T00:00:00Z", 4) ==
        Strings{"2026-01-30T00:00:00.000Z", "2026-02-27T00:00:00.000Z", "2026-03-27T00:00:00.000Z",
                "2026-04-24T00:00:00.000Z"});
  // Last Sunday, written 0L or 7L: Jan 25, Feb 22, Mar 29 (the day Europe moves its clocks).
  CHECK(next_utc("0 0 * * 7L", "UTC", "2026-01-01T00:00:00Z", 3) ==
        Strings{"2026-01-25T00:00:00.000Z", "2026-02-22T00:00:00.000Z", "2026-03-29T00:00:00.000Z"});
  CHECK(next_utc("0 0 * * 0L", "UTC", "2026-01-01T00:00:00Z", 3) ==
        next_utc("0 0 * * 7L", "UTC", "2026-01-01T00:00:00Z", 3));
}

TEST_CASE("n#k: the k-th weekday n of the month", "[unit][cron]") {
  // Second Fridays: Jan 9, Feb 13, Mar 13 2026.
  CHECK(next_utc("0 0 * * 5#2", "UTC", "2026-01-01T00:00:00Z", 3) ==
        Strings{"2026-01-09T00:00:00.000Z", "2026-02-13T00:00:00.000Z", "2026-03-13T00:00:00.000Z"});
  // Fifth Mondays: only March and June in the first half of 2026.
  CHECK(next_utc("0 0 * * MON#5", "UTC", "2026-01-01T00:00:00Z", 2) ==
        Strings{"2026-03-30T00:00:00.000Z", "2026-06-29T00:00:00.000Z"});
  // The first Monday and the last Sunday (US and EU clock changes use such rules).
  CHECK(next_utc("0 0 * * 1#1,0L", "UTC", "2026-03-01T00:00:00Z", 3) ==
        Strings{"2026-03-02T00:00:00.000Z", "2026-03-29T00:00:00.000Z", "2026-04-06T00:00:00.000Z"});
}

TEST_CASE("Vixie's rule: both day fields restricted, either matches", "[unit][cron]") {
  // Feb 2026: Mondays 2, 9, 16, 23; the 13th is a Friday.
  CHECK(next_utc("0 0 13 * 1", "UTC", "2026-02-01T00:00:00Z", 5) ==
        Strings{"2026-02-02T00:00:00.000Z", "2026-02-09T00:00:00.000Z", "2026-02-13T00:00:00.000Z",
                "2026-02-16T00:00:00.000Z", "2026-02-23T00:00:00.000Z"});
  // One of them * or ?: only the other decides.
  CHECK(next_utc("0 0 13 * *", "UTC", "2026-02-01T00:00:00Z", 2) ==
        Strings{"2026-02-13T00:00:00.000Z", "2026-03-13T00:00:00.000Z"});
  CHECK(next_utc("0 0 13 * ?", "UTC", "2026-02-01T00:00:00Z", 2) ==
        next_utc("0 0 13 * *", "UTC", "2026-02-01T00:00:00Z", 2));
  CHECK(next_utc("0 0 * * 1", "UTC", "2026-02-01T00:00:00Z", 2) ==
        Strings{"2026-02-02T00:00:00.000Z", "2026-02-09T00:00:00.000Z"});
  CHECK(next_utc("0 0 ? * 1", "UTC", "2026-02-01T00:00:00Z", 2) ==
        next_utc("0 0 * * 1", "UTC", "2026-02-01T00:00:00Z", 2));
  // */10 restricts day-of-month (1, 11, 21, 31), so Mondays are added, not intersected.
  CHECK(next_utc("0 0 */10 * 1", "UTC", "2026-01-31T12:00:00Z", 6) ==
        Strings{"2026-02-01T00:00:00.000Z", "2026-02-02T00:00:00.000Z", "2026-02-09T00:00:00.000Z",
                "2026-02-11T00:00:00.000Z", "2026-02-16T00:00:00.000Z", "2026-02-21T00:00:00.000Z"});
  // The special forms take part in the rule too: the 15th, or the last Friday.
  CHECK(next_utc("0 0 15 * 5L", "UTC", "2026-01-01T00:00:00Z", 3) ==
        Strings{"2026-01-15T00:00:00.000Z", "2026-01-30T00:00:00.000Z", "2026-02-15T00:00:00.000Z"});
}

TEST_CASE("macros fire as their expansions", "[unit][cron]") {
  CHECK(next_utc("@yearly", "UTC", "2026-05-01T00:00:00Z", 2) ==
        Strings{"2027-01-01T00:00:00.000Z", "2028-01-01T00:00:00.000Z"});
  CHECK(next_utc("@monthly", "UTC", "2026-05-01T00:00:00Z", 2) ==
        Strings{"2026-06-01T00:00:00.000Z", "2026-07-01T00:00:00.000Z"});
  // May 3 2026 is a Sunday.
  CHECK(next_utc("@weekly", "UTC", "2026-05-01T00:00:00Z", 2) ==
        Strings{"2026-05-03T00:00:00.000Z", "2026-05-10T00:00:00.000Z"});
  CHECK(next_utc("@daily", "UTC", "2026-05-01T00:00:00Z", 2) ==
        Strings{"2026-05-02T00:00:00.000Z", "2026-05-03T00:00:00.000Z"});
  CHECK(next_utc("@hourly", "UTC", "2026-05-01T00:30:00Z", 2) ==
        Strings{"2026-05-01T01:00:00.000Z", "2026-05-01T02:00:00.000Z"});
}

TEST_CASE("the ends of time: year 9999 and instants out of range", "[unit][cron]") {
  using std::chrono::milliseconds;
  CHECK(next_utc("0 0 1 1 *", "UTC", "9998-06-01T00:00:00Z", 2) == Strings{"9999-01-01T00:00:00.000Z"});
  CHECK(next_utc("* * * * * *", "UTC", "9999-12-31T23:59:57.500Z", 5) ==
        Strings{"9999-12-31T23:59:58.000Z", "9999-12-31T23:59:59.000Z"});
  CHECK_FALSE(next_after(cron("* * * * * *"), Instant::max(), nullptr));
  CHECK_FALSE(
      next_after(cron("* * * * * *"), Instant{milliseconds{std::numeric_limits<std::int64_t>::max() / 2}}, nullptr));
  // Before the year 1 counts as the start of it.
  const auto first = next_after(cron("0 0 1 1 *"), Instant::min(), nullptr);
  REQUIRE(first);
  CHECK(*first == Instant{date::sys_days{date::year{1} / 1 / 1}});
  const date::time_zone* berlin = testing::zone("Europe/Berlin");
  CHECK_FALSE(next_after(cron("* * * * * *"), Instant::max(), berlin));
  CHECK(next_after(cron("0 0 1 1 *"), Instant::min(), berlin));
}

TEST_CASE("UTC as nullptr and as the zone named UTC agree", "[unit][cron]") {
  const date::time_zone* utc = testing::zone("UTC");
  const CronExpr e = cron("7 */5 1-10 * MON-FRI");
  const auto from = at("2026-03-01T00:00:00Z");
  CHECK(next_n(e, from, nullptr, 50) == next_n(e, from, utc, 50));
  CHECK(find_zone("No/Such_Zone") == nullptr);
  CHECK(find_zone("") == nullptr);
  CHECK(find_zone("../../etc/passwd") == nullptr);
}
