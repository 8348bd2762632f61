// Headers as Kafka carries them (connectors) and as Redis keeps them (storage) are the same
// list of (name, optional value); these two functions are the only place that knows both.
// Threading: pure functions.
#pragma once

#include "connectors/record.hpp"
#include "storage/header_codec.hpp"

namespace delayd::broker {

inline storage::StoredHeaders to_stored(const connectors::Headers& headers) {
  storage::StoredHeaders out;
  out.reserve(headers.size());
  for (const auto& h : headers) out.emplace_back(h.name, h.value);
  return out;
}

inline connectors::Headers to_kafka(const storage::StoredHeaders& headers) {
  connectors::Headers out;
  out.reserve(headers.size());
  for (const auto& [name, value] : headers) out.push_back({name, value});
  return out;
}

}  // namespace delayd::broker
