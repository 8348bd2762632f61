#include "admin/job_query.hpp"

#include <algorithm>
#include <charconv>

#include "config/config_names.hpp"
#include "contract/ingest_parse.hpp"
#include "contract/time_format.hpp"
#include "storage/job_record.hpp"

namespace delayd::admin {

namespace {

using storage::JobState;

constexpr std::string_view kParams[] = {"business",  "state", "due_from", "due_to",
                                        "id_prefix", "error", "limit",    "cursor"};

std::string states_list() {
  std::string out;
  for (JobState s : storage::job_record::kStates) out += (out.empty() ? "" : ", ") + std::string(to_string(s));
  return out;
}

std::string fingerprint(const storage::JobFilter& f) {
  std::vector<std::string> parts;
  for (JobState s : f.states) parts.emplace_back(to_string(s));
  parts.emplace_back("|");
  parts.push_back(f.business);
  parts.push_back(f.id_prefix);
  parts.push_back(f.error_text);
  parts.push_back(f.due_from ? std::to_string(*f.due_from) : "-");
  parts.push_back(f.due_to ? std::to_string(*f.due_to) : "-");
  return fingerprint_of(parts);
}

std::string hex(std::string_view s) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (char c : s) {
    out.push_back(kDigits[static_cast<unsigned char>(c) >> 4]);
    out.push_back(kDigits[static_cast<unsigned char>(c) & 15]);
  }
  return out;
}

std::optional<std::string> unhex(std::string_view s) {
  if (s.size() % 2 != 0) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < s.size(); i += 2) {
    unsigned v = 0;
    const auto r = std::from_chars(s.data() + i, s.data() + i + 2, v, 16);
    if (r.ec != std::errc() || r.ptr != s.data() + i + 2) return std::nullopt;
    out.push_back(static_cast<char>(v));
  }
  return out;
}

}  // namespace

std::optional<std::int64_t> parse_count(std::string_view s) {
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  std::int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

std::variant<std::int64_t, BadRequest> parse_time(const std::string& field, std::string_view text) {
  const contract::ParsedTime t = contract::parse_timestamp_ms(text);
  if (!t) {
    return BadRequest{field, "'" + std::string(text.substr(0, 64)) + "' is not epoch ms or RFC 3339 in 1970..9999"};
  }
  return t.epoch_ms;
}

std::variant<std::size_t, BadRequest> parse_limit(std::string_view text) {
  const auto n = parse_count(text);
  if (!n || *n < 1 || *n > static_cast<std::int64_t>(kMaxLimit)) {
    return BadRequest{"limit", "must be a whole number from 1 to " + std::to_string(kMaxLimit)};
  }
  return static_cast<std::size_t>(*n);
}

std::optional<BadRequest> check_business(std::string_view business) {
  if (contract::is_valid_business(business)) return std::nullopt;
  if (business.starts_with(config::kTopicBusinessPrefix) &&
      config::is_valid_topic_name(business.substr(config::kTopicBusinessPrefix.size()))) {
    return std::nullopt;  // an etf1 or Chronos job's business: the topic it is delivered to
  }
  return BadRequest{"business", "must be 1-" + std::to_string(contract::kMaxBusinessChars) +
                                    " characters of A-Z a-z 0-9 . _ -, or topic:<ready topic>"};
}

std::string fingerprint_of(const std::vector<std::string>& fields) {
  std::uint64_t h = 14695981039346656037ull;
  for (const std::string& s : fields) {
    for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    h = (h ^ 0x1fu) * 1099511628211ull;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

std::variant<std::int64_t, BadRequest> parse_rate(const nlohmann::json& body) {
  const auto rate = body.find("rate_per_s");
  if (rate == body.end()) return kDefaultRate;
  if (!rate->is_number_unsigned() || rate->get<std::uint64_t>() < 1 ||
      rate->get<std::uint64_t>() > static_cast<std::uint64_t>(kMaxRate)) {
    return BadRequest{"rate_per_s", "must be a whole number from 1 to " + std::to_string(kMaxRate)};
  }
  return rate->get<std::int64_t>();
}

std::variant<ListRequest, BadRequest> parse_list_request(
    const std::map<std::string, std::string, std::less<>>& params) {
  ListRequest r;
  for (const auto& [name, value] : params) {
    if (name.empty()) return BadRequest{"query", "a parameter without a name"};
    if (std::find(std::begin(kParams), std::end(kParams), name) == std::end(kParams)) {
      return BadRequest{name,
                        "unknown parameter (GET /jobs takes business, state, due_from, due_to, id_prefix, "
                        "error, limit, cursor)"};
    }
  }
  const auto get = [&](std::string_view name) -> const std::string* {
    const auto it = params.find(name);
    return it == params.end() ? nullptr : &it->second;
  };
  if (const auto* v = get("business")) {
    if (auto bad = check_business(*v)) return *bad;
    r.filter.business = *v;
  }
  if (const auto* v = get("state")) {
    std::string_view rest = *v;
    while (true) {
      const auto comma = rest.find(',');
      const std::string_view word = rest.substr(0, comma);
      const auto st = storage::parse_job_state(word);
      if (!st || !storage::job_record::is_stored(*st)) {
        return BadRequest{"state", "unknown state '" + std::string(word.substr(0, 32)) + "' (one of " + states_list() +
                                       ", or several separated by commas)"};
      }
      if (std::find(r.filter.states.begin(), r.filter.states.end(), *st) != r.filter.states.end()) {
        return BadRequest{"state", "'" + std::string(word) + "' is given twice"};
      }
      r.filter.states.push_back(*st);
      if (comma == std::string_view::npos) break;
      rest = rest.substr(comma + 1);
    }
  }
  for (const char* name : {"due_from", "due_to"}) {
    if (const auto* v = get(name)) {
      auto t = parse_time(name, *v);
      if (auto* bad = std::get_if<BadRequest>(&t)) return *bad;
      (std::string_view(name) == "due_from" ? r.filter.due_from : r.filter.due_to) = std::get<std::int64_t>(t);
    }
  }
  if (r.filter.due_from && r.filter.due_to && *r.filter.due_from > *r.filter.due_to) {
    return BadRequest{"due_to", "is before due_from"};
  }
  if (const auto* v = get("id_prefix")) {
    if (!contract::is_valid_job_id(*v)) {
      return BadRequest{"id_prefix", "must be 1-" + std::to_string(contract::kMaxJobIdChars) +
                                         " printable ASCII characters without spaces, as a job-id"};
    }
    r.filter.id_prefix = *v;
  }
  if (const auto* v = get("error")) {
    if (v->empty() || v->size() > kMaxErrorFilterChars) {
      return BadRequest{"error", "must be 1-" + std::to_string(kMaxErrorFilterChars) + " bytes"};
    }
    r.filter.error_text = *v;
  }
  if (const auto* v = get("limit")) {
    auto n = parse_limit(*v);
    if (auto* bad = std::get_if<BadRequest>(&n)) return *bad;
    r.limit = std::get<std::size_t>(n);
  }
  if (const auto* v = get("cursor")) {
    r.cursor = decode_cursor(r.filter, *v);
    if (!r.cursor) {
      return BadRequest{"cursor",
                        "not the cursor of a walk with this filter (give the same business, state, "
                        "due_from, due_to, id_prefix and error as the first page)"};
    }
  }
  return r;
}

std::string encode_cursor(const storage::JobFilter& filter, const storage::WalkCursor& c) {
  std::string out = "1." + fingerprint(filter) + "." + std::to_string(c.walk_start) + "." + std::to_string(c.state);
  if (c.at) out += "." + std::to_string(c.at->score) + "." + hex(c.shard) + "." + hex(c.at->job_id);
  return out;
}

std::optional<storage::WalkCursor> decode_cursor(const storage::JobFilter& filter, std::string_view text) {
  std::vector<std::string_view> parts;
  while (parts.size() < 8) {
    const auto dot = text.find('.');
    parts.push_back(text.substr(0, dot));
    if (dot == std::string_view::npos) break;
    text = text.substr(dot + 1);
  }
  if ((parts.size() != 4 && parts.size() != 7) || parts[0] != "1" || parts[1] != fingerprint(filter)) {
    return std::nullopt;
  }
  const auto start = parse_count(parts[2]);
  const auto state = parse_count(parts[3]);
  const std::size_t states = filter.states.empty() ? storage::all_walk_states().size() : filter.states.size();
  if (!start || *start > contract::kMaxEpochMs || !state || *state >= static_cast<std::int64_t>(states)) {
    return std::nullopt;
  }
  storage::WalkCursor c;
  c.walk_start = *start;
  c.state = static_cast<std::size_t>(*state);
  if (parts.size() == 7) {
    const auto score = parse_count(parts[4]);
    auto shard = unhex(parts[5]);
    auto id = unhex(parts[6]);
    if (!score || *score > storage::kMaxWalkScore || !shard || !id || shard->empty() || id->empty()) {
      return std::nullopt;
    }
    c.at = storage::WalkPosition{*score, std::move(*id)};
    c.shard = std::move(*shard);
  }
  return c;
}

nlohmann::json page_json(const storage::JobFilter& filter, const storage::WalkPage& page) {
  nlohmann::json jobs = nlohmann::json::array();
  for (const storage::BrowsedJob& j : page.jobs) {
    nlohmann::json o{{"job_id", j.job_id},
                     {"business", j.business},
                     {"state", to_string(j.state)},
                     {"deliver_at", j.deliver_at},
                     {"deliver_at_iso", contract::format_rfc3339_ms(j.deliver_at)},
                     {"attempt", j.attempt},
                     {"shard", j.shard}};
    if (!j.error.empty()) o["error"] = j.error;
    if (j.state == JobState::delay) {
      o["due_at"] = j.score;  // a retry's time, later than deliver_at
      if (j.in_flight) o["in_flight"] = true;
    } else {
      o["entered_at"] = j.score;  // when it entered its state
    }
    jobs.push_back(std::move(o));
  }
  nlohmann::json out{{"jobs", std::move(jobs)},
                     {"next", page.next ? nlohmann::json(encode_cursor(filter, *page.next)) : nlohmann::json(nullptr)},
                     {"snapshot", false},
                     {"partial", page.partial},
                     {"examined", page.examined}};
  return out;
}

std::string_view action_name(storage::JobStore::Action a) {
  using A = storage::JobStore::Action;
  return a == A::cancel ? "cancel" : a == A::run_now ? "run-now" : "retry";
}

std::variant<QueryMap, BadRequest> filter_params(const nlohmann::json& filter_json, std::string_view endpoint,
                                                 std::initializer_list<std::string_view> times) {
  QueryMap params;
  if (!filter_json.is_object())
    return BadRequest{"filter", "must be an object of " + std::string(endpoint) + "'s parameters"};
  for (const auto& [name, value] : filter_json.items()) {
    if (name == "limit" || name == "cursor") return BadRequest{"filter." + name, "has no place in a filter"};
    if (value.is_string()) {
      params[name] = value.get<std::string>();
    } else if (value.is_number_unsigned() && std::find(times.begin(), times.end(), name) != times.end()) {
      params[name] = std::to_string(value.get<std::uint64_t>());
    } else {
      return BadRequest{"filter." + name, "must be a string"};
    }
  }
  return params;
}

std::variant<storage::JobFilter, BadRequest> parse_stored_filter(const nlohmann::json& filter_json) {
  auto params = filter_params(filter_json, "GET /jobs", {"due_from", "due_to"});
  if (auto* bad = std::get_if<BadRequest>(&params)) return *bad;
  auto parsed = parse_list_request(std::get<QueryMap>(params));
  if (auto* bad = std::get_if<BadRequest>(&parsed)) return BadRequest{"filter." + bad->field, bad->reason};
  return std::get<ListRequest>(std::move(parsed)).filter;
}

std::variant<BulkRequest, BadRequest> parse_bulk_request(std::string_view body) {
  using A = storage::JobStore::Action;
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return BadRequest{"body", "must be a JSON object with action, filter, dry_run and rate_per_s"};
  }
  for (const auto& [name, value] : j.items()) {
    if (name != "action" && name != "filter" && name != "dry_run" && name != "rate_per_s") {
      return BadRequest{name, "unknown field (action, filter, dry_run, rate_per_s)"};
    }
  }
  BulkRequest r;
  const auto action = j.find("action");
  if (action == j.end() || !action->is_string()) return BadRequest{"action", "must be cancel, run-now or retry"};
  if (*action == "cancel") {
    r.action = A::cancel;
  } else if (*action == "run-now") {
    r.action = A::run_now;
  } else if (*action == "retry") {
    r.action = A::retry;
  } else {
    return BadRequest{"action", "must be cancel, run-now or retry"};
  }
  const auto dry = j.find("dry_run");
  if (dry == j.end() || !dry->is_boolean()) return BadRequest{"dry_run", "must be true or false (there is no default)"};
  r.dry_run = dry->get<bool>();
  auto rate = parse_rate(j);
  if (auto* bad = std::get_if<BadRequest>(&rate)) return *bad;
  r.rate_per_s = std::get<std::int64_t>(rate);
  const auto filter = j.find("filter");
  if (filter == j.end()) return BadRequest{"filter", "is required ({} for every job the action applies to)"};
  auto parsed = parse_stored_filter(*filter);
  if (auto* bad = std::get_if<BadRequest>(&parsed)) return *bad;
  r.filter = std::get<storage::JobFilter>(std::move(parsed));
  const storage::JobState wanted = r.action == A::retry ? storage::JobState::failed : storage::JobState::delay;
  if (r.filter.states.empty()) r.filter.states = {wanted};
  if (r.filter.states != std::vector<storage::JobState>{wanted}) {
    return BadRequest{"filter.state", std::string(action_name(r.action)) + " applies to " +
                                          std::string(to_string(wanted)) + " jobs only"};
  }
  r.filter_json = *filter;
  r.filter_json["state"] = std::string(to_string(wanted));
  return r;
}

std::variant<std::int64_t, BadRequest> parse_reschedule_body(std::string_view body, std::int64_t now_ms) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return BadRequest{"body", "must be a JSON object with deliver_at (epoch ms or RFC 3339) or delay_ms"};
  }
  for (const auto& [name, value] : j.items()) {
    if (name != "deliver_at" && name != "delay_ms") return BadRequest{name, "unknown field (deliver_at or delay_ms)"};
  }
  if (j.contains("deliver_at") == j.contains("delay_ms")) {
    return BadRequest{"body", "give exactly one of deliver_at and delay_ms"};
  }
  if (j.contains("delay_ms")) {
    const auto& d = j["delay_ms"];
    if (!d.is_number_unsigned() ||
        d.get<std::uint64_t>() > static_cast<std::uint64_t>(contract::kMaxEpochMs - now_ms)) {
      return BadRequest{"delay_ms", "must be a whole number of milliseconds from 0, ending before year 10000"};
    }
    return now_ms + d.get<std::int64_t>();
  }
  const auto& at = j["deliver_at"];
  if (at.is_number_unsigned()) {
    if (at.get<std::uint64_t>() > static_cast<std::uint64_t>(contract::kMaxEpochMs)) {
      return BadRequest{"deliver_at", "is after year 9999"};
    }
    return at.get<std::int64_t>();
  }
  if (at.is_string()) return parse_time("deliver_at", at.get<std::string>());
  return BadRequest{"deliver_at", "must be epoch ms (a whole number) or an RFC 3339 string"};
}

}  // namespace delayd::admin
