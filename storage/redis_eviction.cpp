#include "storage/redis_eviction.hpp"

#include <charconv>

namespace delayd::storage {

Eviction eviction_of(std::string_view name) {
  if (name == "noeviction") return Eviction::none;
  if (name.starts_with("volatile-")) return Eviction::settled_only;
  if (name.starts_with("allkeys-")) return Eviction::any_key;
  return Eviction::unknown;
}

Eviction EvictionPolicy::eviction() const { return eviction_of(policy); }

std::optional<EvictionPolicy> parse_eviction_policy(std::string_view info) {
  EvictionPolicy out;
  bool named = false;
  while (!info.empty()) {
    const std::size_t end = info.find('\n');
    std::string_view line = info.substr(0, end);
    info = end == std::string_view::npos ? std::string_view() : info.substr(end + 1);
    if (line.ends_with('\r')) line.remove_suffix(1);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view field = line.substr(0, colon);
    const std::string_view value = line.substr(colon + 1);
    if (field == "maxmemory_policy") {
      out.policy = std::string(value);
      named = true;
    } else if (field == "maxmemory") {
      std::uint64_t bytes = 0;
      const auto r = std::from_chars(value.data(), value.data() + value.size(), bytes);
      out.maxmemory = r.ec == std::errc{} && r.ptr == value.data() + value.size() ? bytes : 0;
    }
  }
  if (!named) return std::nullopt;
  return out;
}

}  // namespace delayd::storage
