// The job store's replies turned into values: what its scripts and reads answered (a claim, a
// transition, a record's fields, a score), parsed without trusting the bytes. Internal to
// storage/ (JobStore's writes in job_store.cpp, its reads in job_store_reads.cpp); other rooms
// read jobs through JobStore (job_store.hpp).
//
// Error model: nothing here throws on what Redis returned. A reply of an unexpected shape becomes
// a corrupt job or transition, an unreadable number nullopt or 0, an unreadable payload a field
// or a Claim::Kind that says so.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "redis/connection.hpp"
#include "storage/job_store.hpp"
#include "storage/payload_compression.hpp"

namespace delayd::storage::reply_parse {

// The whole of `s` as a decimal integer; nullopt for anything else (an empty string, a sign
// alone, trailing bytes).
std::optional<std::int64_t> parse_i64(std::string_view s);

// A score read back from a pending set, rounded up (never early) and clamped into 0..2^62.
std::int64_t score_of(redis::ReplyView v);

// A script's {changed, state[, at]} for one job; a reply of another shape is a corrupt state.
Transition parse_transition(const std::string& job_id, std::string_view shard, redis::ReplyView r);

// Undoes the scripts' enc(): each "%XX" back to its byte; a malformed escape is kept as it is.
std::string percent_decode(std::string_view s);

// The fields of a job record for people and tools (long names, payload decoded with
// `dictionaries`); nullopt when its header line does not have the documented shape (job_record.hpp).
std::optional<std::map<std::string, std::string>> parse_record(std::string_view record,
                                                               const PayloadDictionaries& dictionaries);

// Adds an in-flight entry's fields (attempt, firing_at, claimed_by); nothing for a nil entry.
void add_in_flight(std::map<std::string, std::string>& fields, redis::ReplyView entry);

// Adds the history list as the field "history", one decoded event per line; nothing when empty.
void add_history(std::map<std::string, std::string>& fields, redis::ReplyView list);

// Writes a new job's repeat rule into its record's fields (key_schema.hpp), as occurrence 1.
void put_repeat_rule(const RepeatRule& r, std::map<std::string, std::string, std::less<>>& fields);

// One job's claim from claim.lua's reply and the record read right after it (its payload
// decompressed with `dictionaries`); an unexpected shape or an unreadable payload is a corrupt
// claim, never an exception.
Claim parse_claim(const std::string& job_id, redis::ReplyView r, redis::ReplyView record,
                  const PayloadDictionaries& dictionaries);

}  // namespace delayd::storage::reply_parse
