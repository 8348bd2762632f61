// next_after (the fast path) against next_after_slow (cron/cron_reference.hpp: every second
// tried, each rule written out directly) on seeded random expressions, zones and instants, half
// of them just before a daylight-saving transition. For every case: the fast answer equals the
// first second the slow model fires at within the window, or lies beyond the window when the
// model finds none; the fast answer fires by fires_at; and so does the answer after it.
//
// Scale: DELAYD_CRON_DIFF_CASES sets the number of cases (default 3000, two seconds; 300 in the
// sanitizer builds, where the second-by-second model runs thirty times slower);
// DELAYD_CRON_DIFF_SEED another seed; DELAYD_CRON_DIFF_VERBOSE=1 prints what was covered. A
// failure prints the expression, zone and instant.
#include <chrono>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cron/cron_reference.hpp"
#include "tests/cron/cron_test_support.hpp"

using namespace delayd::cron;
using delayd::cron::testing::show;

namespace {

using std::chrono::hours;
using std::chrono::seconds;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__)
constexpr std::size_t kDefaultCases = 300;
#else
constexpr std::size_t kDefaultCases = 3000;
#endif

std::size_t env_or(const char* name, std::size_t fallback) {
  if (const char* v = std::getenv(name)) {
    const long long n = std::atoll(v);
    if (n > 0) return static_cast<std::size_t>(n);
  }
  return fallback;
}

class Generator {
 public:
  explicit Generator(std::uint64_t seed) : rng_(seed) {}

  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(int percent) { return pick(1, 100) <= percent; }

  // A random expression: mostly frequent (so that the slow model finds the answer within its
  // window), with every grammar element appearing.
  std::string expression() {
    std::ostringstream out;
    const bool six = chance(35);
    if (six) out << plain(0, 59, 40) << ' ';
    out << plain(0, 59, 30) << ' ' << plain(0, 23, 45) << ' ' << day_of_month() << ' ' << month() << ' '
        << day_of_week();
    return out.str();
  }

  std::mt19937_64& rng() { return rng_; }

 private:
  // A number, range, step or list over lo..hi; `star` percent of the time "*".
  std::string plain(int lo, int hi, int star) {
    if (chance(star)) return "*";
    const int items = chance(70) ? 1 : pick(2, 4);
    std::string out;
    for (int i = 0; i < items; ++i) {
      if (i) out += ',';
      out += item(lo, hi);
    }
    return out;
  }

  std::string item(int lo, int hi) {
    const int a = pick(lo, hi);
    const int b = pick(a, hi);
    const int step = pick(1, std::max(1, (hi - lo + 1) / 2));
    switch (pick(0, 4)) {
      case 0:
        return std::to_string(a);
      case 1:
        return std::to_string(a) + "-" + std::to_string(b);
      case 2:
        return "*/" + std::to_string(step);
      case 3:
        return std::to_string(a) + "-" + std::to_string(b) + "/" + std::to_string(step);
      default:
        return std::to_string(a) + "/" + std::to_string(step);
    }
  }

  std::string day_of_month() {
    if (chance(55)) return chance(80) ? "*" : "?";
    const int items = chance(70) ? 1 : pick(2, 3);
    std::string out;
    for (int i = 0; i < items; ++i) {
      if (i) out += ',';
      switch (pick(0, 5)) {
        case 0:
          out += "L";
          break;
        case 1:
          out += "LW";
          break;
        case 2:
          out += std::to_string(pick(1, 31)) + "W";
          break;
        default:
          out += item(1, 31);
      }
    }
    return out;
  }

  std::string month() {
    static const char* names[] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
    if (chance(70)) return "*";
    if (chance(30)) return std::string(names[pick(0, 11)]) + "-" + "DEC";
    return plain(1, 12, 0);
  }

  std::string day_of_week() {
    static const char* names[] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};
    if (chance(55)) return chance(80) ? "*" : "?";
    const int items = chance(70) ? 1 : pick(2, 3);
    std::string out;
    for (int i = 0; i < items; ++i) {
      if (i) out += ',';
      switch (pick(0, 6)) {
        case 0:
          out += std::to_string(pick(0, 7)) + "L";
          break;
        case 1:
          out += std::string(names[pick(0, 6)]) + "#" + std::to_string(pick(1, 5));
          break;
        case 2:
          out += std::string(names[pick(1, 5)]) + "-" + (chance(50) ? "SUN" : "SAT");
          break;
        case 3:
          out += std::to_string(pick(0, 7));
          break;
        default:
          out += item(0, 6);
      }
    }
    return out;
  }

  std::mt19937_64 rng_;
};

struct Zone {
  const char* name;
  const date::time_zone* tz;                   // nullptr: UTC
  std::vector<date::sys_seconds> transitions;  // 2026-2027
};

std::vector<Zone> zones() {
  // Hour shifts (Berlin, New York, London, Santiago: southern), half-hour (Lord Howe), 2 h
  // (Troll), odd offsets (Kathmandu +05:45, St Johns -03:30, Chatham +12:45/+13:45), none
  // (Tokyo, Sao Paulo since 2019), and Casablanca's Ramadan shift.
  const char* names[] = {"Europe/Berlin",    "America/New_York", "Australia/Lord_Howe", "Asia/Tokyo",
                         "Europe/London",    "America/Santiago", "Antarctica/Troll",    "Asia/Kathmandu",
                         "America/St_Johns", "Pacific/Chatham",  "America/Sao_Paulo",   "Africa/Casablanca"};
  std::vector<Zone> out{{"UTC", nullptr, {}}};
  for (const char* name : names) {
    Zone z{name, testing::zone(name), {}};
    for (auto t = date::sys_seconds{date::sys_days{date::year{2026} / 1 / 1}};
         t < date::sys_days{date::year{2028} / 1 / 1};) {
      const date::sys_info info = z.tz->get_info(t);
      if (info.end >= date::sys_days{date::year{2028} / 1 / 1}) break;
      z.transitions.push_back(info.end);
      t = info.end;
    }
    out.push_back(std::move(z));
  }
  return out;
}

}  // namespace

TEST_CASE("next_after equals the second-by-second reference on random cases", "[unit][cron][diff]") {
  const std::size_t cases = env_or("DELAYD_CRON_DIFF_CASES", kDefaultCases);
  const std::uint64_t seed = env_or("DELAYD_CRON_DIFF_SEED", 20260329);
  const seconds window = hours{36};
  Generator gen(seed);
  const std::vector<Zone> all_zones = zones();
  std::size_t checked = 0, near_transition = 0, beyond_window = 0, never = 0, mismatches = 0;

  for (std::size_t i = 0; i < cases; ++i) {
    const std::string text = gen.expression();
    const ParsedCron parsed = parse_cron(text);
    INFO("case " << i << ": '" << text << "': " << parsed.error);
    REQUIRE(parsed);
    const CronExpr& e = *parsed.expr;
    const Zone& z = all_zones[static_cast<std::size_t>(gen.pick(0, static_cast<int>(all_zones.size()) - 1))];

    Instant after;
    if (!z.transitions.empty() && gen.chance(50)) {
      ++near_transition;
      const auto t = z.transitions[static_cast<std::size_t>(gen.pick(0, static_cast<int>(z.transitions.size()) - 1))];
      after = Instant{t} - std::chrono::milliseconds{gen.pick(0, 3 * 3600 * 1000)};
    } else {
      const auto from = date::sys_days{date::year{2020} / 1 / 1}.time_since_epoch();
      const auto to = date::sys_days{date::year{2037} / 1 / 1}.time_since_epoch();
      std::uniform_int_distribution<std::int64_t> ms(std::chrono::milliseconds{from}.count(),
                                                     std::chrono::milliseconds{to}.count());
      after = Instant{std::chrono::milliseconds{ms(gen.rng())}};
      if (gen.chance(30)) after = date::floor<seconds>(after);  // whole seconds, as chained calls pass
    }

    // Two steps: from `after`, and from the answer.
    for (int step = 0; step < 2; ++step) {
      INFO("zone " << z.name << ", after " << show(after) << " (step " << step << ")");
      const auto fast = next_after(e, after, z.tz);
      const auto slow = next_after_slow(e, after, z.tz, window);
      ++checked;
      bool ok = true;
      if (slow) {
        ok = fast == slow;
      } else {
        ok = !fast || *fast > after + window;
        if (fast)
          ++beyond_window;
        else
          ++never;
      }
      if (fast && !fires_at(e, date::floor<seconds>(*fast), z.tz)) ok = false;
      if (!ok) {
        ++mismatches;
        CHECK(fast == slow);  // prints both
        if (mismatches > 20) FAIL("more than 20 mismatches");
      }
      if (!fast) break;
      after = *fast;
    }
  }
  CHECK(mismatches == 0);
  CHECK(checked >= cases);
  if (std::getenv("DELAYD_CRON_DIFF_VERBOSE") != nullptr) {
    WARN("cron reference diff: " << checked << " checks, " << near_transition << " cases near a transition, "
                                 << beyond_window << " answers beyond the window, " << never << " never");
  }
}
