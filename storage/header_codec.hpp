// How a job's payload (Kafka key, value and headers) is kept in one Redis string.
//
// Lengths are LEB128 varints of (length + 1); 0 stands for null. A payload is: key length, key
// bytes, value length, value bytes, then the headers, each as name length, name bytes, value
// length, value bytes. Binary-safe; keeps header order, repeated names and null values; costs
// 2 bytes per short header and 2-3 per payload beyond the bytes themselves (the u32 lengths of
// the first layout cost 8 each: on a 200-byte job that was the step to the next allocator size).
// The decoders throw std::invalid_argument on a truncated or malformed blob.
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

struct StoredPayload {
  std::optional<std::string> key;
  std::optional<std::string> value;
  StoredHeaders headers;
  bool operator==(const StoredPayload&) const = default;
};

std::string encode_headers(const StoredHeaders& headers);
StoredHeaders decode_headers(std::string_view blob);
std::string encode_payload(const StoredPayload& payload);
StoredPayload decode_payload(std::string_view blob);

}  // namespace delayd::storage
