#include "connectors/topic_reader.hpp"

#include <algorithm>
#include <chrono>

#include "connectors/rdkafka_config.hpp"

namespace delayd::connectors {

namespace {

using Clock = std::chrono::steady_clock;

std::string where(const std::string& topic, std::int32_t partition) {
  return topic + "[" + std::to_string(partition) + "]";
}

}  // namespace

struct TopicReader::Impl {
  LogEventBridge events{"kafka topic reader"};
  // Declared last so that it is destroyed first, while the bridge is still alive.
  std::unique_ptr<RdKafka::KafkaConsumer> consumer;
};

TopicReader::TopicReader(const Properties& props) {
  Properties effective = with_defaults({{"group.id", "delayd-topic-reader"}}, props);
  require_property(effective, {"bootstrap.servers", "metadata.broker.list"});
  // Never a member of a group: assign() only, and nothing stored or committed.
  effective = with_forced(std::move(effective),
                          {{"enable.auto.commit", "false"},
                           {"enable.auto.offset.store", "false"},
                           {"enable.partition.eof", "true"},
                           {"auto.offset.reset", "earliest"}},
                          "kafka topic reader");
  impl_ = std::make_unique<Impl>();
  auto conf = make_conf(effective);
  std::string errstr;
  if (conf->set("event_cb", static_cast<RdKafka::EventCb*>(&impl_->events), errstr) != RdKafka::Conf::CONF_OK) {
    throw KafkaError("kafka topic reader callbacks: " + errstr);
  }
  impl_->consumer.reset(RdKafka::KafkaConsumer::create(conf.get(), errstr));
  if (!impl_->consumer) throw KafkaConfigError("", "", errstr);
}

TopicReader::~TopicReader() {
  if (impl_ && impl_->consumer) impl_->consumer->close();
}
TopicReader::TopicReader(TopicReader&&) noexcept = default;
TopicReader& TopicReader::operator=(TopicReader&&) noexcept = default;

std::optional<int> TopicReader::partitions(const std::string& topic, int timeout_ms) {
  std::unique_ptr<RdKafka::Topic> handle;
  std::string errstr;
  handle.reset(RdKafka::Topic::create(impl_->consumer.get(), topic, nullptr, errstr));
  if (!handle) throw KafkaError("kafka topic reader: topic " + topic + ": " + errstr);
  RdKafka::Metadata* raw = nullptr;
  const RdKafka::ErrorCode err = impl_->consumer->metadata(false, handle.get(), &raw, timeout_ms);
  std::unique_ptr<RdKafka::Metadata> md(raw);
  if (err != RdKafka::ERR_NO_ERROR) {
    throw KafkaError("kafka topic reader: metadata of " + topic + ": " + RdKafka::err2str(err));
  }
  for (const auto* t : *md->topics()) {
    if (t->topic() != topic) continue;
    if (t->err() == RdKafka::ERR_UNKNOWN_TOPIC_OR_PART) return std::nullopt;
    if (t->err() != RdKafka::ERR_NO_ERROR) {
      throw KafkaError("kafka topic reader: metadata of " + topic + ": " + RdKafka::err2str(t->err()));
    }
    return static_cast<int>(t->partitions()->size());
  }
  return std::nullopt;
}

TopicReader::Watermarks TopicReader::watermarks(const std::string& topic, std::int32_t partition, int timeout_ms) {
  Watermarks w;
  const RdKafka::ErrorCode err =
      impl_->consumer->query_watermark_offsets(topic, partition, &w.low, &w.high, timeout_ms);
  if (err != RdKafka::ERR_NO_ERROR) {
    throw KafkaError("kafka topic reader: watermarks of " + where(topic, partition) + ": " + RdKafka::err2str(err));
  }
  return w;
}

std::int64_t TopicReader::offset_for_time(const std::string& topic, std::int32_t partition, std::int64_t timestamp_ms,
                                          int timeout_ms) {
  std::unique_ptr<RdKafka::TopicPartition> tp(RdKafka::TopicPartition::create(topic, partition, timestamp_ms));
  std::vector<RdKafka::TopicPartition*> tps{tp.get()};
  const RdKafka::ErrorCode err = impl_->consumer->offsetsForTimes(tps, timeout_ms);
  if (err != RdKafka::ERR_NO_ERROR || tp->err() != RdKafka::ERR_NO_ERROR) {
    throw KafkaError("kafka topic reader: offset for time in " + where(topic, partition) + ": " +
                     RdKafka::err2str(err != RdKafka::ERR_NO_ERROR ? err : tp->err()));
  }
  // -1: no record that late.
  return tp->offset() >= 0 ? tp->offset() : watermarks(topic, partition, timeout_ms).high;
}

std::vector<Record> TopicReader::read(const std::string& topic, std::int32_t partition, std::int64_t from,
                                      std::int64_t to, std::size_t max, int timeout_ms) {
  std::vector<Record> out;
  if (from >= to || max == 0) return out;
  std::unique_ptr<RdKafka::TopicPartition> tp(RdKafka::TopicPartition::create(topic, partition, from));
  std::vector<RdKafka::TopicPartition*> tps{tp.get()};
  RdKafka::ErrorCode err = impl_->consumer->assign(tps);
  if (err != RdKafka::ERR_NO_ERROR) {
    throw KafkaError("kafka topic reader: assign " + where(topic, partition) + ": " + RdKafka::err2str(err));
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string failure;
  while (out.size() < max) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) break;
    std::unique_ptr<RdKafka::Message> m(impl_->consumer->consume(static_cast<int>(std::min<long long>(left, 200))));
    if (!m || m->err() == RdKafka::ERR__TIMED_OUT) continue;
    if (m->err() == RdKafka::ERR__PARTITION_EOF) break;
    if (m->err() != RdKafka::ERR_NO_ERROR) {
      failure = m->errstr();
      break;
    }
    if (m->offset() >= to) break;
    if (m->offset() < from) continue;
    out.push_back(to_record(*m));
    if (m->offset() + 1 >= to) break;
  }
  err = impl_->consumer->unassign();
  if (!failure.empty()) {
    throw KafkaError("kafka topic reader: reading " + where(topic, partition) + ": " + failure);
  }
  if (err != RdKafka::ERR_NO_ERROR) {
    throw KafkaError("kafka topic reader: unassign " + where(topic, partition) + ": " + RdKafka::err2str(err));
  }
  return out;
}

}  // namespace delayd::connectors
