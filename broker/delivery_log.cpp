#include "broker/delivery_log.hpp"

#include <charconv>
#include <tuple>
#include <utility>

#include "contract/ingest_parse.hpp"

namespace delayd::broker {

namespace {

// The value of the last header named `name` (delayd's own headers come after the producer's).
const std::optional<std::string>* last_header(const connectors::Headers& headers, std::string_view name) {
  for (auto h = headers.rbegin(); h != headers.rend(); ++h) {
    if (h->name == name) return &h->value;
  }
  return nullptr;
}

std::optional<int> positive_int(std::string_view text) {
  int n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n <= 0) return std::nullopt;
  return n;
}

// "<a>" or "<a>/<r>": an attempt, and a repeat's occurrence if it names one.
std::optional<std::pair<int, int>> attempt_token(std::string_view text) {
  const auto slash = text.find('/');
  const auto attempt = positive_int(text.substr(0, slash));
  if (!attempt) return std::nullopt;
  if (slash == std::string_view::npos) return std::pair{*attempt, 0};
  const auto repeat = positive_int(text.substr(slash + 1));
  if (!repeat) return std::nullopt;
  return std::pair{*attempt, *repeat};
}

constexpr std::string_view kReady = "ready ";
constexpr std::string_view kDead = "dead ";
constexpr std::size_t kReadChunk = 5000;

}  // namespace

std::optional<connectors::OutRecord> log_record(const connectors::OutRecord& rec, TagKind kind,
                                                const std::string& topic, std::int32_t partition) {
  if (kind != TagKind::ready && kind != TagKind::failed_dlq) return std::nullopt;
  const auto* id = last_header(rec.headers, contract::kHeaderJobId);
  const auto* attempt = last_header(rec.headers, contract::kHeaderAttempt);
  if (id == nullptr || attempt == nullptr || !id->has_value() || !attempt->has_value()) return std::nullopt;
  const auto n = positive_int(**attempt);
  if (!n) return std::nullopt;
  std::string token = std::to_string(*n);
  const auto* repeat = last_header(rec.headers, contract::kHeaderRepeat);
  if (repeat != nullptr && repeat->has_value()) {
    const auto r = positive_int(**repeat);
    if (!r) return std::nullopt;
    token += "/" + std::to_string(*r);
  }
  connectors::OutRecord out;
  out.topic = topic;
  out.partition = partition;
  out.key = **id;
  if (kind == TagKind::ready) {
    out.value = std::string(kReady) + token;
  } else {
    const auto* error = last_header(rec.headers, contract::kHeaderError);
    out.value = std::string(kDead) + token + " " + (error && error->has_value() ? **error : std::string());
  }
  return out;
}

std::optional<LoggedDelivery> parse_log_record(const connectors::Record& rec) {
  if (!rec.key || !rec.value) return std::nullopt;
  std::string_view v = *rec.value;
  LoggedDelivery d;
  d.job_id = *rec.key;
  if (v.starts_with(kReady)) {
    v.remove_prefix(kReady.size());
    const auto n = attempt_token(v);
    if (!n) return std::nullopt;
    std::tie(d.attempt, d.repeat) = *n;
    return d;
  }
  if (v.starts_with(kDead)) {
    v.remove_prefix(kDead.size());
    const auto space = v.find(' ');
    const auto n = attempt_token(v.substr(0, space));
    if (!n) return std::nullopt;
    d.kind = LoggedDelivery::Kind::dead;
    std::tie(d.attempt, d.repeat) = *n;
    if (space != std::string_view::npos) d.reason = std::string(v.substr(space + 1));
    return d;
  }
  return std::nullopt;
}

std::vector<LoggedDelivery> read_delivery_log(connectors::TopicReader& reader, const std::string& topic,
                                              std::int32_t partition, std::int64_t since_ms, int timeout_ms) {
  std::vector<LoggedDelivery> out;
  const std::int64_t end = reader.watermarks(topic, partition, timeout_ms).high;
  std::int64_t from = reader.offset_for_time(topic, partition, since_ms, timeout_ms);
  while (from < end) {
    const auto records = reader.read(topic, partition, from, end, kReadChunk, timeout_ms);
    // None: the rest up to `end` are transaction markers or aborted records, which a committed
    // read skips (the partition's end was reached).
    if (records.empty()) break;
    for (const auto& r : records) {
      if (auto d = parse_log_record(r)) out.push_back(std::move(*d));
    }
    from = records.back().offset + 1;
  }
  return out;
}

}  // namespace delayd::broker
