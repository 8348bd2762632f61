#include "config/ingest_topics.hpp"

#include "base/text_encoding.hpp"
#include "config/config.hpp"
#include "config/config_names.hpp"

namespace delayd::config {

std::vector<IngestTopic> ingest_topics(const Config& c) {
  std::vector<IngestTopic> out{{c.kafka.ingest_topic, IngestFormat::delayd}};
  for (const auto& entry : split_business_list(c.kafka.ingest_topics)) {
    const auto colon = entry.find(':');
    IngestTopic t{entry.substr(0, colon), IngestFormat::delayd};
    if (colon != std::string::npos) {
      const auto format = parse_ingest_format(entry.substr(colon + 1));
      if (!format) {
        throw ConfigError("config error: kafka.ingest_topics entry " + base::quote_for_message(entry) +
                          ": the format must be delayd, etf1 or chronos");
      }
      t.format = *format;
    }
    if (t.topic == out.front().topic) {
      out.front().format = t.format;
    } else {
      out.push_back(std::move(t));
    }
  }
  return out;
}

DeliveryMode delivery_mode(const Config& c) {
  return parse_delivery_mode(c.kafka.delivery).value_or(DeliveryMode::at_least_once);
}

std::int64_t mark_gather_ms(const Config& c) {
  if (c.scheduler.mark_gather_ms) return *c.scheduler.mark_gather_ms;
  return delivery_mode(c) == DeliveryMode::exactly_once ? kMarkGatherExactlyOnceMs : 0;
}

std::string delivery_log_topic(std::string_view ingest_topic) { return std::string(ingest_topic) + ".delivered"; }

std::string transactional_id(const Config& c, std::string_view shard) {
  return c.kafka.group_id + "." + std::string(shard);
}

std::vector<ConsumerGroup> consumer_groups(const Config& c) {
  std::vector<ConsumerGroup> out;
  const std::string& main = c.kafka.group_id;
  for (const auto& t : ingest_topics(c)) {
    if (out.empty()) {
      out.push_back({main, t.topic, false, ""});
    } else {
      out.push_back({main + "." + t.topic, t.topic, false, main});
    }
  }
  if (!c.kafka.status_topic.empty())
    out.push_back({main + "." + c.kafka.status_topic, c.kafka.status_topic, true, main});
  return out;
}

}  // namespace delayd::config
