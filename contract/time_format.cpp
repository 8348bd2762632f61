#include "contract/time_format.hpp"

#include <cstdio>

namespace delayd::contract {

namespace {

constexpr std::int64_t kMsPerDay = 86'400'000;

// Howard Hinnant's days_from_civil / civil_from_days: exact proleptic Gregorian arithmetic in
// integers, valid far beyond the range we need, with no dependency on the C library's timegm
// (which is neither standard nor safe with hostile inputs).
constexpr std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) noexcept {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

struct Civil {
  std::int64_t year;
  unsigned month;
  unsigned day;
};

constexpr Civil civil_from_days(std::int64_t z) noexcept {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const std::int64_t y = static_cast<std::int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  return {y + (m <= 2 ? 1 : 0), m, d};
}

static_assert(days_from_civil(1970, 1, 1) == 0);
static_assert(days_from_civil(2000, 3, 1) == 11017);
static_assert(civil_from_days(11017).month == 3);

constexpr bool is_leap(std::int64_t y) noexcept { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

constexpr unsigned days_in_month(std::int64_t y, unsigned m) noexcept {
  constexpr unsigned kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : kDays[m - 1];
}

constexpr bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

// Reads exactly `n` digits at `pos`; false if any of them is not a digit.
bool read_fixed(std::string_view s, std::size_t pos, std::size_t n, unsigned& out) noexcept {
  if (pos + n > s.size()) return false;
  unsigned v = 0;
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (!is_digit(s[i])) return false;
    v = v * 10 + static_cast<unsigned>(s[i] - '0');
  }
  out = v;
  return true;
}

ParsedTime fail(TimeError e) noexcept { return ParsedTime{0, e}; }

}  // namespace

ParsedTime parse_epoch_ms(std::string_view text) noexcept {
  if (text.empty()) return fail(TimeError::syntax);
  std::int64_t v = 0;
  bool too_big = false;
  for (char c : text) {
    if (!is_digit(c)) return fail(TimeError::syntax);
    // Keep scanning after overflow so that "123abc" with many digits is still a syntax error.
    if (!too_big) {
      v = v * 10 + (c - '0');
      too_big = v > kMaxEpochMs;
    }
  }
  if (too_big) return fail(TimeError::out_of_range);
  return ParsedTime{v, TimeError::none};
}

ParsedTime parse_rfc3339_ms(std::string_view s) noexcept {
  // Fixed positions: YYYY-MM-DDTHH:MM:SS is 19 characters.
  unsigned year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (s.size() < 20) return fail(TimeError::syntax);
  if (!read_fixed(s, 0, 4, year) || s[4] != '-' || !read_fixed(s, 5, 2, month) || s[7] != '-' ||
      !read_fixed(s, 8, 2, day) || (s[10] != 'T' && s[10] != 't') || !read_fixed(s, 11, 2, hour) || s[13] != ':' ||
      !read_fixed(s, 14, 2, minute) || s[16] != ':' || !read_fixed(s, 17, 2, second)) {
    return fail(TimeError::syntax);
  }
  std::size_t pos = 19;
  unsigned millis = 0;
  if (s[pos] == '.') {
    ++pos;
    const std::size_t start = pos;
    bool below_ms = false;  // a non-zero digit finer than a millisecond
    while (pos < s.size() && is_digit(s[pos])) {
      if (pos - start < 3) {
        millis = millis * 10 + static_cast<unsigned>(s[pos] - '0');
      } else if (s[pos] != '0') {
        below_ms = true;
      }
      ++pos;
    }
    const std::size_t digits = pos - start;
    if (digits < 1 || digits > 9) return fail(TimeError::syntax);
    for (std::size_t i = digits; i < 3; ++i) millis *= 10;
    // Up to the next millisecond: 10:00:00.0009 is due at 10:00:00.001, never at .000.
    if (below_ms) ++millis;
  }
  if (pos >= s.size()) return fail(TimeError::syntax);
  std::int64_t offset_s = 0;
  unsigned off_h = 0, off_m = 0;
  if (s[pos] == 'Z' || s[pos] == 'z') {
    ++pos;
  } else if (s[pos] == '+' || s[pos] == '-') {
    const bool negative = s[pos] == '-';
    if (!read_fixed(s, pos + 1, 2, off_h) || pos + 3 >= s.size() || s[pos + 3] != ':' ||
        !read_fixed(s, pos + 4, 2, off_m)) {
      return fail(TimeError::syntax);
    }
    pos += 6;
    offset_s = (static_cast<std::int64_t>(off_h) * 3600 + off_m * 60) * (negative ? -1 : 1);
  } else {
    return fail(TimeError::syntax);
  }
  if (pos != s.size()) return fail(TimeError::syntax);

  if (month < 1 || month > 12 || day < 1 || day > days_in_month(year, month) || hour > 23 || minute > 59 ||
      second > 60 || off_h > 23 || off_m > 59) {
    return fail(TimeError::bad_field);
  }
  const std::int64_t local_s = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
  // The local time minus its offset is UTC: 10:00+01:00 is 09:00Z.
  const std::int64_t ms = (local_s - offset_s) * 1000 + millis;
  if (ms < 0 || ms > kMaxEpochMs) return fail(TimeError::out_of_range);
  return ParsedTime{ms, TimeError::none};
}

ParsedTime parse_timestamp_ms(std::string_view text) noexcept {
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos) {
    return parse_epoch_ms(text);
  }
  return parse_rfc3339_ms(text);
}

std::string format_rfc3339_ms(std::int64_t epoch_ms) {
  // Floor division, so that instants before 1970 land on the right day.
  std::int64_t days = epoch_ms / kMsPerDay;
  std::int64_t rem = epoch_ms % kMsPerDay;
  if (rem < 0) {
    rem += kMsPerDay;
    --days;
  }
  const Civil c = civil_from_days(days);
  const auto ms_of_day = static_cast<unsigned>(rem);
  char buf[64];
  const int n =
      std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02u:%02u:%02u.%03uZ", static_cast<long long>(c.year), c.month,
                    c.day, ms_of_day / 3'600'000, ms_of_day / 60'000 % 60, ms_of_day / 1000 % 60, ms_of_day % 1000);
  return std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
}

}  // namespace delayd::contract
