// The console's dead letters: what a client may ask of GET /dead-letters and of a redrive, read and
// checked in one place; a dead-letter record as the console shows it; the walk over the
// dead-letter topic; and the ingest record a redrive publishes for a dead letter.
//
//   GET /dead-letters?reason=&business=&since=&until=&limit=&cursor=
//   reason    the record's reason word (broker/dead_letter.hpp: invalid_record, ack_timeout, ...)
//             or a piece of its error text, any case (at most kMaxErrorFilterChars)
//   business  its business header equals this (the ingest contract's rules)
//   since, until  its timestamp (when it was dead-lettered) is at or after / at or before this:
//             epoch ms or RFC 3339
//   limit     1..kMaxLimit (default kDefaultLimit); cursor: the `next` of the previous page
//
// The walk. The topic's partitions are read each in offset order from the cursor's offsets (a new
// walk: from `since`'s offset, by the broker's time index, or the first kept one), and a page
// merges them in timestamp order (ties by partition, then offset). The cursor holds, per
// partition, the next offset to look at, so a record is never listed twice in one walk; records
// dead-lettered after the walk passed their place come in later pages only if their partition
// has not been read to its end yet (the answer is not a snapshot). A page reads at most
// kScanBudget records: past that it answers with what it found and a cursor (partial: true).
//
// A redrive (POST /dead-letters/redrive) publishes each matching dead letter back to the ingest
// topic (redrive_record()): the original key, value and headers, less what delayd added when it
// dead-lettered it, plus redrive-count (one more than the record's), redriven-from (its place in
// the dead-letter topic) and redrive-operation. A record redriven max_redrives times already, or
// whose value was dropped to fit the dead-letter topic, is skipped with the reason.
// Threading: pure functions, except walk_dead_letters() and count_redrivable() (they read Kafka
// through their source).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "admin/job_query.hpp"
#include "config/config.hpp"
#include "connectors/record.hpp"

namespace delayd::admin {

struct DeadLetterFilter {
  std::string reason;                        // empty: any
  std::string business;                      // empty: any
  std::optional<std::int64_t> since, until;  // epoch ms, inclusive
};

// Per partition of the dead-letter topic, the next offset a walk looks at (index: partition).
struct DeadLetterCursor {
  std::vector<std::int64_t> next;
  bool operator==(const DeadLetterCursor&) const = default;
};

struct DeadLetterListRequest {
  DeadLetterFilter filter;
  std::size_t limit = kDefaultLimit;
  std::optional<DeadLetterCursor> cursor;  // nullopt: a new walk
};

std::variant<DeadLetterListRequest, BadRequest> parse_dead_letter_request(
    const std::map<std::string, std::string, std::less<>>& params);
std::string encode_dead_letter_cursor(const DeadLetterFilter& filter, const DeadLetterCursor& cursor);
// nullopt: not a cursor of a walk with this filter.
std::optional<DeadLetterCursor> decode_dead_letter_cursor(const DeadLetterFilter& filter, std::string_view text);

// A redrive: {"filter": {reason, business, since, until as strings (since and until may be
// numbers)}, "dry_run": true|false, "rate_per_s": N}. dry_run is required.
struct RedriveRequest {
  DeadLetterFilter filter;
  nlohmann::json filter_json;  // the filter as parameters, to store with the operation
  bool dry_run = true;
  std::int64_t rate_per_s = kDefaultRate;
  std::string access;  // who asked (admin/access.hpp's name)
};
std::variant<RedriveRequest, BadRequest> parse_redrive_request(std::string_view body);
// The filter stored with a redrive operation, read again.
std::variant<DeadLetterFilter, BadRequest> parse_stored_dead_letter_filter(const nlohmann::json& filter_json);

// One dead-letter record as the console lists it.
struct DeadLetterSummary {
  std::int32_t partition = -1;
  std::int64_t offset = -1;
  std::int64_t at = -1;  // the record's timestamp, epoch ms (-1: none)
  std::string error;
  std::optional<std::string> reason, job_id, business;
  struct Source {
    std::string topic;
    std::int64_t partition = -1, offset = -1;
  };
  std::optional<Source> source;  // set for a dead-lettered ingest record
  std::size_t size = 0;          // key, value and headers (connectors::record_bytes)
  bool value_kept = true;        // false: the value was dropped to fit (value-bytes header)
  std::int64_t redrive_count = 0;
};
DeadLetterSummary summarize(const connectors::Record& rec);
nlohmann::json to_json(const DeadLetterSummary& s);
bool matches(const DeadLetterFilter& filter, const DeadLetterSummary& s);

// Where a walk reads from: the dead-letter topic's partitions (TopicReader in the service; a
// vector of records in the unit tests).
class DeadLetterSource {
 public:
  virtual ~DeadLetterSource() = default;
  virtual std::int32_t partitions() = 0;  // 0: the topic does not exist
  virtual std::int64_t first_offset(std::int32_t partition) = 0;
  virtual std::int64_t end_offset(std::int32_t partition) = 0;
  // The first offset with a timestamp at or after `ms` (end_offset() if none).
  virtual std::int64_t offset_for_time(std::int32_t partition, std::int64_t ms) = 0;
  // Records of [from, to), at most max, in offset order.
  virtual std::vector<connectors::Record> read(std::int32_t partition, std::int64_t from, std::int64_t to,
                                               std::size_t max) = 0;
  // Where the last read() stopped when it reached `to` or the partition's end: the next offset,
  // past offsets no record stands for (transaction markers, aborted records: the dead letters are
  // written in transactions with kafka.delivery = exactly_once). nullopt otherwise.
  virtual std::optional<std::int64_t> reached_end() { return std::nullopt; }
};

inline constexpr std::size_t kScanBudget = 20'000;

struct DeadLetterPage {
  std::vector<connectors::Record> records;  // the matching ones, in the walk's order
  std::optional<DeadLetterCursor> next;     // nullopt: the walk is over
  std::size_t examined = 0;                 // records read
  bool partial = false;                     // the scan budget ended the page early
};
// The next page of a walk (see above). Throws what the source throws (Kafka unreachable).
DeadLetterPage walk_dead_letters(DeadLetterSource& source, const DeadLetterFilter& filter,
                                 const std::optional<DeadLetterCursor>& cursor, std::size_t limit,
                                 std::size_t scan_budget = kScanBudget);
// {"dead_letters": [...], "next", "snapshot": false, "partial", "examined"}.
nlohmann::json dead_letter_page_json(const DeadLetterFilter& filter, const DeadLetterPage& page);

// The ingest record that redrives `rec` (see above), or why it is skipped. partition: the ingest
// partition it came from when it says (an ingest record's dead letter), else -1 (the caller
// finds the job's shard).
struct Redriven {
  connectors::OutRecord record;
};
// Where redrives go: kafka.ingest_topic, in delayd's format. A dead letter read from a topic in
// another format (etf1, Chronos: other_formats, topic -> format) is skipped, said so: it would not
// parse there, and its own topic is its producers'.
struct RedriveTarget {
  RedriveTarget(std::string topic) : ingest_topic(std::move(topic)) {}  // NOLINT: a topic is a target
  RedriveTarget(const char* topic) : ingest_topic(topic) {}             // NOLINT
  std::string ingest_topic;
  std::map<std::string, std::string, std::less<>> other_formats;
};
RedriveTarget redrive_target(const config::Config& config);
std::variant<Redriven, std::string> redrive_record(const connectors::Record& rec, std::int64_t max_redrives,
                                                   const RedriveTarget& target, const std::string& operation);
// A redrive's dry run: the dead letters of the filter's walk, and of those, how many a redrive
// would skip and why (redrive_record()'s reason). complete: false when time_limit ended the count
// before the walk did (matched is then a lower bound).
struct RedriveCount {
  std::int64_t matched = 0;
  std::map<std::string, std::int64_t> would_skip;
  bool complete = false;
};
RedriveCount count_redrivable(DeadLetterSource& source, const DeadLetterFilter& filter, std::int64_t max_redrives,
                              const RedriveTarget& target, std::chrono::steady_clock::duration time_limit);
// {"dry_run": true, "matched", "would_skip": {reason: n}, "complete"}.
nlohmann::json to_json(const RedriveCount& count);

// "<partition>:<offset>": a dead letter's id (and its redriven-from header).
std::string dead_letter_id(std::int32_t partition, std::int64_t offset);

}  // namespace delayd::admin
