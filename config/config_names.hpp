// Names shared by the configuration and the ingest parser: which Kafka topic names are legal,
// and how a business name becomes its ready topic. (How an untrusted value is quoted into a
// one-line error message: base::quote_for_message(), base/text_encoding.hpp.)
//
// Invariants: render_ready_topic() replaces the first "{business}" only; the configuration guarantees there
// is exactly one.
// Threading: pure functions; callable from any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace delayd::config {

// The placeholder a ready-topic template must contain exactly once.
inline constexpr std::string_view kBusinessPlaceholder = "{business}";

// Kafka's own rule (topic names are also file names on the brokers): 1-249 characters of
// [A-Za-z0-9._-], and not "." or "..". Names starting with "__" are refused too, because Kafka
// reserves them for internal topics such as __consumer_offsets.
bool is_valid_topic_name(std::string_view name) noexcept;

// Kafka's rule for a group.instance.id (kafka.group_instance_id): 1-249 characters of
// [A-Za-z0-9._-], and not "." or "..".
bool is_valid_group_instance_id(std::string_view id) noexcept;

// A business that names its ready topic itself: "topic:<topic>", the business of the etf1 and
// Chronos formats' jobs (their records name the topic to deliver to, not a business). A
// producer's business header cannot take this form (':' is not a business character).
inline constexpr std::string_view kTopicBusinessPrefix = "topic:";
inline std::string topic_business(std::string_view topic) {
  return std::string(kTopicBusinessPrefix) + std::string(topic);
}

// The template with its "{business}" replaced by `business`; the topic itself for a topic
// business. No validation.
std::string render_ready_topic(std::string_view topic_template, std::string_view business);

}  // namespace delayd::config
