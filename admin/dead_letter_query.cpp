#include "admin/dead_letter_query.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include "broker/dead_letter.hpp"
#include "config/config_names.hpp"
#include "contract/ingest_parse.hpp"

namespace delayd::admin {

namespace {

using connectors::Record;

constexpr std::string_view kParams[] = {"reason", "business", "since", "until", "limit", "cursor"};
// Records one read() asks for at most.
constexpr std::size_t kChunk = 500;
// Partitions a cursor may hold (a dead-letter topic has a handful).
constexpr std::size_t kMaxPartitions = 10'000;
// A partition's records come in offset order and their timestamps almost in order too (each is
// its producer's clock): a walk with `until` stops reading a partition at the first record this
// much later than it, so a record stamped a little earlier than its predecessor is not missed.
constexpr std::int64_t kUntilSlackMs = 60'000;

const std::optional<std::string>* header(const Record& rec, std::string_view name) {
  return connectors::find_header(rec.headers, name);
}

std::optional<std::string> text_header(const Record& rec, std::string_view name) {
  const auto* h = header(rec, name);
  if (h == nullptr || !h->has_value()) return std::nullopt;
  return **h;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::vector<std::string> fingerprint_fields(const DeadLetterFilter& f) {
  return {"dead-letters", f.reason, f.business, f.since ? std::to_string(*f.since) : "-",
          f.until ? std::to_string(*f.until) : "-"};
}

// The headers delayd adds to a record it dead-letters, or to one it redrives: dropped when the
// record is published again (the redrive adds its own afresh).
bool added_by_delayd(std::string_view name) {
  constexpr std::array<std::string_view, 9> kAdded = {
      contract::kHeaderError,           contract::kHeaderReason,           contract::kHeaderSourceTopic,
      contract::kHeaderSourcePartition, contract::kHeaderSourceOffset,     contract::kHeaderRedriveCount,
      contract::kHeaderRedrivenFrom,    contract::kHeaderRedriveOperation, broker::kHeaderValueBytes};
  return std::find(kAdded.begin(), kAdded.end(), name) != kAdded.end();
}

// The headers a ready record has that its ingest record did not (fire_path.cpp's ready_record()),
// other than business, job-id and deliver-at, which the ingest contract reads again; delay-ms
// goes because deliver-at now says when (both at once are refused).
bool added_on_delivery(std::string_view name) {
  return name == contract::kHeaderAttempt || name == contract::kHeaderRepeat || name == contract::kHeaderDelayMs;
}

}  // namespace

std::variant<DeadLetterListRequest, BadRequest> parse_dead_letter_request(
    const std::map<std::string, std::string, std::less<>>& params) {
  DeadLetterListRequest r;
  for (const auto& [name, value] : params) {
    if (name.empty()) return BadRequest{"query", "a parameter without a name"};
    if (std::find(std::begin(kParams), std::end(kParams), name) == std::end(kParams)) {
      return BadRequest{name,
                        "unknown parameter (GET /dead-letters takes reason, business, since, until, limit, cursor)"};
    }
  }
  const auto get = [&](std::string_view name) -> const std::string* {
    const auto it = params.find(name);
    return it == params.end() ? nullptr : &it->second;
  };
  if (const auto* v = get("reason")) {
    if (v->empty() || v->size() > kMaxErrorFilterChars) {
      return BadRequest{"reason", "must be 1-" + std::to_string(kMaxErrorFilterChars) + " bytes"};
    }
    r.filter.reason = *v;
  }
  if (const auto* v = get("business")) {
    if (auto bad = check_business(*v)) return *bad;
    r.filter.business = *v;
  }
  for (const char* name : {"since", "until"}) {
    if (const auto* v = get(name)) {
      auto t = parse_time(name, *v);
      if (auto* bad = std::get_if<BadRequest>(&t)) return *bad;
      (std::string_view(name) == "since" ? r.filter.since : r.filter.until) = std::get<std::int64_t>(t);
    }
  }
  if (r.filter.since && r.filter.until && *r.filter.since > *r.filter.until) {
    return BadRequest{"since", "is after until"};
  }
  if (const auto* v = get("limit")) {
    auto n = parse_limit(*v);
    if (auto* bad = std::get_if<BadRequest>(&n)) return *bad;
    r.limit = std::get<std::size_t>(n);
  }
  if (const auto* v = get("cursor")) {
    r.cursor = decode_dead_letter_cursor(r.filter, *v);
    if (!r.cursor) {
      return BadRequest{"cursor",
                        "not the cursor of a walk with this filter (give the same reason, business, since and "
                        "until as the first page)"};
    }
  }
  return r;
}

std::string encode_dead_letter_cursor(const DeadLetterFilter& filter, const DeadLetterCursor& cursor) {
  std::string out = "d1." + fingerprint_of(fingerprint_fields(filter)) + ".";
  for (std::size_t p = 0; p < cursor.next.size(); ++p) out += (p == 0 ? "" : "-") + std::to_string(cursor.next[p]);
  return out;
}

std::optional<DeadLetterCursor> decode_dead_letter_cursor(const DeadLetterFilter& filter, std::string_view text) {
  const std::string head = "d1." + fingerprint_of(fingerprint_fields(filter)) + ".";
  if (text.substr(0, head.size()) != head) return std::nullopt;
  text.remove_prefix(head.size());
  DeadLetterCursor c;
  while (c.next.size() < kMaxPartitions) {
    const auto dash = text.find('-');
    const auto n = parse_count(text.substr(0, dash));
    if (!n) return std::nullopt;
    c.next.push_back(*n);
    if (dash == std::string_view::npos) return c;
    text.remove_prefix(dash + 1);
  }
  return std::nullopt;
}

std::variant<DeadLetterFilter, BadRequest> parse_stored_dead_letter_filter(const nlohmann::json& filter_json) {
  auto params = filter_params(filter_json, "GET /dead-letters", {"since", "until"});
  if (auto* bad = std::get_if<BadRequest>(&params)) return *bad;
  auto parsed = parse_dead_letter_request(std::get<QueryMap>(params));
  if (auto* bad = std::get_if<BadRequest>(&parsed)) return BadRequest{"filter." + bad->field, bad->reason};
  return std::get<DeadLetterListRequest>(std::move(parsed)).filter;
}

std::variant<RedriveRequest, BadRequest> parse_redrive_request(std::string_view body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return BadRequest{"body", "must be a JSON object with filter, dry_run and rate_per_s"};
  }
  for (const auto& [name, value] : j.items()) {
    if (name != "filter" && name != "dry_run" && name != "rate_per_s") {
      return BadRequest{name, "unknown field (filter, dry_run, rate_per_s)"};
    }
  }
  RedriveRequest r;
  const auto dry = j.find("dry_run");
  if (dry == j.end() || !dry->is_boolean()) return BadRequest{"dry_run", "must be true or false (there is no default)"};
  r.dry_run = dry->get<bool>();
  auto rate = parse_rate(j);
  if (auto* bad = std::get_if<BadRequest>(&rate)) return *bad;
  r.rate_per_s = std::get<std::int64_t>(rate);
  const auto filter = j.find("filter");
  if (filter == j.end()) return BadRequest{"filter", "is required ({} for every dead letter)"};
  auto parsed = parse_stored_dead_letter_filter(*filter);
  if (auto* bad = std::get_if<BadRequest>(&parsed)) return *bad;
  r.filter = std::get<DeadLetterFilter>(std::move(parsed));
  r.filter_json = *filter;
  return r;
}

DeadLetterSummary summarize(const Record& rec) {
  DeadLetterSummary s;
  s.partition = rec.partition;
  s.offset = rec.offset;
  s.at = rec.timestamp_ms;
  s.error = text_header(rec, contract::kHeaderError).value_or("");
  s.reason = text_header(rec, contract::kHeaderReason);
  s.job_id = text_header(rec, contract::kHeaderJobId);
  s.business = text_header(rec, contract::kHeaderBusiness);
  if (auto topic = text_header(rec, contract::kHeaderSourceTopic)) {
    s.source = DeadLetterSummary::Source{std::move(*topic), -1, -1};
    if (auto p = text_header(rec, contract::kHeaderSourcePartition)) s.source->partition = parse_count(*p).value_or(-1);
    if (auto o = text_header(rec, contract::kHeaderSourceOffset)) s.source->offset = parse_count(*o).value_or(-1);
  }
  s.size = connectors::record_bytes(rec);
  s.value_kept = header(rec, broker::kHeaderValueBytes) == nullptr;
  if (auto n = text_header(rec, contract::kHeaderRedriveCount)) s.redrive_count = parse_count(*n).value_or(0);
  return s;
}

nlohmann::json to_json(const DeadLetterSummary& s) {
  const auto opt = [](const std::optional<std::string>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
  nlohmann::json j = {{"id", dead_letter_id(s.partition, s.offset)},
                      {"partition", s.partition},
                      {"offset", s.offset},
                      {"at", s.at},
                      {"error", s.error},
                      {"reason", opt(s.reason)},
                      {"job_id", opt(s.job_id)},
                      {"business", opt(s.business)},
                      {"source", nullptr},
                      {"size", s.size},
                      {"value_kept", s.value_kept},
                      {"redrive_count", s.redrive_count}};
  if (s.source) {
    j["source"] = {{"topic", s.source->topic}, {"partition", s.source->partition}, {"offset", s.source->offset}};
  }
  return j;
}

bool matches(const DeadLetterFilter& f, const DeadLetterSummary& s) {
  if (!f.business.empty() && s.business != f.business) return false;
  if (f.since && s.at < *f.since) return false;
  if (f.until && s.at > *f.until) return false;
  if (!f.reason.empty()) {
    const std::string want = lower(f.reason);
    const bool word = s.reason && lower(*s.reason) == want;
    if (!word && lower(s.error).find(want) == std::string::npos) return false;
  }
  return true;
}

DeadLetterPage walk_dead_letters(DeadLetterSource& source, const DeadLetterFilter& filter,
                                 const std::optional<DeadLetterCursor>& cursor, std::size_t limit,
                                 std::size_t scan_budget) {
  DeadLetterPage page;
  const std::int32_t n = source.partitions();
  if (n <= 0 || limit == 0) return page;
  struct Part {
    std::int64_t pos = 0, end = 0;
    bool over = false;  // read to its end, or past `until`
    std::vector<Record> found;
    std::size_t taken = 0;
  };
  std::vector<Part> parts(static_cast<std::size_t>(n));
  std::size_t budget = scan_budget;
  for (std::int32_t p = 0; p < n; ++p) {
    Part& part = parts[static_cast<std::size_t>(p)];
    const std::int64_t first = source.first_offset(p);
    if (cursor && static_cast<std::size_t>(p) < cursor->next.size()) {
      part.pos = std::max(cursor->next[static_cast<std::size_t>(p)], first);
    } else {
      part.pos = filter.since ? std::max(source.offset_for_time(p, *filter.since), first) : first;
    }
    part.end = source.end_offset(p);
    while (!part.over && part.found.size() < limit && budget > 0) {
      if (part.pos >= part.end) {
        part.over = true;
        break;
      }
      std::vector<Record> chunk = source.read(p, part.pos, part.end, std::min(kChunk, budget));
      if (chunk.empty()) {
        // Only transaction markers (or aborted records) up to where the read stopped: past them.
        if (const auto reached = source.reached_end(); reached && *reached > part.pos) {
          part.pos = *reached;
          continue;
        }
        page.partial = true;  // nothing arrived in time: say so, and come back to it
        break;
      }
      for (Record& rec : chunk) {
        ++page.examined;
        --budget;
        part.pos = rec.offset + 1;
        if (filter.until && rec.timestamp_ms > *filter.until + kUntilSlackMs) {
          part.over = true;
          break;
        }
        if (matches(filter, summarize(rec))) {
          part.found.push_back(std::move(rec));
          if (part.found.size() >= limit) break;
        }
      }
    }
    if (budget == 0 && !part.over) page.partial = true;
  }
  // Merge: the earliest head among the partitions, each partition's records in offset order.
  while (page.records.size() < limit) {
    Part* best = nullptr;
    for (Part& part : parts) {
      if (part.taken == part.found.size()) continue;
      if (best == nullptr || part.found[part.taken].timestamp_ms < best->found[best->taken].timestamp_ms) best = &part;
    }
    if (best == nullptr) break;
    page.records.push_back(best->found[best->taken++]);
  }
  DeadLetterCursor next;
  bool more = false;
  for (Part& part : parts) {
    if (part.taken < part.found.size()) {
      next.next.push_back(part.found[part.taken].offset);
      more = true;
    } else {
      next.next.push_back(part.pos);
      if (!part.over) more = true;
    }
  }
  if (more) page.next = std::move(next);
  return page;
}

nlohmann::json dead_letter_page_json(const DeadLetterFilter& filter, const DeadLetterPage& page) {
  nlohmann::json list = nlohmann::json::array();
  for (const Record& rec : page.records) list.push_back(to_json(summarize(rec)));
  return {{"dead_letters", std::move(list)},
          {"next", page.next ? nlohmann::json(encode_dead_letter_cursor(filter, *page.next)) : nlohmann::json()},
          {"snapshot", false},
          {"partial", page.partial},
          {"examined", page.examined}};
}

RedriveCount count_redrivable(DeadLetterSource& source, const DeadLetterFilter& filter, std::int64_t max_redrives,
                              const RedriveTarget& target, std::chrono::steady_clock::duration time_limit) {
  const auto until = std::chrono::steady_clock::now() + time_limit;
  RedriveCount count;
  std::optional<DeadLetterCursor> cursor;
  while (std::chrono::steady_clock::now() < until) {
    const DeadLetterPage page = walk_dead_letters(source, filter, cursor, kMaxLimit);
    for (const Record& rec : page.records) {
      ++count.matched;
      auto r = redrive_record(rec, max_redrives, target, "");
      if (auto* why = std::get_if<std::string>(&r)) ++count.would_skip[*why];
    }
    cursor = page.next;
    if (!cursor) {
      count.complete = true;
      break;
    }
  }
  return count;
}

nlohmann::json to_json(const RedriveCount& count) {
  return {{"dry_run", true},
          {"matched", count.matched},
          {"would_skip", count.would_skip.empty() ? nlohmann::json::object() : nlohmann::json(count.would_skip)},
          {"complete", count.complete}};
}

std::string dead_letter_id(std::int32_t partition, std::int64_t offset) {
  return std::to_string(partition) + ":" + std::to_string(offset);
}

RedriveTarget redrive_target(const config::Config& config) {
  RedriveTarget target(config.kafka.ingest_topic);
  for (const auto& t : config::ingest_topics(config)) {
    if (t.format != config::IngestFormat::delayd) target.other_formats[t.topic] = std::string(to_string(t.format));
  }
  return target;
}

std::variant<Redriven, std::string> redrive_record(const Record& rec, std::int64_t max_redrives,
                                                   const RedriveTarget& target, const std::string& operation) {
  const std::string& ingest_topic = target.ingest_topic;
  const DeadLetterSummary s = summarize(rec);
  if (!s.value_kept) return std::string("its value was dropped to fit the dead-letter topic");
  if (s.source) {
    if (const auto other = target.other_formats.find(s.source->topic); other != target.other_formats.end()) {
      return "read from " + other->first + " in the " + other->second + " format: publish it there again";
    }
  }
  // A delivery letter of a job read in a peer format names its business "topic:<target>", which
  // delayd's own format cannot: published to the ingest topic it would only be dead-lettered
  // again, as an invalid record. Its schedule belongs on the peer's topic.
  if (!s.source && s.business && s.business->starts_with(config::kTopicBusinessPrefix)) {
    return "its job was read in a peer format (business " + *s.business +
           "), which delayd's ingest topic cannot schedule: publish it to the peer's topic again";
  }
  if (s.redrive_count >= max_redrives) {
    return "redriven " + std::to_string(s.redrive_count) + " times already (admin.max_redrives " +
           std::to_string(max_redrives) + ")";
  }
  const bool ingest_letter = s.source.has_value();
  Redriven out;
  out.record.topic = ingest_topic;
  out.record.key = rec.key;
  out.record.value = rec.value;
  for (const connectors::Header& h : rec.headers) {
    if (added_by_delayd(h.name) || (!ingest_letter && added_on_delivery(h.name))) continue;
    // A derived job-id (kDerivedJobIdPrefix) may not be given in a header: the record gets a new
    // one from its new offset.
    if (h.name == contract::kHeaderJobId && h.value && h.value->rfind(contract::kDerivedJobIdPrefix, 0) == 0) {
      continue;
    }
    out.record.headers.push_back(h);
  }
  out.record.headers.push_back({std::string(contract::kHeaderRedriveCount), std::to_string(s.redrive_count + 1)});
  out.record.headers.push_back({std::string(contract::kHeaderRedrivenFrom), dead_letter_id(s.partition, s.offset)});
  out.record.headers.push_back({std::string(contract::kHeaderRedriveOperation), operation});
  if (ingest_letter && s.source->topic == ingest_topic && s.source->partition >= 0) {
    out.record.partition = static_cast<std::int32_t>(s.source->partition);
  }
  return out;
}

}  // namespace delayd::admin
