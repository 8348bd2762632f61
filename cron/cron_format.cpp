#include "cron/cron_format.hpp"

#include <date/date.h>
#include <date/tz.h>

#include <cstdio>
#include <cstdlib>

namespace delayd::cron {

std::chrono::seconds utc_offset(Instant at, const date::time_zone* zone) {
  if (zone == nullptr) return std::chrono::seconds(0);
  return zone->get_info(std::chrono::floor<std::chrono::seconds>(at)).offset;
}

std::string format_in_zone(Instant at, const date::time_zone* zone) {
  const std::chrono::seconds offset = utc_offset(at, zone);
  const auto local = at + offset;  // still a sys_time: the calendar fields of the local time
  const auto day = std::chrono::floor<date::days>(local);
  const date::year_month_day ymd{day};
  const date::hh_mm_ss<std::chrono::milliseconds> tod{local - day};
  char buf[64];
  int n = std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02d", static_cast<int>(ymd.year()),
                        static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                        static_cast<int>(tod.hours().count()), static_cast<int>(tod.minutes().count()),
                        static_cast<int>(tod.seconds().count()));
  std::string out(buf, static_cast<std::size_t>(n));
  if (tod.subseconds().count() != 0) {
    n = std::snprintf(buf, sizeof buf, ".%03d", static_cast<int>(tod.subseconds().count()));
    out.append(buf, static_cast<std::size_t>(n));
  }
  if (offset.count() == 0) return out + "Z";
  const long long minutes = std::llabs(offset.count()) / 60;
  n = std::snprintf(buf, sizeof buf, "%c%02lld:%02lld", offset.count() < 0 ? '-' : '+', minutes / 60, minutes % 60);
  return out.append(buf, static_cast<std::size_t>(n));
}

}  // namespace delayd::cron
