// The ingest contract: turns one record read from the ingest topic into a job to schedule, a
// cancel or reschedule request, or a reason to dead-letter it (and a status-topic record into a
// report, parse_status()). Pure and total: no I/O, no clock, no exception on any input (only
// std::bad_alloc can escape), so a hostile record can never stall a partition.
//
// Headers (names matched exactly and case-sensitively; if a name repeats, the first counts):
//   op          "schedule" (default), "upsert", "cancel" or "reschedule". An upsert is a schedule
//               where the latest wins (docs/producing.md "Latest wins"): it replaces a waiting job of its
//               job-id (required), or starts a new one when the id's job was delivered or is
//               final.
//   job-id      1-200 printable ASCII characters (0x21-0x7E), not starting with "auto:". Optional
//               for schedule: without it the id is derived from the record's position and
//               timestamp, "auto:<topic>-<partition>-<offset>@<timestamp ms>", which is stable
//               when the same record is redelivered after a crash (a replay reschedules the same
//               job instead of adding a twin), can never equal an id a producer chose (the
//               prefix is refused in job-id), and differs for a record at the same offset of a
//               re-created topic (its timestamp differs). Required for cancel.
//   deliver-at  Unix epoch milliseconds (decimal digits) or RFC 3339 (see time_format.hpp).
//   delay-ms    Alternative to deliver-at: decimal milliseconds after the record's timestamp.
//               Exactly one of deliver-at and delay-ms must be present for schedule.
//   business    [A-Za-z0-9._-]{1,100}; names the ready topic through the configured template;
//               must be in rules.allowed_businesses when that is not empty.
// Size: a value over max_value_bytes, or a whole record (key, value, header names and values)
// over max_record_bytes, is refused: it could never be delivered as a ready record.
//   repeat-every-ms  Optional: the job repeats every this many milliseconds (1..2^53), at
//               deliver-at + k * interval, each ready record with a `repeat` header (from 1).
//   repeat-count     Optional, with repeat-every-ms or repeat-cron: at most this many occurrences
//               (1..10^9).
//   repeat-cron      Optional, instead of repeat-every-ms: a calendar repeat, a cron expression
//               (cron/cron_expr.hpp's grammar). deliver-at and delay-ms become optional: the
//               first occurrence is the expression's first instant at or after deliver-at (or
//               the record's timestamp without either).
//   repeat-tz        Optional, with repeat-cron: the IANA zone it is read in (default UTC).
//   repeat-until     Optional, with either repeat: no occurrence after this instant (epoch ms or
//               RFC 3339); before the first occurrence is a bad record.
//   repeat-catchup   Optional, with either repeat: latest (default), all or none
//               (storage::Catchup; broker/repeat_plan.hpp applies it).
//   max-lateness-ms  Optional, any schedule (1..2^53): delayd does not deliver it later than
//               deliver-at + this; a job it reaches later is dead-lettered as expired and ends
//               failed, a repeat's occurrence is skipped instead.
// A cancel reads only op and job-id; every other header, and the value, are ignored. A
// reschedule reads op, job-id (required) and exactly one of deliver-at and delay-ms (delay-ms
// counts from the reschedule record's own timestamp).
//
// The status topic (docs/consuming.md, "Job lifecycle"): parse_status() reads a consumer's report, headers
//   job-id (required, as above), status (running | finished | failed), error (optional, cut to
//   1000 bytes), retry-after-ms (optional, 0..86400000, for failed), attempt (optional, the ready
//   record's attempt header echoed: a report about another delivery than the job's current one
//   is ignored, which makes reports exact across redeliveries and replays).
//
// Invariants of a ScheduleJob: 0 <= deliver_at_ms <= kMaxEpochMs; job_id is non-empty;
// ready_topic is a legal Kafka topic name other than the ingest and DLQ topics; `carried` holds
// the record's headers in their order, minus every deliver-at, job-id, attempt, business and
// repeat header (the broker writes its own normalized ones on the ready record; business is kept
// once, in the job record, not twice).
// Threading: pure functions over their arguments; callable from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>

#include "config/config.hpp"
#include "connectors/record.hpp"
#include "contract/time_format.hpp"
#include "storage/job_state.hpp"
#include "storage/repeat_rule.hpp"

namespace delayd::contract {

// Header names of the ingest contract, and of the ready record the broker writes.
inline constexpr std::string_view kHeaderOp = "op";
inline constexpr std::string_view kHeaderJobId = "job-id";
inline constexpr std::string_view kHeaderDeliverAt = "deliver-at";
inline constexpr std::string_view kHeaderDelayMs = "delay-ms";
inline constexpr std::string_view kHeaderBusiness = "business";
inline constexpr std::string_view kHeaderAttempt = "attempt";
inline constexpr std::string_view kHeaderRepeatEvery = "repeat-every-ms";
inline constexpr std::string_view kHeaderRepeatCount = "repeat-count";
inline constexpr std::string_view kHeaderRepeatCron = "repeat-cron";
inline constexpr std::string_view kHeaderRepeatTz = "repeat-tz";
inline constexpr std::string_view kHeaderRepeatUntil = "repeat-until";
inline constexpr std::string_view kHeaderRepeatCatchup = "repeat-catchup";
inline constexpr std::string_view kHeaderMaxLateness = "max-lateness-ms";
// The occurrence of a repeating job, on its ready records.
inline constexpr std::string_view kHeaderRepeat = "repeat";
inline constexpr std::string_view kHeaderStatus = "status";
inline constexpr std::string_view kHeaderRetryAfter = "retry-after-ms";
inline constexpr std::size_t kMaxReportErrorBytes = 1000;
// The dead-letter record carries the reason in this header (in full), and in a word
// (broker/dead_letter.hpp's DeadLetterReason) in the next; an ingest record's dead letter also
// says where the record was read.
inline constexpr std::string_view kHeaderError = "error";
inline constexpr std::string_view kHeaderReason = "reason";
inline constexpr std::string_view kHeaderSourceTopic = "source-topic";
inline constexpr std::string_view kHeaderSourcePartition = "source-partition";
inline constexpr std::string_view kHeaderSourceOffset = "source-offset";
// A dead letter published again to the ingest topic (POST /dead-letters/redrive) says how many
// times it has been, which dead letter it was ("<partition>:<offset>" of the dead-letter topic)
// and which operation published it. A job whose record is failed is revived by an ingest record
// of its job-id with a higher redrive-count than the one it was created with (accept.lua).
inline constexpr std::string_view kHeaderRedriveCount = "redrive-count";
inline constexpr std::string_view kHeaderRedrivenFrom = "redriven-from";
inline constexpr std::string_view kHeaderRedriveOperation = "redrive-operation";
// A redrive-count header counts up to one past the highest admin.max_redrives.
inline constexpr std::int64_t kMaxRedriveCount = config::kMaxRedrives + 1;

inline constexpr std::size_t kMaxBusinessChars = 100;
// Derived job-ids start with this; a job-id header may not.
inline constexpr std::string_view kDerivedJobIdPrefix = "auto:";
inline constexpr std::size_t kMaxJobIdChars = 200;

// A business name: 1 to kMaxBusinessChars of A-Z a-z 0-9 . _ -
bool is_valid_business(std::string_view s) noexcept;
// A job-id: 1 to kMaxJobIdChars printable ASCII characters without spaces.
bool is_valid_job_id(std::string_view s) noexcept;

struct IngestRules {
  std::string ready_topic_template = "ready.{business}";
  std::size_t max_value_bytes = 1'000'000;
  std::size_t max_record_bytes = 0;                       // 0: no limit beyond max_value_bytes
  std::set<std::string, std::less<>> allowed_businesses;  // empty: every valid name
  // A business whose ready topic would be one of these is refused, so a record can never be
  // published back into delayd's own input. Empty sets and strings disable the check.
  std::set<std::string, std::less<>> ingest_topics;
  std::string dlq_topic;
  // The etf1 and Chronos formats (contract/peer_formats.hpp).
  bool etf1_drop_past_due = false;  // etf1.past_due = drop
  std::int64_t etf1_grace_ms = 0;
  std::string chronos_output_topic;
  // Whether `topic` (a ready topic a record names) may be written: not delayd's own input.
  bool is_own_topic(std::string_view topic) const {
    return ingest_topics.count(topic) > 0 || (!dlq_topic.empty() && topic == dlq_topic);
  }
};

// The rules a loaded configuration implies.
IngestRules ingest_rules(const config::Config& config);

struct ScheduleJob {
  std::string job_id;
  bool job_id_derived = false;  // true when job-id was absent and the id comes from the offset
  std::int64_t deliver_at_ms = 0;
  std::string business;
  std::string ready_topic;
  std::optional<std::string> key;
  std::optional<std::string> value;
  connectors::Headers carried;
  storage::RepeatRule repeat{};      // the repeat-* headers; not repeating unless repeat.repeats()
  std::int64_t max_lateness_ms = 0;  // max-lateness-ms; 0: no limit
  std::int64_t redrive_count = 0;    // the redrive-count header (0: not a redriven dead letter)
  bool upsert = false;               // latest wins (op upsert, and the etf1 and Chronos formats)
  bool operator==(const ScheduleJob&) const = default;
};

struct RescheduleJob {
  std::string job_id;
  std::int64_t deliver_at_ms = 0;
  bool operator==(const RescheduleJob&) const = default;
};

struct CancelJob {
  std::string job_id;
  bool operator==(const CancelJob&) const = default;
};

struct Invalid {
  std::string reason;  // one line of printable ASCII, for the DLQ record's `error` header
  bool operator==(const Invalid&) const = default;
};

// A record delayd reads and leaves alone on purpose: its own etf1 tombstone.
struct Ignored {
  std::string why;
  bool operator==(const Ignored&) const = default;
};

// A valid schedule that a policy drops (etf1.past_due = drop): counted, not scheduled.
struct Dropped {
  std::string job_id;
  std::string reason;
  bool operator==(const Dropped&) const = default;
};

using ParsedIngest = std::variant<ScheduleJob, CancelJob, RescheduleJob, Invalid, Ignored, Dropped>;

ParsedIngest parse_ingest(const connectors::Record& rec, const IngestRules& rules);

// Shared by every format (contract/peer_formats.hpp): a value or whole record too large to be
// delivered, and a ready topic delayd may not write ("<named_by> ready topic ..., which ...").
std::optional<Invalid> check_record_size(const connectors::Record& rec, const IngestRules& rules);
std::optional<Invalid> check_ready_topic(const std::string& topic, const std::string& named_by,
                                         const IngestRules& rules);

using storage::ReportStatus;
struct StatusReport {
  std::string job_id;
  ReportStatus status = ReportStatus::finished;
  std::string error;                           // at most kMaxReportErrorBytes
  std::optional<std::int64_t> retry_after_ms;  // for failed
  int attempt = 0;                             // 0: not given
  bool operator==(const StatusReport&) const = default;
};
using ParsedStatus = std::variant<StatusReport, Invalid>;

// A record of the status topic. Pure and total like parse_ingest().
ParsedStatus parse_status(const connectors::Record& rec);

// The id a record gets when it carries no job-id (see job-id above).
std::string derived_job_id(const connectors::Record& rec);

// The record that cancels `job_id`, for `ingest_topic`: op=cancel and the job-id, keyed by the id
// (so it lands in the job's partition when the job was keyed by its id too, as delayctl does).
connectors::OutRecord cancel_record(const std::string& ingest_topic, const std::string& job_id);

}  // namespace delayd::contract
