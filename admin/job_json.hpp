// JSON views of what Redis holds, for delayctl and people: a job (its record's fields as
// JobStore::get() gives them, with headers decoded and times also in RFC 3339) and the store's
// statistics.
// The record's key and value and each header's value are shown as a preview that keeps every
// byte it shows: "<f>" is the text when the bytes are printable UTF-8 (base/text_encoding.hpp),
// else their base64, and "<f>_encoding" says which ("text" or "base64"). Only the first
// kPreviewBytes bytes are shown (a text is cut where no character is split); a cut preview also
// has "<f>_truncated": true and "<f>_bytes": the whole size. Other fields render invalid UTF-8
// replaced (U+FFFD), by to_text().
// Threading: pure functions.
#pragma once

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "storage/job_store.hpp"

namespace delayd::admin {

inline constexpr std::size_t kPreviewBytes = 4096;

// The job's JSON: its record's fields as JobStore::get() returns them, decoded as said above.
nlohmann::json job_to_json(const std::string& job_id, const std::map<std::string, std::string>& fields);
// The store's statistics (delayctl stats).
nlohmann::json stats_to_json(const storage::StoreStats& stats);
// A bulk operation's stored fields (storage/operation_store.hpp) as GET /operations/{id} shows
// them: counts and times as numbers (times also in RFC 3339), filter and skipped as JSON, the
// cursor left out.
nlohmann::json operation_to_json(const std::string& id, const std::map<std::string, std::string>& fields);
// dump() that never throws on invalid UTF-8.
std::string to_text(const nlohmann::json& j);

}  // namespace delayd::admin
