#include "admin/job_json.hpp"

#include "broker/time_format.hpp"
#include "storage/header_codec.hpp"

#include <charconv>

namespace delayd::admin {

using broker::format_rfc3339_ms;

namespace {

// Fields that hold epoch milliseconds; each gets an "<name>_iso" companion.
constexpr const char* kTimeFields[] = {"deliver_at", "created_at", "firing_at", "ready_at", "cancelled_at", "failed_at"};

std::optional<std::int64_t> as_int(const std::string& s) {
  std::int64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

nlohmann::json job_to_json(const std::string& job_id, const std::map<std::string, std::string>& fields) {
  nlohmann::json j;
  j["job_id"] = job_id;
  for (const auto& [name, value] : fields) {
    if (name == "headers") {
      nlohmann::json hs = nlohmann::json::array();
      try {
        for (const auto& [hn, hv] : storage::decode_headers(value)) {
          hs.push_back({{"name", hn}, {"value", hv ? nlohmann::json(*hv) : nlohmann::json(nullptr)}});
        }
      } catch (const std::invalid_argument&) {
        hs = "<undecodable>";
      }
      j["headers"] = hs;
    } else if (name == "attempt") {
      j[name] = as_int(value).value_or(0);
    } else {
      j[name] = value;
    }
  }
  for (const char* f : kTimeFields) {
    auto it = fields.find(f);
    if (it == fields.end()) continue;
    if (auto ms = as_int(it->second)) {
      j[f] = *ms;
      j[std::string(f) + "_iso"] = format_rfc3339_ms(*ms);
    }
  }
  if (fields.count("headers")) {
    if (!fields.count("key")) j["key"] = nullptr;
    if (!fields.count("value")) j["value"] = nullptr;
  } else {
    j["payload_deleted"] = true;  // a finished job keeps its record, not its payload
  }
  return j;
}

nlohmann::json stats_to_json(const storage::StoreStats& s) {
  nlohmann::json j;
  j["pending"] = s.pending;
  if (s.next_due) {
    j["next_due"] = *s.next_due;
    j["next_due_iso"] = format_rfc3339_ms(*s.next_due);
  } else {
    j["next_due"] = nullptr;
  }
  j["pending_by_shard"] = s.pending_by_shard;
  j["by_business"] = s.by_business_state;
  return j;
}

std::string to_text(const nlohmann::json& j) { return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace); }

}  // namespace delayd::admin
