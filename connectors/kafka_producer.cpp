#include "connectors/kafka_producer.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <utility>

#include "connectors/rdkafka_config.hpp"

namespace delayd::connectors {
namespace {

// The caller's tag travels as librdkafka's per-message opaque pointer, which saves an
// allocation per record and leaves nothing to free when a report never comes back.
static_assert(sizeof(std::uintptr_t) >= sizeof(std::uint64_t), "a tag must fit in a pointer");

void* tag_to_opaque(std::uint64_t tag) {
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(tag));
}

std::uint64_t opaque_to_tag(const void* opaque) {
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(opaque));
}

std::unique_ptr<RdKafka::Headers> make_headers(const Headers& headers) {
  if (headers.empty()) return nullptr;
  std::unique_ptr<RdKafka::Headers> out(RdKafka::Headers::create());
  for (const auto& h : headers) {
    // A null data pointer is how librdkafka encodes a null header value; an empty std::string
    // has a non-null data() and so stays an empty value.
    const RdKafka::ErrorCode err = h.value ? out->add(h.name, h.value->data(), h.value->size())
                                           : out->add(h.name, nullptr, 0);
    if (err != RdKafka::ERR_NO_ERROR) {
      throw KafkaError("kafka header '" + h.name + "': " + RdKafka::err2str(err));
    }
  }
  return out;
}

}  // namespace

struct KafkaProducer::Impl final : RdKafka::DeliveryReportCb {
  explicit Impl(ReportHandler handler) : on_report(std::move(handler)), events("kafka producer") {}

  ~Impl() override {
    // Reports of purged records would reach a handler whose owner is being torn down.
    destroying = true;
    if (producer) {
      producer->purge(RdKafka::Producer::PURGE_QUEUE | RdKafka::Producer::PURGE_INFLIGHT |
                      RdKafka::Producer::PURGE_NON_BLOCKING);
      producer.reset();
    }
  }

  void dr_cb(RdKafka::Message& message) override {
    if (destroying) return;
    --outstanding;
    DeliveryReport report;
    report.tag = opaque_to_tag(message.msg_opaque());
    report.topic = message.topic_name();
    report.partition = message.partition();
    report.offset = message.offset();
    report.ok = message.err() == RdKafka::ERR_NO_ERROR;
    if (!report.ok) report.error = message.errstr();
    deliver(report);
  }

  // Exceptions must not cross librdkafka's C frames, so they are parked here and rethrown once
  // control is back in our code.
  void deliver(const DeliveryReport& report) {
    if (!on_report) return;
    try {
      on_report(report);
    } catch (...) {
      if (!handler_error) handler_error = std::current_exception();
    }
  }

  void rethrow_handler_error() {
    if (handler_error) std::rethrow_exception(std::exchange(handler_error, nullptr));
  }

  void report_refused(const OutRecord& rec, RdKafka::ErrorCode err) {
    DeliveryReport report;
    report.tag = rec.tag;
    report.topic = rec.topic;
    report.partition = rec.partition;
    report.ok = false;
    report.error = RdKafka::err2str(err);
    if (err == RdKafka::ERR__FATAL) {
      std::string reason;
      producer->fatal_error(reason);
      report.error += ": " + reason;
    }
    deliver(report);
  }

  ReportHandler on_report;
  LogEventBridge events;
  std::exception_ptr handler_error;
  int outstanding = 0;
  bool destroying = false;
  // Declared last so that it is destroyed first, while the callbacks above are still alive.
  std::unique_ptr<RdKafka::Producer> producer;
};

KafkaProducer::KafkaProducer(const Properties& props, ReportHandler on_report)
    : impl_(std::make_unique<Impl>(std::move(on_report))) {
  const Properties effective = with_defaults({{"enable.idempotence", "true"}, {"acks", "all"}}, props);
  require_property(effective, {"bootstrap.servers", "metadata.broker.list"});
  auto conf = make_conf(effective);
  std::string errstr;
  if (conf->set("dr_cb", static_cast<RdKafka::DeliveryReportCb*>(impl_.get()), errstr) !=
          RdKafka::Conf::CONF_OK ||
      conf->set("event_cb", static_cast<RdKafka::EventCb*>(&impl_->events), errstr) !=
          RdKafka::Conf::CONF_OK) {
    throw KafkaError("kafka producer callbacks: " + errstr);
  }
  impl_->producer.reset(RdKafka::Producer::create(conf.get(), errstr));
  if (!impl_->producer) throw KafkaConfigError("", "", errstr);
}

KafkaProducer::~KafkaProducer() = default;
KafkaProducer::KafkaProducer(KafkaProducer&&) noexcept = default;
KafkaProducer& KafkaProducer::operator=(KafkaProducer&&) noexcept = default;

void KafkaProducer::produce(const OutRecord& rec, int timeout_ms) {
  using Clock = std::chrono::steady_clock;
  auto headers = make_headers(rec.headers);
  // RK_MSG_COPY: librdkafka copies the payload before produce() returns and never writes
  // through the pointer, which is what makes the const_cast below harmless.
  void* payload = rec.value ? const_cast<char*>(rec.value->data()) : nullptr;
  const std::size_t payload_len = rec.value ? rec.value->size() : 0;
  const void* key = rec.key ? rec.key->data() : nullptr;
  const std::size_t key_len = rec.key ? rec.key->size() : 0;
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));

  for (;;) {
    const RdKafka::ErrorCode err =
        impl_->producer->produce(rec.topic, rec.partition, RdKafka::Producer::RK_MSG_COPY, payload,
                                 payload_len, key, key_len, 0, headers.get(), tag_to_opaque(rec.tag));
    if (err == RdKafka::ERR_NO_ERROR) {
      // On success librdkafka has taken the headers and already deleted them.
      static_cast<void>(headers.release());
      ++impl_->outstanding;
      return;
    }
    if (err != RdKafka::ERR__QUEUE_FULL) {
      impl_->report_refused(rec, err);
      impl_->rethrow_handler_error();
      return;
    }
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      throw KafkaError("kafka producer queue still full after " + std::to_string(timeout_ms) +
                       " ms (" + std::to_string(impl_->outstanding) +
                       " records outstanding); record for topic '" + rec.topic + "' not enqueued");
    }
    // Serving reports is what frees room in the queue.
    poll(static_cast<int>(std::min<long long>(left, 100)));
  }
}

int KafkaProducer::poll(int timeout_ms) {
  const int served = impl_->producer->poll(timeout_ms);
  impl_->rethrow_handler_error();
  return served;
}

bool KafkaProducer::flush(int timeout_ms) {
  impl_->producer->flush(timeout_ms);
  // flush() waits until librdkafka's queue is empty; a report it queued in the meantime is
  // served here so that outstanding() tells the truth on return.
  impl_->producer->poll(0);
  impl_->rethrow_handler_error();
  return impl_->outstanding == 0;
}

int KafkaProducer::outstanding() const { return impl_->outstanding; }

std::optional<std::string> KafkaProducer::fatal_error() const {
  std::string reason;
  if (impl_->producer->fatal_error(reason) == RdKafka::ERR_NO_ERROR) return std::nullopt;
  return reason;
}

}  // namespace delayd::connectors
