// contract::parse_ingest on a record built from the fuzzer's bytes. parse_ingest promises to be
// total (no exception but bad_alloc escapes, which libFuzzer reports as a crash) and every
// outcome is checked against the invariants ingest_parse.hpp states.
//
// Input: lines separated by '\n', each one field of the record, in order:
//   #key=<bytes>     the key            #value=<bytes>   the value
//   #ts=<decimal>    timestamp_ms (may be negative; unreadable text leaves -1)
//   <name>=<value>   a header           <name>           a header with a null value
// The topic, partition and offset are fixed: delay-ingest, 3, 42.
#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "broker/repeat_plan.hpp"
#include "config/config_names.hpp"
#include "contract/ingest_parse.hpp"
#include "contract/peer_formats.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace {

using delayd::connectors::Header;
using delayd::connectors::Record;
using delayd::contract::CancelJob;
using delayd::contract::IngestRules;
using delayd::contract::Invalid;
using delayd::contract::ParsedIngest;
using delayd::contract::ScheduleJob;

Record record_from(std::string_view in) {
  Record rec;
  rec.topic = "delay-ingest";
  rec.partition = 3;
  rec.offset = 42;
  while (true) {
    const auto nl = in.find('\n');
    const std::string_view line = in.substr(0, nl);
    if (line.starts_with("#key=")) {
      rec.key = std::string(line.substr(5));
    } else if (line.starts_with("#value=")) {
      rec.value = std::string(line.substr(7));
    } else if (line.starts_with("#ts=")) {
      const std::string_view t = line.substr(4);
      std::int64_t ts = -1;
      if (std::from_chars(t.data(), t.data() + t.size(), ts).ec == std::errc{}) rec.timestamp_ms = ts;
    } else if (const auto eq = line.find('='); eq != std::string_view::npos) {
      rec.headers.push_back(Header{std::string(line.substr(0, eq)), std::string(line.substr(eq + 1))});
    } else {
      rec.headers.push_back(Header{std::string(line), std::nullopt});
    }
    if (nl == std::string_view::npos) break;
    in.remove_prefix(nl + 1);
  }
  return rec;
}

bool printable_line(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
}

void check(const Record& rec, const IngestRules& rules, const ParsedIngest& parsed) {
  using delayd::contract::kHeaderAttempt;
  using delayd::contract::kHeaderBusiness;
  using delayd::contract::kHeaderDeliverAt;
  using delayd::contract::kHeaderJobId;
  using delayd::contract::kHeaderRepeat;
  const auto* id = delayd::connectors::find_header(rec.headers, kHeaderJobId);
  if (const auto* bad = std::get_if<Invalid>(&parsed)) {
    FUZZ_CHECK(!bad->reason.empty());
    FUZZ_CHECK(printable_line(bad->reason));
  } else if (const auto* cancel = std::get_if<CancelJob>(&parsed)) {
    FUZZ_CHECK(id != nullptr && id->has_value() && **id == cancel->job_id);
  } else if (const auto* move = std::get_if<delayd::contract::RescheduleJob>(&parsed)) {
    FUZZ_CHECK(id != nullptr && id->has_value() && **id == move->job_id);
    FUZZ_CHECK(move->deliver_at_ms >= 0 && move->deliver_at_ms <= delayd::contract::kMaxEpochMs);
  } else {
    const auto& job = std::get<ScheduleJob>(parsed);
    FUZZ_CHECK(job.deliver_at_ms >= 0 && job.deliver_at_ms <= delayd::contract::kMaxEpochMs);
    FUZZ_CHECK(!job.job_id.empty());
    FUZZ_CHECK(job.job_id_derived == (id == nullptr));
    FUZZ_CHECK(job.job_id == (id == nullptr ? delayd::contract::derived_job_id(rec) : **id));
    FUZZ_CHECK(job.job_id.starts_with(delayd::contract::kDerivedJobIdPrefix) == job.job_id_derived);
    FUZZ_CHECK(rules.allowed_businesses.empty() || rules.allowed_businesses.count(job.business) == 1);
    FUZZ_CHECK(delayd::config::is_valid_topic_name(job.ready_topic));
    FUZZ_CHECK(!rules.is_own_topic(job.ready_topic));
    FUZZ_CHECK(job.key == rec.key && job.value == rec.value);
    // The repeat rule: one kind at most, its other settings only with a repeat, a calendar one
    // that the broker can follow, no end before the first occurrence.
    const auto& rule = job.repeat;
    FUZZ_CHECK(rule.every.count() >= 0 && rule.count >= 0 && job.max_lateness_ms >= 0);
    FUZZ_CHECK(rule.every.count() == 0 || rule.cron.empty());
    FUZZ_CHECK(rule.repeats() || (rule.count == 0 && !rule.until && rule.catchup == delayd::storage::Catchup::latest &&
                                  rule.tz == "UTC"));
    FUZZ_CHECK(!delayd::broker::unusable(rule));
    FUZZ_CHECK(!rule.until || *rule.until >= job.deliver_at_ms);
    FUZZ_CHECK(!job.value || job.value->size() <= rules.max_value_bytes);
    FUZZ_CHECK(rules.max_record_bytes == 0 || delayd::connectors::record_bytes(rec) <= rules.max_record_bytes);
    std::size_t i = 0;
    for (const auto& h : rec.headers) {
      if (h.name == kHeaderDeliverAt || h.name == kHeaderJobId || h.name == kHeaderAttempt ||
          h.name == kHeaderBusiness || h.name == kHeaderRepeat) {
        continue;  // the broker writes these itself (business: kept once, in the job record)
      }
      FUZZ_CHECK(i < job.carried.size() && job.carried[i] == h);
      ++i;
    }
    FUZZ_CHECK(i == job.carried.size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Record rec = record_from(delayd::fuzz::bytes(data, size));

  const IngestRules defaults;
  check(rec, defaults, delayd::contract::parse_ingest(rec, defaults));

  // The same bytes as a status-topic record.
  const auto status = delayd::contract::parse_status(rec);
  if (const auto* bad = std::get_if<Invalid>(&status)) {
    FUZZ_CHECK(!bad->reason.empty() && printable_line(bad->reason));
  } else {
    const auto& r = std::get<delayd::contract::StatusReport>(status);
    const auto* id = delayd::connectors::find_header(rec.headers, delayd::contract::kHeaderJobId);
    FUZZ_CHECK(id != nullptr && id->has_value() && **id == r.job_id);
    FUZZ_CHECK(r.error.size() <= delayd::contract::kMaxReportErrorBytes);
    FUZZ_CHECK(!r.retry_after_ms || (*r.retry_after_ms >= 0 && *r.retry_after_ms <= 86'400'000));
    FUZZ_CHECK(r.attempt >= 0);
  }

  // The branches the defaults cannot reach with small inputs: a value or a record over the
  // limit, a business not allowed, and one whose ready topic would be delayd's own ingest or
  // DLQ topic.
  IngestRules strict;
  strict.ready_topic_template = "{business}";
  strict.max_value_bytes = 8;
  strict.max_record_bytes = 96;
  strict.allowed_businesses = {"orders", "delay-ingest", "a.b_c-d", "b"};
  strict.ingest_topics = {"delay-ingest"};
  strict.dlq_topic = "delay-dlq";
  check(rec, strict, delayd::contract::parse_ingest(rec, strict));

  // The same bytes in the etf1 and Chronos formats (contract/peer_formats.hpp): total, every
  // reason one printable line, every job an upsert to a legal topic that is not delayd's own.
  IngestRules peers = strict;
  peers.allowed_businesses.clear();
  peers.chronos_output_topic = "chronos.out";
  peers.etf1_drop_past_due = size % 2 == 0;
  peers.etf1_grace_ms = 1000;
  for (const auto& parsed : {delayd::contract::parse_etf1(rec, peers), delayd::contract::parse_chronos(rec, peers)}) {
    if (const auto* bad = std::get_if<Invalid>(&parsed)) {
      FUZZ_CHECK(!bad->reason.empty() && printable_line(bad->reason));
    } else if (const auto* job = std::get_if<ScheduleJob>(&parsed)) {
      FUZZ_CHECK(job->upsert);
      FUZZ_CHECK(delayd::contract::is_valid_job_id(job->job_id));
      FUZZ_CHECK(job->deliver_at_ms >= 0 && job->deliver_at_ms <= delayd::contract::kMaxEpochMs);
      FUZZ_CHECK(delayd::config::is_valid_topic_name(job->ready_topic) && !peers.is_own_topic(job->ready_topic));
      FUZZ_CHECK(job->business == delayd::config::topic_business(job->ready_topic));
    } else if (const auto* cancel = std::get_if<delayd::contract::CancelJob>(&parsed)) {
      FUZZ_CHECK(delayd::contract::is_valid_job_id(cancel->job_id));
    } else if (const auto* dropped = std::get_if<delayd::contract::Dropped>(&parsed)) {
      FUZZ_CHECK(printable_line(dropped->reason));
    }
  }
  return 0;
}
