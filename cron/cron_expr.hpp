// Cron expressions: what a calendar schedule says, and the next instant it names in a time zone.
//
// ------------------------------------------------------------------------------------------
// Purpose
// ------------------------------------------------------------------------------------------
// A repeat header `repeat-cron: 0 9 * * MON-FRI` with `repeat-tz: Europe/Berlin` means "09:00
// Berlin time on weekdays". This room turns the text into a CronExpr (parse_cron) and answers
// "when is the first occurrence strictly after instant t?" (next_after). It reads no clock (the
// caller passes `after`) and does no I/O of its own: a zone is a `const date::time_zone*` the
// caller looked up (find_zone), and the only file reads are the tz library's, when it opens the
// tz database on the first find_zone and a zone's rules on that zone's first use.
//
// ------------------------------------------------------------------------------------------
// Grammar
// ------------------------------------------------------------------------------------------
// Five fields, or six with SECONDS FIRST (as Quartz, Spring and BullMQ's cron-parser; note that
// Python's croniter puts a sixth field last), separated by spaces or tabs:
//
//     [second] minute hour day-of-month month day-of-week
//
//     field          values          names      also
//     second         0-59                       (absent: 0)
//     minute         0-59
//     hour           0-23
//     day-of-month   1-31                       ?  L  LW  nW
//     month          1-12            JAN-DEC
//     day-of-week    0-7 (0, 7: SUN) SUN-SAT    ?  nL  n#k
//
//     form     example      means
//     *        *            every value of the field
//     a        5            that value
//     a-b      MON-FRI      a to b inclusive; a <= b, except that a day-of-week range may end at
//                           SUN or 0, meaning 7 (FRI-SUN is Friday, Saturday, Sunday)
//     */n      */15         every n-th value from the field's first: 0,15,30,45
//     a-b/n    9-17/2       every n-th value from a to b: 9,11,13,15,17
//     a/n      5/20         every n-th value from a to the field's last: 5,25,45
//     x,y,...  1,15,L       any of the items (each item any form above or below)
//     ?        ?            day-of-month and day-of-week only: the same as * (Quartz's
//                           "no value"); must stand alone
//     L        L            day-of-month: the last day of the month
//     LW       LW           day-of-month: the last weekday (Mon-Fri) of the month
//     nW       15W          day-of-month: the weekday nearest to day n, within the month: a
//                           Saturday moves to Friday, a Sunday to Monday, but 1W on a Saturday
//                           is Monday the 3rd and a Sunday that ends the month is the Friday
//                           before; no match in a month without day n (31W in April)
//     nL       5L, FRIL     day-of-week: the last weekday n of the month (5L: last Friday)
//     n#k      5#2, FRI#2   day-of-week: the k-th weekday n of the month, k in 1-5 (no match in
//                           a month with fewer than k)
//
//     @yearly, @annually = 0 0 1 1 *     @monthly = 0 0 1 * *     @weekly = 0 0 * * 0
//     @daily, @midnight  = 0 0 * * *     @hourly  = 0 * * * *
//
// Names and letters are case-insensitive. In day-of-week, * and a/n run over 0-7, as in cronie
// and croniter: */2 is SUN,TUE,THU,SAT, and 1/2 is MON,WED,FRI and SUN (7). Steps are 1 to the
// field's number of values (60, 24, 31, 12, 7). Anything else is an error: a range that runs backwards (22-2: write
// 22-23,0-2), a value out of range, L in a field other than the two day fields, Quartz's L-3 or a bare L in day-of-week
// (Quartz reads it as Saturday, which nobody means), @reboot.
//
// Limits, checked before anything else: at most kMaxCronText bytes, at most kMaxListItems
// items per field. Every error is one printable line that starts with the field it is about,
// "day-of-month: 32 is outside 1-31", or says what is wrong with the whole ("expected 5 or 6
// fields ..."); bytes that are not printable ASCII are shown as \xNN.
//
// ------------------------------------------------------------------------------------------
// Day-of-month and day-of-week: Vixie cron's rule
// ------------------------------------------------------------------------------------------
// When both day fields are restricted, a day matches if EITHER matches: `0 0 1,15 * MON` runs
// on the 1st, the 15th and every Monday. When one of them is a lone * or ?, only the other
// decides: `0 0 * * MON` is every Monday. Why: it is what crontab(5) has meant since Vixie cron
// and what cronie and croniter do, so a schedule copied from a crontab keeps its meaning; and a
// Quartz expression, which always has ? in one of the two, means the same as in Quartz. Only a
// lone * or ? counts as unrestricted: `*/2` restricts the field (as in croniter; Vixie cron,
// looking only at the first character, treats `*/2` as *), and so does `1-31` (croniter, which
// compares the set of days, treats that one as *).
//
// ------------------------------------------------------------------------------------------
// Time zones and daylight saving, as classic cron does it
// ------------------------------------------------------------------------------------------
// The fields are matched against the wall clock of the zone (an IANA name such as
// Europe/Berlin, from the system's tz database through Howard Hinnant's date/tz; nullptr means
// UTC). Each matching local time becomes an instant:
//
//   - A local time that happens once is that instant.
//   - Spring gap: a local time that does not exist fires at the first instant after the gap.
//     Europe/Berlin on 2026-03-29 jumps from 02:00 CET to 03:00 CEST at 01:00Z, so
//     `30 2 * * *` fires at 2026-03-29T03:00:00+02:00 = 01:00:00Z, and the next day at
//     02:30+02:00 again. All local times of the gap land on that one instant, and occurrences
//     that land on one instant are one delivery: `*/15 2 * * *` (02:00, 02:15, 02:30, 02:45)
//     fires once, at 01:00Z, and so does `0 * * * *` for 02:00 and 03:00.
//   - Autumn overlap: a local time that happens twice fires once, at its FIRST instant.
//     Europe/Berlin on 2026-10-25 goes back from 03:00 CEST to 02:00 CET at 01:00Z, so
//     `30 2 * * *` fires at 2026-10-25T02:30:00+02:00 = 00:30Z, and not at 02:30+01:00 =
//     01:30Z. This holds for every schedule, frequent ones included: `0 * * * *` fires at
//     00:00Z (02:00 CEST) and then 02:00Z (03:00 CET), nothing at 01:00Z (02:00 CET), and
//     `*/10 * * * *` is silent for the repeated hour. The rule keeps one delivery per local
//     time, which is what a daily or weekly schedule needs; croniter instead fires the repeated
//     local times a second time.
//
// The same holds for any shift: Australia/Lord_Howe moves by 30 minutes (02:00 -> 02:30 on
// 2026-10-04, `15 2 * * *` fires at 02:30+11:00; 02:00 -> 01:30 on 2026-04-05, `45 1 * * *`
// fires only at 01:45+11:00). The rules are those the zone has: the system tz database read by
// date/tz, which knows transitions up to 2037 (the TZif files' explicit table) but not the rule
// that extends them, so from 2038 on a zone keeps the offset of its last listed transition
// (Europe/Berlin: CET all year).
//
// ------------------------------------------------------------------------------------------
// The search and its bound
// ------------------------------------------------------------------------------------------
// next_after works in local time: from the local time of `after` it finds the first matching
// month, day (a 31-bit mask of the month's matching days, from the two day fields and the rule
// above), hour, minute and second, each a bit search, maps that local time to its instant by the
// rules above, and skips the rest of an autumn overlap when `after` lies in its second pass. All
// instants are whole seconds; the first one strictly after `after` is the answer.
//
// It looks at most kSearchYears = 400 years of calendar ahead, which is exact: the Gregorian
// calendar repeats every 400 years to the weekday, so an expression with no match in 400 years
// never matches (`0 0 30 2 *`, `0 0 31 4 *`, `0 0 31W 4 *`) and next_after says nullopt after
// about 4800 month steps (well under a millisecond). A shorter bound would be wrong: Feb 29
// skips 2100 (2096 to 2104 is 8 years), and `0 0 * 2 1#5` (a fifth Monday in February, so a
// leap year whose February starts on a Monday) comes in 2044, 2072 and then 2112. The search
// also ends with the local year kMaxYear (9999): an `after` from 9999-12-31T23:59:59Z on has no
// next instant, and one before the year 1 counts as the start of it.
//
// Cost: next_after is O(months and days stepped) plus a few tz lookups (binary searches); for a
// schedule that fires at least daily, a few microseconds. cron_reference.hpp holds the slow,
// second-by-second model it is checked against.
//
// Threading: pure functions, callable from any thread; a CronExpr is a value. The tz library
// loads each zone's rules on first use under its own std::call_once.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace date {
class time_zone;
}

namespace delayd::cron {

// Longest expression parse_cron reads, in bytes (surrounding spaces included).
inline constexpr std::size_t kMaxCronText = 256;
// Most comma-separated items in one field.
inline constexpr std::size_t kMaxListItems = 64;
// How far next_after looks ahead, in calendar years (one full Gregorian cycle).
inline constexpr int kSearchYears = 400;
// The last calendar year next_after searches (local time).
inline constexpr int kMaxYear = 9999;

// Instants at the API: Unix time in milliseconds (what deliver-at carries).
using Instant = std::chrono::sys_time<std::chrono::milliseconds>;

// A parsed expression: one bit per allowed value of each field, plus the special day forms.
// Every field has at least one bit set or one special form. Compare with ==.
struct CronExpr {
  std::uint64_t seconds = 1;                     // bit s: second s, 0-59 ({0} for five fields)
  std::uint64_t minutes = 0;                     // bit m: minute m, 0-59
  std::uint32_t hours = 0;                       // bit h: hour h, 0-23
  std::uint32_t days = 0;                        // bit d: day of month d, 1-31 (bit 0 unused)
  std::uint32_t nearest_weekdays = 0;            // bit d: dW, the weekday nearest to day d, 1-31
  bool last_day = false;                         // L: the last day of the month
  bool last_weekday = false;                     // LW: the last Monday-Friday of the month
  std::uint16_t months = 0;                      // bit m: month m, 1-12 (bit 0 unused)
  std::uint8_t weekdays = 0;                     // bit w: weekday w, 0-6, 0 = Sunday (7 is stored as 0)
  std::uint8_t last_of_weekday = 0;              // bit w: wL, the last weekday w of the month
  std::array<std::uint8_t, 7> nth_of_weekday{};  // [w] bit k: w#k, the k-th weekday w, k 1-5
  bool dom_any = true;                           // day-of-month was a lone * or ? (unrestricted)
  bool dow_any = true;                           // day-of-week was a lone * or ? (unrestricted)
  bool with_seconds = false;                     // six fields (seconds first)

  friend bool operator==(const CronExpr&, const CronExpr&) = default;
};

// What parse_cron returns: an expression, or the reason there is none.
struct ParsedCron {
  std::optional<CronExpr> expr;  // set iff the text is a valid expression
  std::string error;             // empty iff expr is set; one printable line naming the field
  explicit operator bool() const noexcept { return expr.has_value(); }
};

// Parses the grammar in the header. Total: every input gets an expression or an error; throws
// only std::bad_alloc. O(text).
ParsedCron parse_cron(std::string_view text);

// The zone named `name` (an IANA name such as "Europe/Berlin", or "UTC") from the system tz
// database, or nullptr if there is none. The first call reads the database's directory.
// Throws only std::bad_alloc.
const date::time_zone* find_zone(std::string_view name);

// The first instant strictly after `after` at which `expr` fires in `zone` (nullptr: UTC), by
// the DST rules of the header; always a whole second. nullopt iff nothing matches within
// kSearchYears of `after` (then nothing ever does) or before the end of kMaxYear.
// Throws only std::bad_alloc (from the tz library's first load of the zone).
std::optional<Instant> next_after(const CronExpr& expr, Instant after, const date::time_zone* zone);

// The next `n` instants after `after`, in order, each strictly after the one before (fewer if
// the schedule ends): next_after applied n times. O(n * next_after).
std::vector<Instant> next_n(const CronExpr& expr, Instant after, const date::time_zone* zone, std::size_t n);

}  // namespace delayd::cron
