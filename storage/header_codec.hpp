// How a job's Kafka headers are kept in one field of its Redis hash.
//
// Format, repeated per header, in order: u32 name length, name bytes, u32 value length or
// 0xFFFFFFFF for a null value, value bytes (lengths big-endian). Binary-safe, keeps order,
// repeated names and null values, and costs 8 bytes per header beyond the bytes themselves.
// decode_headers throws std::invalid_argument on a truncated or malformed blob.
// Threading: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace delayd::storage {

using StoredHeader = std::pair<std::string, std::optional<std::string>>;
using StoredHeaders = std::vector<StoredHeader>;

std::string encode_headers(const StoredHeaders& headers);
StoredHeaders decode_headers(std::string_view blob);

}  // namespace delayd::storage
