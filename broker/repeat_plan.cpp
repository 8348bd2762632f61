#include "broker/repeat_plan.hpp"

#include <algorithm>
#include <chrono>

#include "cron/cron_expr.hpp"

namespace delayd::broker {

namespace {

using storage::Catchup;
using storage::Occurrence;
using storage::RepeatRule;

// A calendar rule's expression and zone, read (precondition: !unusable(rule)).
struct Calendar {
  cron::CronExpr expr;
  const date::time_zone* zone = nullptr;
};

Calendar calendar_of(const RepeatRule& rule) { return {*cron::parse_cron(rule.cron).expr, cron::find_zone(rule.tz)}; }

std::optional<std::int64_t> cron_after(const Calendar& c, std::int64_t t) {
  const auto at = cron::next_after(c.expr, cron::Instant(std::chrono::milliseconds(t)), c.zone);
  if (!at) return std::nullopt;
  return at->time_since_epoch().count();
}

// Whether `o` is within the rule's end and count.
bool allowed(const RepeatRule& rule, const Occurrence& o) {
  return (!rule.until || o.at <= *rule.until) && (rule.count == 0 || o.number <= rule.count);
}

// The interval's occurrence k steps after `from`, k >= 1.
Occurrence step(const RepeatRule& rule, Occurrence from, std::int64_t k) {
  return {from.at + k * rule.every.count(), from.number + k};
}

}  // namespace

std::optional<std::string> unusable(const RepeatRule& rule) {
  if (rule.every.count() > 0 || rule.cron.empty()) return std::nullopt;
  if (const cron::ParsedCron p = cron::parse_cron(rule.cron); !p) return "repeat-cron: " + p.error;
  if (cron::find_zone(rule.tz) == nullptr) return "repeat-tz: no zone '" + rule.tz + "' in the tz database";
  return std::nullopt;
}

std::optional<Occurrence> first_after(const RepeatRule& rule, Occurrence from, std::int64_t t) {
  std::optional<Occurrence> o;
  if (rule.every.count() > 0) {
    const std::int64_t k = t < from.at ? 1 : std::max<std::int64_t>(1, (t - from.at) / rule.every.count() + 1);
    o = step(rule, from, k);
  } else if (auto at = cron_after(calendar_of(rule), std::max(t, from.at))) {
    o = Occurrence{*at, from.number + 1};
  }
  if (o && !allowed(rule, *o)) return std::nullopt;
  return o;
}

std::optional<Occurrence> last_by(const RepeatRule& rule, Occurrence from, std::int64_t t) {
  if (rule.until) t = std::min(t, *rule.until);
  if (t <= from.at) return std::nullopt;
  if (rule.every.count() > 0) {
    std::int64_t k = (t - from.at) / rule.every.count();
    if (rule.count > 0) k = std::min(k, rule.count - from.number);
    if (k < 1) return std::nullopt;
    return step(rule, from, k);
  }
  if (rule.count > 0 && from.number >= rule.count) return std::nullopt;
  // Backwards in doubling windows until one holds an occurrence, then forwards to its last:
  // a few calls whatever the outage's length. [t - w, t] had none when w was half as wide, so
  // the walk forwards crosses at most the occurrences of a window of w / 2.
  const Calendar c = calendar_of(rule);
  for (std::int64_t w = 1000;; w *= 2) {  // ends once w covers (from.at, t]
    const std::int64_t lo = t - from.at > w ? t - w : from.at;
    auto x = cron_after(c, lo);
    if (x && *x <= t) {
      while (auto y = cron_after(c, *x)) {
        if (*y > t) break;
        x = y;
      }
      return Occurrence{*x, from.number + 1};
    }
    if (lo == from.at) return std::nullopt;
  }
}

std::optional<std::optional<Occurrence>> skip(const RepeatRule& rule, Occurrence due, std::int64_t now) {
  if (rule.catchup == Catchup::all) return std::nullopt;
  const auto after = first_after(rule, due, due.at);
  if (!after || after->at > now) return std::nullopt;  // `due` is the latest one due: deliver it
  std::optional<Occurrence> to =
      rule.catchup == Catchup::latest ? last_by(rule, due, now) : first_after(rule, due, now);
  // A calendar series numbers its deliveries: the occurrence it goes on at takes the skipped
  // one's number.
  if (to && rule.every.count() == 0) to->number = due.number;
  return to;
}

std::optional<Occurrence> after_expired(const RepeatRule& rule, Occurrence due, std::int64_t now,
                                        std::int64_t max_catchup) {
  std::optional<Occurrence> to = next(rule, due, now, max_catchup);
  if (to && rule.every.count() == 0) to->number = due.number;
  return to;
}

std::optional<Occurrence> next(const RepeatRule& rule, Occurrence done, std::int64_t now, std::int64_t max_catchup) {
  const auto after = first_after(rule, done, done.at);
  if (!after || after->at > now) return after;  // nothing missed meanwhile: the next one
  switch (rule.catchup) {
    case Catchup::latest:
      return last_by(rule, done, now);
    case Catchup::all:
      if (rule.caught_up + 1 < max_catchup) return after;
      break;
    case Catchup::none:
      break;
  }
  return first_after(rule, done, now);
}

}  // namespace delayd::broker
