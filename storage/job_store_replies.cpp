// The replies of the job store's scripts and reads, turned into values (job_store_replies.hpp).
#include "storage/job_store_replies.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "storage/job_record.hpp"
#include "storage/payload_compression.hpp"

namespace delayd::storage::reply_parse {

std::optional<std::int64_t> parse_i64(std::string_view s) {
  std::int64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// A score read back from a pending set. delayd writes whole milliseconds, but a hand-edited
// entry may hold a fraction or an infinity: round up (a deadline read late is never early) and
// clamp into 0..2^62, where the wheel and the claim script sort it out.
std::int64_t score_of(redis::ReplyView v) {
  const std::string text(v.str());
  if (auto whole = parse_i64(text)) return std::clamp<std::int64_t>(*whole, 0, std::int64_t{1} << 62);
  char* end = nullptr;
  const double d = std::strtod(text.c_str(), &end);
  if (std::isnan(d) || d <= 0) return 0;
  if (d >= 4.6e18) return std::int64_t{1} << 62;
  return static_cast<std::int64_t>(std::ceil(d));
}

// A script's {changed, state} for one job. A state the scripts never return means the reply
// itself cannot be trusted; it is reported as corrupt rather than thrown.
Transition parse_transition(const std::string& job_id, std::string_view shard, redis::ReplyView r) {
  Transition t;
  t.job_id = job_id;
  t.shard = std::string(shard);
  try {
    t.changed = r[0].integer() == 1;
    t.state = parse_job_state(r[1].str()).value_or(JobState::corrupt);
    if (r.size() > 2) t.at = parse_i64(r[2].str()).value_or(0);
  } catch (const redis::RedisCommandError&) {
    t.state = JobState::corrupt;
  }
  return t;
}

// Undoes the scripts' enc(): "%XX" back to the byte. A malformed escape is kept as it is.
std::string percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned value = 0;
    if (s[i] == '%' && i + 2 < s.size() &&
        std::from_chars(s.data() + i + 1, s.data() + i + 3, value, 16).ptr == s.data() + i + 3) {
      out.push_back(static_cast<char>(value));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

namespace {

// The record's short field names (key_schema.hpp) as tools show them, for a record in `state`:
// nb of a delivered job is when it goes round again without a report (job_record.hpp).
std::string_view display_name(std::string_view stored, JobState state) {
  constexpr std::pair<std::string_view, std::string_view> kNames[] = {
      {"every", "repeat_every_ms"},   {"count", "repeat_count"}, {"rep", "repeat"},
      {"rd", "redelivered"},          {"nb", "not_before"},      {"dead", "dead_reason"},
      {"ma", "max_process_attempts"}, {"rv", "redrive_count"},   {"vo", "version_offset"},
      {"cron", "repeat_cron"},        {"tz", "repeat_tz"},       {"until", "repeat_until"},
      {"cu", "repeat_catchup"},       {"cc", "caught_up"},       {"ml", "max_lateness_ms"}};
  if (stored == "nb" && (state == JobState::ready || state == JobState::running)) return "ack_deadline";
  for (const auto& [from, to] : kNames) {
    if (from == stored) return to;
  }
  return stored;
}

}  // namespace

// The fields of a job record (key_schema.hpp), for people and tools; nullopt if the header
// line does not have the documented shape (job_record.hpp: what the scripts call corrupt).
std::optional<std::map<std::string, std::string>> parse_record(std::string_view record,
                                                               const PayloadDictionaries& dictionaries) {
  const std::optional<JobRecord> r = parse_job_record(record);
  if (!r) return std::nullopt;
  std::map<std::string, std::string> out{{"state", std::string(to_string(r->state))},
                                         {"attempt", std::to_string(r->attempt)}};
  if (r->business != "-") {  // "-": a remembered cancel, whose job (and so its time) is not known yet
    out.emplace("deliver_at", std::to_string(r->deliver_at));
    out.emplace("business", r->business);
  }
  for (const auto& [name, value] : r->fields) {
    if (name == "h") continue;               // only says the history list exists
    if (name == kCompressedField) continue;  // how the payload is kept, read below
    out[std::string(display_name(name, r->state))] = percent_decode(value);
  }
  const std::string_view payload = r->payload;
  if (!payload.empty()) {
    try {
      const auto z = r->fields.find(kCompressedField);
      StoredPayload p =
          decode_payload(read_payload(payload, z != r->fields.end() && z->second == kCompressedValue, &dictionaries));
      if (p.key) out.emplace("key", *p.key);
      if (p.value) out.emplace("value", *p.value);
      out.emplace("headers", encode_headers(p.headers));
    } catch (const std::invalid_argument& e) {
      out.emplace("payload_error", e.what());
    }
  }
  return out;
}

namespace {

// The payload of a record read back (what follows its header line).
StoredPayload payload_of(redis::ReplyView record, const PayloadDictionaries& dictionaries) {
  if (!record.is_string()) throw std::invalid_argument("record gone or not a string");
  const std::string_view v = record.str();
  const auto nl = v.find('\n');
  if (nl == std::string_view::npos) throw std::invalid_argument("no header line");
  const std::string_view stored = v.substr(nl + 1);
  if (stored.empty()) return decode_payload(stored);
  return decode_payload(read_payload(stored, header_field(v, kCompressedField) == kCompressedValue, &dictionaries));
}

}  // namespace

// A job in flight: its entry "<attempt> <firing_at> <epoch>" in the shard's in-flight hash
// shows as the fields attempt (the attempt under way), firing_at and claimed_by (the epoch of
// the owner that claimed it).
void add_in_flight(std::map<std::string, std::string>& fields, redis::ReplyView entry) {
  if (!entry.is_string()) return;
  const std::string_view e = entry.str();
  const auto sp = e.find(' ');
  if (sp == std::string_view::npos) return;
  fields["attempt"] = std::string(e.substr(0, sp));
  const std::string_view rest = e.substr(sp + 1);
  const auto sp2 = rest.find(' ');
  fields["firing_at"] = std::string(rest.substr(0, sp2));
  if (sp2 != std::string_view::npos) fields["claimed_by"] = std::string(rest.substr(sp2 + 1));
}

// The history list as the field "history": one event per line, "<ms> <event> <attempt>
// <detail>", the detail decoded (a line break in it shown as a space).
void add_history(std::map<std::string, std::string>& fields, redis::ReplyView list) {
  if (!list.is_array() || list.size() == 0) return;
  std::string text;
  for (size_t i = 0; i < list.size(); ++i) {
    std::string line = percent_decode(list[i].str());
    std::replace(line.begin(), line.end(), '\n', ' ');
    if (!text.empty()) text += '\n';
    text += line;
  }
  fields["history"] = std::move(text);
}

// The record's fields of a repeat rule (key_schema.hpp), for a new job: the series starts at
// occurrence 1.
void put_repeat_rule(const RepeatRule& r, std::map<std::string, std::string, std::less<>>& fields) {
  if (r.every.count() > 0) {
    fields["every"] = std::to_string(r.every.count());
  } else {
    fields["cron"] = job_record::encode_field_value(r.cron);
    fields["tz"] = r.tz;
  }
  if (r.count > 0) fields["count"] = std::to_string(r.count);
  if (r.until) fields["until"] = std::to_string(*r.until);
  if (r.catchup != Catchup::latest) fields["cu"] = std::string(to_string(r.catchup));
  fields["rep"] = "1";
}

namespace {

// The repeat rule from the claim's long form, items from..from+6 (claim.lua's rule_of()).
RepeatRule repeat_rule_of(redis::ReplyView r, std::size_t from) {
  RepeatRule rule;
  rule.every = std::chrono::milliseconds(parse_i64(r[from].str()).value_or(0));
  rule.cron = percent_decode(r[from + 1].str());
  if (!r[from + 2].str().empty()) rule.tz = std::string(r[from + 2].str());
  rule.until = parse_i64(r[from + 3].str());
  rule.count = parse_i64(r[from + 4].str()).value_or(0);
  rule.catchup = parse_catchup(r[from + 5].str()).value_or(Catchup::latest);
  rule.caught_up = parse_i64(r[from + 6].str()).value_or(0);
  return rule;
}

}  // namespace

// One job's claim from the script's reply and the record read right after it. Never throws on
// what the bytes say: an unexpected shape is reported as a corrupt job.
Claim parse_claim(const std::string& job_id, redis::ReplyView r, redis::ReplyView record,
                  const PayloadDictionaries& dictionaries) {
  Claim c;
  c.job_id = job_id;
  const std::string_view kind = r[0].str();
  if (kind == "deliver") {
    c.state = JobState::delay;
    c.deliver_at = parse_i64(r[1].str()).value_or(0);
    c.business = std::string(r[2].str());
    c.attempt = static_cast<int>(r[3].integer());
    c.not_before = c.deliver_at;
    if (r.size() > 4) {  // the long form: a job that is not plain (kClaim)
      c.repeat = static_cast<int>(parse_i64(r[4].str()).value_or(0));
      c.plain = false;
      c.not_before = std::max(c.deliver_at, parse_i64(r[6].str()).value_or(0));
      c.redelivery = r[7].integer() == 1;
      c.dead_reason = percent_decode(r[8].str());
      if (r.size() > 16) {
        c.max_lateness = std::chrono::milliseconds(parse_i64(r[9].str()).value_or(0));
        c.rule = repeat_rule_of(r, 10);
      }
    }
    try {
      StoredPayload p = payload_of(record, dictionaries);
      c.key = std::move(p.key);
      c.value = std::move(p.value);
      c.headers = std::move(p.headers);
      c.kind = Claim::Kind::deliver;
    } catch (const std::invalid_argument& e) {
      c.kind = Claim::Kind::corrupt;
      c.reason = std::string("corrupt job record: payload unreadable: ") + e.what();
    }
  } else if (kind == "early") {
    c.kind = Claim::Kind::early;
    c.state = JobState::delay;
    c.deliver_at = parse_i64(r[1].str()).value_or(0);
  } else if (kind == "corrupt") {
    c.kind = Claim::Kind::corrupt;
    c.marked_failed = true;
    c.state = JobState::failed;
    c.reason = std::string(r[1].str());
  } else if (kind == "unreadable") {
    c.kind = Claim::Kind::unreadable;
    c.reason = std::string(r[1].str());
    if (r.size() > 2) {
      c.kept = true;
      c.reason += "; " + std::string(r[2].str());
    }
  } else {
    c.kind = Claim::Kind::finished;
    c.state = parse_job_state(r[1].str()).value_or(JobState::corrupt);
  }
  return c;
}

}  // namespace delayd::storage::reply_parse
