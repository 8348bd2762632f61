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
  std::optional<std::int64_t> reached_end;  // the last read()'s
  // Declared last so that it is destroyed first, while the bridge is still alive.
  std::unique_ptr<RdKafka::KafkaConsumer> consumer;
};

TopicReader::TopicReader(const Properties& props) {
  // fetch.wait.max.ms 10 (librdkafka: 500): a range that ends in transaction markers is known to
  // be read only at the partition's end, where the broker would hold each fetch for the whole
  // wait; a reader of ranges never tails a partition.
  Properties effective = with_defaults({{"group.id", "delayd-topic-reader"}, {"fetch.wait.max.ms", "10"}}, props);
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
  return partition_count(*impl_->consumer, topic, timeout_ms, "kafka topic reader");
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
  impl_->reached_end.reset();
  if (from >= to || max == 0) {
    if (from >= to) impl_->reached_end = from;
    return out;
  }
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
    if (m->err() == RdKafka::ERR__PARTITION_EOF) {
      // The end as this reader sees it; past the last record returned, at least.
      impl_->reached_end = std::max(m->offset(), out.empty() ? from : out.back().offset + 1);
      break;
    }
    if (m->err() != RdKafka::ERR_NO_ERROR) {
      failure = m->errstr();
      break;
    }
    if (m->offset() >= to) {
      impl_->reached_end = to;
      break;
    }
    if (m->offset() < from) continue;
    out.push_back(to_record(*m));
    if (m->offset() + 1 >= to) {
      impl_->reached_end = to;
      break;
    }
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

std::optional<std::int64_t> TopicReader::reached_end() const { return impl_->reached_end; }

}  // namespace delayd::connectors
