#include "cron/cron_expr.hpp"

#include <date/date.h>
#include <date/tz.h>

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace delayd::cron {

namespace {

using std::chrono::seconds;

// ------------------------------------------------------------------------------------------
// Parsing
// ------------------------------------------------------------------------------------------

enum class Field { second, minute, hour, day_of_month, month, day_of_week };

struct FieldSpec {
  Field field;
  const char* name;
  int min;
  int max;     // the largest value (day-of-week: 7, another Sunday); where * and a/n end
  int values;  // how many distinct values: the largest step
};

constexpr FieldSpec kSpecs[] = {
    {Field::second, "second", 0, 59, 60}, {Field::minute, "minute", 0, 59, 60},
    {Field::hour, "hour", 0, 23, 24},     {Field::day_of_month, "day-of-month", 1, 31, 31},
    {Field::month, "month", 1, 12, 12},   {Field::day_of_week, "day-of-week", 0, 7, 7},
};

constexpr const char* kMonthNames[] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                       "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
constexpr const char* kDayNames[] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};

struct Macro {
  const char* name;
  const char* expansion;
};
constexpr Macro kMacros[] = {
    {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"}, {"@weekly", "0 0 * * 0"},
    {"@daily", "0 0 * * *"},  {"@midnight", "0 0 * * *"}, {"@hourly", "0 * * * *"},
};

constexpr char upper(char c) noexcept { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c; }
constexpr bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }
constexpr bool is_alpha(char c) noexcept { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
constexpr bool is_blank(char c) noexcept { return c == ' ' || c == '\t'; }

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (upper(a[i]) != upper(b[i])) return false;
  }
  return true;
}

// The text as one printable line for an error message: bytes outside printable ASCII as \xNN,
// cut at 40 bytes of input.
std::string shown(std::string_view text) {
  constexpr std::size_t kMaxShown = 40;
  std::string out = "'";
  for (std::size_t i = 0; i < text.size() && i < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  if (text.size() > kMaxShown) out += "...";
  out += "'";
  return out;
}

// Thrown inside the parser only, caught by parse_cron: the message of the error.
struct BadCron {
  std::string message;
};

[[noreturn]] void fail(const FieldSpec& spec, const std::string& what) {
  throw BadCron{std::string(spec.name) + ": " + what};
}

// One comma-separated item of one field, read left to right.
class ItemReader {
 public:
  ItemReader(const FieldSpec& spec, std::string_view item) : spec_(spec), item_(item) {}

  bool at_end() const noexcept { return pos_ == item_.size(); }
  // What has been read so far: digits, letters and the separators taken.
  std::string_view consumed() const noexcept { return item_.substr(0, pos_); }
  char peek() const noexcept { return at_end() ? '\0' : item_[pos_]; }
  bool take(char c) noexcept {
    if (at_end() || upper(item_[pos_]) != c) return false;
    ++pos_;
    return true;
  }

  // A number or, in month and day-of-week, a three-letter name. Checked against min..max.
  int value() {
    if (is_digit(peek())) {
      const std::size_t start = pos_;
      int v = 0;
      while (is_digit(peek())) {
        v = std::min(v * 10 + (item_[pos_] - '0'), 100000);  // saturates: still out of range
        ++pos_;
      }
      if (v < spec_.min || v > spec_.max) {
        fail(spec_, std::string(item_.substr(start, pos_ - start)) + " is outside " + std::to_string(spec_.min) + "-" +
                        std::to_string(spec_.max));
      }
      return v;
    }
    if (is_alpha(peek()) && (spec_.field == Field::month || spec_.field == Field::day_of_week)) {
      const std::size_t start = pos_;
      while (pos_ < item_.size() && pos_ - start < 3 && is_alpha(item_[pos_])) ++pos_;
      const std::string_view name = item_.substr(start, pos_ - start);
      const std::string where = name == item_ ? shown(name) : shown(item_) + ": " + shown(name);
      if (spec_.field == Field::month) {
        for (int i = 0; i < 12; ++i) {
          if (iequals(name, kMonthNames[i])) return i + 1;
        }
        fail(spec_, where + " is not a month name (JAN-DEC)");
      }
      for (int i = 0; i < 7; ++i) {
        if (iequals(name, kDayNames[i])) return i;
      }
      fail(spec_, where + " is not a day name (SUN-SAT)");
    }
    fail(spec_, shown(item_) + " is not a number, range, step or list" + allowed_hint());
  }

  // The number after '/': 1..values.
  int step() {
    if (!is_digit(peek())) fail(spec_, shown(item_) + ": a step needs a number after '/'");
    const std::size_t start = pos_;
    int v = 0;
    while (is_digit(peek())) {
      v = std::min(v * 10 + (item_[pos_] - '0'), 100000);
      ++pos_;
    }
    if (v < 1 || v > spec_.values) {
      fail(spec_,
           "step " + std::string(item_.substr(start, pos_ - start)) + " is outside 1-" + std::to_string(spec_.values));
    }
    return v;
  }

  void expect_end() {
    if (!at_end()) fail(spec_, shown(item_) + " is not a number, range, step or list" + allowed_hint());
  }

 private:
  std::string allowed_hint() const {
    switch (spec_.field) {
      case Field::day_of_month:
        return " (also ?, L, LW, nW)";
      case Field::day_of_week:
        return " (also ?, SUN-SAT, nL, n#k)";
      case Field::month:
        return " (also JAN-DEC)";
      default:
        return "";
    }
  }

  const FieldSpec& spec_;
  std::string_view item_;
  std::size_t pos_ = 0;
};

std::uint64_t bits(int from, int to, int step) {
  std::uint64_t out = 0;
  for (int v = from; v <= to; v += step) out |= std::uint64_t{1} << v;
  return out;
}

// Reads one field into `e`.
void parse_field(const FieldSpec& spec, std::string_view text, CronExpr& e) {
  const bool dom = spec.field == Field::day_of_month;
  const bool dow = spec.field == Field::day_of_week;
  if (text == "?" && (dom || dow)) {
    text = "*";
  }
  std::uint64_t set = 0;  // plain values
  std::size_t items = 0;
  std::size_t pos = 0;
  while (true) {
    const std::size_t comma = text.find(',', pos);
    const std::string_view item = text.substr(pos, comma == std::string_view::npos ? text.npos : comma - pos);
    if (++items > kMaxListItems) fail(spec, "more than " + std::to_string(kMaxListItems) + " list items");
    if (item.empty()) fail(spec, "empty list item in " + shown(text));

    ItemReader r(spec, item);
    if (item == "?") {
      if (dom || dow) fail(spec, "'?' must stand alone");
      fail(spec, "'?' is only allowed in day-of-month and day-of-week");
    }
    if (r.take('*')) {
      int step = 1;
      if (r.take('/')) step = r.step();
      r.expect_end();
      set |= bits(spec.min, spec.max, step);
    } else if (dom && iequals(item, "L")) {
      e.last_day = true;
    } else if (dom && iequals(item, "LW")) {
      e.last_weekday = true;
    } else if (upper(r.peek()) == 'L' && !(spec.field == Field::month)) {
      if (dow) fail(spec, "a bare L is not allowed (Quartz reads it as SAT); for the last weekday n write nL");
      if (dom) fail(spec, shown(item) + " is not supported (only L, LW and nW)");
      fail(spec, "L is only allowed in day-of-month and day-of-week");
    } else {
      const int first = r.value();
      if (dom && r.take('W')) {
        r.expect_end();
        e.nearest_weekdays |= std::uint32_t{1} << first;
      } else if (dow && r.take('L')) {
        r.expect_end();
        e.last_of_weekday |= static_cast<std::uint8_t>(1u << (first % 7));
      } else if (dow && r.take('#')) {
        if (!is_digit(r.peek())) fail(spec, shown(item) + ": '#' needs a number 1-5 after it");
        const char k = r.peek();
        r.take(k);
        if (!r.at_end() || k < '1' || k > '5') fail(spec, shown(item) + ": the k of n#k must be 1-5");
        e.nth_of_weekday[static_cast<std::size_t>(first % 7)] |= static_cast<std::uint8_t>(1u << (k - '0'));
      } else {
        int last = first;
        int step = 1;
        if (r.take('-')) {
          last = r.value();
          if (dow && last == 0 && first > 0) last = 7;  // FRI-SUN
          if (last < first) {
            fail(spec, "range " + std::string(r.consumed()) + " runs backwards (write it as two ranges)");
          }
          if (r.take('/')) step = r.step();
        } else if (r.take('/')) {
          step = r.step();
          last = spec.max;
        }
        r.expect_end();
        set |= bits(first, last, step);
      }
    }
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }

  switch (spec.field) {
    case Field::second:
      e.seconds = set;
      break;
    case Field::minute:
      e.minutes = set;
      break;
    case Field::hour:
      e.hours = static_cast<std::uint32_t>(set);
      break;
    case Field::day_of_month:
      e.days = static_cast<std::uint32_t>(set);
      e.dom_any = text == "*";
      break;
    case Field::month:
      e.months = static_cast<std::uint16_t>(set);
      break;
    case Field::day_of_week:
      // 7 is Sunday, as 0 is.
      e.weekdays = static_cast<std::uint8_t>((set | (set >> 7)) & 0x7f);
      e.dow_any = text == "*";
      break;
  }
}

CronExpr parse_fields(std::string_view text) {
  std::array<std::string_view, 7> fields;
  std::size_t count = 0;
  std::size_t pos = 0;
  while (true) {
    while (pos < text.size() && is_blank(text[pos])) ++pos;
    if (pos == text.size()) break;
    const std::size_t start = pos;
    while (pos < text.size() && !is_blank(text[pos])) ++pos;
    if (count < fields.size()) fields[count] = text.substr(start, pos - start);
    ++count;
  }
  if (count == 0) throw BadCron{"empty cron expression"};
  if (count == 1 && fields[0].front() == '@') {
    for (const Macro& m : kMacros) {
      if (iequals(fields[0], m.name)) return parse_fields(m.expansion);
    }
    throw BadCron{"unknown macro " + shown(fields[0]) +
                  " (known: @yearly @annually @monthly @weekly @daily @midnight @hourly)"};
  }
  if (count != 5 && count != 6) {
    throw BadCron{"expected 5 fields (minute hour day-of-month month day-of-week) or 6 (second first), found " +
                  std::to_string(count)};
  }
  CronExpr e;
  e.with_seconds = count == 6;
  const std::size_t skip = e.with_seconds ? 0 : 1;  // five fields: no second
  for (std::size_t i = 0; i < count; ++i) {
    parse_field(kSpecs[i + skip], fields[i], e);
  }
  if (!e.with_seconds) e.seconds = 1;
  return e;
}

// ------------------------------------------------------------------------------------------
// The search
// ------------------------------------------------------------------------------------------

using LocalSeconds = date::local_seconds;
using SysSeconds = date::sys_seconds;

constexpr unsigned kSunday = 0;
constexpr unsigned kSaturday = 6;

// The weekday of y-m-day, 0 = Sunday.
unsigned weekday_of(date::year y, date::month m, unsigned day) {
  return date::weekday{date::sys_days{y / m / date::day{day}}}.c_encoding();
}

// Bits 1..dim: the days of month y/m on which `e`'s day fields match.
std::uint32_t matching_days(const CronExpr& e, date::year y, date::month m) {
  const unsigned dim = static_cast<unsigned>((y / m / date::last).day());
  const std::uint32_t all = static_cast<std::uint32_t>(((std::uint64_t{1} << (dim + 1)) - 1) & ~std::uint64_t{1});
  if (e.dom_any && e.dow_any) return all;

  std::uint32_t dom = 0;
  if (!e.dom_any) {
    dom = e.days & all;
    const unsigned wd_last = weekday_of(y, m, dim);
    if (e.last_day) dom |= std::uint32_t{1} << dim;
    if (e.last_weekday) {
      const unsigned d = wd_last == kSaturday ? dim - 1 : wd_last == kSunday ? dim - 2 : dim;
      dom |= std::uint32_t{1} << d;
    }
    for (std::uint32_t w = e.nearest_weekdays & all; w != 0; w &= w - 1) {
      const auto n = static_cast<unsigned>(std::countr_zero(w));
      const unsigned wd = weekday_of(y, m, n);
      unsigned d = n;
      if (wd == kSaturday) d = n == 1 ? 3 : n - 1;
      if (wd == kSunday) d = n == dim ? n - 2 : n + 1;
      dom |= std::uint32_t{1} << d;
    }
  }

  std::uint32_t dow = 0;
  if (!e.dow_any) {
    const unsigned wd1 = weekday_of(y, m, 1);
    for (unsigned w = 0; w < 7; ++w) {
      const unsigned first = 1 + (w + 7 - wd1) % 7;  // the first weekday w of the month
      if (e.weekdays & (1u << w)) {
        for (unsigned d = first; d <= dim; d += 7) dow |= std::uint32_t{1} << d;
      }
      for (unsigned k = 1; k <= 5; ++k) {
        const unsigned d = first + 7 * (k - 1);
        if ((e.nth_of_weekday[w] & (1u << k)) && d <= dim) dow |= std::uint32_t{1} << d;
      }
      if (e.last_of_weekday & (1u << w)) dow |= std::uint32_t{1} << (first + 7 * ((dim - first) / 7));
    }
  }

  if (e.dom_any) return dow;
  if (e.dow_any) return dom;
  return dom | dow;  // Vixie: both restricted, either matches
}

// The lowest set bit of `mask` at or above `from`, or -1.
int next_bit(std::uint64_t mask, int from) noexcept {
  if (from >= 64) return -1;
  const std::uint64_t above = mask >> from;
  return above == 0 ? -1 : from + std::countr_zero(above);
}

// The first day at or after `day`, not after `last`, on which `e` matches.
std::optional<date::local_days> next_day(const CronExpr& e, date::local_days day, date::local_days last) {
  const date::year_month_day ymd{day};
  date::year y = ymd.year();
  auto m = static_cast<unsigned>(ymd.month());
  auto d = static_cast<unsigned>(ymd.day());
  while (true) {
    const date::local_days first_of_month{y / date::month{m} / 1};
    if (first_of_month > last) return std::nullopt;
    if (e.months & (1u << m)) {
      const std::uint32_t days = matching_days(e, y, date::month{m}) & ~((std::uint32_t{1} << d) - 1);
      if (days != 0) {
        const date::local_days found = first_of_month + date::days{std::countr_zero(days) - 1};
        if (found > last) return std::nullopt;
        return found;
      }
    }
    d = 1;
    if (++m == 13) {
      m = 1;
      y += date::years{1};
    }
  }
}

// The first time of day at or after `from` that `e` allows (hour, minute, second), or nullopt.
std::optional<seconds> next_time_of_day(const CronExpr& e, seconds from) {
  const auto s = static_cast<int>(from.count());
  const int h0 = s / 3600, m0 = s / 60 % 60, s0 = s % 60;
  for (int h = next_bit(e.hours, h0); h >= 0; h = next_bit(e.hours, h + 1)) {
    for (int mi = next_bit(e.minutes, h == h0 ? m0 : 0); mi >= 0; mi = next_bit(e.minutes, mi + 1)) {
      const int sec = next_bit(e.seconds, h == h0 && mi == m0 ? s0 : 0);
      if (sec >= 0) return seconds{h * 3600 + mi * 60 + sec};
    }
  }
  return std::nullopt;
}

// The first local time at or after `from`, on a day not after `last`, that `e` matches.
std::optional<LocalSeconds> next_local(const CronExpr& e, LocalSeconds from, date::local_days last) {
  date::local_days day = date::floor<date::days>(from);
  seconds tod = from - day;
  while (day <= last) {
    const auto found = next_day(e, day, last);
    if (!found) return std::nullopt;
    if (*found != day) {
      day = *found;
      tod = seconds{0};
    }
    if (const auto t = next_time_of_day(e, tod)) return day + *t;
    day += date::days{1};
    tod = seconds{0};
  }
  return std::nullopt;
}

// The instant of local time `l` by the header's rules: a gap's local times are the gap's end,
// an overlap's are their first pass.
SysSeconds to_instant(LocalSeconds l, const date::time_zone* zone) {
  if (zone == nullptr) return SysSeconds{l.time_since_epoch()};
  const date::local_info info = zone->get_info(l);
  if (info.result == date::local_info::nonexistent) return info.first.end;
  return SysSeconds{l.time_since_epoch()} - info.first.offset;  // unique, or the first of two
}

LocalSeconds to_local(SysSeconds t, const date::time_zone* zone) {
  if (zone == nullptr) return LocalSeconds{t.time_since_epoch()};
  return zone->to_local(t);
}

// 0001-01-01T00:00:00Z and the end of kMaxYear: the instants next_after works between, which
// keeps every day count inside date::days (an int).
const SysSeconds kFirstInstant = date::sys_days{date::year{1} / 1 / 1};
const SysSeconds kLastInstant = date::sys_days{date::year{kMaxYear} / 12 / 31} + date::days{1} - seconds{1};

}  // namespace

ParsedCron parse_cron(std::string_view text) {
  if (text.size() > kMaxCronText) {
    return {std::nullopt, "cron expression longer than " + std::to_string(kMaxCronText) + " bytes (" +
                              std::to_string(text.size()) + ")"};
  }
  try {
    return {parse_fields(text), {}};
  } catch (BadCron& bad) {
    return {std::nullopt, std::move(bad.message)};
  }
}

const date::time_zone* find_zone(std::string_view name) {
  if (name.empty()) return nullptr;
  try {
    return date::locate_zone(name);
  } catch (const std::runtime_error&) {  // unknown name, or no tz database at all
    return nullptr;
  }
}

std::optional<Instant> next_after(const CronExpr& expr, Instant after, const date::time_zone* zone) {
  if (after >= kLastInstant) return std::nullopt;
  // Every occurrence is a whole second: the candidates start at the first one after `after`.
  // Starting from the local time of floor(after), not of floor(after) + 1 s, keeps a spring gap
  // that ends exactly at floor(after) + 1 s in view: its local times fire at that instant.
  const SysSeconds floor_after = std::max(date::floor<seconds>(after), kFirstInstant - seconds{1});
  LocalSeconds from = to_local(floor_after, zone) + seconds{1};
  const date::local_days last =
      std::min(date::floor<date::days>(from) + date::days{146097}, date::local_days{date::year{kMaxYear} / 12 / 31});
  static_assert(kSearchYears == 400, "146097 days are 400 Gregorian years");
  while (true) {
    const auto local = next_local(expr, from, last);
    if (!local) return std::nullopt;
    const SysSeconds at = to_instant(*local, zone);
    if (at > after) return Instant{at};
    // Only the first pass of an autumn overlap maps to instants before `after` when `after` is
    // in the second pass: go on from the end of the overlap.
    from = *local + seconds{1};
    if (zone != nullptr) {
      const date::local_info info = zone->get_info(*local);
      if (info.result == date::local_info::ambiguous) {
        from = std::max(from, LocalSeconds{(info.first.end + info.first.offset).time_since_epoch()});
      }
    }
  }
}

std::vector<Instant> next_n(const CronExpr& expr, Instant after, const date::time_zone* zone, std::size_t n) {
  std::vector<Instant> out;
  out.reserve(std::min<std::size_t>(n, 1024));
  while (out.size() < n) {
    const auto next = next_after(expr, out.empty() ? after : out.back(), zone);
    if (!next) break;
    out.push_back(*next);
  }
  return out;
}

}  // namespace delayd::cron
