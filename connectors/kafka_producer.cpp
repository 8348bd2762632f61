#include "connectors/kafka_producer.hpp"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "connectors/delivery_class.hpp"
#include "connectors/rdkafka_config.hpp"

namespace delayd::connectors {
namespace {

// The caller's tag travels as librdkafka's per-message opaque pointer, which saves an
// allocation per record and leaves nothing to free when a report never comes back.
static_assert(sizeof(std::uintptr_t) >= sizeof(std::uint64_t), "a tag must fit in a pointer");

void* tag_to_opaque(std::uint64_t tag) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(tag)); }

std::uint64_t opaque_to_tag(const void* opaque) {
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(opaque));
}

std::unique_ptr<RdKafka::Headers> make_headers(const Headers& headers) {
  if (headers.empty()) return nullptr;
  std::unique_ptr<RdKafka::Headers> out(RdKafka::Headers::create());
  for (const auto& h : headers) {
    // A null data pointer is how librdkafka encodes a null header value; an empty std::string
    // has a non-null data() and so stays an empty value.
    const RdKafka::ErrorCode err =
        h.value ? out->add(h.name, h.value->data(), h.value->size()) : out->add(h.name, nullptr, 0);
    if (err != RdKafka::ERR_NO_ERROR) {
      throw KafkaError("kafka header '" + h.name + "': " + RdKafka::err2str(err));
    }
  }
  return out;
}

}  // namespace

struct KafkaProducer::Impl final : RdKafka::DeliveryReportCb {
  Impl(ReportHandler handler, const Properties& props)
      : properties(props), on_report(std::move(handler)), events("kafka producer", principal_of(props)) {}

  ~Impl() override {
    // Reports of purged records would reach a handler (and wake a hook) whose owner is being
    // torn down.
    disarm();
    destroying = true;
    if (producer) {
      producer->purge(RdKafka::Producer::PURGE_QUEUE | RdKafka::Producer::PURGE_INFLIGHT |
                      RdKafka::Producer::PURGE_NON_BLOCKING);
      release();
    }
  }

  // Topic handles belong to the instance that made them, and go before it; so does the wake
  // hook, removed first so that no librdkafka thread calls it while the instance goes.
  void release() {
    disarm();
    topics.clear();
    producer.reset();
  }

  // librdkafka calls this with the main queue's lock held (a report was queued on an empty
  // queue); disarm() takes the same lock, so a hook it removed is not running any more.
  static void queued(rd_kafka_t* /*rk*/, void* opaque) noexcept {
    auto* self = static_cast<Impl*>(opaque);
    if (self->wake) self->wake();
  }

  // Sets the hook on the current instance's main queue (the one poll() serves), if there is one.
  // Precondition: producer is set.
  void arm() {
    if (!wake || main_queue) return;
    main_queue.reset(rd_kafka_queue_get_main(producer->c_ptr()));
    rd_kafka_queue_cb_event_enable(main_queue.get(), &Impl::queued, this);
  }

  void disarm() noexcept {
    if (!main_queue) return;
    rd_kafka_queue_cb_event_enable(main_queue.get(), nullptr, nullptr);
    main_queue.reset();
  }

  // The first record for a topic asks for its metadata at once. produce() by topic name makes
  // librdkafka 2.0's local topic without asking; its records then wait for the main thread's
  // scan of unknown topics, once a second: up to a second, which the record's timestamp (taken
  // here) does not show. A topic handle made by name asks for its leader when it is new. A
  // handle that cannot be made changes nothing: the record is produced, and refused, as before.
  void know(const std::string& topic) {
    if (topics.count(topic) != 0) return;
    std::string errstr;
    std::unique_ptr<RdKafka::Topic> handle(RdKafka::Topic::create(producer.get(), topic, nullptr, errstr));
    if (handle) topics.emplace(topic, std::move(handle));
  }

  void dr_cb(RdKafka::Message& message) override {
    if (destroying) return;
    DeliveryReport report;
    report.tag = opaque_to_tag(message.msg_opaque());
    forget(report.tag);
    report.topic = message.topic_name();
    report.partition = message.partition();
    report.offset = message.offset();
    if (const RdKafka::MessageTimestamp ts = message.timestamp();
        ts.type != RdKafka::MessageTimestamp::MSG_TIMESTAMP_NOT_AVAILABLE) {
      report.timestamp_ms = ts.timestamp;
    }
    if (message.err() == RdKafka::ERR__PURGE_QUEUE || message.err() == RdKafka::ERR__PURGE_INFLIGHT) ++purged;
    report.error_class = classify_report(message.err(), message.status(), report.offset, acks_return_offsets);
    report.ok = report.error_class == DeliveryError::none;
    if (!report.ok) report.error = message.err() == RdKafka::ERR_NO_ERROR ? kNoOffsetError : message.errstr();
    explain_refusal(report, message.err());
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
    // Refused before it was queued: nothing was sent, so nothing can have been written.
    report.error_class = classify(err, RdKafka::Message::MSG_STATUS_NOT_PERSISTED);
    report.error = RdKafka::err2str(err);
    if (err == RdKafka::ERR__FATAL) {
      std::string reason;
      producer->fatal_error(reason);
      report.error += ": " + reason;
    }
    explain_refusal(report, err);
    deliver(report);
  }

  // A new librdkafka instance from the saved properties, with this object's callbacks.
  void build() {
    auto conf = make_conf(properties);
    std::string errstr;
    if (conf->set("dr_cb", static_cast<RdKafka::DeliveryReportCb*>(this), errstr) != RdKafka::Conf::CONF_OK ||
        conf->set("event_cb", static_cast<RdKafka::EventCb*>(&events), errstr) != RdKafka::Conf::CONF_OK) {
      throw KafkaError("kafka producer callbacks: " + errstr);
    }
    producer.reset(RdKafka::Producer::create(conf.get(), errstr));
    if (!producer) throw KafkaConfigError("", "", errstr);
    arm();
  }

  // A refused record's error names what was refused (Write on its topic) and to whom. While the
  // login is being refused, records only time out: their error says why. A delivered record
  // ends a refusal.
  void explain_refusal(DeliveryReport& report, RdKafka::ErrorCode err) {
    if (report.ok) {
      events.clear_refusal();
      return;
    }
    if (auto refused = fatal_refusal()) {
      // The instance could not even get its producer id: nothing of it was written.
      report.error = *refused;
      report.error_class = DeliveryError::refused;
      return;
    }
    if (const Refusal kind = refusal_of(static_cast<int>(err)); kind != Refusal::none) {
      const bool cluster = err == RdKafka::ERR_CLUSTER_AUTHORIZATION_FAILED;
      report.error = refusal_sentence(kind, principal_of(properties), cluster ? "IdempotentWrite" : "Write",
                                      cluster ? "the cluster" : "topic " + report.topic, report.error);
      return;
    }
    if (report.error_class == DeliveryError::transient || report.error_class == DeliveryError::possibly_persisted) {
      if (auto refusal = events.refusal()) {
        report.error += " (" + *refusal + ")";
        if (report.error_class == DeliveryError::transient) report.error_class = DeliveryError::refused;
      }
    }
  }

  // The fatal error's sentence when the instance is fatal because Kafka refused it (an idempotent
  // producer without Write on any topic, or IdempotentWrite on the cluster, cannot get its id).
  std::optional<std::string> fatal_refusal() const {
    if (!producer) return std::nullopt;
    std::string reason;
    const RdKafka::ErrorCode code = producer->fatal_error(reason);
    const Refusal kind = refusal_of(static_cast<int>(code));
    if (code == RdKafka::ERR_NO_ERROR || kind == Refusal::none) return std::nullopt;
    const bool cluster = code == RdKafka::ERR_CLUSTER_AUTHORIZATION_FAILED;
    return refusal_sentence(kind, principal_of(properties), cluster ? "IdempotentWrite" : "",
                            cluster ? "the cluster (or Write on any topic)" : "", reason);
  }

  void forget(std::uint64_t tag) {
    if (auto it = unreported.find(tag); it != unreported.end()) unreported.erase(it);
  }

  Properties properties;
  // Whether Kafka answers a written record with its offset (acks is not 0): then a success
  // without one is only possibly written (delivery_class.hpp).
  bool acks_return_offsets = find_property(properties, "acks").value_or("all") != "0";
  // Tags of records accepted by produce() and not yet reported (a multiset: tags are the
  // caller's and need not be unique). Its size is outstanding().
  std::unordered_multiset<std::uint64_t> unreported;
  std::uint64_t produced = 0;  // records accepted by produce(), ever
  std::uint64_t purged = 0;    // records reported as purged, ever
  ReportHandler on_report;
  LogEventBridge events;
  std::exception_ptr handler_error;
  bool destroying = false;
  std::function<void()> wake;  // on_reports_queued()'s hook; empty: none
  // Declared after the callbacks so that it is destroyed before them, while they are alive.
  std::unique_ptr<RdKafka::Producer> producer;
  // The reference to producer's main queue that carries the wake hook (null: no hook); it goes
  // before the instance (release()).
  struct QueueRelease {
    void operator()(rd_kafka_queue_t* q) const noexcept { rd_kafka_queue_destroy(q); }
  };
  std::unique_ptr<rd_kafka_queue_t, QueueRelease> main_queue;
  // One handle per topic this instance has produced to (know()); declared last so that the
  // handles go before the instance they belong to; release() clears them too.
  std::unordered_map<std::string, std::unique_ptr<RdKafka::Topic>> topics;
};

KafkaProducer::KafkaProducer(const Properties& props, ReportHandler on_report)
    : impl_(std::make_unique<Impl>(std::move(on_report),
                                   with_defaults({{"enable.idempotence", "true"}, {"acks", "all"}}, props))) {
  require_property(impl_->properties, {"bootstrap.servers", "metadata.broker.list"});
  impl_->build();
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
  impl_->know(rec.topic);

  for (;;) {
    const RdKafka::ErrorCode err = impl_->producer->produce(
        rec.topic, rec.partition, RdKafka::Producer::RK_MSG_COPY, payload, payload_len, key, key_len,
        rec.timestamp_ms >= 0 ? rec.timestamp_ms : 0, headers.get(), tag_to_opaque(rec.tag));
    if (err == RdKafka::ERR_NO_ERROR) {
      // On success librdkafka has taken the headers and already deleted them.
      static_cast<void>(headers.release());
      impl_->unreported.insert(rec.tag);
      ++impl_->produced;
      return;
    }
    if (err != RdKafka::ERR__QUEUE_FULL) {
      impl_->report_refused(rec, err);
      impl_->rethrow_handler_error();
      return;
    }
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      throw KafkaError("kafka producer queue still full after " + std::to_string(timeout_ms) + " ms (" +
                       std::to_string(impl_->unreported.size()) + " records outstanding); record for topic '" +
                       rec.topic + "' not enqueued");
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
  return impl_->unreported.empty();
}

void KafkaProducer::prepare(const std::string& topic) { impl_->know(topic); }

std::optional<int> KafkaProducer::partition_count(const std::string& topic, int timeout_ms) {
  return connectors::partition_count(*impl_->producer, topic, timeout_ms, "kafka producer");
}

void KafkaProducer::report_now(const DeliveryReport& report) {
  impl_->deliver(report);
  impl_->rethrow_handler_error();
}

void KafkaProducer::on_reports_queued(std::function<void()> wake) {
  impl_->disarm();
  impl_->wake = std::move(wake);
  if (impl_->producer) impl_->arm();
}

int KafkaProducer::outstanding() const { return static_cast<int>(impl_->unreported.size()); }

std::uint64_t KafkaProducer::produced() const { return impl_->produced; }

std::optional<std::string> KafkaProducer::fatal_error() const {
  std::string reason;
  if (impl_->producer->fatal_error(reason) == RdKafka::ERR_NO_ERROR) return std::nullopt;
  return reason;
}

std::optional<std::string> KafkaProducer::fatal_refusal() const { return impl_->fatal_refusal(); }

std::optional<std::string> KafkaProducer::recover_if_fatal() {
  auto reason = fatal_error();
  if (!reason) return std::nullopt;
  const auto refused = impl_->fatal_refusal();
  if (refused) reason = refused;
  // Purged records are reported (ERR__PURGE_QUEUE / ERR__PURGE_INFLIGHT, classified by their
  // persistence status) when the reports are served, which the poll below does.
  impl_->producer->purge(RdKafka::Producer::PURGE_QUEUE | RdKafka::Producer::PURGE_INFLIGHT |
                         RdKafka::Producer::PURGE_NON_BLOCKING);
  for (int i = 0; i < 50 && !impl_->unreported.empty(); ++i) impl_->producer->poll(10);
  impl_->destroying = true;  // a straggling report from the old instance must not reach the handler
  impl_->release();
  impl_->destroying = false;
  // Whatever the old instance did not report is reported here, as possibly written.
  auto left = std::exchange(impl_->unreported, {});
  for (std::uint64_t tag : left) {
    DeliveryReport report;
    report.tag = tag;
    report.error_class = refused ? DeliveryError::refused : DeliveryError::possibly_persisted;
    report.error = refused ? *refused : "producer replaced after a fatal error: " + *reason;
    impl_->deliver(report);
  }
  impl_->build();
  impl_->rethrow_handler_error();
  return reason;
}

int KafkaProducer::purge_queued() {
  const int before = outstanding();
  impl_->producer->purge(RdKafka::Producer::PURGE_QUEUE | RdKafka::Producer::PURGE_NON_BLOCKING);
  return before;
}

std::uint64_t KafkaProducer::purged() const { return impl_->purged; }

namespace {

// What a transactional call's error asks of the caller (TxnOutcome's table).
KafkaProducer::TxnOutcome outcome_of(RdKafka::Error* raw, const Properties& props) {
  using Kind = KafkaProducer::TxnOutcome::Kind;
  std::unique_ptr<RdKafka::Error> error(raw);
  KafkaProducer::TxnOutcome out;
  if (!error) return out;
  out.error = error->str();
  const RdKafka::ErrorCode code = error->code();
  if (const Refusal kind = refusal_of(static_cast<int>(code)); kind != Refusal::none) {
    out.kind = Kind::fatal;
    out.refused = true;
    const bool id = code == RdKafka::ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
    out.error = refusal_sentence(kind, principal_of(props), id ? "Write" : "",
                                 id ? "transactional id " + find_property(props, "transactional.id").value_or("") : "",
                                 out.error);
    return out;
  }
  if (code == RdKafka::ERR__FENCED || code == RdKafka::ERR_PRODUCER_FENCED ||
      code == RdKafka::ERR_INVALID_PRODUCER_EPOCH) {
    out.kind = Kind::fenced;
  } else if (error->is_fatal()) {
    out.kind = Kind::fatal;
  } else if (error->txn_requires_abort()) {
    out.kind = Kind::abort;
  } else if (error->is_retriable()) {
    out.kind = Kind::retry;
  } else {
    out.kind = Kind::fatal;  // a call out of order: nothing sensible can follow on this instance
  }
  return out;
}

}  // namespace

KafkaProducer::TxnOutcome KafkaProducer::init_transactions(int timeout_ms) {
  return outcome_of(impl_->producer->init_transactions(timeout_ms), impl_->properties);
}

KafkaProducer::TxnOutcome KafkaProducer::begin_transaction() {
  return outcome_of(impl_->producer->begin_transaction(), impl_->properties);
}

KafkaProducer::TxnOutcome KafkaProducer::commit_transaction(int timeout_ms) {
  TxnOutcome out = outcome_of(impl_->producer->commit_transaction(timeout_ms), impl_->properties);
  impl_->producer->poll(0);  // the reports the commit's flush queued
  impl_->rethrow_handler_error();
  return out;
}

KafkaProducer::TxnOutcome KafkaProducer::abort_transaction(int timeout_ms) {
  TxnOutcome out = outcome_of(impl_->producer->abort_transaction(timeout_ms), impl_->properties);
  impl_->producer->poll(0);
  impl_->rethrow_handler_error();
  return out;
}

void KafkaProducer::inject_fatal_error_for_testing(const std::string& reason) {
  rd_kafka_test_fatal_error(impl_->producer->c_ptr(), RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, reason.c_str());
}

}  // namespace delayd::connectors
