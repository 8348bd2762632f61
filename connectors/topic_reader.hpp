// TopicReader: reads a range of one partition of a topic, outside any consumer group: the console
// lists the dead-letter topic with it, and a redrive reads the records it publishes again (and,
// resuming, the ingest topic's tail to find what it published before a crash).
//
// Invariants: it never joins a group and never commits an offset, so it can read any topic
// without disturbing delayd's own consumers. read() returns records in offset order, each at or
// after `from` and before `to`; offsets may skip (compaction, transaction markers, records of
// aborted transactions: it reads committed records only, librdkafka's default).
// Errors: a broker that cannot be reached within the timeout throws KafkaError naming the topic;
// nothing read is ever thrown for (a record is returned as it is).
// Threading: one thread at a time. Holds one librdkafka client (with its threads). Move-only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "connectors/kafka_error.hpp"
#include "connectors/record.hpp"

namespace delayd::connectors {

class TopicReader {
 public:
  // bootstrap.servers is required; group.id, if given, is never used to join or commit.
  // Throws KafkaConfigError for a refused or missing property.
  explicit TopicReader(const Properties& props);
  ~TopicReader();
  TopicReader(TopicReader&&) noexcept;
  TopicReader& operator=(TopicReader&&) noexcept;
  TopicReader(const TopicReader&) = delete;
  TopicReader& operator=(const TopicReader&) = delete;

  // The topic's partition count from fresh metadata; nullopt if the topic does not exist.
  std::optional<int> partitions(const std::string& topic, int timeout_ms = 5000);

  struct Watermarks {
    std::int64_t low = 0;   // the first offset still kept
    std::int64_t high = 0;  // the offset the next record written will get
  };
  Watermarks watermarks(const std::string& topic, std::int32_t partition, int timeout_ms = 5000);

  // The first offset whose record's timestamp is at or after `timestamp_ms`; the high watermark
  // when there is none.
  std::int64_t offset_for_time(const std::string& topic, std::int32_t partition, std::int64_t timestamp_ms,
                               int timeout_ms = 5000);

  // Records of [from, to), at most `max`, in offset order. Returns fewer when `to` is reached (or
  // the partition's end), or when timeout_ms passes without the next record arriving.
  std::vector<Record> read(const std::string& topic, std::int32_t partition, std::int64_t from, std::int64_t to,
                           std::size_t max, int timeout_ms = 5000);
  // Where the last read() stopped when it reached `to` or the partition's end (for this reader,
  // which reads committed records only, the last stable offset): the next offset to read, past
  // the transaction markers and aborted records that no record stands for. nullopt when it
  // stopped for another reason (max records, or nothing arrived within the timeout).
  std::optional<std::int64_t> reached_end() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace delayd::connectors
