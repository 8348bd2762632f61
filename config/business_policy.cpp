#include "config/business_policy.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "base/backoff.hpp"

namespace delayd::config {

namespace {

constexpr std::int64_t kMaxMs = 86'400'000;

std::int64_t integer(const std::string& entry, std::string_view text, std::int64_t min, std::int64_t max) {
  std::int64_t v = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v < min || v > max) {
    throw ConfigError("scheduler.business." + entry + " = \"" + std::string(text) + "\": must be an integer from " +
                      std::to_string(min) + " to " + std::to_string(max));
  }
  return v;
}

bool boolean(const std::string& entry, std::string_view text) {
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  throw ConfigError("scheduler.business." + entry + " = \"" + std::string(text) + "\": must be true or false");
}

void apply(BusinessPolicy& p, const std::string& entry, std::string_view setting, std::string_view value) {
  using std::chrono::milliseconds;
  if (setting == "max_process_attempts") {
    p.max_process_attempts = static_cast<int>(integer(entry, value, 1, 1'000'000));
  } else if (setting == "process_retry_base_ms") {
    p.retry_base = milliseconds(integer(entry, value, 0, kMaxMs));
  } else if (setting == "process_retry_max_ms") {
    p.retry_max = milliseconds(integer(entry, value, 0, kMaxMs));
  } else if (setting == "ack_timeout_ms") {
    p.ack_timeout = milliseconds(integer(entry, value, 0, kMaxMs));
  } else if (setting == "keep_payload") {
    p.keep_payload = boolean(entry, value);
  } else {
    throw ConfigError("scheduler.business." + entry +
                      ": unknown setting; a business may override max_process_attempts, process_retry_base_ms, "
                      "process_retry_max_ms, ack_timeout_ms and keep_payload");
  }
}

// ack_timeout needs the payload; the ceiling is at least the base.
void settle(BusinessPolicy& p, const std::string& business) {
  if (p.ack_timeout.count() > 0) p.keep_payload = true;
  if (p.retry_max < p.retry_base) {
    throw ConfigError("scheduler.business." + business + ": process_retry_max_ms (" +
                      std::to_string(p.retry_max.count()) + ") is less than process_retry_base_ms (" +
                      std::to_string(p.retry_base.count()) + ")");
  }
}

}  // namespace

std::int64_t BusinessPolicy::retry_at(int attempt, std::int64_t now_ms,
                                      std::optional<std::chrono::milliseconds> retry_after, double jitter) const {
  if (retry_after) return now_ms + retry_after->count();
  const std::int64_t d = base::doubling(retry_base, retry_max, attempt).count();
  const double j = std::clamp(jitter, 0.0, 1.0);
  return now_ms + d / 2 + static_cast<std::int64_t>(std::floor(static_cast<double>(d - d / 2) * j));
}

BusinessPolicies::BusinessPolicies(const Config& c) {
  const auto& s = c.scheduler;
  defaults_ = BusinessPolicy{
      static_cast<int>(s.max_process_attempts), std::chrono::milliseconds(s.process_retry_base_ms),
      std::chrono::milliseconds(s.process_retry_max_ms), std::chrono::milliseconds(s.ack_timeout_ms), s.keep_payload};
  settle(defaults_, "(defaults)");
  for (const auto& [entry, value] : s.business) {
    const auto dot = entry.rfind('.');
    if (dot == std::string::npos || dot == 0) {
      throw ConfigError("scheduler.business." + entry + ": expected <business>.<setting>");
    }
    const std::string business = entry.substr(0, dot);
    auto [it, fresh] = overrides_.try_emplace(business, defaults_);
    apply(it->second, entry, std::string_view(entry).substr(dot + 1), value);
  }
  for (auto& [business, p] : overrides_) settle(p, business);
}

const BusinessPolicy& BusinessPolicies::of(std::string_view business) const {
  const auto it = overrides_.find(business);
  return it == overrides_.end() ? defaults_ : it->second;
}

}  // namespace delayd::config
