#include "contract/ingest_parse.hpp"

#include <charconv>
#include <tuple>

#include "base/text_encoding.hpp"
#include "config/config.hpp"
#include "config/config_names.hpp"
#include "contract/time_format.hpp"
#include "cron/cron_expr.hpp"

namespace delayd::contract {

namespace {

using connectors::find_header;
using connectors::Record;

bool is_business_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

std::string header_ref(std::string_view name) {
  std::string s = "header '";
  s += name;
  s += '\'';
  return s;
}

Invalid invalid(std::string reason) { return Invalid{std::move(reason)}; }

// A header that is present must have a value for any of the contract's headers; a null one is
// as unusable as a missing one but deserves its own message.
Invalid null_header(std::string_view name) { return invalid(header_ref(name) + " is null"); }

// Returns the deliver-at instant or the reason it cannot be had.
std::variant<std::int64_t, Invalid> deliver_at_of(const Record& rec) {
  const auto* at = find_header(rec.headers, kHeaderDeliverAt);
  const auto* delay = find_header(rec.headers, kHeaderDelayMs);
  if (at != nullptr && delay != nullptr) {
    return invalid("both deliver-at and delay-ms given");
  }
  if (at == nullptr && delay == nullptr) {
    return invalid("missing header 'deliver-at' (or 'delay-ms')");
  }
  if (at != nullptr) {
    if (!at->has_value()) return null_header(kHeaderDeliverAt);
    const std::string& text = **at;
    const ParsedTime t = parse_timestamp_ms(text);
    switch (t.error) {
      case TimeError::none:
        return t.epoch_ms;
      case TimeError::syntax:
        return invalid(header_ref(kHeaderDeliverAt) +
                       " is not epoch milliseconds or RFC 3339: " + base::quote_for_message(text));
      case TimeError::bad_field:
        return invalid(header_ref(kHeaderDeliverAt) +
                       " is not a valid date and time: " + base::quote_for_message(text));
      case TimeError::out_of_range:
        return invalid(header_ref(kHeaderDeliverAt) +
                       " is outside 1970-01-01T00:00:00Z..9999-12-31T23:59:59.999Z: " + base::quote_for_message(text));
    }
    return invalid(header_ref(kHeaderDeliverAt) + " is unreadable");
  }
  if (!delay->has_value()) return null_header(kHeaderDelayMs);
  const std::string& text = **delay;
  // Digits only: from_chars alone would also take a leading '-'.
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
    return invalid(header_ref(kHeaderDelayMs) +
                   " is not a non-negative decimal number of milliseconds: " + base::quote_for_message(text));
  }
  std::int64_t ms = 0;
  const auto parsed = std::from_chars(text.data(), text.data() + text.size(), ms);
  if (parsed.ec != std::errc{} || ms > kMaxEpochMs) {
    return invalid(header_ref(kHeaderDelayMs) + " is too large: " + base::quote_for_message(text));
  }
  if (rec.timestamp_ms < 0) {
    return invalid("header 'delay-ms' given but the record has no timestamp");
  }
  // Both operands are at most kMaxEpochMs here, so the sum cannot overflow.
  if (rec.timestamp_ms > kMaxEpochMs || ms > kMaxEpochMs - rec.timestamp_ms) {
    return invalid("record timestamp " + std::to_string(rec.timestamp_ms) + " plus delay-ms " + std::to_string(ms) +
                   " is after 9999-12-31T23:59:59.999Z");
  }
  return rec.timestamp_ms + ms;
}

// Returns the job-id header's value, nullopt when absent, or the reason it is unusable.
std::variant<std::optional<std::string>, Invalid> job_id_of(const Record& rec) {
  const auto* id = find_header(rec.headers, kHeaderJobId);
  if (id == nullptr) return std::optional<std::string>{};
  if (!id->has_value()) return null_header(kHeaderJobId);
  if (!is_valid_job_id(**id)) {
    return invalid(header_ref(kHeaderJobId) + " must be 1-" + std::to_string(kMaxJobIdChars) +
                   " printable ASCII characters without spaces: " + base::quote_for_message(**id) + " (" +
                   std::to_string((*id)->size()) + " bytes)");
  }
  return *id;
}

// A header of decimal digits only, within [min, max]; nullopt when absent.
std::variant<std::optional<std::int64_t>, Invalid> number_header(const Record& rec, std::string_view name,
                                                                 std::int64_t min, std::int64_t max) {
  const auto* h = find_header(rec.headers, name);
  if (h == nullptr) return std::optional<std::int64_t>{};
  if (!h->has_value()) return null_header(name);
  const std::string& text = **h;
  std::int64_t v = 0;
  const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
  const auto parsed = std::from_chars(text.data(), text.data() + text.size(), v);
  if (!digits || parsed.ec != std::errc{} || v < min || v > max) {
    return invalid(header_ref(name) + " must be a decimal number from " + std::to_string(min) + " to " +
                   std::to_string(max) + ": " + base::quote_for_message(text));
  }
  return std::optional<std::int64_t>{v};
}

// The repeat rule of a schedule (rule.repeats() false: it does not repeat), or the reason it is
// unusable. The first occurrence is the caller's (first_occurrence()).
std::variant<storage::RepeatRule, Invalid> repeat_of(const Record& rec) {
  auto every = number_header(rec, kHeaderRepeatEvery, 1, std::int64_t{1} << 53);
  if (auto* bad = std::get_if<Invalid>(&every)) return std::move(*bad);
  auto count = number_header(rec, kHeaderRepeatCount, 1, 1'000'000'000);
  if (auto* bad = std::get_if<Invalid>(&count)) return std::move(*bad);
  storage::RepeatRule rule;
  rule.every = std::chrono::milliseconds(std::get<std::optional<std::int64_t>>(every).value_or(0));
  rule.count = std::get<std::optional<std::int64_t>>(count).value_or(0);
  if (const auto* cron_text = find_header(rec.headers, kHeaderRepeatCron)) {
    if (!cron_text->has_value()) return null_header(kHeaderRepeatCron);
    if (rule.every.count() > 0) return invalid("headers 'repeat-cron' and 'repeat-every-ms' given: one or the other");
    if (const cron::ParsedCron parsed = cron::parse_cron(**cron_text); !parsed) {
      return invalid(header_ref(kHeaderRepeatCron) + " is not a cron expression: " + parsed.error);
    }
    rule.cron = **cron_text;
  }
  const bool repeats = rule.repeats();
  const auto needs_repeat = [&](std::string_view name) {
    return invalid(header_ref(name) + " given without 'repeat-every-ms' or 'repeat-cron'");
  };
  if (rule.count > 0 && !repeats) return invalid("header 'repeat-count' given without 'repeat-every-ms'");
  if (const auto* tz = find_header(rec.headers, kHeaderRepeatTz)) {
    if (!tz->has_value()) return null_header(kHeaderRepeatTz);
    if (rule.cron.empty()) return invalid("header 'repeat-tz' given without 'repeat-cron'");
    if (cron::find_zone(**tz) == nullptr) {
      return invalid(header_ref(kHeaderRepeatTz) +
                     " is not a time zone of the tz database (an IANA name such as Europe/Berlin, or UTC): " +
                     base::quote_for_message(**tz));
    }
    rule.tz = **tz;
  }
  if (const auto* until = find_header(rec.headers, kHeaderRepeatUntil)) {
    if (!until->has_value()) return null_header(kHeaderRepeatUntil);
    if (!repeats) return needs_repeat(kHeaderRepeatUntil);
    const ParsedTime t = parse_timestamp_ms(**until);
    if (!t) {
      return invalid(header_ref(kHeaderRepeatUntil) +
                     " is not epoch milliseconds or RFC 3339 within 1970..9999: " + base::quote_for_message(**until));
    }
    rule.until = t.epoch_ms;
  }
  if (const auto* catchup = find_header(rec.headers, kHeaderRepeatCatchup)) {
    if (!catchup->has_value()) return null_header(kHeaderRepeatCatchup);
    if (!repeats) return needs_repeat(kHeaderRepeatCatchup);
    const auto c = storage::parse_catchup(**catchup);
    if (!c) {
      return invalid(header_ref(kHeaderRepeatCatchup) +
                     " must be 'latest', 'all' or 'none': " + base::quote_for_message(**catchup));
    }
    rule.catchup = *c;
  }
  return rule;
}

// The first occurrence of a calendar repeat: its first instant at or after `from` (deliver-at,
// or the record's timestamp), or the reason there is none.
std::variant<std::int64_t, Invalid> first_occurrence(const storage::RepeatRule& rule, std::int64_t from) {
  const cron::ParsedCron parsed = cron::parse_cron(rule.cron);
  const auto at =
      cron::next_after(*parsed.expr, cron::Instant(std::chrono::milliseconds(from - 1)), cron::find_zone(rule.tz));
  if (!at || at->time_since_epoch().count() > kMaxEpochMs) {
    return invalid(header_ref(kHeaderRepeatCron) + " names no instant at or after " + format_rfc3339_ms(from) + " in " +
                   rule.tz);
  }
  return at->time_since_epoch().count();
}

}  // namespace

std::optional<Invalid> check_record_size(const Record& rec, const IngestRules& rules) {
  if (rec.value && rec.value->size() > rules.max_value_bytes) {
    return invalid("value is " + std::to_string(rec.value->size()) + " bytes, larger than the limit of " +
                   std::to_string(rules.max_value_bytes) + " bytes");
  }
  if (rules.max_record_bytes > 0 && connectors::record_bytes(rec) > rules.max_record_bytes) {
    return invalid("record is " + std::to_string(connectors::record_bytes(rec)) +
                   " bytes (key, value and headers), larger than the " + std::to_string(rules.max_record_bytes) +
                   " bytes a ready record can take (the producer's message.max.bytes less room for delayd's headers)");
  }
  return std::nullopt;
}

std::optional<Invalid> check_ready_topic(const std::string& topic, const std::string& named_by,
                                         const IngestRules& rules) {
  if (!config::is_valid_topic_name(topic)) {
    return invalid(named_by + " ready topic " + base::quote_for_message(topic) +
                   ", which is not a legal Kafka topic name");
  }
  if (rules.is_own_topic(topic)) {
    return invalid(named_by + " ready topic " + base::quote_for_message(topic) +
                   ", which is delayd's own ingest or DLQ topic");
  }
  return std::nullopt;
}

bool is_valid_business(std::string_view s) noexcept {
  if (s.empty() || s.size() > kMaxBusinessChars) return false;
  for (char c : s) {
    if (!is_business_char(c)) return false;
  }
  return true;
}

bool is_valid_job_id(std::string_view s) noexcept {
  if (s.empty() || s.size() > kMaxJobIdChars) return false;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x21 || u > 0x7e) return false;
  }
  return true;
}

ParsedStatus parse_status(const Record& rec) {
  auto id_or = job_id_of(rec);
  if (auto* bad = std::get_if<Invalid>(&id_or)) return std::move(*bad);
  auto& id = std::get<std::optional<std::string>>(id_or);
  if (!id) return invalid("status record without header 'job-id'");
  const auto* status = find_header(rec.headers, kHeaderStatus);
  if (status == nullptr) return invalid("status record without header 'status'");
  if (!status->has_value()) return null_header(kHeaderStatus);
  StatusReport r;
  r.job_id = std::move(*id);
  if (**status == "running") {
    r.status = ReportStatus::running;
  } else if (**status == "finished") {
    r.status = ReportStatus::finished;
  } else if (**status == "failed") {
    r.status = ReportStatus::failed;
  } else {
    return invalid(header_ref(kHeaderStatus) +
                   " must be 'running', 'finished' or 'failed': " + base::quote_for_message(**status));
  }
  if (const auto* error = find_header(rec.headers, kHeaderError); error != nullptr && error->has_value()) {
    r.error = (*error)->substr(0, kMaxReportErrorBytes);
  }
  auto after = number_header(rec, kHeaderRetryAfter, 0, 86'400'000);
  if (auto* bad = std::get_if<Invalid>(&after)) return std::move(*bad);
  r.retry_after_ms = std::get<std::optional<std::int64_t>>(after);
  auto attempt = number_header(rec, kHeaderAttempt, 1, 1'000'000'000);
  if (auto* bad = std::get_if<Invalid>(&attempt)) return std::move(*bad);
  r.attempt = static_cast<int>(std::get<std::optional<std::int64_t>>(attempt).value_or(0));
  return r;
}

IngestRules ingest_rules(const config::Config& config) {
  IngestRules rules;
  rules.ready_topic_template = config.kafka.ready_topic_template;
  rules.max_value_bytes = static_cast<std::size_t>(config.scheduler.max_value_bytes);
  rules.max_record_bytes = config::max_ready_record_bytes(config);
  for (const auto& t : config::ingest_topics(config)) rules.ingest_topics.insert(t.topic);
  rules.dlq_topic = config.kafka.dlq_topic;
  rules.etf1_drop_past_due = config.etf1.past_due == "drop";
  rules.etf1_grace_ms = config.etf1.grace_s * 1000;
  rules.chronos_output_topic = config.chronos.output_topic;
  for (auto& name : config::split_business_list(config.kafka.allowed_businesses))
    rules.allowed_businesses.insert(std::move(name));
  return rules;
}

std::string derived_job_id(const Record& rec) {
  std::string id = std::string(kDerivedJobIdPrefix) + rec.topic + '-' + std::to_string(rec.partition) + '-' +
                   std::to_string(rec.offset);
  if (rec.timestamp_ms >= 0) id += '@' + std::to_string(rec.timestamp_ms);
  return id;
}

connectors::OutRecord cancel_record(const std::string& ingest_topic, const std::string& job_id) {
  connectors::OutRecord rec;
  rec.topic = ingest_topic;
  rec.key = job_id;
  rec.headers = {{std::string(kHeaderOp), "cancel"}, {std::string(kHeaderJobId), job_id}};
  return rec;
}

ParsedIngest parse_ingest(const Record& rec, const IngestRules& rules) {
  bool cancel = false;
  bool reschedule = false;
  bool upsert = false;
  if (const auto* op = find_header(rec.headers, kHeaderOp)) {
    if (!op->has_value()) return null_header(kHeaderOp);
    if (**op == "cancel") {
      cancel = true;
    } else if (**op == "reschedule") {
      reschedule = true;
    } else if (**op == "upsert") {
      upsert = true;
    } else if (**op != "schedule") {
      return invalid(header_ref(kHeaderOp) +
                     " must be 'schedule', 'upsert', 'cancel' or 'reschedule': " + base::quote_for_message(**op));
    }
  }

  auto id_or = job_id_of(rec);
  if (auto* bad = std::get_if<Invalid>(&id_or)) return std::move(*bad);
  auto& explicit_id = std::get<std::optional<std::string>>(id_or);
  if (explicit_id && explicit_id->starts_with(kDerivedJobIdPrefix)) {
    return invalid(header_ref(kHeaderJobId) + " must not start with '" + std::string(kDerivedJobIdPrefix) +
                   "', which is kept for the ids delayd derives: " + base::quote_for_message(*explicit_id));
  }

  if (cancel) {
    if (!explicit_id) return invalid("op 'cancel' needs header 'job-id'");
    return CancelJob{std::move(*explicit_id)};
  }
  if (reschedule) {
    if (!explicit_id) return invalid("op 'reschedule' needs header 'job-id'");
    auto new_at = deliver_at_of(rec);
    if (auto* bad = std::get_if<Invalid>(&new_at)) return std::move(*bad);
    return RescheduleJob{std::move(*explicit_id), std::get<std::int64_t>(new_at)};
  }
  if (upsert && !explicit_id) return invalid("op 'upsert' needs header 'job-id'");

  if (auto bad = check_record_size(rec, rules)) return std::move(*bad);

  // A calendar repeat may leave its first occurrence to its expression: the first instant at
  // or after the record's timestamp.
  const bool cron_only = find_header(rec.headers, kHeaderRepeatCron) != nullptr &&
                         find_header(rec.headers, kHeaderDeliverAt) == nullptr &&
                         find_header(rec.headers, kHeaderDelayMs) == nullptr;
  std::variant<std::int64_t, Invalid> at_or = std::int64_t{0};
  if (!cron_only) {
    at_or = deliver_at_of(rec);
  } else if (rec.timestamp_ms < 0 || rec.timestamp_ms > kMaxEpochMs) {
    return invalid("header 'repeat-cron' without 'deliver-at' or 'delay-ms' needs the record's timestamp");
  } else {
    at_or = rec.timestamp_ms;
  }
  if (auto* bad = std::get_if<Invalid>(&at_or)) return std::move(*bad);

  const auto* business = find_header(rec.headers, kHeaderBusiness);
  if (business == nullptr) return invalid("missing header 'business'");
  if (!business->has_value()) return null_header(kHeaderBusiness);
  if (!is_valid_business(**business)) {
    return invalid(header_ref(kHeaderBusiness) + " must be 1-" + std::to_string(kMaxBusinessChars) +
                   " characters of [A-Za-z0-9._-]: " + base::quote_for_message(**business) + " (" +
                   std::to_string((*business)->size()) + " bytes)");
  }
  if (!rules.allowed_businesses.empty() && rules.allowed_businesses.count(**business) == 0) {
    return invalid("business " + base::quote_for_message(**business) + " is not in kafka.allowed_businesses");
  }
  std::string topic = config::render_ready_topic(rules.ready_topic_template, **business);
  if (auto bad = check_ready_topic(topic, "business " + base::quote_for_message(**business) + " gives", rules)) {
    return std::move(*bad);
  }

  auto repeat_or = repeat_of(rec);
  if (auto* bad = std::get_if<Invalid>(&repeat_or)) return std::move(*bad);
  storage::RepeatRule& repeat = std::get<storage::RepeatRule>(repeat_or);
  if (!repeat.cron.empty()) {
    at_or = first_occurrence(repeat, std::get<std::int64_t>(at_or));
    if (auto* bad = std::get_if<Invalid>(&at_or)) return std::move(*bad);
  }
  if (repeat.until && *repeat.until < std::get<std::int64_t>(at_or)) {
    return invalid(header_ref(kHeaderRepeatUntil) + " is before the first occurrence, " +
                   format_rfc3339_ms(std::get<std::int64_t>(at_or)));
  }
  auto redrive_or = number_header(rec, kHeaderRedriveCount, 0, kMaxRedriveCount);
  if (auto* bad = std::get_if<Invalid>(&redrive_or)) return std::move(*bad);
  auto lateness_or = number_header(rec, kHeaderMaxLateness, 1, std::int64_t{1} << 53);
  if (auto* bad = std::get_if<Invalid>(&lateness_or)) return std::move(*bad);

  ScheduleJob job;
  job.repeat = std::move(repeat);
  job.max_lateness_ms = std::get<std::optional<std::int64_t>>(lateness_or).value_or(0);
  job.redrive_count = std::get<std::optional<std::int64_t>>(redrive_or).value_or(0);
  job.upsert = upsert;
  job.job_id_derived = !explicit_id.has_value();
  job.job_id = explicit_id ? std::move(*explicit_id) : derived_job_id(rec);
  job.deliver_at_ms = std::get<std::int64_t>(at_or);
  job.business = **business;
  job.ready_topic = std::move(topic);
  job.key = rec.key;
  job.value = rec.value;
  job.carried.reserve(rec.headers.size());
  for (const auto& h : rec.headers) {
    if (h.name == kHeaderDeliverAt || h.name == kHeaderJobId || h.name == kHeaderAttempt || h.name == kHeaderBusiness ||
        h.name == kHeaderRepeat) {
      continue;
    }
    job.carried.push_back(h);
  }
  return job;
}

}  // namespace delayd::contract
