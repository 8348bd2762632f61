// parse_cron: every element of the grammar in cron/cron_expr.hpp, the limits, and the errors
// (each one printable line that names its field).
#include <string>
#include <string_view>

#include "tests/cron/cron_test_support.hpp"

using namespace delayd::cron;
using delayd::cron::testing::cron;

namespace {

std::uint64_t values(std::initializer_list<int> list) {
  std::uint64_t out = 0;
  for (int v : list) out |= std::uint64_t{1} << v;
  return out;
}

std::uint64_t range(int from, int to, int step = 1) {
  std::uint64_t out = 0;
  for (int v = from; v <= to; v += step) out |= std::uint64_t{1} << v;
  return out;
}

std::string error_of(std::string_view text) {
  const ParsedCron p = parse_cron(text);
  INFO("expression: '" << text << "'");
  REQUIRE_FALSE(p);
  REQUIRE_FALSE(p.error.empty());
  return p.error;
}

bool printable_line(const std::string& s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("five fields: minute hour day-of-month month day-of-week, second 0", "[unit][cron]") {
  const CronExpr e = cron("5 4 3 2 1");
  CHECK_FALSE(e.with_seconds);
  CHECK(e.seconds == values({0}));
  CHECK(e.minutes == values({5}));
  CHECK(e.hours == values({4}));
  CHECK(e.days == values({3}));
  CHECK(e.months == values({2}));
  CHECK(e.weekdays == values({1}));
  CHECK_FALSE(e.dom_any);
  CHECK_FALSE(e.dow_any);
}

TEST_CASE("six fields put the second first", "[unit][cron]") {
  const CronExpr e = cron("6 5 4 3 2 1");
  CHECK(e.with_seconds);
  CHECK(e.seconds == values({6}));
  CHECK(e.minutes == values({5}));
  CHECK(e.hours == values({4}));
  CHECK(e.days == values({3}));
  CHECK(e.months == values({2}));
  CHECK(e.weekdays == values({1}));
  CHECK(cron("* * * * * *").seconds == range(0, 59));
}

TEST_CASE("star, ranges, steps and lists", "[unit][cron]") {
  const CronExpr all = cron("* * * * *");
  CHECK(all.minutes == range(0, 59));
  CHECK(all.hours == range(0, 23));
  CHECK(all.days == range(1, 31));
  CHECK(all.months == range(1, 12));
  CHECK(all.weekdays == range(0, 6));
  CHECK(all.dom_any);
  CHECK(all.dow_any);

  CHECK(cron("10-20 * * * *").minutes == range(10, 20));
  CHECK(cron("*/15 * * * *").minutes == values({0, 15, 30, 45}));
  CHECK(cron("* */7 * * *").hours == values({0, 7, 14, 21}));
  CHECK(cron("* * */10 * *").days == values({1, 11, 21, 31}));
  CHECK(cron("* * * */5 *").months == values({1, 6, 11}));
  CHECK(cron("9-17/2 * * * *").minutes == values({9, 11, 13, 15, 17}));
  CHECK(cron("5/20 * * * *").minutes == values({5, 25, 45}));
  CHECK(cron("* 20/2 * * *").hours == values({20, 22}));
  CHECK(cron("1,2,3,30-32/2,59 * * * *").minutes == values({1, 2, 3, 30, 32, 59}));
  CHECK(cron("0-10/60 * * * *").minutes == values({0}));  // a step as large as the field
  CHECK(cron("07 007 * * *").minutes == values({7}));     // leading zeros
  CHECK(cron("*/60 * * * *").minutes == values({0}));
  CHECK(cron("  1\t2  * * *  ").hours == values({2}));  // spaces and tabs separate
}

TEST_CASE("month and day names, in any case", "[unit][cron]") {
  CHECK(cron("0 0 1 JAN *").months == values({1}));
  CHECK(cron("0 0 1 jan,Feb,mAR,apr,may,jun,jul,aug,sep,oct,nov,DEC *").months == range(1, 12));
  CHECK(cron("0 0 1 MAR-MAY *").months == values({3, 4, 5}));
  CHECK(cron("0 0 1 JAN-DEC/3 *").months == values({1, 4, 7, 10}));
  CHECK(cron("0 0 * * SUN,mon,Tue,WED,thu,FRI,sat").weekdays == range(0, 6));
  CHECK(cron("0 0 * * MON-FRI").weekdays == range(1, 5));
  CHECK(cron("0 0 * * mon-fri/2").weekdays == values({1, 3, 5}));
  CHECK(cron("0 0 * * SUN/3").weekdays == values({0, 3, 6}));
}

TEST_CASE("day-of-week 7 is Sunday like 0, and a range may end at SUN", "[unit][cron]") {
  CHECK(cron("0 0 * * 7").weekdays == values({0}));
  CHECK(cron("0 0 * * 0").weekdays == values({0}));
  CHECK(cron("0 0 * * 0,7").weekdays == values({0}));
  CHECK(cron("0 0 * * 5-7").weekdays == values({5, 6, 0}));
  CHECK(cron("0 0 * * FRI-SUN").weekdays == values({5, 6, 0}));
  CHECK(cron("0 0 * * 5-0").weekdays == values({5, 6, 0}));
  CHECK(cron("0 0 * * 0-7").weekdays == range(0, 6));
  // * and a/n run over 0-7, as in cronie and croniter: 1/2 reaches 7, Sunday.
  CHECK(cron("0 0 * * */2").weekdays == values({0, 2, 4, 6}));
  CHECK(cron("0 0 * * */7").weekdays == values({0}));
  CHECK(cron("0 0 * * 1/2").weekdays == values({1, 3, 5, 0}));
  CHECK(cron("0 0 * * 2/2").weekdays == values({2, 4, 6}));
  CHECK(cron("0 0 * * 7/2").weekdays == values({0}));
}

TEST_CASE("? is * in the day fields", "[unit][cron]") {
  const CronExpr q = cron("0 0 ? * MON");
  CHECK(q.dom_any);
  CHECK_FALSE(q.dow_any);
  CHECK(q == cron("0 0 * * MON"));
  CHECK(cron("0 0 1 * ?") == cron("0 0 1 * *"));
  CHECK(cron("0 0 ? * ?") == cron("0 0 * * *"));
}

TEST_CASE("only a lone * or ? leaves a day field unrestricted", "[unit][cron]") {
  CHECK_FALSE(cron("0 0 */2 * *").dom_any);
  CHECK_FALSE(cron("0 0 1-31 * *").dom_any);
  CHECK_FALSE(cron("0 0 * * 0-6").dow_any);
  CHECK_FALSE(cron("0 0 * * */1").dow_any);
  CHECK(cron("0 0 * * *").dom_any);
}

TEST_CASE("L, LW and nW in day-of-month", "[unit][cron]") {
  const CronExpr l = cron("0 0 L * *");
  CHECK(l.last_day);
  CHECK(l.days == 0);
  CHECK_FALSE(l.dom_any);
  CHECK(cron("0 0 l * *").last_day);
  CHECK(cron("0 0 LW * *").last_weekday);
  CHECK(cron("0 0 lw * *").last_weekday);
  const CronExpr w = cron("0 0 15W * *");
  CHECK(w.nearest_weekdays == values({15}));
  CHECK(w.days == 0);
  CHECK(cron("0 0 1w,31W * *").nearest_weekdays == values({1, 31}));
  const CronExpr mixed = cron("0 0 1,15,L,10W * *");
  CHECK(mixed.days == values({1, 15}));
  CHECK(mixed.last_day);
  CHECK(mixed.nearest_weekdays == values({10}));
}

TEST_CASE("nL and n#k in day-of-week", "[unit][cron]") {
  const CronExpr last_friday = cron("0 0 * * 5L");
  CHECK(last_friday.last_of_weekday == values({5}));
  CHECK(last_friday.weekdays == 0);
  CHECK_FALSE(last_friday.dow_any);
  CHECK(cron("0 0 * * FRIL") == last_friday);
  CHECK(cron("0 0 * * fril") == last_friday);
  CHECK(cron("0 0 * * 7L").last_of_weekday == values({0}));
  CHECK(cron("0 0 * * 0L").last_of_weekday == values({0}));

  const CronExpr second_friday = cron("0 0 * * 5#2");
  CHECK(second_friday.nth_of_weekday[5] == values({2}));
  CHECK(second_friday.weekdays == 0);
  CHECK(cron("0 0 * * FRI#2") == second_friday);
  const CronExpr several = cron("0 0 * * 1#1,1#5,SUN#3,2L,3");
  CHECK(several.nth_of_weekday[1] == values({1, 5}));
  CHECK(several.nth_of_weekday[0] == values({3}));
  CHECK(several.last_of_weekday == values({2}));
  CHECK(several.weekdays == values({3}));
}

TEST_CASE("macros", "[unit][cron]") {
  CHECK(cron("@yearly") == cron("0 0 1 1 *"));
  CHECK(cron("@annually") == cron("0 0 1 1 *"));
  CHECK(cron("@monthly") == cron("0 0 1 * *"));
  CHECK(cron("@weekly") == cron("0 0 * * 0"));
  CHECK(cron("@daily") == cron("0 0 * * *"));
  CHECK(cron("@midnight") == cron("0 0 * * *"));
  CHECK(cron("@hourly") == cron("0 * * * *"));
  CHECK(cron("  @HOURLY ") == cron("0 * * * *"));
}

TEST_CASE("every error names its field, on one printable line", "[unit][cron]") {
  struct Case {
    const char* text;
    const char* message;  // the whole message
  };
  const Case cases[] = {
      {"60 * * * *", "minute: 60 is outside 0-59"},
      {"* 24 * * *", "hour: 24 is outside 0-23"},
      {"0 0 32 * *", "day-of-month: 32 is outside 1-31"},
      {"0 0 0 * *", "day-of-month: 0 is outside 1-31"},
      {"0 0 * 13 *", "month: 13 is outside 1-12"},
      {"0 0 * 0 *", "month: 0 is outside 1-12"},
      {"0 0 * * 8", "day-of-week: 8 is outside 0-7"},
      {"60 0 0 * * *", "second: 60 is outside 0-59"},
      {"99999999999999999999 * * * *", "minute: 99999999999999999999 is outside 0-59"},
      {"* 22-2 * * *", "hour: range 22-2 runs backwards (write it as two ranges)"},
      {"*/0 * * * *", "minute: step 0 is outside 1-60"},
      {"* * * */13 *", "month: step 13 is outside 1-12"},
      {"* * * * */8", "day-of-week: step 8 is outside 1-7"},
      {"*/ * * * *", "minute: '*/': a step needs a number after '/'"},
      {"5x * * * *", "minute: '5x' is not a number, range, step or list"},
      {"abc * * * *", "minute: 'abc' is not a number, range, step or list"},
      {"0 0 * FOO *", "month: 'FOO' is not a month name (JAN-DEC)"},
      {"0 0 * JAN-FOO *", "month: 'JAN-FOO': 'FOO' is not a month name (JAN-DEC)"},
      {"0 0 * * FOO", "day-of-week: 'FOO' is not a day name (SUN-SAT)"},
      {"0 0 * * MONDAY", "day-of-week: 'MONDAY' is not a number, range, step or list (also ?, SUN-SAT, nL, n#k)"},
      {"0 0 * * FRI-MON", "day-of-week: range FRI-MON runs backwards (write it as two ranges)"},
      {"0 0 1,,2 * *", "day-of-month: empty list item in '1,,2'"},
      {"0 0 1, * *", "day-of-month: empty list item in '1,'"},
      {"? 0 * * *", "minute: '?' is only allowed in day-of-month and day-of-week"},
      {"0 0 ?,1 * *", "day-of-month: '?' must stand alone"},
      {"0 0 * * L", "day-of-week: a bare L is not allowed (Quartz reads it as SAT); for the last weekday n write nL"},
      {"0 0 L-3 * *", "day-of-month: 'L-3' is not supported (only L, LW and nW)"},
      {"0 L * * *", "hour: L is only allowed in day-of-month and day-of-week"},
      {"0 0 15W * 1W", "day-of-week: '1W' is not a number, range, step or list (also ?, SUN-SAT, nL, n#k)"},
      {"0 0 * * 5#6", "day-of-week: '5#6': the k of n#k must be 1-5"},
      {"0 0 * * 5#0", "day-of-week: '5#0': the k of n#k must be 1-5"},
      {"0 0 * * 5#", "day-of-week: '5#': '#' needs a number 1-5 after it"},
      {"0 0 * * 1-5#2", "day-of-week: '1-5#2' is not a number, range, step or list (also ?, SUN-SAT, nL, n#k)"},
      {"0 0 32W * *", "day-of-month: 32 is outside 1-31"},
      {"", "empty cron expression"},
      {"   ", "empty cron expression"},
      {"* * * *", "expected 5 fields (minute hour day-of-month month day-of-week) or 6 (second first), found 4"},
      {"* * * * * * *", "expected 5 fields (minute hour day-of-month month day-of-week) or 6 (second first), found 7"},
      {"@reboot", "unknown macro '@reboot' (known: @yearly @annually @monthly @weekly @daily @midnight @hourly)"},
      {"@daily 5", "expected 5 fields (minute hour day-of-month month day-of-week) or 6 (second first), found 2"},
      {"0 0 * * 1\n", "day-of-week: '1\\x0a' is not a number, range, step or list (also ?, SUN-SAT, nL, n#k)"},
      {"0 0 * * \xff", "day-of-week: '\\xff' is not a number, range, step or list (also ?, SUN-SAT, nL, n#k)"},
  };
  for (const Case& c : cases) {
    const std::string error = error_of(c.text);
    INFO("expression: '" << c.text << "'");
    CHECK(error == c.message);
    CHECK(printable_line(error));
  }
}

TEST_CASE("the input is bounded: kMaxCronText bytes, kMaxListItems items a field", "[unit][cron]") {
  std::string longest = "0 0 * * *";
  longest.append(kMaxCronText - longest.size(), ' ');
  CHECK(parse_cron(longest));
  CHECK(error_of(longest + " ") == "cron expression longer than 256 bytes (257)");

  std::string items;
  for (std::size_t i = 0; i < kMaxListItems; ++i) items += (i ? "," : "") + std::to_string(i % 60);
  CHECK(parse_cron(items + " * * * *"));
  CHECK(error_of(items + ",1 * * * *") == "minute: more than 64 list items");

  // A long token is cut in the message, which stays one short line.
  const std::string long_token(200, 'x');
  CHECK(error_of(long_token + " * * * *") ==
        "minute: 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...' is not a number, range, step or list");
}
