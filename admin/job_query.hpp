// The console's job queries: what a client may ask of GET /jobs (and, later, of a bulk action's
// filter), read and checked in one place, the walk's cursor, and the JSON of a page.
//
//   GET /jobs?business=&state=&due_from=&due_to=&id_prefix=&error=&limit=&cursor=
//   business   a business name (the ingest contract's rules)
//   state      one of delay, ready, running, finished, cancelled, failed, or several
//              separated by commas (walked in that order); absent: all six
//   due_from, due_to  epoch ms or RFC 3339; a waiting job's due time, another's deliver_at
//   id_prefix  the job-id starts with it (job-id characters, at most kMaxJobIdChars)
//   error      the job's error (failed) or last error holds this text, any case (at most
//              kMaxErrorFilterChars)
//   limit      1..kMaxLimit (default kDefaultLimit)
//   cursor     the `next` of the previous page of the same walk (same filter)
// Anything else, or a value out of its range, is refused with the parameter's name.
//
// The cursor is opaque to clients: hex and dots, carrying the walk's start, where it stands, and
// a fingerprint of the filter; a cursor given with another filter, or damaged, is refused.
// Threading: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "storage/job_browse.hpp"

namespace delayd::admin {

inline constexpr std::size_t kDefaultLimit = 50;
inline constexpr std::size_t kMaxLimit = 500;
inline constexpr std::size_t kMaxErrorFilterChars = 200;

struct ListRequest {
  storage::JobFilter filter;
  std::size_t limit = kDefaultLimit;
  std::optional<storage::WalkCursor> cursor;  // nullopt: a new walk
};

// A refusal for a 400: which parameter, and why.
struct BadRequest {
  std::string field;
  std::string reason;
  nlohmann::json json() const { return {{"error", field + ": " + reason}, {"field", field}}; }
};

// Shared by the console's queries (this file's and dead_letter_query.hpp's):
// A whole number of at most 18 digits; nullopt for anything else.
std::optional<std::int64_t> parse_count(std::string_view s);
// A time parameter: epoch ms or RFC 3339 (contract/time_format.hpp).
std::variant<std::int64_t, BadRequest> parse_time(const std::string& field, std::string_view text);
// A page's limit: 1..kMaxLimit.
std::variant<std::size_t, BadRequest> parse_limit(std::string_view text);
// nullopt when `business` is a valid business name (the ingest contract's rule), else the refusal.
std::optional<BadRequest> check_business(std::string_view business);
// FNV-1a (64 bits, 16 hex digits) of the fields, each ended by a 0x1f: ties a cursor to its filter.
std::string fingerprint_of(const std::vector<std::string>& fields);
using QueryMap = std::map<std::string, std::string, std::less<>>;
// A filter given as a JSON object (a bulk action's or a redrive's) as the endpoint's query
// parameters: every value a string, or a whole number for the names in `times`; no limit or
// cursor. Refusals name "filter.<name>".
std::variant<QueryMap, BadRequest> filter_params(const nlohmann::json& filter_json, std::string_view endpoint,
                                                 std::initializer_list<std::string_view> times);

// GET /jobs's parameters (request_target.hpp's query_params()).
std::variant<ListRequest, BadRequest> parse_list_request(const std::map<std::string, std::string, std::less<>>& params);

std::string encode_cursor(const storage::JobFilter& filter, const storage::WalkCursor& cursor);
// nullopt: not a cursor of a walk with this filter.
std::optional<storage::WalkCursor> decode_cursor(const storage::JobFilter& filter, std::string_view text);

// {"jobs": [...], "next": cursor | null, "snapshot": false, "partial", "examined"}.
nlohmann::json page_json(const storage::JobFilter& filter, const storage::WalkPage& page);

// A bulk action (POST /jobs/bulk): {"action": "cancel" | "run-now" | "retry", "filter": {GET /jobs's
// filter fields, values as strings (due_from and due_to may be numbers)}, "dry_run": true|false,
// "rate_per_s": N}. cancel and run-now act on waiting jobs (the filter's state, if given, must be
// "delay"), retry on failed ones ("failed"); without a state the filter gets the action's.
// dry_run is required (no default either way); rate_per_s 1..kMaxRate, default kDefaultRate.
inline constexpr std::int64_t kDefaultRate = 500;
inline constexpr std::int64_t kMaxRate = 100'000;
// A body's rate_per_s: 1..kMaxRate, kDefaultRate when absent.
std::variant<std::int64_t, BadRequest> parse_rate(const nlohmann::json& body);
struct BulkRequest {
  storage::JobStore::Action action = storage::JobStore::Action::cancel;
  storage::JobFilter filter;
  nlohmann::json filter_json;  // the filter as parameters (strings), to store and read again
  bool dry_run = true;
  std::int64_t rate_per_s = kDefaultRate;
  std::string access;  // who asked (admin/access.hpp's name), kept with the operation for its audit
};
std::variant<BulkRequest, BadRequest> parse_bulk_request(std::string_view body);
// The filter stored with an operation, read again (parse_bulk_request()'s filter_json).
std::variant<storage::JobFilter, BadRequest> parse_stored_filter(const nlohmann::json& filter_json);
std::string_view action_name(storage::JobStore::Action a);

// When a reschedule asks the job to be delivered: POST /jobs/{id}/reschedule's body, exactly one
// of {"deliver_at": epoch ms or RFC 3339} and {"delay_ms": N} (from now_ms).
std::variant<std::int64_t, BadRequest> parse_reschedule_body(std::string_view body, std::int64_t now_ms);

}  // namespace delayd::admin
