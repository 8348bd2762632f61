#include "contract/peer_formats.hpp"

#include <charconv>

#include "base/text_encoding.hpp"
#include "config/config_names.hpp"
#include "contract/time_format.hpp"

namespace delayd::contract {

namespace {

using connectors::find_header;
using connectors::Record;

Invalid invalid(std::string reason) { return Invalid{std::move(reason)}; }

std::string quoted_header(std::string_view name) { return "header '" + std::string(name) + "'"; }

// A header's value; nullopt when absent or null.
std::optional<std::string_view> value_of(const Record& rec, std::string_view name) {
  const auto* h = find_header(rec.headers, name);
  if (h == nullptr || !h->has_value()) return std::nullopt;
  return std::string_view(**h);
}

// The ready topic a record names, checked as a business's would be.
std::optional<Invalid> check_target(const std::string& topic, std::string_view named_by, const IngestRules& rules) {
  if (auto bad = check_ready_topic(topic, std::string(named_by) + " names", rules)) return bad;
  if (!rules.allowed_businesses.empty() && rules.allowed_businesses.count(topic) == 0) {
    return invalid(std::string(named_by) + " names topic " + base::quote_for_message(topic) +
                   ", which is not in kafka.allowed_businesses");
  }
  return std::nullopt;
}

// The job of a format that names its ready topic: latest wins, business "topic:<topic>".
ScheduleJob topic_job(std::string job_id, std::int64_t at_ms, std::string topic) {
  ScheduleJob job;
  job.job_id = std::move(job_id);
  job.deliver_at_ms = at_ms;
  job.business = config::topic_business(topic);
  job.ready_topic = std::move(topic);
  job.upsert = true;
  return job;
}

}  // namespace

std::string etf1_job_id(std::string_view key) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(key.size());
  for (char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x21 && c <= 0x7e && c != '%') {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
  }
  return out;
}

ParsedIngest parse_etf1(const Record& rec, const IngestRules& rules) {
  if (!rec.key || rec.key->empty()) return invalid("etf1 schedule without a key (the schedule id)");
  std::string id = etf1_job_id(*rec.key);
  if (id.size() > kMaxJobIdChars) {
    return invalid("etf1 schedule id is " + std::to_string(id.size()) + " characters once encoded, more than " +
                   std::to_string(kMaxJobIdChars) + ": " + base::quote_for_message(*rec.key));
  }
  if (!rec.value) {
    if (const auto own = value_of(rec, kHeaderOwnTombstone)) {
      return Ignored{"delayd's own tombstone (" + base::quote_for_message(*own, 20) + ")"};
    }
    return CancelJob{std::move(id)};
  }
  const auto epoch = value_of(rec, kEtf1Epoch);
  if (!epoch) return invalid("etf1 schedule without " + quoted_header(kEtf1Epoch) + " (or it is null)");
  std::int64_t seconds = 0;
  const bool digits = !epoch->empty() && epoch->find_first_not_of("0123456789") == std::string_view::npos;
  const auto parsed = std::from_chars(epoch->data(), epoch->data() + epoch->size(), seconds);
  if (!digits || parsed.ec != std::errc{} || seconds > kMaxEpochMs / 1000) {
    return invalid(quoted_header(kEtf1Epoch) + " must be whole seconds since 1970 (decimal digits, up to year 9999): " +
                   base::quote_for_message(*epoch));
  }
  const auto target = value_of(rec, kEtf1TargetTopic);
  if (!target) return invalid("etf1 schedule without " + quoted_header(kEtf1TargetTopic) + " (or it is null)");
  std::string topic(*target);
  if (auto bad = check_target(topic, quoted_header(kEtf1TargetTopic), rules)) return std::move(*bad);
  if (auto bad = check_record_size(rec, rules)) return std::move(*bad);
  const std::int64_t at_ms = seconds * 1000;
  if (rules.etf1_drop_past_due && rec.timestamp_ms >= 0 && at_ms < rec.timestamp_ms - rules.etf1_grace_ms) {
    return Dropped{std::move(id), "past due when produced: epoch " + std::string(*epoch) + " s, produced at " +
                                      format_rfc3339_ms(rec.timestamp_ms) + " (etf1.past_due = drop, grace " +
                                      std::to_string(rules.etf1_grace_ms / 1000) + " s)"};
  }
  ScheduleJob job = topic_job(std::move(id), at_ms, std::move(topic));
  if (const auto key = value_of(rec, kEtf1TargetKey)) job.key = std::string(*key);
  job.value = rec.value;
  job.carried = rec.headers;
  job.carried.push_back(
      {std::string(kEtf1Timestamp), std::to_string(rec.timestamp_ms >= 0 ? rec.timestamp_ms / 1000 : 0)});
  job.carried.push_back({std::string(kEtf1Key), *rec.key});
  job.carried.push_back({std::string(kEtf1Topic), rec.topic});
  return job;
}

ParsedIngest parse_chronos(const Record& rec, const IngestRules& rules) {
  const auto id = value_of(rec, kChronosId);
  if (!id) return invalid("Chronos record without " + quoted_header(kChronosId) + " (or it is null)");
  if (!is_valid_job_id(*id)) {
    return invalid(quoted_header(kChronosId) + " must be 1-" + std::to_string(kMaxJobIdChars) +
                   " printable ASCII characters without spaces: " + base::quote_for_message(*id));
  }
  std::string_view op = "schedule";
  if (const auto* h = find_header(rec.headers, kHeaderOp)) {
    if (!h->has_value()) return invalid("header 'op' is null");
    op = **h;
  }
  if (op == "cancel") return CancelJob{std::string(*id)};
  if (op != "schedule" && op != "reschedule") {
    return invalid("header 'op' must be 'schedule', 'cancel' or 'reschedule': " + base::quote_for_message(op));
  }
  const auto deadline = value_of(rec, kChronosDeadline);
  if (!deadline) return invalid("Chronos record without " + quoted_header(kChronosDeadline) + " (or it is null)");
  const ParsedTime t = parse_rfc3339_ms(*deadline);
  if (!t) {
    const bool no_offset = parse_rfc3339_ms(std::string(*deadline) + "Z").error == TimeError::none;
    return invalid(quoted_header(kChronosDeadline) +
                   (no_offset ? " has no UTC offset (add Z or +HH:MM): " : " is not RFC 3339 with an offset: ") +
                   base::quote_for_message(*deadline));
  }
  if (op == "reschedule") return RescheduleJob{std::string(*id), t.epoch_ms};
  if (rules.chronos_output_topic.empty()) return invalid("no chronos.output_topic is configured");
  if (auto bad = check_target(rules.chronos_output_topic, "chronos.output_topic", rules)) return std::move(*bad);
  if (auto bad = check_record_size(rec, rules)) return std::move(*bad);
  ScheduleJob job = topic_job(std::string(*id), t.epoch_ms, rules.chronos_output_topic);
  job.key = rec.key;
  job.value = rec.value;
  job.carried = rec.headers;
  return job;
}

connectors::OutRecord etf1_tombstone(const std::string& topic, std::int32_t partition, std::string key,
                                     std::string_view why) {
  connectors::OutRecord r;
  r.topic = topic;
  r.partition = partition;
  r.key = std::move(key);
  r.headers.push_back({std::string(kHeaderOwnTombstone), std::string(why)});
  return r;
}

}  // namespace delayd::contract
