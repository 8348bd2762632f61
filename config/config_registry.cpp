#include "config/config_registry.hpp"

#include <array>

#include "config/config_names.hpp"

namespace delayd::config::detail {

namespace {

// A generic lambda converts to both the mutable and the const accessor, so each setting names
// its member once.
template <class T, class F>
constexpr Field<T> field(F f) {
  return Field<T>{f, f};
}

using Str = std::string;
using Int = std::int64_t;
using OptInt = std::optional<std::int64_t>;

constexpr Int kMaxInt32 = 2'147'483'647;

std::string check_non_empty(std::string_view v) { return v.empty() ? "must not be empty" : ""; }

std::string check_topic(std::string_view v) {
  return is_valid_topic_name(v) ? ""
                                : "must be a legal Kafka topic name: 1-249 characters of "
                                  "[A-Za-z0-9._-], not \".\", \"..\" or starting with \"__\"";
}

std::string check_optional_topic(std::string_view v) { return v.empty() ? "" : check_topic(v); }

std::string check_ready_template(std::string_view v) {
  const auto first = v.find(kBusinessPlaceholder);
  if (first == std::string_view::npos || v.find(kBusinessPlaceholder, first + 1) != std::string_view::npos) {
    return "must contain {business} exactly once";
  }
  // The shortest and the longest legal business must both give legal topic names; every
  // business in between then does too, except "." and ".." which the ingest parser refuses
  // record by record when the template is the bare placeholder.
  if (!is_valid_topic_name(render_ready_topic(v, "a")) ||
      !is_valid_topic_name(render_ready_topic(v, std::string(100, 'a')))) {
    return "must give a legal Kafka topic name ([A-Za-z0-9._-], at most 249 characters, not "
           "starting with \"__\") for every business of up to 100 characters";
  }
  return "";
}

// Comma-separated business names, each as the ingest contract allows them; empty: every name.
std::string check_business_list(std::string_view v) {
  for (const auto& name : split_business_list(v)) {
    if (name.empty() || name.size() > 100 ||
        name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
            std::string::npos) {
      return "must be a comma-separated list of business names ([A-Za-z0-9._-]{1,100}), or empty for any";
    }
  }
  return "";
}

// kafka.ingest_topics: "<topic>[:<format>]" entries (ingest_topics() reads them, once).
std::string check_ingest_topics(std::string_view v) {
  for (const auto& entry : split_business_list(v)) {
    const auto colon = entry.find(':');
    const std::string topic = entry.substr(0, colon);
    if (std::string problem = check_topic(topic); !problem.empty()) {
      return "entry " + quote_for_message(entry) + ": the topic " + problem;
    }
    if (colon != std::string::npos && !parse_ingest_format(entry.substr(colon + 1))) {
      return "entry " + quote_for_message(entry) + ": the format must be delayd, etf1 or chronos";
    }
  }
  return "";
}

std::string check_past_due(std::string_view v) { return v == "fire" || v == "drop" ? "" : "must be fire or drop"; }

std::string check_redis_url(std::string_view v) {
  try {
    (void)redis::parse_redis_url(v);
    return "";
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
}

std::string check_prefix(std::string_view v) {
  if (v.empty() || v.size() > 64) return "must be 1-64 characters of [A-Za-z0-9._-]";
  for (char c : v) {
    // ASCII by hand: std::isalnum would follow the process locale.
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) {
      return "must be 1-64 characters of [A-Za-z0-9._-]";
    }
  }
  return "";
}

std::string check_log_level(std::string_view v) {
  for (std::string_view ok : {"trace", "debug", "info", "warn", "error"}) {
    if (v == ok) return "";
  }
  return "must be one of trace, debug, info, warn, error";
}

std::string check_log_format(std::string_view v) { return v == "text" || v == "json" ? "" : "must be text or json"; }

std::string check_listen(std::string_view v) {
  if (v.empty()) return "";
  const auto colon = v.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return "must be host:port (or empty to turn the endpoint off)";
  const std::string_view port = v.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos ||
      std::stoi(std::string(port)) > 65535) {
    return "the port must be a number from 0 to 65535";
  }
  return "";
}

// clang-format off
constexpr std::array kSettings = {
  Setting{"kafka.bootstrap", field<Str>([](auto& c) -> auto& { return c.kafka.bootstrap; }), 0, 0, check_non_empty},
  Setting{"kafka.group_id", field<Str>([](auto& c) -> auto& { return c.kafka.group_id; }), 0, 0, check_non_empty},
  Setting{"kafka.ingest_topic", field<Str>([](auto& c) -> auto& { return c.kafka.ingest_topic; }), 0, 0, check_topic},
  Setting{"kafka.ingest_topics", field<Str>([](auto& c) -> auto& { return c.kafka.ingest_topics; }), 0, 0, check_ingest_topics, false, true},
  Setting{"kafka.dlq_topic", field<Str>([](auto& c) -> auto& { return c.kafka.dlq_topic; }), 0, 0, check_topic},
  Setting{"kafka.status_topic", field<Str>([](auto& c) -> auto& { return c.kafka.status_topic; }), 0, 0, check_optional_topic},
  Setting{"kafka.ready_topic_template", field<Str>([](auto& c) -> auto& { return c.kafka.ready_topic_template; }), 0, 0, check_ready_template},
  Setting{"kafka.create_topics", field<bool>([](auto& c) -> auto& { return c.kafka.create_topics; })},
  Setting{"kafka.max_ready_topics", field<Int>([](auto& c) -> auto& { return c.kafka.max_ready_topics; }), 1, 1'000'000},
  Setting{"kafka.allowed_businesses", field<Str>([](auto& c) -> auto& { return c.kafka.allowed_businesses; }), 0, 0, check_business_list, false, true},
  Setting{"kafka.topic_partitions", field<Int>([](auto& c) -> auto& { return c.kafka.topic_partitions; }), 1, 100'000},
  Setting{"kafka.topic_replication", field<Int>([](auto& c) -> auto& { return c.kafka.topic_replication; }), 1, 32'767},
  Setting{"kafka.message_timeout_ms", field<Int>([](auto& c) -> auto& { return c.kafka.message_timeout_ms; }), 1, kMaxInt32},
  Setting{"kafka.missing_topic_timeout_ms", field<Int>([](auto& c) -> auto& { return c.kafka.missing_topic_timeout_ms; }), 1000, kMaxInt32},
  Setting{"kafka.sasl_password", field<Str>([](auto& c) -> auto& { return c.kafka.sasl_password; }), 0, 0, nullptr, true},
  Setting{"kafka.sasl_password_file", field<Str>([](auto& c) -> auto& { return c.kafka.sasl_password_file; })},
  Setting{"kafka.properties", field<PropertyMap>([](auto& c) -> auto& { return c.kafka.properties; })},
  Setting{"kafka.consumer_properties", field<PropertyMap>([](auto& c) -> auto& { return c.kafka.consumer_properties; })},
  Setting{"kafka.producer_properties", field<PropertyMap>([](auto& c) -> auto& { return c.kafka.producer_properties; })},

  Setting{"redis.url", field<Str>([](auto& c) -> auto& { return c.redis.url; }), 0, 0, check_redis_url},
  Setting{"redis.password", field<Str>([](auto& c) -> auto& { return c.redis.password; }), 0, 0, nullptr, true},
  Setting{"redis.password_file", field<Str>([](auto& c) -> auto& { return c.redis.password_file; })},
  Setting{"redis.tls_ca_file", field<Str>([](auto& c) -> auto& { return c.redis.tls_ca_file; })},
  Setting{"redis.tls_cert_file", field<Str>([](auto& c) -> auto& { return c.redis.tls_cert_file; })},
  Setting{"redis.tls_key_file", field<Str>([](auto& c) -> auto& { return c.redis.tls_key_file; })},
  Setting{"redis.tls_server_name", field<Str>([](auto& c) -> auto& { return c.redis.tls_server_name; })},
  Setting{"redis.tls_verify", field<bool>([](auto& c) -> auto& { return c.redis.tls_verify; })},
  Setting{"redis.db", field<OptInt>([](auto& c) -> auto& { return c.redis.db; }), 0, kMaxInt32},
  Setting{"redis.prefix", field<Str>([](auto& c) -> auto& { return c.redis.prefix; }), 0, 0, check_prefix},
  Setting{"redis.timeout_ms", field<Int>([](auto& c) -> auto& { return c.redis.timeout_ms; }), 1, 3'600'000},
  Setting{"redis.job_retention_s", field<Int>([](auto& c) -> auto& { return c.redis.job_retention_s; }), 0, 3'153'600'000},
  Setting{"redis.wait_replicas", field<Int>([](auto& c) -> auto& { return c.redis.wait_replicas; }), 0, 16},
  Setting{"redis.wait_timeout_ms", field<Int>([](auto& c) -> auto& { return c.redis.wait_timeout_ms; }), 1, 60'000},

  Setting{"wheel.tick_ms", field<Int>([](auto& c) -> auto& { return c.wheel.tick_ms; }), 1, 60'000},
  Setting{"wheel.slot_bits", field<Int>([](auto& c) -> auto& { return c.wheel.slot_bits; }), 4, 12},

  // The upper bound of load_window_ms depends on the wheel; validate_config() checks it.
  Setting{"scheduler.load_window_ms", field<Int>([](auto& c) -> auto& { return c.scheduler.load_window_ms; }), 1, INT64_MAX},
  Setting{"scheduler.ingest_batch", field<Int>([](auto& c) -> auto& { return c.scheduler.ingest_batch; }), 1, 1'000'000},
  Setting{"scheduler.load_batch", field<Int>([](auto& c) -> auto& { return c.scheduler.load_batch; }), 1, 1'000'000},
  Setting{"scheduler.fire_batch", field<Int>([](auto& c) -> auto& { return c.scheduler.fire_batch; }), 1, 1'000'000},
  Setting{"scheduler.max_attempts", field<Int>([](auto& c) -> auto& { return c.scheduler.max_attempts; }), 1, 1'000'000},
  Setting{"scheduler.max_catchup", field<Int>([](auto& c) -> auto& { return c.scheduler.max_catchup; }), 1, 1'000'000},
  Setting{"scheduler.retry_backoff_ms", field<Int>([](auto& c) -> auto& { return c.scheduler.retry_backoff_ms; }), 0, 86'400'000},
  Setting{"scheduler.retry_backoff_max_ms", field<Int>([](auto& c) -> auto& { return c.scheduler.retry_backoff_max_ms; }), 0, 86'400'000},
  // Kafka's own ceiling for a message (librdkafka's message.max.bytes).
  Setting{"scheduler.max_value_bytes", field<Int>([](auto& c) -> auto& { return c.scheduler.max_value_bytes; }), 1, 1'000'000'000},
  Setting{"scheduler.shutdown_timeout_ms", field<Int>([](auto& c) -> auto& { return c.scheduler.shutdown_timeout_ms; }), 0, 3'600'000},
  Setting{"scheduler.cancel_memory_s", field<Int>([](auto& c) -> auto& { return c.scheduler.cancel_memory_s; }), 0, 604'800},
  Setting{"scheduler.claim_ahead_ms", field<Int>([](auto& c) -> auto& { return c.scheduler.claim_ahead_ms; }), 0, 1'000},
  Setting{"scheduler.max_process_attempts", field<Int>([](auto& c) -> auto& { return c.scheduler.max_process_attempts; }), 1, 1'000'000},
  Setting{"scheduler.process_retry_base_ms", field<Int>([](auto& c) -> auto& { return c.scheduler.process_retry_base_ms; }), 0, 86'400'000},
  Setting{"scheduler.process_retry_max_ms", field<Int>([](auto& c) -> auto& { return c.scheduler.process_retry_max_ms; }), 0, 86'400'000},
  Setting{"scheduler.ack_timeout_ms", field<Int>([](auto& c) -> auto& { return c.scheduler.ack_timeout_ms; }), 0, 86'400'000},
  Setting{"scheduler.keep_payload", field<bool>([](auto& c) -> auto& { return c.scheduler.keep_payload; })},
  Setting{"scheduler.business", field<PropertyMap>([](auto& c) -> auto& { return c.scheduler.business; })},

  Setting{"etf1.past_due", field<Str>([](auto& c) -> auto& { return c.etf1.past_due; }), 0, 0, check_past_due},
  Setting{"etf1.grace_s", field<Int>([](auto& c) -> auto& { return c.etf1.grace_s; }), 0, 31'536'000},
  Setting{"etf1.tombstone_on_fire", field<bool>([](auto& c) -> auto& { return c.etf1.tombstone_on_fire; })},
  Setting{"etf1.history_topic", field<Str>([](auto& c) -> auto& { return c.etf1.history_topic; }), 0, 0, check_optional_topic},

  Setting{"chronos.output_topic", field<Str>([](auto& c) -> auto& { return c.chronos.output_topic; }), 0, 0, check_optional_topic},

  Setting{"log.level", field<Str>([](auto& c) -> auto& { return c.log.level; }), 0, 0, check_log_level},
  Setting{"log.format", field<Str>([](auto& c) -> auto& { return c.log.format; }), 0, 0, check_log_format},

  Setting{"admin.listen", field<Str>([](auto& c) -> auto& { return c.admin.listen; }), 0, 0, check_listen},
  Setting{"admin.token", field<Str>([](auto& c) -> auto& { return c.admin.token; }), 0, 0, nullptr, true},
  Setting{"admin.token_file", field<Str>([](auto& c) -> auto& { return c.admin.token_file; })},
  Setting{"admin.read_token", field<Str>([](auto& c) -> auto& { return c.admin.read_token; }), 0, 0, nullptr, true},
  Setting{"admin.read_token_file", field<Str>([](auto& c) -> auto& { return c.admin.read_token_file; })},
  Setting{"admin.max_connections", field<Int>([](auto& c) -> auto& { return c.admin.max_connections; }), 1, 100'000},
  Setting{"admin.read_timeout_ms", field<Int>([](auto& c) -> auto& { return c.admin.read_timeout_ms; }), 1, 3'600'000},
  Setting{"admin.max_header_bytes", field<Int>([](auto& c) -> auto& { return c.admin.max_header_bytes; }), 512, 1'048'576},
  Setting{"admin.max_body_bytes", field<Int>([](auto& c) -> auto& { return c.admin.max_body_bytes; }), 0, 1'048'576},
  Setting{"admin.max_redrives", field<Int>([](auto& c) -> auto& { return c.admin.max_redrives; }), 1, kMaxRedrives},
};
// clang-format on

}  // namespace

std::span<const Setting> settings() { return kSettings; }

const Setting* find_setting(std::string_view name) {
  for (const auto& s : kSettings) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string env_name(std::string_view setting_name) {
  std::string out = "DELAYD_";
  for (char c : setting_name) {
    if (c == '.') {
      out.push_back('_');
    } else {
      out.push_back(c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c);
    }
  }
  return out;
}

bool is_secret_property(std::string_view name) {
  // librdkafka's secrets: ssl.key.password, ssl.keystore.password, sasl.password,
  // sasl.oauthbearer.client.secret, sasl.oauthbearer.config, ssl.key.pem, ssl_key.
  for (std::string_view marker :
       {"password", "secret", "sasl.oauthbearer.config", "ssl.key.pem", "ssl_key", "sasl.jaas"}) {
    if (name.find(marker) != std::string_view::npos) return true;
  }
  return false;
}

std::string display_value(const Setting& s, const Config& c) {
  struct Visitor {
    const Setting& s;
    const Config& c;
    std::string operator()(const Field<std::string>& f) const {
      const std::string& v = f.get(c);
      if (s.secret) return v.empty() ? "\"\"" : "\"***\"";
      if (s.name == "redis.url") return quote_for_message(redis::mask_redis_url(v), 300);
      return quote_for_message(v, 300);
    }
    std::string operator()(const Field<bool>& f) const { return f.get(c) ? "true" : "false"; }
    std::string operator()(const Field<std::int64_t>& f) const { return std::to_string(f.get(c)); }
    std::string operator()(const Field<std::optional<std::int64_t>>& f) const {
      const auto& v = f.get(c);
      return v ? std::to_string(*v) : "unset";
    }
    std::string operator()(const Field<PropertyMap>& f) const {
      std::string out = "{";
      for (const auto& [k, v] : f.get(c)) {
        if (out.size() > 1) out += ", ";
        out += quote_for_message(k) + " = " + (is_secret_property(k) ? std::string("\"***\"") : quote_for_message(v));
      }
      return out + "}";
    }
  };
  return std::visit(Visitor{s, c}, s.field);
}

}  // namespace delayd::config::detail
