// Plain value types for Kafka records as delayd sees them, with no librdkafka in sight:
// the broker builds and inspects these, the connectors translate them to and from librdkafka.
//
// Invariants: a header value may be null (Kafka allows it) and is then std::nullopt, distinct
// from an empty value. Headers keep their order and may repeat a name, as in Kafka.
// Threading: plain values; no shared state.
#pragma once

#include <cstddef>
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
  // The record's timestamp, ms since the epoch; -1: the time the producer takes it (produce()).
  // A caller that holds a record before producing it sets the time the record is about.
  std::int64_t timestamp_ms = -1;
};

// Why a record was not written, in the terms a caller decides by.
enum class DeliveryError : std::uint8_t {
  none,                // written: ok
  transient,           // not written, and Kafka never refused it (broker unreachable, timed out
                       // before it was sent, queue full, purged from the queue): try again later
  possibly_persisted,  // unknown: it timed out or was purged while in flight, or was acknowledged
                       // without an offset (delivery_class.hpp), so the broker may have written
                       // it; a retry may duplicate it
  too_large,           // over a size limit (the producer's message.max.bytes or the topic's)
  unknown_topic,       // the topic or its partition does not exist (deleted, or not created
                       // yet): not written; the record can go once the topic is there again
  refused,             // Kafka refused the client, not the record: its login failed or an ACL
                       // (Write on the topic) is missing. Not written; fixed outside delayd, so
                       // the record waits without spending attempts (kafka_error.hpp: Refusal)
  permanent,           // Kafka refused it for good: invalid record, policy
  fatal,               // the producer instance is broken (an idempotence fatal error); only a
                       // new instance can write again (KafkaProducer::recover_if_fatal)
  fenced,              // not written: its transaction can never commit, because another producer
                       // took the transactional id over (a new owner of the record's shard)
};

// Key, value, header names and header values of a Record or an OutRecord: what counts against
// Kafka's message size limits (framing aside).
template <typename R>
std::size_t record_bytes(const R& r) {
  std::size_t n = (r.key ? r.key->size() : 0) + (r.value ? r.value->size() : 0);
  for (const auto& h : r.headers) n += h.name.size() + (h.value ? h.value->size() : 0);
  return n;
}

// The outcome of one produced record, from librdkafka's delivery report.
struct DeliveryReport {
  std::uint64_t tag = 0;
  std::string topic;
  std::int32_t partition = -1;
  std::int64_t offset = -1;
  std::int64_t timestamp_ms = -1;  // the record's timestamp as written (-1 if not known)
  bool ok = false;
  DeliveryError error_class = DeliveryError::none;  // none exactly when ok
  std::string error;                                // empty when ok
};

struct TopicPartition {
  std::string topic;
  std::int32_t partition = -1;
  bool operator==(const TopicPartition&) const = default;
  auto operator<=>(const TopicPartition&) const = default;
};

}  // namespace delayd::connectors
