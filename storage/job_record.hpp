// The job record's header line (key_schema.hpp): the one home of its facts, and its reading in C++.
//
//   <state> <deliver_at> <attempt> <business>[ <name>=<value>]...\n<payload>
//
// The Lua scripts read and write the same line (prelude.lua's parse(), prelude_jobs.lua's write()). Their lists
// STATES and FIELDS and their digit limits are not written by hand: the build generates them from
// this file (record_lua_gen.cpp, prepended to prelude.lua), so the two readings share one list of
// states, of names and of limits. tests/storage/record_codec_diff_test.cpp feeds both readings the
// same good and damaged records and checks that they agree.
//
// The grammar, which both readings apply to the bytes before the first "\n":
//   state       one of kStates, as to_string() spells it
//   deliver_at  1 to kMaxDeliverAtDigits of 0-9 (no sign), epoch ms
//   attempt     1 to kMaxAttemptDigits of 0-9
//   business    one or more bytes that are not white space (" \t\n\v\f\r", Lua's %s): what the
//               ingest contract lets through, or "-" for a remembered cancel
//   field       " <name>=<value>": name one or more of A-Z a-z 0-9 _ (Lua's [%w_]), value zero or
//               more bytes that are not white space (free text is percent-encoded)
// separated by exactly one space, with nothing after the last field. Anything else is a corrupt
// record. A name that is not in kFields still reads (a record written by a newer delayd, read
// after a rollback, is not corrupt), but Lua's write() drops it.
// Threading: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "storage/job_state.hpp"

namespace delayd::storage {

namespace job_record {

// The states a record holds (the other JobStates describe what a call found, never stored).
inline constexpr JobState kStates[] = {JobState::delay,    JobState::ready,     JobState::running,
                                       JobState::finished, JobState::cancelled, JobState::failed};

// The names write() knows, in the order it writes them (key_schema.hpp says what each means;
// stop: a repeating job cancelled while an occurrence is in flight, ends after it).
inline constexpr std::string_view kFields[] = {"last_error",
                                               "ready_at",
                                               "running_at",
                                               "finished_at",
                                               "cancelled_at",
                                               "failed_at",
                                               "error",
                                               "cancelled_early",
                                               "every",
                                               "count",
                                               "rep",
                                               "rd",
                                               "nb",
                                               "dead",
                                               "ma",
                                               "stop",
                                               "h",
                                               "mv",
                                               "dl",
                                               "rv",
                                               "vo",
                                               "cron",
                                               "tz",
                                               "until",
                                               "cu",
                                               "cc",
                                               "ml",
                                               "z"};

// A free-text value made fit for a field, as prelude_jobs.lua's enc() does it: white space and '%'
// percent-encoded ("%20", "%25"). job_store_replies.hpp's percent_decode() reads it back.
std::string encode_field_value(std::string_view text);

// Lua's numbers are doubles: every integer of 15 digits is exact in one, not every one of 16.
inline constexpr std::size_t kMaxDeliverAtDigits = 15;
// An attempt fits an int (Claim::attempt) with room to count on.
inline constexpr std::size_t kMaxAttemptDigits = 9;

// Whether every name is one or more of A-Z a-z 0-9 _, as the grammar (and a Lua string in
// single quotes, as the build writes FIELDS) needs.
constexpr bool names_are_words() {
  for (std::string_view name : kFields) {
    if (name.empty()) return false;
    for (char c : name) {
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
    }
  }
  return true;
}
static_assert(names_are_words(), "a field name the grammar cannot read");

// Whether s is a state a record may hold.
constexpr bool is_stored(JobState s) {
  for (JobState stored : kStates) {
    if (s == stored) return true;
  }
  return false;
}

}  // namespace job_record

// A record as read: the header line's words and fields, and the payload after the line.
struct JobRecord {
  JobState state = JobState::delay;
  std::int64_t deliver_at = 0;
  std::int64_t attempt = 0;
  std::string business;
  // name -> value as stored (free text still percent-encoded); a name given twice: the last.
  std::map<std::string, std::string, std::less<>> fields;
  std::string_view payload;  // into the bytes given to parse_job_record()
};

// The record, or nullopt when its header line breaks the grammar above (a corrupt record).
// It replaced a split on spaces in job_store.cpp that also read what every script calls corrupt:
// a state never stored ("missing", "in_flight", "corrupt"), a sign or more digits than the
// limits, an empty business (two spaces), a tab or CR inside a word; get() showed such a job as
// if it were fine while the broker set it aside.
std::optional<JobRecord> parse_job_record(std::string_view record);

// Where the job's entry in its shard's pending set belongs, from its record alone: for a delay
// job the later of deliver_at and nb (not before: a retry's time, an operator's retry, the passed
// ack deadline of a job delivered again); for a ready or running job nb, its ack deadline, when
// its business has one; nullopt for a job that has no entry (any other state, or ready or
// running with nothing waiting). nb reads as deliver_at does (1 to kMaxDeliverAtDigits digits);
// any other value is no nb. Every script keeps the entry there (prelude.lua's entry_at(), the
// same rule; record_codec_diff_test.cpp checks that the two agree), so that an entry can be found
// by its score from its record: what pending entries kept in small sorted sets by score need.
// Records written by delayd before this rule (0.3.0 and earlier builds) may lack the nb of an ack deadline or of a
// produce retry.
std::optional<std::int64_t> pending_score(const JobRecord& r);

// The header line (without its "\n") that prelude_jobs.lua's write() would write for these values:
// the words, then each of `fields` whose name is in kFields, in kFields' order (names not in
// kFields are not written, as write() drops them). Values must be free of white space (encode
// free text first). parse_job_record(format_header_line(...) + "\n") reads them back.
std::string format_header_line(JobState state, std::int64_t deliver_at, std::int64_t attempt, std::string_view business,
                               const std::map<std::string, std::string, std::less<>>& fields);

// The value of the field `name` on a record's header line (the bytes before its first "\n", or
// all of `record` if it has none), read without building a JobRecord: for the fire path, which
// needs one field of a record the script has already checked. nullopt when the line has no such
// field or fewer than its four words. The last of a name given twice, as parse_job_record().
std::optional<std::string_view> header_field(std::string_view record, std::string_view name);

}  // namespace delayd::storage
