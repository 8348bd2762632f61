#include "admin/job_json.hpp"

#include <charconv>

#include "base/text_encoding.hpp"
#include "broker/repeat_plan.hpp"
#include "contract/time_format.hpp"
#include "cron/cron_expr.hpp"
#include "cron/cron_format.hpp"
#include "storage/header_codec.hpp"

namespace delayd::admin {

using contract::format_rfc3339_ms;

namespace {

// Fields that hold epoch milliseconds; each gets an "<name>_iso" companion.
constexpr const char* kTimeFields[] = {"deliver_at", "created_at",   "firing_at",    "ready_at",
                                       "running_at", "finished_at",  "cancelled_at", "failed_at",
                                       "not_before", "ack_deadline", "repeat_until"};

std::optional<std::int64_t> as_int(const std::string& s) {
  std::int64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// How many of a waiting calendar repeat's coming occurrences a job shows.
constexpr int kShownOccurrences = 3;

// A waiting calendar repeat's next occurrences (the pending one first), each as RFC 3339 in the
// repeat's zone with its offset and as epoch ms; empty for any other job.
nlohmann::json next_occurrences(const std::map<std::string, std::string>& fields) {
  nlohmann::json out = nlohmann::json::array();
  const auto get = [&](const char* name) {
    const auto it = fields.find(name);
    return it == fields.end() ? std::string() : it->second;
  };
  storage::RepeatRule rule;
  rule.cron = get("repeat_cron");
  rule.tz = get("repeat_tz").empty() ? rule.tz : get("repeat_tz");
  rule.until = as_int(get("repeat_until"));
  const auto at = as_int(get("deliver_at"));
  const auto number = as_int(get("repeat"));
  if (rule.cron.empty() || get("state") != "delay" || !at || !number || broker::unusable(rule)) return out;
  rule.count = as_int(get("repeat_count")).value_or(0);
  const date::time_zone* zone = cron::find_zone(rule.tz);
  std::optional<storage::Occurrence> o = storage::Occurrence{*at, *number};
  for (int i = 0; i < kShownOccurrences && o; ++i) {
    out.push_back({{"at", o->at},
                   {"at_local", cron::format_in_zone(cron::Instant(std::chrono::milliseconds(o->at)), zone)},
                   {"repeat", o->number}});
    o = broker::first_after(rule, *o, o->at);
  }
  return out;
}

// The "history" field (storage: one "<ms> <event> <attempt> <detail>" per line) as an array of
// {"at", "at_iso", "event", "attempt", "detail"}; a line of another shape is kept as a string.
nlohmann::json history_to_json(const std::string& text) {
  nlohmann::json out = nlohmann::json::array();
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto end = std::min(text.find('\n', start), text.size());
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    const auto a = line.find(' ');
    const auto b = a == std::string::npos ? a : line.find(' ', a + 1);
    const auto c = b == std::string::npos ? b : line.find(' ', b + 1);
    const auto at = a == std::string::npos ? std::nullopt : as_int(line.substr(0, a));
    const auto attempt =
        b == std::string::npos ? std::nullopt : as_int(line.substr(b + 1, c == std::string::npos ? c : c - b - 1));
    if (!at || !attempt) {
      out.push_back(line);
      continue;
    }
    out.push_back({{"at", *at},
                   {"at_iso", format_rfc3339_ms(*at)},
                   {"event", line.substr(a + 1, b - a - 1)},
                   {"attempt", *attempt},
                   {"detail", c == std::string::npos ? std::string() : line.substr(c + 1)}});
  }
  return out;
}

// Sets j[name] to the preview of `bytes`, with its companions (job_json.hpp).
void put_preview(nlohmann::json& j, const std::string& name, std::string_view bytes) {
  const std::string_view text = base::utf8_prefix(bytes, kPreviewBytes);
  std::string_view shown = text;
  if (base::is_printable_utf8(text)) {
    j[name] = std::string(text);
    j[name + "_encoding"] = "text";
  } else {
    shown = bytes.substr(0, kPreviewBytes);
    j[name] = base::base64(shown);
    j[name + "_encoding"] = "base64";
  }
  if (shown.size() < bytes.size()) {
    j[name + "_truncated"] = true;
    j[name + "_bytes"] = bytes.size();
  }
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
          nlohmann::json h{{"name", hn}, {"value", nullptr}};
          if (hv) put_preview(h, "value", *hv);
          hs.push_back(std::move(h));
        }
      } catch (const std::invalid_argument&) {
        hs = "<undecodable>";
      }
      j["headers"] = hs;
    } else if (name == "attempt" || name == "repeat" || name == "repeat_every_ms" || name == "repeat_count" ||
               name == "redelivered" || name == "caught_up") {
      j[name] = as_int(value).value_or(0);
    } else if (name == "history") {
      j[name] = history_to_json(value);
    } else if (name == "key" || name == "value") {
      put_preview(j, name, value);
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
  if (auto next = next_occurrences(fields); !next.empty()) j["next_occurrences"] = std::move(next);
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

nlohmann::json operation_to_json(const std::string& id, const std::map<std::string, std::string>& f) {
  nlohmann::json j{{"operation", id}};
  for (const auto& [k, v] : f) {
    if (k == "cursor") continue;
    if (k == "filter" || k == "skipped") {
      j[k] = nlohmann::json::parse(v, nullptr, false);
    } else if (k == "matched" || k == "done" || k == "failed" || k == "rate_per_s" || k.ends_with("_at")) {
      try {
        j[k] = std::stoll(v);
        if (k.ends_with("_at")) j[k + "_iso"] = contract::format_rfc3339_ms(std::stoll(v));
      } catch (const std::exception&) {
        j[k] = v;
      }
    } else {
      j[k] = v;
    }
  }
  return j;
}

std::string to_text(const nlohmann::json& j) { return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace); }

}  // namespace delayd::admin
