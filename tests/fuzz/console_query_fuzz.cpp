// The console's reading of what a client sends (admin/job_query.hpp, admin/request_target.hpp) on
// the fuzzer's bytes, as a query string and as a JSON body: every reader must be total, and
// what it accepts must be within its stated bounds. A cursor it accepts encodes back to one that
// decodes to the same place; a bulk filter it accepts reads back (as an operation stores it) to
// the same filter, of the action's one state. The same for the dead letters' queries
// (admin/dead_letter_query.hpp): GET /dead-letters's parameters and a redrive's body.
#include <cstdint>
#include <string>
#include <string_view>

#include "admin/dead_letter_query.hpp"
#include "admin/job_query.hpp"
#include "admin/request_target.hpp"
#include "contract/time_format.hpp"
#include "storage/job_record.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace {

using namespace delayd;

bool same_filter(const storage::JobFilter& a, const storage::JobFilter& b) {
  return a.states == b.states && a.business == b.business && a.id_prefix == b.id_prefix &&
         a.error_text == b.error_text && a.due_from == b.due_from && a.due_to == b.due_to;
}

void check_query(std::string_view bytes) {
  const admin::QueryParams q = admin::query_params("/jobs?" + std::string(bytes));
  if (!q.error.empty()) return;
  auto parsed = admin::parse_list_request(q.values);
  if (std::holds_alternative<admin::BadRequest>(parsed)) {
    FUZZ_CHECK(!std::get<admin::BadRequest>(parsed).field.empty());
    return;
  }
  const admin::ListRequest& r = std::get<admin::ListRequest>(parsed);
  FUZZ_CHECK(r.limit >= 1 && r.limit <= admin::kMaxLimit);
  for (storage::JobState s : r.filter.states) FUZZ_CHECK(storage::job_record::is_stored(s));
  FUZZ_CHECK(!r.filter.due_from || (*r.filter.due_from >= 0 && *r.filter.due_from <= contract::kMaxEpochMs));
  FUZZ_CHECK(!r.filter.due_from || !r.filter.due_to || *r.filter.due_from <= *r.filter.due_to);
  if (r.cursor) {
    const auto again = admin::decode_cursor(r.filter, admin::encode_cursor(r.filter, *r.cursor));
    FUZZ_CHECK(again && again->walk_start == r.cursor->walk_start && again->state == r.cursor->state &&
               again->at == r.cursor->at && again->shard == r.cursor->shard);
  }
}

bool same_dl_filter(const admin::DeadLetterFilter& a, const admin::DeadLetterFilter& b) {
  return a.reason == b.reason && a.business == b.business && a.since == b.since && a.until == b.until;
}

void check_dead_letter_query(std::string_view bytes) {
  const admin::QueryParams q = admin::query_params("/dead-letters?" + std::string(bytes));
  if (!q.error.empty()) return;
  auto parsed = admin::parse_dead_letter_request(q.values);
  if (std::holds_alternative<admin::BadRequest>(parsed)) {
    FUZZ_CHECK(!std::get<admin::BadRequest>(parsed).field.empty());
    return;
  }
  const admin::DeadLetterListRequest& r = std::get<admin::DeadLetterListRequest>(parsed);
  FUZZ_CHECK(r.limit >= 1 && r.limit <= admin::kMaxLimit);
  FUZZ_CHECK(r.filter.reason.size() <= admin::kMaxErrorFilterChars);
  FUZZ_CHECK(!r.filter.since || !r.filter.until || *r.filter.since <= *r.filter.until);
  if (r.cursor) {
    const auto again =
        admin::decode_dead_letter_cursor(r.filter, admin::encode_dead_letter_cursor(r.filter, *r.cursor));
    FUZZ_CHECK(again && *again == *r.cursor);
  }
}

void check_bodies(std::string_view bytes) {
  auto redrive = admin::parse_redrive_request(bytes);
  if (const auto* r = std::get_if<admin::RedriveRequest>(&redrive)) {
    FUZZ_CHECK(r->rate_per_s >= 1 && r->rate_per_s <= admin::kMaxRate);
    const auto stored = admin::parse_stored_dead_letter_filter(r->filter_json);
    FUZZ_CHECK(std::holds_alternative<admin::DeadLetterFilter>(stored) &&
               same_dl_filter(std::get<admin::DeadLetterFilter>(stored), r->filter));
  }
  auto bulk = admin::parse_bulk_request(bytes);
  if (const auto* r = std::get_if<admin::BulkRequest>(&bulk)) {
    FUZZ_CHECK(r->rate_per_s >= 1 && r->rate_per_s <= admin::kMaxRate);
    FUZZ_CHECK(r->filter.states.size() == 1);
    const auto stored = admin::parse_stored_filter(r->filter_json);
    FUZZ_CHECK(std::holds_alternative<storage::JobFilter>(stored) &&
               same_filter(std::get<storage::JobFilter>(stored), r->filter));
  }
  const auto at = admin::parse_reschedule_body(bytes, 1'795'000'000'000);
  if (const auto* ms = std::get_if<std::int64_t>(&at)) FUZZ_CHECK(*ms >= 0 && *ms <= contract::kMaxEpochMs);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes = delayd::fuzz::bytes(data, size);
  check_query(bytes);
  check_dead_letter_query(bytes);
  check_bodies(bytes);
  return 0;
}
