#include "cron/cron_reference.hpp"

#include <date/date.h>

namespace delayd::cron {

namespace {

using std::chrono::seconds;

bool has(std::uint64_t mask, unsigned bit) { return ((mask >> bit) & 1) != 0; }

struct Day {
  date::year_month_day ymd;
  unsigned day;      // 1-31
  unsigned last;     // the month's last day
  unsigned weekday;  // 0 = Sunday
};

unsigned weekday_of(const date::year_month_day& ymd) { return date::weekday{date::sys_days{ymd}}.c_encoding(); }

bool is_monday_to_friday(const date::year_month_day& ymd) {
  const unsigned w = weekday_of(ymd);
  return w >= 1 && w <= 5;
}

date::year_month_day day_in_month(const Day& d, unsigned n) {
  return date::year_month_day{d.ymd.year(), d.ymd.month(), date::day{n}};
}

// LW: the largest day of the month that is Monday to Friday.
unsigned last_weekday_of_month(const Day& d) {
  unsigned n = d.last;
  while (!is_monday_to_friday(day_in_month(d, n))) --n;
  return n;
}

// nW: among the month's Monday-to-Friday days, the one closest to day n (never a tie: the two
// days at distance 1 from a Saturday or a Sunday are never both weekdays).
unsigned nearest_weekday_in_month(const Day& d, unsigned n) {
  for (unsigned dist = 0;; ++dist) {
    if (n > dist && is_monday_to_friday(day_in_month(d, n - dist))) return n - dist;
    if (n + dist <= d.last && is_monday_to_friday(day_in_month(d, n + dist))) return n + dist;
  }
}

bool day_of_month_matches(const CronExpr& e, const Day& d) {
  if (has(e.days, d.day)) return true;
  if (e.last_day && d.day == d.last) return true;
  if (e.last_weekday && d.day == last_weekday_of_month(d)) return true;
  for (unsigned n = 1; n <= d.last; ++n) {
    if (has(e.nearest_weekdays, n) && nearest_weekday_in_month(d, n) == d.day) return true;
  }
  return false;
}

bool day_of_week_matches(const CronExpr& e, const Day& d) {
  if (has(e.weekdays, d.weekday)) return true;
  const unsigned k = (d.day - 1) / 7 + 1;  // the k-th such weekday of the month
  if (has(e.nth_of_weekday[d.weekday], k)) return true;
  return has(e.last_of_weekday, d.weekday) && d.day + 7 > d.last;
}

bool day_matches(const CronExpr& e, const Day& d) {
  if (e.dom_any && e.dow_any) return true;
  if (e.dom_any) return day_of_week_matches(e, d);
  if (e.dow_any) return day_of_month_matches(e, d);
  return day_of_month_matches(e, d) || day_of_week_matches(e, d);
}

date::local_seconds local_of(date::sys_seconds t, seconds offset) {
  return date::local_seconds{(t + offset).time_since_epoch()};
}

// fires_at for an instant inside `info`, whose previous period is `prev`.
bool fires_in(const CronExpr& e, date::sys_seconds t, const date::sys_info& info, const date::sys_info& prev) {
  const date::local_seconds local = local_of(t, info.offset);
  // The clocks went back at info.begin: local times below the previous period's last one were
  // all shown before, and fired then if they match.
  if (prev.offset > info.offset && local < local_of(info.begin, prev.offset)) return false;
  if (matches_local(e, local)) return true;
  // The clocks went forward at info.begin: the local times they skipped fire now.
  if (t == info.begin && prev.offset < info.offset) {
    for (date::local_seconds g = local_of(info.begin, prev.offset); g < local; g += seconds{1}) {
      if (matches_local(e, g)) return true;
    }
  }
  return false;
}

}  // namespace

bool matches_local(const CronExpr& e, date::local_seconds t) {
  const date::local_days day = date::floor<date::days>(t);
  const date::hh_mm_ss<seconds> tod{t - day};
  if (!has(e.seconds, static_cast<unsigned>(tod.seconds().count()))) return false;
  if (!has(e.minutes, static_cast<unsigned>(tod.minutes().count()))) return false;
  if (!has(e.hours, static_cast<unsigned>(tod.hours().count()))) return false;
  const date::year_month_day ymd{day};
  if (!has(e.months, static_cast<unsigned>(ymd.month()))) return false;
  const Day d{ymd, static_cast<unsigned>(ymd.day()),
              static_cast<unsigned>((ymd.year() / ymd.month() / date::last).day()), weekday_of(ymd)};
  return day_matches(e, d);
}

bool fires_at(const CronExpr& e, date::sys_seconds t, const date::time_zone* zone) {
  if (zone == nullptr) return matches_local(e, local_of(t, seconds{0}));
  const date::sys_info info = zone->get_info(t);
  return fires_in(e, t, info, zone->get_info(info.begin - seconds{1}));
}

std::optional<Instant> next_after_slow(const CronExpr& e, Instant after, const date::time_zone* zone, seconds window) {
  date::sys_seconds t = date::floor<seconds>(after) + seconds{1};
  const Instant end = after + window;
  if (zone == nullptr) {
    for (; t <= end; t += seconds{1}) {
      if (matches_local(e, local_of(t, seconds{0}))) return Instant{t};
    }
    return std::nullopt;
  }
  while (t <= end) {
    const date::sys_info info = zone->get_info(t);
    const date::sys_info prev = zone->get_info(info.begin - seconds{1});
    for (; t < info.end && t <= end; t += seconds{1}) {
      if (fires_in(e, t, info, prev)) return Instant{t};
    }
  }
  return std::nullopt;
}

}  // namespace delayd::cron
