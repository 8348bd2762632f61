// cron::parse_cron on the fuzzer's bytes, and next_after on what parses.
//
// The parser is total: every input gives an expression or an error, never an exception (but
// std::bad_alloc), and the same input the same answer. An error is one printable line (ASCII
// 0x20-0x7e, at most 300 bytes) that starts with the field it is about ("day-of-month: ...") or
// is one of the messages about the whole expression.
//
// For an expression, a zone and an instant are picked from a hash of the input (so the corpus
// stays plain text): UTC, Europe/Berlin, America/New_York, Australia/Lord_Howe or Asia/Tokyo,
// and an instant of 2020-2036, half the time within three hours before one of the zone's DST
// transitions of 2026-2027. Then next_after's answer is strictly after the instant, a whole
// second, fires by the reference model (fires_at), and equals the reference's
// second-by-second search (next_after_slow) within one hour; next_n's three answers increase.
#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cron/cron_expr.hpp"
#include "cron/cron_reference.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace {

using delayd::cron::Instant;
using std::chrono::milliseconds;
using std::chrono::seconds;

bool printable_line(const std::string& s) {
  if (s.empty() || s.size() > 300) return false;
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) return false;
  }
  return true;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

bool names_its_subject(std::string_view error) {
  for (std::string_view field : {"second: ", "minute: ", "hour: ", "day-of-month: ", "month: ", "day-of-week: "}) {
    if (starts_with(error, field)) return true;
  }
  for (std::string_view whole :
       {"empty cron expression", "expected 5 fields ", "unknown macro ", "cron expression longer than "}) {
    if (starts_with(error, whole)) return true;
  }
  return false;
}

struct Zone {
  const date::time_zone* tz;  // nullptr: UTC
  std::vector<date::sys_seconds> transitions;
};

std::array<Zone, 5> load_zones() {
  std::array<Zone, 5> out{};
  const char* names[] = {"Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Tokyo"};
  const date::sys_seconds from = date::sys_days{date::year{2026} / 1 / 1};
  const date::sys_seconds to = date::sys_days{date::year{2028} / 1 / 1};
  for (std::size_t i = 0; i < 4; ++i) {
    out[i + 1].tz = delayd::cron::find_zone(names[i]);
    FUZZ_CHECK(out[i + 1].tz != nullptr);
    for (date::sys_seconds t = from; t < to;) {
      const date::sys_info info = out[i + 1].tz->get_info(t);
      if (info.end >= to) break;
      out[i + 1].transitions.push_back(info.end);
      t = info.end;
    }
  }
  return out;
}

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 14695981039346656037ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::array<Zone, 5> zones = load_zones();
  const std::string_view text = delayd::fuzz::bytes(data, size);

  const delayd::cron::ParsedCron parsed = delayd::cron::parse_cron(text);
  FUZZ_CHECK(parsed.expr.has_value() == parsed.error.empty());
  const delayd::cron::ParsedCron again = delayd::cron::parse_cron(text);
  FUZZ_CHECK(again.expr == parsed.expr && again.error == parsed.error);
  if (!parsed) {
    FUZZ_CHECK(printable_line(parsed.error));
    FUZZ_CHECK(names_its_subject(parsed.error));
    return 0;
  }
  const delayd::cron::CronExpr& e = *parsed.expr;

  std::uint64_t h = fnv1a(text);
  const Zone& zone = zones[h % zones.size()];
  h /= zones.size();
  Instant after;
  if (!zone.transitions.empty() && (h & 1) != 0) {
    h >>= 1;
    const date::sys_seconds t = zone.transitions[h % zone.transitions.size()];
    h /= zone.transitions.size();
    after = Instant{t} - milliseconds{static_cast<std::int64_t>(h % (3 * 3600 * 1000))};
  } else {
    h >>= 1;
    const Instant from{date::sys_days{date::year{2020} / 1 / 1}};
    const Instant to{date::sys_days{date::year{2037} / 1 / 1}};
    after = from + milliseconds{static_cast<std::int64_t>(h % static_cast<std::uint64_t>((to - from).count()))};
  }

  const std::optional<Instant> next = delayd::cron::next_after(e, after, zone.tz);
  const std::optional<Instant> slow = delayd::cron::next_after_slow(e, after, zone.tz, std::chrono::hours{1});
  if (slow) {
    FUZZ_CHECK(next == slow);
  } else {
    FUZZ_CHECK(!next || *next > after + std::chrono::hours{1});
  }
  if (next) {
    FUZZ_CHECK(*next > after);
    FUZZ_CHECK(date::floor<seconds>(*next) == *next);
    FUZZ_CHECK(delayd::cron::fires_at(e, date::floor<seconds>(*next), zone.tz));
  }
  const std::vector<Instant> three = delayd::cron::next_n(e, after, zone.tz, 3);
  FUZZ_CHECK(three.empty() == !next);
  for (std::size_t i = 0; i < three.size(); ++i) FUZZ_CHECK(three[i] > (i == 0 ? after : three[i - 1]));
  return 0;
}
