// Internal to the connectors: turning Properties into librdkafka configuration objects, a
// librdkafka message into a Record, and the bridge from librdkafka's log and error events to the
// log hook. Not for the broker's use; it includes librdkafka's headers, which the public headers keep out of the
// broker's way.
//
// Invariants: a Conf returned here has had every property accepted; a refused one has thrown
// KafkaConfigError naming it. Secrets (passwords, private keys) never appear in an error message
// or a log line: their values are printed as "***".
// Threading: the functions are pure. LogEventBridge::event_cb is called by librdkafka from its
// own threads (log events) and from the polling thread (error events); it only calls log().
#pragma once

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafkacpp.h>

#include <atomic>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "connectors/kafka_error.hpp"
#include "connectors/record.hpp"

namespace delayd::connectors {

// The value as it may appear in messages: "***" for properties that hold secrets.
std::string printable_value(std::string_view property, std::string_view value);

// The last value given for `name` (or for a librdkafka alias of it), if any.
std::optional<std::string> find_property(const Properties& props, std::string_view name);

// `defaults` for the names `user` leaves unset, followed by `user`, so the caller's choices win.
Properties with_defaults(const Properties& defaults, const Properties& user);

// `props` followed by `forced`, so the connectors' invariants win; a caller value that is being
// overridden is logged as a warning, naming `client`, because silently ignoring it would hide a
// misunderstanding of the caller's.
Properties with_forced(Properties props, const Properties& forced, std::string_view client);

// Throws KafkaConfigError naming the first of `names` unless one of them is set.
void require_property(const Properties& props, std::initializer_list<std::string_view> names);

std::unique_ptr<RdKafka::Conf> make_conf(const Properties& props);

// The message as a Record (its key, value and headers copied out).
Record to_record(RdKafka::Message& m);

// The topic's partition count from fresh metadata asked through `client`; nullopt if the topic
// does not exist. Throws KafkaError (its message starting with `who`) if Kafka does not answer;
// given the client's `principal` (principal_of()), KafkaRefused when Kafka refuses the topic.
std::optional<int> partition_count(RdKafka::Handle& client, const std::string& topic, int timeout_ms,
                                   const std::string& who, const std::string& principal = {});

struct CConfDeleter {
  void operator()(rd_kafka_conf_t* conf) const noexcept { rd_kafka_conf_destroy(conf); }
};
using CConfPtr = std::unique_ptr<rd_kafka_conf_t, CConfDeleter>;

// The C API's equivalent of make_conf, with log lines routed to the log hook.
CConfPtr make_c_conf(const Properties& props);

// Routes librdkafka's log, error and throttle events to the log hook. Error events are only
// logged: whoever owns the client decides separately what a fatal error means for it. A
// refusal (an error event whose code refusal_of() classifies: the login failed, an ACL is
// missing) is not logged but kept, as its sentence, for the owner to report once as an outage:
// librdkafka repeats it at every reconnect or retry.
class LogEventBridge : public RdKafka::EventCb {
 public:
  // `label` prefixes every line (e.g. "consumer group=delayd"), set before the client exists
  // because log events can arrive from librdkafka's threads as soon as it does. `principal`
  // (principal_of()) names who was refused.
  explicit LogEventBridge(std::string label, std::string principal = "")
      : label_(std::move(label)), principal_(std::move(principal)) {}
  void event_cb(RdKafka::Event& event) override;

  // The latest refusal an error event reported, until clear_refusal(); nullopt if none.
  std::optional<std::string> refusal() const;
  void clear_refusal();
  // Keeps `sentence` as the current refusal (for refusals the owner finds itself).
  void set_refusal(std::string sentence);

 private:
  const std::string label_;
  const std::string principal_;
  mutable std::mutex mutex_;  // error events may come from any thread that serves the client
  std::optional<std::string> refusal_;
  std::atomic<bool> login_refused_{false};  // librdkafka said a login was refused (its log line)
};

}  // namespace delayd::connectors
