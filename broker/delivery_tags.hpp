// Tags on produced records, so that one producer's delivery reports find their way back to the
// path that produced the record: the top byte says which path, the rest is that path's number.
// Threading: pure functions.
#pragma once

#include <cstdint>

namespace delayd::broker {

enum class TagKind : std::uint8_t {
  ready = 1,       // a ready record (fire path)
  failed_dlq = 2,  // a job out of attempts, on its way to the dead-letter topic (fire path)
  ingest_dlq = 3,  // an invalid ingest record on its way to the dead-letter topic (ingest path)
  follow_up = 4,   // after an etf1 delivery: its tombstone, its history copy (fire path)
};

inline std::uint64_t make_tag(TagKind kind, std::uint64_t seq) {
  return (static_cast<std::uint64_t>(kind) << 56) | (seq & ((std::uint64_t{1} << 56) - 1));
}

inline TagKind tag_kind(std::uint64_t tag) { return static_cast<TagKind>(tag >> 56); }

}  // namespace delayd::broker
