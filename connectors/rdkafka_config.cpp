#include "connectors/rdkafka_config.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <utility>

#include "connectors/log.hpp"

namespace delayd::connectors {
namespace {

// librdkafka accepts several names for a few properties; the ones the connectors look for must
// be found under any of them, or a caller's "request.required.acks" would be overridden by our
// default "acks" without notice.
constexpr std::array<std::pair<std::string_view, std::string_view>, 3> kAliases{{
    {"metadata.broker.list", "bootstrap.servers"},
    {"request.required.acks", "acks"},
    {"queue.buffering.max.ms", "linger.ms"},
}};

std::string_view canonical(std::string_view name) {
  for (const auto& [alias, real] : kAliases) {
    if (name == alias) return real;
  }
  return name;
}

bool is_secret(std::string_view name) {
  for (std::string_view marker : {"password", "secret", "ssl.key.pem", "ssl_key", "oauthbearer.config"}) {
    if (name.find(marker) != std::string_view::npos) return true;
  }
  return false;
}

void log_c(const rd_kafka_t* rk, int level, const char* facility, const char* message) {
  std::string line = "[";
  line += rd_kafka_name(rk);
  line += "] ";
  line += facility;
  line += ": ";
  line += message;
  log(level_from_syslog(level), line);
}

// `text` as a number if all of it (blanks around it aside) is one, else nullopt.
std::optional<double> whole_number(const std::string& text) {
  const auto first = text.find_first_not_of(" \t");
  const auto last = text.find_last_not_of(" \t");
  if (first == std::string::npos) return std::nullopt;
  const std::string trimmed = text.substr(first, last - first + 1);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(trimmed.c_str(), &end);
  if (end != trimmed.c_str() + trimmed.size() || errno == ERANGE) return std::nullopt;
  return v;
}

// librdkafka reads a number property with strtol (base 0) and keeps what it could read, so
// "8192,fetch.wait.max.ms=10" runs as 8192, "010" as 8 and "1e6" as 1, without a word. Given
// the value librdkafka kept (`kept`, read back), throws KafkaConfigError unless a value that
// starts like a number is the number it kept. A word ("all" for acks) was matched by name, and
// a non-number property (a string, a list, a flag) reads back as given: both pass.
void require_read_whole(const std::string& name, const std::string& given, const std::string& kept) {
  if (given == kept) return;
  const auto kept_number = whole_number(kept);
  if (!kept_number) return;
  const auto first = given.find_first_not_of(" \t");
  if (first == std::string::npos) return;
  const char c = given[first];
  if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.')) return;
  if (const auto given_number = whole_number(given); given_number && *given_number == *kept_number) return;
  throw KafkaConfigError(name, given,
                         "librdkafka would read it as " + kept +
                             "; give the number alone, in decimal (without a leading 0, a unit or anything after it)");
}

}  // namespace

std::string printable_value(std::string_view property, std::string_view value) {
  if (is_secret(property)) return "***";
  return std::string(value);
}

std::optional<std::string> find_property(const Properties& props, std::string_view name) {
  std::optional<std::string> found;
  for (const auto& [k, v] : props) {
    if (canonical(k) == canonical(name)) found = v;
  }
  return found;
}

Properties with_defaults(const Properties& defaults, const Properties& user) {
  Properties out;
  for (const auto& d : defaults) {
    if (!find_property(user, d.first)) out.push_back(d);
  }
  out.insert(out.end(), user.begin(), user.end());
  return out;
}

Properties with_forced(Properties props, const Properties& forced, std::string_view client) {
  for (const auto& [name, value] : forced) {
    if (auto given = find_property(props, name); given && *given != value) {
      log(LogLevel::warning, std::string(client) + ": property '" + name + "' = '" + printable_value(name, *given) +
                                 "' is overridden to '" + value + "', which the connector relies on");
    }
    props.emplace_back(name, value);
  }
  return props;
}

void require_property(const Properties& props, std::initializer_list<std::string_view> names) {
  const bool present = std::any_of(names.begin(), names.end(), [&](std::string_view n) {
    auto v = find_property(props, n);
    return v && !v->empty();
  });
  if (!present) {
    throw KafkaConfigError(std::string(*names.begin()), "", "required, but not set");
  }
}

std::unique_ptr<RdKafka::Conf> make_conf(const Properties& props) {
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  for (const auto& [name, value] : props) {
    std::string errstr;
    if (conf->set(name, value, errstr) != RdKafka::Conf::CONF_OK) {
      throw KafkaConfigError(name, value, errstr);
    }
    if (std::string kept; conf->get(name, kept) == RdKafka::Conf::CONF_OK) require_read_whole(name, value, kept);
  }
  return conf;
}

CConfPtr make_c_conf(const Properties& props) {
  CConfPtr conf(rd_kafka_conf_new());
  rd_kafka_conf_set_log_cb(conf.get(), &log_c);
  for (const auto& [name, value] : props) {
    std::array<char, 512> errstr{};
    if (rd_kafka_conf_set(conf.get(), name.c_str(), value.c_str(), errstr.data(), errstr.size()) != RD_KAFKA_CONF_OK) {
      throw KafkaConfigError(name, value, errstr.data());
    }
    std::array<char, 512> kept{};
    std::size_t size = kept.size();
    if (rd_kafka_conf_get(conf.get(), name.c_str(), kept.data(), &size) == RD_KAFKA_CONF_OK && size <= kept.size()) {
      require_read_whole(name, value, kept.data());
    }
  }
  return conf;
}

void LogEventBridge::event_cb(RdKafka::Event& event) {
  switch (event.type()) {
    case RdKafka::Event::EVENT_LOG: {
      LogLevel level = level_from_syslog(static_cast<int>(event.severity()));
      // A fatal error is said by the client's owner (a consumer's KafkaError, a producer's
      // replacement), not by librdkafka's line for it as well.
      if (event.fac() == "FATAL") level = LogLevel::debug;
      // librdkafka's line for a refused login comes at every reconnect, just before the
      // ERR__AUTHENTICATION error event that becomes the refusal the owner says once.
      if (event.fac() == "FAIL" && event.str().find("SASL authentication error") != std::string::npos) {
        login_refused_ = true;
        level = LogLevel::debug;
      }
      log(level, label_ + ": " + event.fac() + ": " + event.str());
      break;
    }
    case RdKafka::Event::EVENT_ERROR:
      if (const Refusal kind = refusal_of(static_cast<int>(event.err())); kind != Refusal::none) {
        // Which group or topic is not in the event; the consumer and producer say it when
        // they see the refusal on a message or a delivery report.
        set_refusal(refusal_sentence(kind, principal_, "", "",
                                     RdKafka::err2str(event.err()) + (event.str().empty() ? "" : ": " + event.str())));
        log(LogLevel::debug, label_ + ": refused: " + event.str());
        break;
      }
      // "All broker connections are down" is what a refused login looks like to the client.
      log(event.fatal() || (event.err() == RdKafka::ERR__ALL_BROKERS_DOWN && login_refused_) ? LogLevel::debug
                                                                                             : LogLevel::warning,
          label_ + (event.fatal() ? ": fatal error: " : ": error: ") + RdKafka::err2str(event.err()) +
              (event.str().empty() ? "" : ": " + event.str()));
      break;
    case RdKafka::Event::EVENT_THROTTLE:
      log(LogLevel::debug,
          label_ + ": throttled " + std::to_string(event.throttle_time()) + " ms by broker " + event.broker_name());
      break;
    default:
      break;
  }
}

std::optional<std::string> LogEventBridge::refusal() const {
  std::lock_guard lock(mutex_);
  return refusal_;
}

void LogEventBridge::clear_refusal() {
  std::lock_guard lock(mutex_);
  refusal_.reset();
  login_refused_ = false;
}

void LogEventBridge::set_refusal(std::string sentence) {
  std::lock_guard lock(mutex_);
  refusal_ = std::move(sentence);
}

namespace {

std::optional<std::string> bytes(const void* data, std::size_t size) {
  if (data == nullptr) return std::nullopt;
  return std::string(static_cast<const char*>(data), size);
}

}  // namespace

Record to_record(RdKafka::Message& m) {
  Record r;
  r.topic = m.topic_name();
  r.partition = m.partition();
  r.offset = m.offset();
  const RdKafka::MessageTimestamp ts = m.timestamp();
  r.timestamp_ms = ts.type == RdKafka::MessageTimestamp::MSG_TIMESTAMP_NOT_AVAILABLE ? -1 : ts.timestamp;
  r.key = bytes(m.key_pointer(), m.key_len());
  r.value = bytes(m.payload(), m.len());
  // The Headers object belongs to the message; get_all() copies them out.
  if (RdKafka::Headers* headers = m.headers()) {
    for (const auto& h : headers->get_all()) {
      r.headers.push_back({h.key(), bytes(h.value(), h.value_size())});
    }
  }
  return r;
}

std::optional<int> partition_count(RdKafka::Handle& client, const std::string& topic, int timeout_ms,
                                   const std::string& who, const std::string& principal) {
  const auto refused = [&](RdKafka::ErrorCode err) {
    if (const Refusal kind = refusal_of(static_cast<int>(err)); kind != Refusal::none && !principal.empty()) {
      throw KafkaRefused(
          refusal_sentence(kind, principal, "Read or Describe", "topic " + topic, RdKafka::err2str(err)));
    }
  };
  std::string errstr;
  std::unique_ptr<RdKafka::Topic> handle(RdKafka::Topic::create(&client, topic, nullptr, errstr));
  if (!handle) throw KafkaError(who + ": topic " + topic + ": " + errstr);
  RdKafka::Metadata* raw = nullptr;
  const RdKafka::ErrorCode err = client.metadata(false, handle.get(), &raw, timeout_ms);
  std::unique_ptr<RdKafka::Metadata> md(raw);
  if (err != RdKafka::ERR_NO_ERROR) {
    refused(err);
    throw KafkaError(who + ": metadata of " + topic + ": " + RdKafka::err2str(err));
  }
  for (const auto* t : *md->topics()) {
    if (t->topic() != topic) continue;
    if (t->err() == RdKafka::ERR_UNKNOWN_TOPIC_OR_PART) return std::nullopt;
    if (t->err() != RdKafka::ERR_NO_ERROR) {
      refused(t->err());
      throw KafkaError(who + ": metadata of " + topic + ": " + RdKafka::err2str(t->err()));
    }
    return static_cast<int>(t->partitions()->size());
  }
  return std::nullopt;
}

}  // namespace delayd::connectors
