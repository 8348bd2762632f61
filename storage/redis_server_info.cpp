#include "storage/redis_server_info.hpp"

#include <charconv>

namespace delayd::storage {

namespace {

// Each "<field>:<value>" line of INFO's text, in order, to `each(field, value)`.
template <typename Each>
void for_each_field(std::string_view info, Each each) {
  while (!info.empty()) {
    const std::size_t end = info.find('\n');
    std::string_view line = info.substr(0, end);
    info = end == std::string_view::npos ? std::string_view() : info.substr(end + 1);
    if (line.ends_with('\r')) line.remove_suffix(1);
    const std::size_t colon = line.find(':');
    if (colon != std::string_view::npos) each(line.substr(0, colon), line.substr(colon + 1));
  }
}

}  // namespace

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
  for_each_field(info, [&](std::string_view field, std::string_view value) {
    if (field == "maxmemory_policy") {
      out.policy = std::string(value);
      named = true;
    } else if (field == "maxmemory") {
      std::uint64_t bytes = 0;
      const auto r = std::from_chars(value.data(), value.data() + value.size(), bytes);
      out.maxmemory = r.ec == std::errc{} && r.ptr == value.data() + value.size() ? bytes : 0;
    }
  });
  if (!named) return std::nullopt;
  return out;
}

std::optional<bool> parse_aof_enabled(std::string_view info) {
  std::optional<bool> out;
  for_each_field(info, [&](std::string_view field, std::string_view value) {
    if (field == "aof_enabled" && (value == "0" || value == "1")) out = value == "1";
  });
  return out;
}

}  // namespace delayd::storage
