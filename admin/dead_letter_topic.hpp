// DeadLetterTopic: the dead-letter topic as walk_dead_letters() reads it (admin/dead_letter_query.hpp),
// through a TopicReader: GET /dead-letters and a redrive's dry run (admin/job_backend.hpp) and a
// redrive operation (admin/operation_runner.hpp).
// Errors: what the reader throws (Kafka unreachable within its timeout).
// Threading: the reader's (one thread at a time).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "admin/dead_letter_query.hpp"
#include "connectors/topic_reader.hpp"

namespace delayd::admin {

class DeadLetterTopic final : public DeadLetterSource {
 public:
  DeadLetterTopic(connectors::TopicReader& reader, std::string topic) : reader_(reader), topic_(std::move(topic)) {}
  std::int32_t partitions() override { return reader_.partitions(topic_).value_or(0); }
  std::int64_t first_offset(std::int32_t p) override { return reader_.watermarks(topic_, p).low; }
  std::int64_t end_offset(std::int32_t p) override { return reader_.watermarks(topic_, p).high; }
  std::int64_t offset_for_time(std::int32_t p, std::int64_t ms) override {
    return reader_.offset_for_time(topic_, p, ms);
  }
  std::vector<connectors::Record> read(std::int32_t p, std::int64_t from, std::int64_t to, std::size_t max) override {
    return reader_.read(topic_, p, from, to, max);
  }
  std::optional<std::int64_t> reached_end() override { return reader_.reached_end(); }

 private:
  connectors::TopicReader& reader_;
  std::string topic_;
};

}  // namespace delayd::admin
