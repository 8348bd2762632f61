#include "connectors/kafka_admin.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "connectors/kafka_error.hpp"
#include "connectors/log.hpp"
#include "connectors/rdkafka_config.hpp"

namespace delayd::connectors {
namespace {

struct KafkaDeleter {
  void operator()(rd_kafka_t* rk) const noexcept { rd_kafka_destroy(rk); }
};
struct NewTopicDeleter {
  void operator()(rd_kafka_NewTopic_t* t) const noexcept { rd_kafka_NewTopic_destroy(t); }
};
struct DeleteTopicDeleter {
  void operator()(rd_kafka_DeleteTopic_t* t) const noexcept { rd_kafka_DeleteTopic_destroy(t); }
};
struct AdminOptionsDeleter {
  void operator()(rd_kafka_AdminOptions_t* o) const noexcept { rd_kafka_AdminOptions_destroy(o); }
};
struct QueueDeleter {
  void operator()(rd_kafka_queue_t* q) const noexcept { rd_kafka_queue_destroy(q); }
};
struct EventDeleter {
  void operator()(rd_kafka_event_t* e) const noexcept { rd_kafka_event_destroy(e); }
};
struct MetadataDeleter {
  void operator()(const rd_kafka_metadata_t* m) const noexcept { rd_kafka_metadata_destroy(m); }
};
struct GroupListDeleter {
  void operator()(const rd_kafka_group_list* l) const noexcept { rd_kafka_group_list_destroy(l); }
};

using KafkaPtr = std::unique_ptr<rd_kafka_t, KafkaDeleter>;
using NewTopicPtr = std::unique_ptr<rd_kafka_NewTopic_t, NewTopicDeleter>;
using DeleteTopicPtr = std::unique_ptr<rd_kafka_DeleteTopic_t, DeleteTopicDeleter>;
using AdminOptionsPtr = std::unique_ptr<rd_kafka_AdminOptions_t, AdminOptionsDeleter>;
using QueuePtr = std::unique_ptr<rd_kafka_queue_t, QueueDeleter>;
using EventPtr = std::unique_ptr<rd_kafka_event_t, EventDeleter>;
using MetadataPtr = std::unique_ptr<const rd_kafka_metadata_t, MetadataDeleter>;
using GroupListPtr = std::unique_ptr<const rd_kafka_group_list, GroupListDeleter>;

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<std::chrono::milliseconds::rep>(left.count(), 0));
}

const rd_kafka_metadata_topic_t* find_topic(const rd_kafka_metadata_t& md, const std::string& name) {
  for (int i = 0; i < md.topic_cnt; ++i) {
    if (name == md.topics[i].topic) return &md.topics[i];
  }
  return nullptr;
}

bool absent(const rd_kafka_metadata_topic_t* t) {
  return t == nullptr || t->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
}

// Why the topic is not usable yet, or empty when every partition has a leader.
std::string not_ready_reason(const rd_kafka_metadata_topic_t* t) {
  if (absent(t)) return "not in cluster metadata";
  if (t->err != RD_KAFKA_RESP_ERR_NO_ERROR) return rd_kafka_err2str(t->err);
  if (t->partition_cnt == 0) return "no partitions in metadata";
  for (int p = 0; p < t->partition_cnt; ++p) {
    const auto& part = t->partitions[p];
    if (part.err != RD_KAFKA_RESP_ERR_NO_ERROR || part.leader < 0) {
      std::string why = "partition " + std::to_string(part.id) + " has no leader";
      if (part.err != RD_KAFKA_RESP_ERR_NO_ERROR) why += std::string(" (") + rd_kafka_err2str(part.err) + ")";
      return why;
    }
  }
  return {};
}

}  // namespace

struct KafkaAdmin::Impl {
  std::string principal;  // principal_of() the properties: who a refusal was for
  // The last login Kafka refused (its error callback, on librdkafka's thread): a request that
  // then goes unanswered was refused, not lost. Empty while none was.
  std::mutex mutex;
  std::string refused_login;
  // librdkafka's error callback: keeps an authentication failure; the rest shows in the
  // requests' own errors.
  static void on_error(rd_kafka_t* /*rk*/, int err, const char* reason, void* opaque) noexcept {
    if (refusal_of(err) != Refusal::authentication) return;
    auto* self = static_cast<Impl*>(opaque);
    const std::lock_guard lock(self->mutex);
    self->refused_login = reason != nullptr ? reason : "";
  }
  // Throws KafkaRefused when Kafka refused the login since this client was made (serving the
  // error callbacks first: an admin client is not polled otherwise).
  void throw_if_login_refused() {
    rd_kafka_poll(rk.get(), 0);
    const std::lock_guard lock(mutex);
    if (!refused_login.empty()) {
      throw KafkaRefused(refusal_sentence(Refusal::authentication, principal, "", "", refused_login));
    }
  }
  // Metadata for all topics: asking for one topic by name could, on a broker with auto-creation
  // on, create it as a side effect, which is the last thing a read should do.
  MetadataPtr metadata(int timeout_ms) {
    const rd_kafka_metadata_t* md = nullptr;
    const rd_kafka_resp_err_t err = rd_kafka_metadata(rk.get(), 1, nullptr, &md, std::max(timeout_ms, 1));
    MetadataPtr owned(md);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      throw_if_login_refused();
      throw KafkaError(std::string("kafka metadata request failed: ") + rd_kafka_err2str(err));
    }
    return owned;
  }

  void create(const std::vector<std::string>& names, int partitions, int replication_factor,
              const std::vector<std::pair<std::string, std::string>>& config, Clock::time_point deadline) {
    std::array<char, 512> errstr{};
    std::vector<NewTopicPtr> owned;
    std::vector<rd_kafka_NewTopic_t*> raw;
    for (const auto& name : names) {
      owned.emplace_back(
          rd_kafka_NewTopic_new(name.c_str(), partitions, replication_factor, errstr.data(), errstr.size()));
      if (!owned.back()) throw KafkaError("kafka topic '" + name + "': " + errstr.data());
      for (const auto& [key, value] : config) {
        if (rd_kafka_NewTopic_set_config(owned.back().get(), key.c_str(), value.c_str()) !=
            RD_KAFKA_RESP_ERR_NO_ERROR) {
          throw KafkaError("kafka topic '" + name + "': config " + key + "=" + value + " refused");
        }
      }
      raw.push_back(owned.back().get());
    }
    AdminOptionsPtr options(rd_kafka_AdminOptions_new(rk.get(), RD_KAFKA_ADMIN_OP_CREATETOPICS));
    const int budget = std::max(remaining_ms(deadline), 1);
    // The operation timeout makes the broker answer only once the topics are created on the
    // controller, instead of as soon as the request is accepted.
    if (rd_kafka_AdminOptions_set_request_timeout(options.get(), budget, errstr.data(), errstr.size()) ||
        rd_kafka_AdminOptions_set_operation_timeout(options.get(), budget, errstr.data(), errstr.size())) {
      throw KafkaError(std::string("kafka admin options: ") + errstr.data());
    }
    QueuePtr queue(rd_kafka_queue_new(rk.get()));
    rd_kafka_CreateTopics(rk.get(), raw.data(), raw.size(), options.get(), queue.get());

    // librdkafka enforces the request timeout itself; the extra second only guards against
    // waiting forever should the result event never come.
    EventPtr event(rd_kafka_queue_poll(queue.get(), budget + 1000));
    if (!event) throw KafkaError("kafka create topics: no answer within " + std::to_string(budget) + " ms");
    if (rd_kafka_event_error(event.get()) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      throw KafkaError(std::string("kafka create topics: ") + rd_kafka_event_error_string(event.get()));
    }
    const rd_kafka_CreateTopics_result_t* result = rd_kafka_event_CreateTopics_result(event.get());
    if (result == nullptr) throw KafkaError("kafka create topics: unexpected event type");
    std::size_t count = 0;
    const rd_kafka_topic_result_t** topics = rd_kafka_CreateTopics_result_topics(result, &count);
    std::string failures;
    for (std::size_t i = 0; i < count; ++i) {
      const rd_kafka_resp_err_t err = rd_kafka_topic_result_error(topics[i]);
      if (err == RD_KAFKA_RESP_ERR_NO_ERROR || err == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) continue;
      const char* why = rd_kafka_topic_result_error_string(topics[i]);
      if (!failures.empty()) failures += "; ";
      failures += std::string("kafka topic '") + rd_kafka_topic_result_name(topics[i]) +
                  "' could not be created: " + (why != nullptr ? why : rd_kafka_err2str(err));
    }
    if (!failures.empty()) throw KafkaError(failures);
  }

  KafkaPtr rk;
};

KafkaAdmin::KafkaAdmin(const Properties& props) : impl_(std::make_unique<Impl>()) {
  require_property(props, {"bootstrap.servers", "metadata.broker.list"});
  impl_->principal = principal_of(props);
  CConfPtr conf = make_c_conf(props);
  // An admin client's requests fail with an error its caller reports; librdkafka's own lines
  // about them (a refused login at every retry) would say the same again, so it says nothing.
  rd_kafka_conf_set_log_cb(conf.get(), [](const rd_kafka_t*, int, const char*, const char*) {});
  rd_kafka_conf_set_error_cb(conf.get(), &Impl::on_error);
  rd_kafka_conf_set_opaque(conf.get(), impl_.get());
  std::array<char, 512> errstr{};
  impl_->rk.reset(rd_kafka_new(RD_KAFKA_PRODUCER, conf.get(), errstr.data(), errstr.size()));
  if (!impl_->rk) throw KafkaConfigError("", "", errstr.data());
  static_cast<void>(conf.release());  // rd_kafka_new() owns it on success
}

KafkaAdmin::~KafkaAdmin() = default;
KafkaAdmin::KafkaAdmin(KafkaAdmin&&) noexcept = default;
KafkaAdmin& KafkaAdmin::operator=(KafkaAdmin&&) noexcept = default;

void KafkaAdmin::ensure_topics(const std::vector<std::string>& topics, int partitions, int replication_factor,
                               int timeout_ms) {
  ensure_topics(topics, partitions, replication_factor, {}, timeout_ms);
}

void KafkaAdmin::ensure_topics(const std::vector<std::string>& topics, int partitions, int replication_factor,
                               const std::vector<std::pair<std::string, std::string>>& config, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  std::vector<std::string> missing;
  {
    const MetadataPtr md = impl_->metadata(remaining_ms(deadline));
    for (const auto& name : topics) {
      const rd_kafka_metadata_topic_t* t = find_topic(*md, name);
      if (absent(t)) {
        if (std::find(missing.begin(), missing.end(), name) == missing.end()) missing.push_back(name);
      } else if (t->partition_cnt != partitions) {
        log(LogLevel::warning, "kafka topic '" + name + "' exists with " + std::to_string(t->partition_cnt) +
                                   " partitions, not the " + std::to_string(partitions) + " asked for; left as it is");
      }
    }
  }
  if (!missing.empty()) impl_->create(missing, partitions, replication_factor, config, deadline);

  // Creation is acknowledged by the controller before every broker's metadata shows the
  // leaders, so wait for the metadata that clients will actually see.
  for (;;) {
    std::string pending;
    const MetadataPtr md = impl_->metadata(std::max(remaining_ms(deadline), 1));
    for (const auto& name : topics) {
      const std::string why = not_ready_reason(find_topic(*md, name));
      if (!why.empty()) {
        pending = "kafka topic '" + name + "': " + why;
        break;
      }
    }
    if (pending.empty()) return;
    if (remaining_ms(deadline) == 0) {
      throw KafkaError(pending + " after " + std::to_string(timeout_ms) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(100, remaining_ms(deadline))));
  }
}

std::vector<KafkaAdmin::GroupMember> KafkaAdmin::group_members(const std::string& group, int timeout_ms) {
  // rd_kafka_list_groups (ListGroups to every broker, DescribeGroups to the one that lists the
  // group), not the admin API's DescribeConsumerGroups: that one goes through librdkafka's
  // coordinator-request machine, which aborts the process (`eonce->refcnt > 0`) when the
  // coordinator's connection drops under a request (confluentinc/librdkafka#4605, fix #5397 not
  // merged; seen on 2.0.2 and 2.12.1 with delayd cut off from Kafka). This path's replies go to a
  // queue of its own, dropped on a timeout.
  const int budget = std::max(timeout_ms, 1);
  const rd_kafka_group_list* raw = nullptr;
  const rd_kafka_resp_err_t err = rd_kafka_list_groups(impl_->rk.get(), group.c_str(), &raw, budget);
  const GroupListPtr list(raw);
  const std::string what = "kafka describe consumer group " + group + ": ";
  // A login or an ACL Kafka refuses is a KafkaRefused (Describe on the group: Read implies it).
  const auto refused = [&](int code, const std::string& detail) {
    if (const Refusal kind = refusal_of(code); kind != Refusal::none) {
      throw KafkaRefused(refusal_sentence(kind, impl_->principal, "Describe", "group " + group, detail));
    }
  };
  // __PARTIAL: some broker did not answer, but a group came back; with one group asked for, it is
  // the answer of the coordinator that lists it.
  const bool found = err == RD_KAFKA_RESP_ERR__PARTIAL && list && list->group_cnt > 0;
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR && !found) {
    refused(static_cast<int>(err), rd_kafka_err2str(err));
    impl_->throw_if_login_refused();
    if (err == RD_KAFKA_RESP_ERR__TIMED_OUT || err == RD_KAFKA_RESP_ERR__PARTIAL) {
      throw KafkaError(what + "no answer within " + std::to_string(budget) + " ms");
    }
    throw KafkaError(what + rd_kafka_err2str(err));
  }
  std::vector<GroupMember> out;
  for (int i = 0; list && i < list->group_cnt; ++i) {
    const rd_kafka_group_info& info = list->groups[i];
    if (info.group == nullptr || group != info.group) continue;
    if (info.err == RD_KAFKA_RESP_ERR_GROUP_ID_NOT_FOUND) continue;  // no such group: no members
    if (info.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      refused(static_cast<int>(info.err), rd_kafka_err2str(info.err));
      throw KafkaError(what + rd_kafka_err2str(info.err));
    }
    auto text = [](const char* s) { return s != nullptr ? std::string(s) : std::string(); };
    for (int m = 0; m < info.member_cnt; ++m) {
      const rd_kafka_group_member_info& member = info.members[m];
      out.push_back({text(member.client_id), text(member.client_host), text(member.member_id)});
    }
  }
  return out;
}

void KafkaAdmin::delete_topics(const std::vector<std::string>& topics, int timeout_ms) {
  std::vector<DeleteTopicPtr> owned;
  std::vector<rd_kafka_DeleteTopic_t*> raw;
  for (const auto& name : topics) {
    owned.emplace_back(rd_kafka_DeleteTopic_new(name.c_str()));
    raw.push_back(owned.back().get());
  }
  std::array<char, 512> errstr{};
  AdminOptionsPtr options(rd_kafka_AdminOptions_new(impl_->rk.get(), RD_KAFKA_ADMIN_OP_DELETETOPICS));
  const int budget = std::max(timeout_ms, 1);
  if (rd_kafka_AdminOptions_set_request_timeout(options.get(), budget, errstr.data(), errstr.size()) ||
      rd_kafka_AdminOptions_set_operation_timeout(options.get(), budget, errstr.data(), errstr.size())) {
    throw KafkaError(std::string("kafka admin options: ") + errstr.data());
  }
  QueuePtr queue(rd_kafka_queue_new(impl_->rk.get()));
  rd_kafka_DeleteTopics(impl_->rk.get(), raw.data(), raw.size(), options.get(), queue.get());
  EventPtr event(rd_kafka_queue_poll(queue.get(), budget + 1000));
  if (!event) throw KafkaError("kafka delete topics: no answer within " + std::to_string(budget) + " ms");
  if (rd_kafka_event_error(event.get()) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    throw KafkaError(std::string("kafka delete topics: ") + rd_kafka_event_error_string(event.get()));
  }
  const rd_kafka_DeleteTopics_result_t* result = rd_kafka_event_DeleteTopics_result(event.get());
  if (result == nullptr) throw KafkaError("kafka delete topics: unexpected event type");
  std::size_t count = 0;
  const rd_kafka_topic_result_t** results = rd_kafka_DeleteTopics_result_topics(result, &count);
  std::string failures;
  for (std::size_t i = 0; i < count; ++i) {
    const rd_kafka_resp_err_t err = rd_kafka_topic_result_error(results[i]);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR || err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) continue;
    const char* why = rd_kafka_topic_result_error_string(results[i]);
    if (!failures.empty()) failures += "; ";
    failures += std::string("kafka topic '") + rd_kafka_topic_result_name(results[i]) +
                "' could not be deleted: " + (why != nullptr ? why : rd_kafka_err2str(err));
  }
  if (!failures.empty()) throw KafkaError(failures);
}

std::optional<int> KafkaAdmin::partition_count(const std::string& topic, int timeout_ms) {
  const MetadataPtr md = impl_->metadata(timeout_ms);
  const rd_kafka_metadata_topic_t* t = find_topic(*md, topic);
  if (absent(t)) return std::nullopt;
  if (t->partition_cnt == 0 && t->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    throw KafkaError("kafka topic '" + topic + "': " + rd_kafka_err2str(t->err));
  }
  return t->partition_cnt;
}

}  // namespace delayd::connectors
