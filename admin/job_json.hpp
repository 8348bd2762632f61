// JSON views of what Redis holds, for delayctl and people: a job (its record's fields as
// JobStore::get() gives them, with headers decoded and times also in RFC 3339) and the store's
// statistics.
// Binary keys, values or headers are rendered with invalid UTF-8 replaced (U+FFFD): the JSON is
// for reading, Redis keeps the exact bytes.
// Threading: pure functions.
#pragma once

#include "storage/job_store.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <string>

namespace delayd::admin {

nlohmann::json job_to_json(const std::string& job_id, const std::map<std::string, std::string>& fields);
nlohmann::json stats_to_json(const storage::StoreStats& stats);
// dump() that never throws on invalid UTF-8.
std::string to_text(const nlohmann::json& j);

}  // namespace delayd::admin
