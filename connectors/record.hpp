// Plain value types for Kafka records as delayd sees them, with no librdkafka in sight:
// the broker builds and inspects these, the connectors translate them to and from librdkafka.
//
// Invariants: a header value may be null (Kafka allows it) and is then std::nullopt, distinct
// from an empty value. Headers keep their order and may repeat a name, as in Kafka.
// Threading: plain values; no shared state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace delayd::connectors {

struct Header {
  std::string name;
  std::optional<std::string> value;
  bool operator==(const Header&) const = default;
};

using Headers = std::vector<Header>;

// The first header of that name, or nullptr. A header present with a null value gives a
// pointer to std::nullopt, so callers can tell "absent" from "null".
inline const std::optional<std::string>* find_header(const Headers& headers, std::string_view name) {
  for (const auto& h : headers) {
    if (h.name == name) return &h.value;
  }
  return nullptr;
}

// A record read from Kafka.
struct Record {
  std::string topic;
  std::int32_t partition = -1;
  std::int64_t offset = -1;
  std::int64_t timestamp_ms = -1;  // -1 when the record carries no timestamp
  std::optional<std::string> key;
  std::optional<std::string> value;
  Headers headers;
};

// A record to write. `tag` is the caller's own identifier, handed back in the delivery report.
struct OutRecord {
  std::string topic;
  std::optional<std::string> key;
  std::optional<std::string> value;
  Headers headers;
  std::uint64_t tag = 0;
  // -1 lets librdkafka's partitioner choose (by key hash; at random without a key). A fixed
  // partition is for callers that must keep a record beside others, and for tests.
  std::int32_t partition = -1;
};

// The outcome of one produced record, from librdkafka's delivery report.
struct DeliveryReport {
  std::uint64_t tag = 0;
  std::string topic;
  std::int32_t partition = -1;
  std::int64_t offset = -1;
  bool ok = false;
  std::string error;  // empty when ok
};

struct TopicPartition {
  std::string topic;
  std::int32_t partition = -1;
  bool operator==(const TopicPartition&) const = default;
  auto operator<=>(const TopicPartition&) const = default;
};

}  // namespace delayd::connectors
