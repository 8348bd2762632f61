// Wall-clock timestamps as delayd reads and writes them: Unix epoch milliseconds, and RFC 3339
// text. The ingest contract accepts both forms for `deliver-at`; logs and `delayctl get` print
// RFC 3339 in UTC with milliseconds.
//
// Invariants: a successful parse yields a value in [0, kMaxEpochMs], i.e. between
// 1970-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z, so downstream code (Redis scores, wheel
// ticks, arithmetic with delays) never meets a negative or absurd time. Sub-millisecond digits
// round UP to the next millisecond, never down: truncating 10:00:00.0009Z to 10:00:00.000 would
// let a job fire 0.9 ms before the instant its producer wrote, and delayd never fires early. (So
// 9999-12-31T23:59:59.9991Z is out of range.)
// Threading: pure functions; callable from any thread. No parser reads the clock or the locale.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace delayd::contract {

// 9999-12-31T23:59:59.999Z.
inline constexpr std::int64_t kMaxEpochMs = 253'402'300'799'999;

enum class TimeError {
  none,
  syntax,        // not the expected form at all
  bad_field,     // the form is right but a field is impossible: month 13, Feb 30, hour 24, ...
  out_of_range,  // a real instant, but before 1970 or after 9999
};

struct ParsedTime {
  std::int64_t epoch_ms = 0;  // meaningful only when error == TimeError::none
  TimeError error = TimeError::none;
  explicit operator bool() const noexcept { return error == TimeError::none; }
};

// Decimal ASCII digits only (no sign, no spaces); leading zeros are allowed.
ParsedTime parse_epoch_ms(std::string_view text) noexcept;

// RFC 3339 date-time: YYYY-MM-DD"T"HH:MM:SS[.F{1,9}]("Z" | ("+"|"-")HH:MM), with "t" and "z"
// accepted in lower case. A leap second (:60) is accepted and counts as the first instant of
// the next minute, which is never earlier than the producer meant.
ParsedTime parse_rfc3339_ms(std::string_view text) noexcept;

// Either form: all digits means epoch milliseconds, anything else must be RFC 3339.
ParsedTime parse_timestamp_ms(std::string_view text) noexcept;

// "2026-11-22T10:00:00.123Z". Any int64 is accepted; years outside 0000-9999 are printed with
// as many digits (and a sign) as they need rather than rejected, since this is for display.
std::string format_rfc3339_ms(std::int64_t epoch_ms);

}  // namespace delayd::contract
