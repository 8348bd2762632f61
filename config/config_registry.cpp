#include "config/config_registry.hpp"

#include <array>

#include "base/text_encoding.hpp"
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

std::string check_group_instance_id(std::string_view v) {
  return v.empty() || is_valid_group_instance_id(v)
             ? ""
             : "must be empty or 1-249 characters of [A-Za-z0-9._-], not \".\" or \"..\" (Kafka's rule)";
}

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
      return "entry " + base::quote_for_message(entry) + ": the topic " + problem;
    }
    if (colon != std::string::npos && !parse_ingest_format(entry.substr(colon + 1))) {
      return "entry " + base::quote_for_message(entry) + ": the format must be delayd, etf1 or chronos";
    }
  }
  return "";
}

std::string check_delivery(std::string_view v) {
  return parse_delivery_mode(v) ? "" : "must be exactly_once or at_least_once";
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
  Setting{"kafka.bootstrap",
          "Kafka bootstrap servers",
          field<Str>([](auto& c) -> auto& { return c.kafka.bootstrap; }), 0, 0, check_non_empty},
  Setting{"kafka.group_id",
          "consumer group of kafka.ingest_topic (each other topic read: <group_id>.<topic>); instances with the same group share the shards",
          field<Str>([](auto& c) -> auto& { return c.kafka.group_id; }), 0, 0, check_non_empty},
  Setting{"kafka.group_instance_id",
          "this instance's static membership of its consumer groups (Kafka's group.instance.id), unique per instance and kept across its restarts: "
          "a restarted instance takes its shards back at once, not after the session timeout; empty: dynamic membership. "
          "See [Scaling out](../operating/scaling.md#static-membership)",
          field<Str>([](auto& c) -> auto& { return c.kafka.group_instance_id; }), 0, 0, check_group_instance_id},
  Setting{"kafka.ingest_topic",
          "where producers publish (delayd's format); always read, also by delayctl and the console",
          field<Str>([](auto& c) -> auto& { return c.kafka.ingest_topic; }), 0, 0, check_topic},
  Setting{"kafka.ingest_topics",
          "more ingest topics, `<topic>[:<format>]` with format `delayd`, `etf1` or `chronos`, "
          "comma-separated (a TOML array too): see [Drop-in for etf1 and Chronos](../producing.md#drop-in-for-etf1-and-chronos)",
          field<Str>([](auto& c) -> auto& { return c.kafka.ingest_topics; }), 0, 0, check_ingest_topics, false, true},
  Setting{"kafka.dlq_topic",
          "dead letters",
          field<Str>([](auto& c) -> auto& { return c.kafka.dlq_topic; }), 0, 0, check_topic},
  Setting{"kafka.status_topic",
          "where consumers publish status reports (`running`, `finished`, `failed`; see [Job "
          "lifecycle](../consuming.md#job-lifecycle)); created with the other topics; empty: no reports are"
          " read",
          field<Str>([](auto& c) -> auto& { return c.kafka.status_topic; }), 0, 0, check_optional_topic},
  Setting{"kafka.ready_topic_template",
          "must contain `{business}` once",
          field<Str>([](auto& c) -> auto& { return c.kafka.ready_topic_template; }), 0, 0, check_ready_template},
  Setting{"kafka.create_topics",
          "create missing ingest, DLQ and ready topics (a ready topic when its first job is accepted, on a "
          "thread of its own)",
          field<bool>([](auto& c) -> auto& { return c.kafka.create_topics; })},
  Setting{"kafka.max_ready_topics",
          "distinct ready topics one delayd process asks to create; records needing one more are "
          "dead-lettered, so producers cannot make delayd create topics without end",
          field<Int>([](auto& c) -> auto& { return c.kafka.max_ready_topics; }), 1, 1'000'000},
  Setting{"kafka.allowed_businesses",
          "comma-separated business names; records for any other business are dead-lettered; empty: any",
          field<Str>([](auto& c) -> auto& { return c.kafka.allowed_businesses; }), 0, 0, check_business_list, false, true},
  Setting{"kafka.topic_partitions",
          "partitions of each topic delayd creates",
          field<Int>([](auto& c) -> auto& { return c.kafka.topic_partitions; }), 1, 100'000},
  Setting{"kafka.topic_replication",
          "replication factor of each topic delayd creates",
          field<Int>([](auto& c) -> auto& { return c.kafka.topic_replication; }), 1, 32'767},
  Setting{"kafka.message_timeout_ms",
          "how long one delivery attempt may take",
          field<Int>([](auto& c) -> auto& { return c.kafka.message_timeout_ms; }), 1, kMaxInt32},
  Setting{"kafka.missing_topic_timeout_ms",
          "how long a ready topic may be missing (deleted under delayd) before its jobs are dead-lettered "
          "(`topic_missing`); until then they wait without spending attempts, and with `create_topics` on "
          "the topic is created again",
          field<Int>([](auto& c) -> auto& { return c.kafka.missing_topic_timeout_ms; }), 1000, kMaxInt32},
  Setting{"kafka.delivery",
          "`exactly_once`: each shard's records (ready, dead letters of jobs, etf1 tombstones) are written"
          " in Kafka transactions, and a `read_committed` consumer sees every job once, whatever happens to"
          " the instances; `at_least_once`: one idempotent producer, and a crash or a cut from Kafka may"
          " deliver a job twice (see [Guarantees](../guarantees.md#exactly-once))",
          field<Str>([](auto& c) -> auto& { return c.kafka.delivery; }), 0, 0, check_delivery},
  Setting{"kafka.delivery_log_retention_ms",
          "retention of the delivery logs (`<ingest topic>.delivered`, `exactly_once` only) delayd creates:"
          " how long a shard may stay without an owner before the record of what its last owner delivered"
          " is gone",
          field<Int>([](auto& c) -> auto& { return c.kafka.delivery_log_retention_ms; }), 60'000, kMaxInt32},
  Setting{"kafka.transaction_linger_ms",
          "`exactly_once` only: the shortest time between two commits of a shard's transactions. A"
          " transaction begun sooner after the previous commit stays open until then for the records"
          " that fire meanwhile; one begun later (a lone job after a quiet spell) commits at once, and so"
          " does every one of a shard taking only a few records a linger (a sparse shard: see"
          " [Performance](../performance/cost.md#linger-sent-at-commit)). Each"
          " record's timestamp is when it fires; the shards' producers linger as long (`linger.ms`, unless"
          " set in `kafka.producer_properties`), so a transaction's records leave at its commit, and a"
          " `read_committed` consumer sees them then, at most this much later. Each commit costs the"
          " broker a few requests and log writes whatever it holds: fewer, larger transactions under load"
          " cost Kafka and delayd less CPU (see [Performance](../performance/cost.md#the-cost-of-a-job)); 0"
          " commits each batch at once. The default, 20, measured on two cores: from 2 000 to 10 000 jobs"
          " a second half of Kafka's CPU a job and a quarter to a half less of delayd's, the p99 lateness"
          " as good or better; at 100 and 500 a second the same as with 0"
          " ([Performance](../performance/cost.md#linger-sent-at-commit))",
          field<Int>([](auto& c) -> auto& { return c.kafka.transaction_linger_ms; }), 0, 1000},
  Setting{"kafka.transaction_late_linger_ms",
          "`exactly_once` only: the linger of a shard draining a backlog. A shard that fired a job at"
          " least this late within the last 100 ms lingers this long after its previous commit instead"
          " of `kafka.transaction_linger_ms` (the same gate for sparse shards applies): its jobs are late"
          " already, and fewer, larger commits cost Kafka and delayd less a job, so the backlog drains"
          " sooner. A shard whose jobs fire on time never waits longer than"
          " `kafka.transaction_linger_ms`; a job published already that far past its `deliver-at`"
          " counts as late too (delayd knows when a job was due, not when it arrived), so a busy"
          " shard of such jobs lingers this long. The default, 100, measured on two cores: a million jobs due"
          " within one second drained in 29.9-30.5 s against 32.5-35.0 without it, a fired job costing"
          " delayd a fifth less CPU and Kafka nearly half less"
          " ([Performance](../performance/burst.md#a-longer-linger-for-a-backlog)); 0, or a value not"
          " above `kafka.transaction_linger_ms`: off",
          field<Int>([](auto& c) -> auto& { return c.kafka.transaction_late_linger_ms; }), 0, 5000},
  Setting{"kafka.sasl_password",
          "`sasl.password` for every Kafka client (SASL PLAIN or SCRAM; the rest goes in "
          "`[kafka.properties]`, see [Kafka security](../operating/configuration.md#kafka-security)); "
          "secret (masked by `--print-config`). Not with `kafka.properties.sasl.password`; empty: none",
          field<Str>([](auto& c) -> auto& { return c.kafka.sasl_password; }), 0, 0, nullptr, true},
  Setting{"kafka.sasl_password_file",
          "a file that holds `kafka.sasl_password` (a Kubernetes secret mounted as a file), read once at "
          "start-up, its trailing newline trimmed, as `admin.token_file` holds `admin.token`. Setting both,"
          " or naming a file that cannot be read or is empty, is a configuration error (exit status 2); "
          "empty: none",
          field<Str>([](auto& c) -> auto& { return c.kafka.sasl_password_file; })},
  Setting{"kafka.properties",
          "any librdkafka property, for every client (SASL, TLS, ...)",
          field<PropertyMap>([](auto& c) -> auto& { return c.kafka.properties; })},
  Setting{"kafka.consumer_properties",
          "any librdkafka property, for the consumer only",
          field<PropertyMap>([](auto& c) -> auto& { return c.kafka.consumer_properties; })},
  Setting{"kafka.producer_properties",
          "any librdkafka property, for the producers only",
          field<PropertyMap>([](auto& c) -> auto& { return c.kafka.producer_properties; })},

  Setting{"redis.url",
          "`redis://[[user]:password@]host[:port][/db]`, or "
          "`redis-cluster://[[user]:password@]host:port[,host:port...]` for a Redis Cluster; `rediss://` "
          "and `redis-cluster+tls://` for the same over TLS ([Redis over "
          "TLS](../operating/scaling.md#redis-over-tls))",
          field<Str>([](auto& c) -> auto& { return c.redis.url; }), 0, 0, check_redis_url},
  Setting{"redis.password",
          "overrides the url's password; secret (masked by `--print-config`)",
          field<Str>([](auto& c) -> auto& { return c.redis.password; }), 0, 0, nullptr, true},
  Setting{"redis.password_file",
          "a file that holds `redis.password` (a mounted secret), read once at start-up as "
          "`admin.token_file` is; both set is a configuration error; empty: none",
          field<Str>([](auto& c) -> auto& { return c.redis.password_file; })},
  Setting{"redis.tls_ca_file",
          "PEM file of the CA certificates the server's certificate must lead to; empty: the system's CAs",
          field<Str>([](auto& c) -> auto& { return c.redis.tls_ca_file; })},
  Setting{"redis.tls_cert_file",
          "client certificate (PEM), for servers that require one (`tls-auth-clients yes`); with "
          "`redis.tls_key_file`",
          field<Str>([](auto& c) -> auto& { return c.redis.tls_cert_file; })},
  Setting{"redis.tls_key_file",
          "the client certificate's key (PEM); with `redis.tls_cert_file`",
          field<Str>([](auto& c) -> auto& { return c.redis.tls_key_file; })},
  Setting{"redis.tls_server_name",
          "the name (or IP address) the server's certificate must carry; also sent as SNI when it is a "
          "name; empty: the url's host",
          field<Str>([](auto& c) -> auto& { return c.redis.tls_server_name; })},
  Setting{"redis.tls_verify",
          "`false` accepts any certificate (testing only: it gives up protection against a server in the "
          "middle)",
          field<bool>([](auto& c) -> auto& { return c.redis.tls_verify; })},
  Setting{"redis.db",
          "overrides the url's database number; unset: the url's",
          field<OptInt>([](auto& c) -> auto& { return c.redis.db; }), 0, kMaxInt32},
  Setting{"redis.prefix",
          "key prefix, `[A-Za-z0-9._-]{1,64}`",
          field<Str>([](auto& c) -> auto& { return c.redis.prefix; }), 0, 0, check_prefix},
  Setting{"redis.timeout_ms",
          "connect and command timeout",
          field<Int>([](auto& c) -> auto& { return c.redis.timeout_ms; }), 1, 3'600'000},
  Setting{"redis.job_retention_s",
          "how long finished jobs are kept; 0 = forever",
          field<Int>([](auto& c) -> auto& { return c.redis.job_retention_s; }), 0, 3'153'600'000},
  Setting{"redis.wait_replicas",
          "after each ingest batch, wait until this many replicas of every primary written to acknowledge "
          "(Redis `WAIT`) before the batch's offsets may be committed; 0 = no wait",
          field<Int>([](auto& c) -> auto& { return c.redis.wait_replicas; }), 0, 16},
  Setting{"redis.wait_timeout_ms",
          "how long `WAIT` may take; fewer acknowledgements = the batch is written again later",
          field<Int>([](auto& c) -> auto& { return c.redis.wait_timeout_ms; }), 1, 60'000},

  Setting{"redis.leave_group_after_ms",
          "an instance that cannot reach Redis for this long leaves its consumer groups (each that has "
          "another member), so that an instance that can takes its shards over, and joins again once Redis "
          "answers; 0: it never leaves",
          field<Int>([](auto& c) -> auto& { return c.redis.leave_group_after_ms; }), 0, kMaxInt32},
  Setting{"redis.compress_payloads_above_bytes",
          "a job's payload (key, value and headers) longer than this is kept zstd-compressed in Redis, "
          "with a dictionary trained from the first 1 000 such payloads once there is one, read back by every "
          "reader; 0 = never. Records written either way read alike",
          field<Int>([](auto& c) -> auto& { return c.redis.compress_payloads_above_bytes; }), 0, kMaxInt32},
  Setting{"redis.compression_dictionary",
          "compress those payloads with a zstd dictionary that the first instance trains from the first "
          "payloads it compresses and keeps in Redis; false: each payload alone (larger, for values "
          "that have little in common). Records written either way read alike",
          field<bool>([](auto& c) -> auto& { return c.redis.compression_dictionary; })},
  Setting{"redis.functions",
          "call delayd's scripts as one function library (FUNCTION LOAD once, then FCALL: a call no longer "
          "defines the scripts' shared helpers again) where Redis has functions (7 and later) and the user may "
          "load them, else as EVAL scripts; false: EVAL scripts always (for a proxy that does not pass FCALL on)",
          field<bool>([](auto& c) -> auto& { return c.redis.functions; })},
  Setting{"redis.settings_check_interval_ms",
          "how often a running instance reads every Redis server's `maxmemory-policy` and persistence again "
          "(`INFO`): one that may now drop waiting jobs degrades `/healthz` and sets "
          "`delayd_redis_may_drop_waiting_jobs`; 0 = at start only (where it refuses to start)",
          field<Int>([](auto& c) -> auto& { return c.redis.settings_check_interval_ms; }), 0, 86'400'000},

  Setting{"wheel.tick_ms",
          "wheel resolution",
          field<Int>([](auto& c) -> auto& { return c.wheel.tick_ms; }), 1, 60'000},
  Setting{"wheel.slot_bits",
          "3 levels of 2^bits slots; range = tick × 2^(3·bits) (16 777 216 ms ≈ 4.66 h)",
          field<Int>([](auto& c) -> auto& { return c.wheel.slot_bits; }), 4, 12},

  // The upper bound of load_window_ms depends on the wheel; validate_config() checks it.
  Setting{"scheduler.load_window_ms",
          "jobs due within this window are held in the wheel; must be below the wheel's range",
          field<Int>([](auto& c) -> auto& { return c.scheduler.load_window_ms; }), 1, INT64_MAX},
  Setting{"scheduler.ingest_batch",
          "batch size of the ingest path (records per batch)",
          field<Int>([](auto& c) -> auto& { return c.scheduler.ingest_batch; }), 1, 1'000'000},
  Setting{"scheduler.load_batch",
          "batch size of the load path (jobs read from Redis per window)",
          field<Int>([](auto& c) -> auto& { return c.scheduler.load_batch; }), 1, 1'000'000},
  Setting{"scheduler.fire_batch",
          "batch size of the fire path (jobs claimed per call)",
          field<Int>([](auto& c) -> auto& { return c.scheduler.fire_batch; }), 1, 1'000'000},
  Setting{"scheduler.max_attempts",
          "delivery attempts before a job fails",
          field<Int>([](auto& c) -> auto& { return c.scheduler.max_attempts; }), 1, 1'000'000},
  Setting{"scheduler.max_catchup",
          "`repeat-catchup: all`: at most this many missed occurrences of a repeat delivered in a row after"
          " an outage, then it goes on with the next one still to come (1..1000000)",
          field<Int>([](auto& c) -> auto& { return c.scheduler.max_catchup; }), 1, 1'000'000},
  Setting{"scheduler.retry_backoff_ms",
          "first retry backoff of a delivery Kafka refused; it doubles up to `retry_backoff_max_ms`",
          field<Int>([](auto& c) -> auto& { return c.scheduler.retry_backoff_ms; }), 0, 86'400'000},
  Setting{"scheduler.retry_backoff_max_ms",
          "the cap of the doubling retry backoff",
          field<Int>([](auto& c) -> auto& { return c.scheduler.retry_backoff_max_ms; }), 0, 86'400'000},
  // Kafka's own ceiling for a message (librdkafka's message.max.bytes).
  Setting{"scheduler.max_value_bytes",
          "larger ingest values are dead-lettered; must leave 1 024 bytes under the producer's "
          "`message.max.bytes`",
          field<Int>([](auto& c) -> auto& { return c.scheduler.max_value_bytes; }), 1, 1'000'000'000},
  Setting{"scheduler.shutdown_timeout_ms",
          "how long SIGTERM waits for in-flight records",
          field<Int>([](auto& c) -> auto& { return c.scheduler.shutdown_timeout_ms; }), 0, 3'600'000},
  Setting{"scheduler.cancel_memory_s",
          "how long a cancel for an id delayd does not know yet is remembered; 0 = not at all",
          field<Int>([](auto& c) -> auto& { return c.scheduler.cancel_memory_s; }), 0, 604'800},
  Setting{"scheduler.claim_ahead_ms",
          "jobs are claimed in Redis this long before they are due and their records held in memory until "
          "then; a cancel within this time of the due time is late; 0 = claim at the due time",
          field<Int>([](auto& c) -> auto& { return c.scheduler.claim_ahead_ms; }), 0, 1'000},
  Setting{"scheduler.claim_gather_ms",
          "when a job falls due within `claim_ahead_ms`, its claim also takes the jobs due up to this much "
          "later, so that under load a shard gets fewer, larger claim calls; a cancel within "
          "`claim_ahead_ms` + this of the due time may be late; 0 = only what is due within `claim_ahead_ms`",
          field<Int>([](auto& c) -> auto& { return c.scheduler.claim_gather_ms; }), 0, 1'000},
  Setting{"scheduler.mark_gather_ms",
          "how long Kafka's acknowledgements of ready records may wait to be written to Redis as `ready` "
          "together: at modest rates a shard then gets one mark call for several records instead of one for "
          "each (a quarter less Redis CPU a job at 2 000 jobs/s); the job's state says `ready` up to this much "
          "later. Unset: 20 with `kafka.delivery = exactly_once` (a takeover finds what was delivered in the "
          "delivery log), 0 with `at_least_once` (a kill -9 delivers again every job whose mark was waiting)",
          field<OptInt>([](auto& c) -> auto& { return c.scheduler.mark_gather_ms; }), 0, 1'000},
  Setting{"scheduler.max_process_attempts",
          "deliveries a job may get through `failed` reports and ack timeouts; then it is dead-lettered and"
          " `failed`",
          field<Int>([](auto& c) -> auto& { return c.scheduler.max_process_attempts; }), 1, 1'000'000},
  Setting{"scheduler.process_retry_base_ms",
          "backoff after a `failed` report without `retry-after-ms`: base × 2^(attempt − 1), capped at "
          "`process_retry_max_ms`, then a random time between half of that and all of it",
          field<Int>([](auto& c) -> auto& { return c.scheduler.process_retry_base_ms; }), 0, 86'400'000},
  Setting{"scheduler.process_retry_max_ms",
          "the cap of that backoff",
          field<Int>([](auto& c) -> auto& { return c.scheduler.process_retry_max_ms; }), 0, 86'400'000},
  Setting{"scheduler.ack_timeout_ms",
          "deliver a job again when it has had no report for this long; 0: off",
          field<Int>([](auto& c) -> auto& { return c.scheduler.ack_timeout_ms; }), 0, 86'400'000},
  Setting{"scheduler.keep_payload",
          "keep a job's payload after `ready` until it is `finished` or `failed`, so that it can be "
          "delivered again; implied by `ack_timeout_ms` > 0",
          field<bool>([](auto& c) -> auto& { return c.scheduler.keep_payload; })},
  Setting{"scheduler.business",
          "the lifecycle settings `max_process_attempts`, `process_retry_base_ms`, `process_retry_max_ms`, "
          "`ack_timeout_ms` and `keep_payload` for one business, as a table `[scheduler.business.<name>]` "
          "(env `DELAYD_SCHEDULER_BUSINESS=\"<name>.<key>=<value>,...\"`, flag `--set "
          "scheduler.business.<name>.<key>=<value>`); see [Lifecycle "
          "settings](../consuming.md#lifecycle-settings)",
          field<PropertyMap>([](auto& c) -> auto& { return c.scheduler.business; })},

  Setting{"etf1.past_due",
          "an etf1 schedule already past due when produced: `fire` at once, or `drop` (counted, tombstoned)",
          field<Str>([](auto& c) -> auto& { return c.etf1.past_due; }), 0, 0, check_past_due},
  Setting{"etf1.grace_s",
          "with `drop`: how far past due a schedule may be produced and still fire, seconds",
          field<Int>([](auto& c) -> auto& { return c.etf1.grace_s; }), 0, 31'536'000},
  Setting{"etf1.tombstone_on_fire",
          "after delivery, a tombstone of the schedule on its topic, in its partition",
          field<bool>([](auto& c) -> auto& { return c.etf1.tombstone_on_fire; })},
  Setting{"etf1.history_topic",
          "a copy of every delivered etf1 record; empty: none",
          field<Str>([](auto& c) -> auto& { return c.etf1.history_topic; }), 0, 0, check_optional_topic},

  Setting{"chronos.output_topic",
          "where Chronos jobs are delivered; needed with a `chronos` ingest topic",
          field<Str>([](auto& c) -> auto& { return c.chronos.output_topic; }), 0, 0, check_optional_topic},

  Setting{"log.level",
          "trace, debug, info, warn, error",
          field<Str>([](auto& c) -> auto& { return c.log.level; }), 0, 0, check_log_level},
  Setting{"log.format",
          "`text` (`<time> <level> <message>`) or `json`: one JSON object per line, `{\"ts\", \"level\", "
          "\"msg\"}` and `job_id` when the line is about one job, for log shippers",
          field<Str>([](auto& c) -> auto& { return c.log.format; }), 0, 0, check_log_format},

  Setting{"admin.listen",
          "`host:port` of the HTTP admin endpoint, for example `127.0.0.1:9464`; empty: off",
          field<Str>([](auto& c) -> auto& { return c.admin.listen; }), 0, 0, check_listen},
  Setting{"admin.token",
          "bearer token asked of every request but `/`, `/healthz`, `/livez` and `/readyz`; it may read and"
          " change everything ([access levels](../operating/admin.md)); secret (masked by "
          "`--print-config`). Give it through `DELAYD_ADMIN_TOKEN` or `admin.token_file` rather than a file"
          " others can read; empty: none",
          field<Str>([](auto& c) -> auto& { return c.admin.token; }), 0, 0, nullptr, true},
  Setting{"admin.token_file",
          "a file that holds `admin.token` (a Kubernetes secret mounted as a file), read once at start-up, "
          "its trailing newline trimmed; `--print-config` shows the path, and the token masked with the "
          "file as its origin. Setting both `admin.token` and this, or naming a file that cannot be read or"
          " is empty, is a configuration error (exit status 2); empty: none",
          field<Str>([](auto& c) -> auto& { return c.admin.token_file; })},
  Setting{"admin.read_token",
          "bearer token that may read everything `admin.token` guards (`GET`, `HEAD`) but change nothing: "
          "any other method gets `403`; must differ from `admin.token`; secret (masked); empty: none",
          field<Str>([](auto& c) -> auto& { return c.admin.read_token; }), 0, 0, nullptr, true},
  Setting{"admin.read_token_file",
          "a file that holds `admin.read_token`, as `admin.token_file` holds `admin.token`; empty: none",
          field<Str>([](auto& c) -> auto& { return c.admin.read_token_file; })},
  Setting{"admin.max_connections",
          "open connections to the endpoint; one more closes the oldest connection still waiting for its "
          "request (refused only when every connection is being answered)",
          field<Int>([](auto& c) -> auto& { return c.admin.max_connections; }), 1, 100'000},
  Setting{"admin.read_timeout_ms",
          "time to receive one whole request, and to send its answer; an idle keep-alive connection is "
          "closed after it",
          field<Int>([](auto& c) -> auto& { return c.admin.read_timeout_ms; }), 1, 3'600'000},
  Setting{"admin.max_header_bytes",
          "request line and headers; larger gets `431` and the connection closed",
          field<Int>([](auto& c) -> auto& { return c.admin.max_header_bytes; }), 512, 1'048'576},
  Setting{"admin.max_body_bytes",
          "request body (no endpoint takes one); larger gets `413`",
          field<Int>([](auto& c) -> auto& { return c.admin.max_body_bytes; }), 0, 1'048'576},
  Setting{"admin.max_redrives",
          "a dead letter already redriven this many times (its `redrive-count` header) is left where it is "
          "by `POST /dead-letters/redrive`, and the operation says so",
          field<Int>([](auto& c) -> auto& { return c.admin.max_redrives; }), 1, kMaxRedrives},
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
      if (s.name == "redis.url") return base::quote_for_message(redis::mask_redis_url(v), 300);
      return base::quote_for_message(v, 300);
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
        out += base::quote_for_message(k) + " = " +
               (is_secret_property(k) ? std::string("\"***\"") : base::quote_for_message(v));
      }
      return out + "}";
    }
  };
  return std::visit(Visitor{s, c}, s.field);
}

}  // namespace delayd::config::detail
