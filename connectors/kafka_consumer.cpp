#include "connectors/kafka_consumer.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <map>
#include <set>

#include "connectors/log.hpp"
#include "connectors/rdkafka_config.hpp"

namespace delayd::connectors {
namespace {

using TopicPartitionPtr = std::unique_ptr<RdKafka::TopicPartition>;

std::vector<TopicPartition> to_values(const std::vector<RdKafka::TopicPartition*>& partitions) {
  std::vector<TopicPartition> out;
  out.reserve(partitions.size());
  for (const auto* tp : partitions) out.push_back({tp->topic(), tp->partition()});
  std::sort(out.begin(), out.end());
  return out;
}

std::string describe(const std::vector<TopicPartition>& partitions) {
  std::string out;
  for (const auto& tp : partitions) {
    if (!out.empty()) out += ", ";
    out += tp.topic + "[" + std::to_string(tp.partition) + "]";
  }
  return out.empty() ? "none" : out;
}

void close_logging_errors(KafkaConsumer& consumer) noexcept {
  try {
    consumer.close();
  } catch (const std::exception& e) {
    log(LogLevel::error, std::string("kafka consumer close: ") + e.what());
  }
}

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<std::chrono::milliseconds::rep>(left.count(), 0));
}

}  // namespace

struct KafkaConsumer::Impl final : RdKafka::RebalanceCb, RdKafka::OffsetCommitCb {
  Impl(Listener l, const std::string& group_id, std::string who)
      : group(group_id),
        principal(std::move(who)),
        listener(std::move(l)),
        events("kafka consumer group=" + group, principal) {}

  ~Impl() override { consumer.reset(); }

  void rebalance_cb(RdKafka::KafkaConsumer* c, RdKafka::ErrorCode err,
                    std::vector<RdKafka::TopicPartition*>& partitions) override {
    rebalanced = true;
    const bool cooperative = c->rebalance_protocol() == "COOPERATIVE";
    const std::vector<TopicPartition> tps = to_values(partitions);
    if (err == RdKafka::ERR__ASSIGN_PARTITIONS) {
      // Assign first: the listener is promised that the partitions are in place when it runs.
      if (cooperative) {
        check(std::unique_ptr<RdKafka::Error>(c->incremental_assign(partitions)), "incremental assign");
      } else {
        check(c->assign(partitions), "assign");
      }
      log(LogLevel::info, c->name() + ": assigned " + describe(tps));
      // The group took us in: the login and the group's ACLs are fine (a topic's, once it is ours).
      if (refused_topic.empty() ||
          std::any_of(tps.begin(), tps.end(), [&](const TopicPartition& tp) { return tp.topic == refused_topic; })) {
        end_refusal();
      }
      notify(listener.assigned, tps);
      return;
    }
    if (err == RdKafka::ERR__REVOKE_PARTITIONS) {
      log(c->assignment_lost() ? LogLevel::warning : LogLevel::info,
          c->name() + (c->assignment_lost() ? ": lost " : ": revoked ") + describe(tps));
      // The listener runs while the partitions are still ours, so that it can finish or abandon
      // their work before another member may start on them (lost: another may have started).
      notify(c->assignment_lost() && listener.lost ? listener.lost : listener.revoked, tps);
      revoked_in_poll.insert(tps.begin(), tps.end());
      if (cooperative) {
        check(std::unique_ptr<RdKafka::Error>(c->incremental_unassign(partitions)), "incremental unassign");
      } else {
        check(c->unassign(), "unassign");
      }
      return;
    }
    // librdkafka's advice for any other rebalance error: drop the whole assignment, it will
    // rejoin. Whatever was ours is no longer, so the listener hears of it.
    log(LogLevel::error, c->name() + ": rebalance failed: " + RdKafka::err2str(err));
    const std::vector<TopicPartition> held = current_assignment();
    notify(listener.lost ? listener.lost : listener.revoked, held);
    revoked_in_poll.insert(held.begin(), held.end());
    check(c->unassign(), "unassign");
  }

  // Results of commit_async(), served inside consume() on the caller's thread. A failed commit is
  // harmless (the records are read again and are idempotent), so it is logged, not thrown.
  // A rebalance fails every commit in flight at once, so one line per kCommitWarningEvery says
  // so, with how many failed since the last line.
  void offset_commit_cb(RdKafka::ErrorCode err, std::vector<RdKafka::TopicPartition*>& offsets) override {
    if (err == RdKafka::ERR_NO_ERROR || err == RdKafka::ERR__NO_OFFSET) return;
    const auto now = Clock::now();
    if (now < next_commit_warning) {
      ++commit_failures_unlogged;
      return;
    }
    next_commit_warning = now + kCommitWarningEvery;
    std::string which;
    for (const auto* tp : offsets) {
      if (tp->err() != RdKafka::ERR_NO_ERROR) which += " " + tp->topic() + "[" + std::to_string(tp->partition()) + "]";
    }
    const std::string more = commit_failures_unlogged == 0
                                 ? ""
                                 : "; " + std::to_string(commit_failures_unlogged) + " more failed commits not logged";
    commit_failures_unlogged = 0;
    log(LogLevel::warning,
        "kafka offset commit failed: " + RdKafka::err2str(err) + which + " (those records will be read again)" + more);
  }

  void notify(const std::function<void(const std::vector<TopicPartition>&)>& fn,
              const std::vector<TopicPartition>& tps) {
    if (!fn) return;
    // Exceptions must not cross librdkafka's C frames; they are rethrown after it returns.
    try {
      fn(tps);
    } catch (...) {
      if (!pending_error) pending_error = std::current_exception();
    }
  }

  void check(RdKafka::ErrorCode err, const char* what) {
    if (err != RdKafka::ERR_NO_ERROR && !pending_error) {
      pending_error = std::make_exception_ptr(
          KafkaError(std::string("kafka consumer ") + what + " failed: " + RdKafka::err2str(err)));
    }
  }

  void check(const std::unique_ptr<RdKafka::Error>& error, const char* what) {
    if (error && !pending_error) {
      pending_error =
          std::make_exception_ptr(KafkaError(std::string("kafka consumer ") + what + " failed: " + error->str()));
    }
  }

  void rethrow_pending() {
    if (pending_error) std::rethrow_exception(std::exchange(pending_error, nullptr));
  }

  void ensure_open() const {
    if (closed) throw KafkaError("kafka consumer is closed");
  }

  std::vector<TopicPartition> current_assignment() const {
    std::vector<RdKafka::TopicPartition*> raw;
    const RdKafka::ErrorCode err = consumer->assignment(raw);
    std::vector<TopicPartitionPtr> owned(raw.begin(), raw.end());
    if (err != RdKafka::ERR_NO_ERROR) {
      throw KafkaError("kafka consumer assignment: " + RdKafka::err2str(err));
    }
    return to_values(raw);
  }

  [[noreturn]] void throw_fatal() const {
    std::string reason;
    const RdKafka::ErrorCode code = consumer->fatal_error(reason);
    if (code == RdKafka::ERR_FENCED_INSTANCE_ID) throw KafkaFencedMember(consumer->name() + ": fenced: " + reason);
    throw KafkaError(consumer->name() + ": fatal error: " + reason);
  }

  // A message's error that is a refusal (refusal_of()): kept, with what was refused, instead of
  // logged; refusal() reports it.
  bool note_refusal(const RdKafka::Message& m) {
    const Refusal kind = refusal_of(static_cast<int>(m.err()));
    if (kind == Refusal::none) return false;
    std::string operation, resource;
    refused_topic.clear();
    if (m.err() == RdKafka::ERR_GROUP_AUTHORIZATION_FAILED) {
      operation = "Read";
      resource = "group " + group;
    } else if (m.err() == RdKafka::ERR_TOPIC_AUTHORIZATION_FAILED) {
      operation = "Read or Describe";
      resource = m.topic_name().empty() ? std::string("a subscribed topic") : "topic " + m.topic_name();
      refused_topic = m.topic_name();
    }
    events.set_refusal(refusal_sentence(kind, principal, operation, resource, m.errstr()));
    return true;
  }

  // A record from `topic` ends a refusal of the login or the group, or of that topic; records
  // of the other topics do not end a refusal of one topic.
  void delivered_from(const std::string& topic) {
    if (refused_topic.empty() || refused_topic == topic) end_refusal();
  }

  void end_refusal() {
    events.clear_refusal();
    refused_topic.clear();
  }

  static constexpr std::chrono::seconds kCommitWarningEvery{10};
  const std::string group;
  const std::string principal;
  std::string refused_topic;  // the topic of the current refusal, if it is a topic's
  Clock::time_point next_commit_warning{};
  std::uint64_t commit_failures_unlogged = 0;
  Listener listener;
  LogEventBridge events;
  std::exception_ptr pending_error;
  std::set<TopicPartition> revoked_in_poll;
  bool rebalanced = false;
  bool closed = false;
  // Declared last so that it is destroyed first, while the callbacks above are still alive.
  std::unique_ptr<RdKafka::KafkaConsumer> consumer;
};

KafkaConsumer::KafkaConsumer(const Properties& props, Listener listener) {
  Properties effective = with_defaults({{"auto.offset.reset", "earliest"}}, props);
  require_property(effective, {"group.id"});
  require_property(effective, {"bootstrap.servers", "metadata.broker.list"});
  const std::string group = find_property(effective, "group.id").value_or("");
  effective =
      with_forced(std::move(effective), {{"enable.auto.commit", "false"}, {"enable.auto.offset.store", "false"}},
                  "kafka consumer group=" + group);
  impl_ = std::make_unique<Impl>(std::move(listener), group, principal_of(effective));
  auto conf = make_conf(effective);
  std::string errstr;
  if (conf->set("rebalance_cb", static_cast<RdKafka::RebalanceCb*>(impl_.get()), errstr) != RdKafka::Conf::CONF_OK ||
      conf->set("offset_commit_cb", static_cast<RdKafka::OffsetCommitCb*>(impl_.get()), errstr) !=
          RdKafka::Conf::CONF_OK ||
      conf->set("event_cb", static_cast<RdKafka::EventCb*>(&impl_->events), errstr) != RdKafka::Conf::CONF_OK) {
    throw KafkaError("kafka consumer callbacks: " + errstr);
  }
  impl_->consumer.reset(RdKafka::KafkaConsumer::create(conf.get(), errstr));
  if (!impl_->consumer) throw KafkaConfigError("", "", errstr);
}

KafkaConsumer::~KafkaConsumer() { close_logging_errors(*this); }

KafkaConsumer::KafkaConsumer(KafkaConsumer&&) noexcept = default;

KafkaConsumer& KafkaConsumer::operator=(KafkaConsumer&& other) noexcept {
  if (this != &other) {
    // The group must see this member leave before it is forgotten.
    close_logging_errors(*this);
    impl_ = std::move(other.impl_);
  }
  return *this;
}

void KafkaConsumer::subscribe(const std::vector<std::string>& topics) {
  impl_->ensure_open();
  const RdKafka::ErrorCode err = impl_->consumer->subscribe(topics);
  if (err != RdKafka::ERR_NO_ERROR) {
    throw KafkaError("kafka consumer subscribe: " + RdKafka::err2str(err));
  }
}

void KafkaConsumer::unsubscribe() {
  impl_->ensure_open();
  const RdKafka::ErrorCode err = impl_->consumer->unsubscribe();
  if (err != RdKafka::ERR_NO_ERROR) {
    throw KafkaError("kafka consumer unsubscribe: " + RdKafka::err2str(err));
  }
}

std::vector<Record> KafkaConsumer::poll_batch(std::size_t max, int timeout_ms) {
  Impl& impl = *impl_;
  impl.ensure_open();
  // Fatal for good: librdkafka reports it once, and the consumer reads nothing after it.
  if (std::string reason; impl.consumer->fatal_error(reason) != RdKafka::ERR_NO_ERROR) impl.throw_fatal();
  std::vector<Record> out;
  if (max == 0) return out;
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  impl.rebalanced = false;
  impl.revoked_in_poll.clear();

  while (out.size() < max) {
    const int wait = out.empty() ? remaining_ms(deadline) : 0;
    std::unique_ptr<RdKafka::Message> m(impl.consumer->consume(wait));
    if (impl.rebalanced) {
      // Records of partitions revoked during this call are no longer the caller's to process.
      std::erase_if(out, [&](const Record& r) {
        return impl.revoked_in_poll.count(TopicPartition{r.topic, r.partition}) != 0;
      });
    }
    impl.rethrow_pending();

    const RdKafka::ErrorCode err = m->err();
    if (err == RdKafka::ERR_NO_ERROR) {
      out.push_back(to_record(*m));
      impl.delivered_from(out.back().topic);
    } else if (err == RdKafka::ERR__FATAL) {
      impl.throw_fatal();
    } else if (impl.note_refusal(*m)) {
      // Reported once by the owner (refusal()), not at every retry.
    } else if (err != RdKafka::ERR__TIMED_OUT && err != RdKafka::ERR__PARTITION_EOF) {
      std::string line = impl.consumer->name() + ": " + RdKafka::err2str(err);
      if (!m->topic_name().empty()) line += " (" + m->topic_name() + "[" + std::to_string(m->partition()) + "])";
      log(LogLevel::warning, line + ": " + m->errstr());
    }

    // A rebalance ends the batch: the caller should act on the new ownership before reading on.
    if (impl.rebalanced) break;
    if (out.empty()) {
      if (remaining_ms(deadline) == 0) break;
    } else if (err != RdKafka::ERR_NO_ERROR && err != RdKafka::ERR__PARTITION_EOF) {
      break;  // nothing more is fetched yet
    }
  }
  return out;
}

std::optional<std::string> KafkaConsumer::refusal() const { return impl_->events.refusal(); }

void KafkaConsumer::commit(const std::vector<Record>& records) {
  std::map<TopicPartition, std::int64_t> next;
  for (const auto& r : records) {
    auto& n = next[TopicPartition{r.topic, r.partition}];
    n = std::max(n, r.offset + 1);
  }
  commit(std::vector<std::pair<TopicPartition, std::int64_t>>(next.begin(), next.end()));
}

namespace {

// librdkafka's partition list for (partition, offset) pairs, one entry per partition (the last
// offset given wins). `owned` keeps the objects alive; `raw` is what the calls take.
struct PartitionList {
  explicit PartitionList(const std::vector<std::pair<TopicPartition, std::int64_t>>& offsets) {
    std::map<TopicPartition, std::int64_t> unique;
    for (const auto& [tp, offset] : offsets) unique[tp] = offset;
    for (const auto& [tp, offset] : unique) {
      owned.emplace_back(RdKafka::TopicPartition::create(tp.topic, tp.partition, offset));
      raw.push_back(owned.back().get());
    }
  }
  std::vector<TopicPartitionPtr> owned;
  std::vector<RdKafka::TopicPartition*> raw;
};

}  // namespace

void KafkaConsumer::commit(const std::vector<std::pair<TopicPartition, std::int64_t>>& next_offsets) {
  impl_->ensure_open();
  // commitSync() with an empty list would commit the current position of every assigned
  // partition, which is exactly what manual commits exist to prevent.
  if (next_offsets.empty()) return;
  PartitionList list(next_offsets);
  const auto& raw = list.raw;
  const RdKafka::ErrorCode err = impl_->consumer->commitSync(list.raw);
  std::string failures;
  for (const auto* tp : raw) {
    if (tp->err() != RdKafka::ERR_NO_ERROR) {
      failures += " " + tp->topic() + "[" + std::to_string(tp->partition()) + "]@" + std::to_string(tp->offset()) +
                  ": " + RdKafka::err2str(tp->err()) + ";";
    }
  }
  if (err != RdKafka::ERR_NO_ERROR || !failures.empty()) {
    throw KafkaError("kafka commit failed: " + RdKafka::err2str(err) + (failures.empty() ? "" : ":" + failures));
  }
}

void KafkaConsumer::commit_async(const std::vector<std::pair<TopicPartition, std::int64_t>>& next_offsets) {
  impl_->ensure_open();
  if (next_offsets.empty()) return;  // an empty list would commit every current position
  PartitionList list(next_offsets);
  const RdKafka::ErrorCode err = impl_->consumer->commitAsync(list.raw);
  if (err != RdKafka::ERR_NO_ERROR) throw KafkaError("kafka commit failed: " + RdKafka::err2str(err));
}

void KafkaConsumer::set_paused(bool paused) {
  impl_->ensure_open();
  std::vector<std::pair<TopicPartition, std::int64_t>> assigned;
  for (const auto& tp : impl_->current_assignment()) assigned.emplace_back(tp, RdKafka::Topic::OFFSET_INVALID);
  if (assigned.empty()) return;
  PartitionList list(assigned);
  const RdKafka::ErrorCode err = paused ? impl_->consumer->pause(list.raw) : impl_->consumer->resume(list.raw);
  if (err != RdKafka::ERR_NO_ERROR) {
    throw KafkaError(std::string("kafka consumer ") + (paused ? "pause" : "resume") + ": " + RdKafka::err2str(err));
  }
}

std::vector<TopicPartition> KafkaConsumer::assignment() const {
  impl_->ensure_open();
  return impl_->current_assignment();
}

std::map<TopicPartition, std::int64_t> KafkaConsumer::lag() const {
  impl_->ensure_open();
  std::vector<RdKafka::TopicPartition*> raw;
  std::map<TopicPartition, std::int64_t> out;
  if (impl_->consumer->assignment(raw) != RdKafka::ERR_NO_ERROR) return out;
  std::vector<TopicPartitionPtr> owned(raw.begin(), raw.end());
  if (impl_->consumer->position(raw) != RdKafka::ERR_NO_ERROR) return out;
  for (const auto* p : raw) {
    std::int64_t low = -1;
    std::int64_t high = -1;
    if (p->offset() < 0 ||
        impl_->consumer->get_watermark_offsets(p->topic(), p->partition(), &low, &high) != RdKafka::ERR_NO_ERROR ||
        high < 0) {
      continue;
    }
    out[TopicPartition{p->topic(), p->partition()}] = std::max<std::int64_t>(high - p->offset(), 0);
  }
  return out;
}

std::string KafkaConsumer::member_id() const {
  impl_->ensure_open();
  return impl_->consumer->memberid();
}

void KafkaConsumer::close() {
  if (!impl_ || impl_->closed) return;
  impl_->closed = true;
  const RdKafka::ErrorCode err = impl_->consumer->close();
  impl_->rethrow_pending();
  if (err != RdKafka::ERR_NO_ERROR) {
    throw KafkaError("kafka consumer close: " + RdKafka::err2str(err));
  }
}

}  // namespace delayd::connectors
