// Timestamps: the two accepted forms of deliver-at, and the display form.
#include "contract/time_format.hpp"

#include <catch2/catch.hpp>
#include <limits>

using namespace delayd::contract;
using namespace delayd::contract;

namespace {

std::int64_t ms(std::string_view text) {
  const ParsedTime t = parse_timestamp_ms(text);
  INFO(text);
  REQUIRE(t.error == TimeError::none);
  return t.epoch_ms;
}

TimeError error_of(std::string_view text) { return parse_timestamp_ms(text).error; }

}  // namespace

TEST_CASE("epoch milliseconds", "[unit][time]") {
  CHECK(ms("0") == 0);
  CHECK(ms("1795000000123") == 1795000000123);
  CHECK(ms("0001795000000123") == 1795000000123);
  CHECK(ms("253402300799999") == kMaxEpochMs);
  CHECK(error_of("253402300800000") == TimeError::out_of_range);
  CHECK(error_of("99999999999999999999999999999") == TimeError::out_of_range);
  CHECK(error_of("") == TimeError::syntax);
  CHECK(parse_epoch_ms("-1").error == TimeError::syntax);
  CHECK(parse_epoch_ms("+1").error == TimeError::syntax);
  CHECK(parse_epoch_ms(" 1").error == TimeError::syntax);
  CHECK(parse_epoch_ms("1 ").error == TimeError::syntax);
  CHECK(parse_epoch_ms("1e3").error == TimeError::syntax);
  CHECK(parse_epoch_ms("12.5").error == TimeError::syntax);
}

TEST_CASE("RFC 3339 equals the epoch milliseconds of the same instant", "[unit][time]") {
  CHECK(ms("1970-01-01T00:00:00Z") == 0);
  CHECK(ms("2026-11-22T10:00:00.123Z") == 1795341600123);
  CHECK(ms("2026-11-22T10:00:00.123z") == 1795341600123);
  CHECK(ms("2026-11-22t10:00:00.123Z") == 1795341600123);
  CHECK(ms("2026-11-22T11:00:00.123+01:00") == 1795341600123);
  CHECK(ms("2026-11-22T04:30:00.123-05:30") == 1795341600123);
  CHECK(ms("2026-11-22T10:00:00.123+00:00") == 1795341600123);
  CHECK(ms("2026-11-22T10:00:00.123-00:00") == 1795341600123);
  // An offset can move the date across midnight and across a year.
  CHECK(ms("2027-01-01T00:30:00+01:00") == ms("2026-12-31T23:30:00Z"));
  CHECK(ms("9999-12-31T23:59:59.999Z") == kMaxEpochMs);
}

TEST_CASE("fractions: 1 to 9 digits, rounded up to the next millisecond, never down", "[unit][time]") {
  CHECK(ms("2026-11-22T10:00:00Z") == 1795341600000);
  CHECK(ms("2026-11-22T10:00:00.1Z") == 1795341600100);
  CHECK(ms("2026-11-22T10:00:00.12Z") == 1795341600120);
  CHECK(ms("2026-11-22T10:00:00.123Z") == 1795341600123);
  CHECK(ms("2026-11-22T10:00:00.123000000Z") == 1795341600123);  // zeros below a ms: exact
  // Any part of a millisecond is a later instant than the millisecond's start: up, never down.
  CHECK(ms("2026-11-22T10:00:00.0009Z") == 1795341600001);
  CHECK(ms("2026-11-22T10:00:00.000000001Z") == 1795341600001);
  CHECK(ms("2026-11-22T10:00:00.1231Z") == 1795341600124);
  CHECK(ms("2026-11-22T10:00:00.1239Z") == 1795341600124);
  // The carry goes through the second, and across the date.
  CHECK(ms("2026-11-22T10:00:00.999999999Z") == 1795341601000);
  CHECK(ms("2026-12-31T23:59:59.9999Z") == ms("2027-01-01T00:00:00Z"));
  CHECK(ms("9999-12-31T23:59:59.999Z") == kMaxEpochMs);
  CHECK(error_of("9999-12-31T23:59:59.9991Z") == TimeError::out_of_range);
  CHECK(error_of("2026-11-22T10:00:00.1234567890Z") == TimeError::syntax);
  CHECK(error_of("2026-11-22T10:00:00.Z") == TimeError::syntax);
}

TEST_CASE("calendar rules: leap years and impossible dates", "[unit][time]") {
  CHECK(ms("2024-02-29T00:00:00Z") == ms("2024-03-01T00:00:00Z") - 86'400'000);
  CHECK(ms("2000-02-29T12:00:00Z") == 951825600000);                // divisible by 400: leap
  CHECK(error_of("2100-02-29T00:00:00Z") == TimeError::bad_field);  // by 100 only: not leap
  CHECK(error_of("2023-02-29T00:00:00Z") == TimeError::bad_field);
  CHECK(error_of("2026-02-30T00:00:00Z") == TimeError::bad_field);
  CHECK(error_of("2026-04-31T00:00:00Z") == TimeError::bad_field);
  CHECK(ms("2026-12-31T00:00:00Z") > 0);
  CHECK(error_of("2026-13-01T00:00:00Z") == TimeError::bad_field);
  CHECK(error_of("2026-00-01T00:00:00Z") == TimeError::bad_field);
  CHECK(error_of("2026-01-00T00:00:00Z") == TimeError::bad_field);
  CHECK(error_of("2026-01-01T24:00:00Z") == TimeError::bad_field);
  CHECK(error_of("2026-01-01T00:60:00Z") == TimeError::bad_field);
  CHECK(error_of("2026-01-01T00:00:61Z") == TimeError::bad_field);
  CHECK(error_of("2026-01-01T00:00:00+24:00") == TimeError::bad_field);
  CHECK(error_of("2026-01-01T00:00:00+01:60") == TimeError::bad_field);
  // A leap second is the first instant of the next minute: never earlier than meant.
  CHECK(ms("2016-12-31T23:59:60Z") == ms("2017-01-01T00:00:00Z"));
}

TEST_CASE("range: 1970 to 9999", "[unit][time]") {
  CHECK(error_of("1969-12-31T23:59:59.999Z") == TimeError::out_of_range);
  CHECK(error_of("1970-01-01T00:30:00+01:00") == TimeError::out_of_range);
  CHECK(error_of("0000-01-01T00:00:00Z") == TimeError::out_of_range);
  CHECK(error_of("9999-12-31T23:59:59-01:00") == TimeError::out_of_range);
}

TEST_CASE("not RFC 3339", "[unit][time]") {
  for (const char* bad :
       {"tomorrow", "2026-11-22", "2026-11-22T10:00:00", "2026-11-22 10:00:00Z", "2026-11-22T10:00Z",
        "2026-11-22T10:00:00+0100", "2026-11-22T10:00:00+01", "2026-11-22T10:00:00+01:00 ", " 2026-11-22T10:00:00Z",
        "2026-11-22T10:00:00ZZ", "26-11-22T10:00:00Z", "2026-1-22T10:00:00Z", "2026/11/22T10:00:00Z",
        "+2026-11-22T10:00:00Z", "2026-11-22T10:00:00.123", "2026-11-22T1a:00:00Z", "-1"}) {
    INFO(bad);
    CHECK(error_of(bad) == TimeError::syntax);
  }
}

TEST_CASE("formatting as RFC 3339 UTC with milliseconds", "[unit][time]") {
  CHECK(format_rfc3339_ms(0) == "1970-01-01T00:00:00.000Z");
  CHECK(format_rfc3339_ms(1795341600123) == "2026-11-22T10:00:00.123Z");
  CHECK(format_rfc3339_ms(951825600000) == "2000-02-29T12:00:00.000Z");
  CHECK(format_rfc3339_ms(kMaxEpochMs) == "9999-12-31T23:59:59.999Z");
  CHECK(format_rfc3339_ms(-1) == "1969-12-31T23:59:59.999Z");
  // Display never fails, even far outside the accepted range.
  CHECK_FALSE(format_rfc3339_ms(std::numeric_limits<std::int64_t>::min()).empty());
  CHECK_FALSE(format_rfc3339_ms(std::numeric_limits<std::int64_t>::max()).empty());
}

TEST_CASE("format and parse are inverse over the accepted range", "[unit][time]") {
  // A deterministic walk across the range, including every month boundary pattern.
  for (std::int64_t t = 0; t <= kMaxEpochMs; t += 79'190'033'371) {
    INFO(t);
    CHECK(ms(format_rfc3339_ms(t)) == t);
  }
  for (std::int64_t day = 0; day < 3 * 366; ++day) {
    const std::int64_t t = day * 86'400'000 + 12'345;
    CHECK(ms(format_rfc3339_ms(t)) == t);
  }
}
