// delayd's configuration: one struct with every setting, and the loader that fills it from, in
// increasing precedence, built-in defaults, a TOML file, DELAYD_* environment variables and
// command-line flags. Both executables (delayd and delayctl) share it.
//
//   file    --config FILE, else $DELAYD_CONFIG; no file at all is fine (defaults apply).
//           [section] key = value, exactly the names below; an unknown key or a wrong TOML type
//           is an error, so a typo can never be silently ignored.
//   env     DELAYD_<SECTION>_<KEY>, e.g. DELAYD_REDIS_URL, DELAYD_SCHEDULER_LOAD_WINDOW_MS.
//           The passthrough tables take "k=v,k2=v2" (a literal comma is written "\,").
//           Unknown DELAYD_* variables are reported in Config::warnings, not refused, because
//           scripts around delayd may use the prefix for their own purposes.
//   flags   --set section.key=value (repeatable, applied in order), --set
//           kafka.properties.<librdkafka property>=value, and the shortcuts --kafka-bootstrap,
//           --redis-url, --log-level, applied after every --set.
// Text values (env, --set): integers in decimal; booleans true/false, 1/0, yes/no, on/off in
// any case; strings verbatim. The passthrough tables merge key by key across sources (a later
// source overrides one property without dropping the others).
//
// One home for each fact of a setting: its default is the member initializer below (option
// structs elsewhere take theirs from here), its name, environment name and range are its row of
// the settings table (config_registry.cpp), and the documentation's settings table
// (docs/operating/configuration.md) is checked against `delayd --print-config`
// (tests/config/check_docs_config.py).
//
// Invariants: a Config returned by load_config() has passed validate_config(): every number is
// in its range (so narrowing casts to int/size_t by users are safe), the ready-topic
// template renders a legal topic for every legal business, the Redis URL parses, and
// scheduler.load_window_ms < wheel range. Every failure is a ConfigError whose message names
// the setting, its value (secrets masked) and where the value came from.
// Threading: loading reads the process environment and a file; do it once at start-up on one
// thread. A loaded Config is a plain value, safe to read from any number of threads.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/ingest_topics.hpp"
#include "config/otel_env.hpp"
#include "redis/url.hpp"

namespace CLI {
class App;
}

namespace delayd::config {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// librdkafka properties, name -> value. Sorted and unique, so printing and merging are stable.
using PropertyMap = std::map<std::string, std::string>;
// What a librdkafka client is built from: unique names, in the order they should be set.
using KafkaProperties = std::vector<std::pair<std::string, std::string>>;

struct KafkaConfig {
  std::string bootstrap = "127.0.0.1:19092";
  std::string group_id = "delayd";
  // This instance's static membership of each of its consumer groups (Kafka's group.instance.id,
  // KIP-345); empty: dynamic membership. Unique per instance, and the same across its restarts: a
  // restarted instance then takes its shards back at once instead of after the dead member's
  // session (broker/ingest_stage.hpp, "Static membership").
  std::string group_instance_id;
  // The topic delayd's own tools publish to (delayctl, the console's cancels), read in
  // delayd's format; always read, listed in ingest_topics or not.
  std::string ingest_topic = "delay-ingest";
  // More ingest topics, comma-separated "<topic>[:<format>]" (format delayd, the default, etf1
  // or chronos; docs/producing.md "Drop-in for etf1 and Chronos"); in TOML also an array of strings.
  // ingest_topics() below is the one reading of it.
  std::string ingest_topics;
  std::string dlq_topic = "delay-ingest.dlq";
  // Consumers' reports on delivered jobs (docs/consuming.md, "Job lifecycle"); empty: none are read.
  std::string status_topic = "delay-status";
  std::string ready_topic_template = "ready.{business}";  // exactly one {business}
  bool create_topics = true;                              // create missing ingest, DLQ and ready topics
  std::int64_t max_ready_topics = 1000;                   // distinct ready topics one process asks to create
  std::string allowed_businesses;                         // comma-separated; empty: any business name
  std::int64_t topic_partitions = 4;                      // for topics delayd creates
  std::int64_t topic_replication = 1;                     // for topics delayd creates
  std::int64_t message_timeout_ms = 30000;                // librdkafka delivery timeout
  // How long a ready topic may be missing (deleted under delayd) before its jobs
  // are dead-lettered; until then they wait without spending attempts.
  std::int64_t missing_topic_timeout_ms = 600000;
  // sasl.password for every client (librdkafka's SASL PLAIN/SCRAM password). Secret: masked when
  // the configuration is printed; not with kafka.properties.sasl.password.
  std::string sasl_password;
  // A file that holds kafka.sasl_password (a Kubernetes secret mounted as a file), read once by
  // load_config() like admin.token_file. Not with kafka.sasl_password itself.
  std::string sasl_password_file;
  // How ready records (and everything else delayd writes about a job) reach Kafka: exactly_once
  // (in transactions, a transactional producer per shard; broker/shard_transactions.hpp) or
  // at_least_once (one idempotent producer). delivery_mode() is the one reading of it.
  std::string delivery = "exactly_once";
  // Retention of each ingest topic's delivery log (<topic>.delivered, exactly_once only) when
  // delayd creates it: a shard left without an owner for longer loses the record of what its last
  // owner delivered, and jobs in flight then are delivered again.
  std::int64_t delivery_log_retention_ms = 86'400'000;
  // exactly_once only: how long, in ms, after its previous commit a shard's transaction stays
  // open for more records before it commits, while the shard is busy (broker/shard_stream.hpp:
  // a sparse shard commits each batch at once). The shards' producers linger as long, so a
  // transaction's records leave at its commit (broker/loop_settings.cpp). Each commit costs the
  // broker a few requests and log writes whatever it holds, so fewer of them is less of Kafka's
  // CPU: 20 ms halved it from 2 000 to 10 000 jobs a second with the p99 as good or better, and
  // changed nothing at 100 and 500 (docs/performance/cost.md, "The linger's records sent at its
  // commit"). 0: every batch commits at once.
  std::int64_t transaction_linger_ms = 20;
  // exactly_once only: the linger, in ms, of a shard draining a backlog: one given a record
  // already at least this late within the last 100 ms lingers this long instead (a shard whose
  // records are on time never waits longer than transaction_linger_ms; broker/shard_stream.hpp;
  // a job published already that late counts as late too: the fire path knows its due time, not
  // its arrival).
  // Its jobs are late already, and fewer, larger commits drain it sooner: a million due at once
  // drained in 29.9-30.5 s with it and 32.5-35.0 without on two cores, a fired job costing delayd
  // a fifth less CPU and Kafka nearly half less (docs/performance/burst.md, "A longer linger for a
  // backlog"). 0, or not above transaction_linger_ms: off.
  std::int64_t transaction_late_linger_ms = 100;
  PropertyMap properties;           // every client: consumer, producer, admin
  PropertyMap consumer_properties;  // the ingest consumer only
  PropertyMap producer_properties;  // the ready/DLQ producer only

  // The ready topic of a business: the template with {business} replaced.
  std::string ready_topic(std::string_view business) const;
};

struct RedisConfig {
  // redis://[[user]:password@]host[:port][/db], or redis-cluster://[[user]:password@]host:port[,host:port...];
  // rediss:// and redis-cluster+tls:// for the same over TLS
  std::string url = "redis://127.0.0.1:16379";
  std::string password;       // overrides the url's password when non-empty
  std::string password_file;  // a file holding redis.password (a mounted secret)
  // TLS (a rediss:// or redis-cluster+tls:// url): PEM files, the name the server's certificate
  // must carry (empty: the url's host), and whether to verify at all. See redis/tls.hpp.
  std::string tls_ca_file;    // empty: the system's CA certificates
  std::string tls_cert_file;  // client certificate (with tls_key_file)
  std::string tls_key_file;
  std::string tls_server_name;
  bool tls_verify = true;
  std::optional<std::int64_t> db;         // overrides the url's db when set
  std::string prefix = "delayd";          // [A-Za-z0-9._-]{1,64}
  std::int64_t timeout_ms = 2000;         // connect and command timeout
  std::int64_t job_retention_s = 604800;  // how long finished jobs are kept; 0: forever
  // After each ingest chunk is accepted, and before its offsets may be committed, wait
  // until this many replicas of every primary written to acknowledge (Redis WAIT); 0: no wait.
  std::int64_t wait_replicas = 0;
  std::int64_t wait_timeout_ms = 1000;  // WAIT's timeout; fewer acknowledgements = retry the chunk
  // An instance that cannot reach Redis for this long leaves its consumer groups, so that an
  // instance that can takes its shards, and joins again once Redis answers; 0: never leaves.
  std::int64_t leave_group_after_ms = 3000;
  // A job's payload (key, value and headers) longer than this many bytes is kept
  // zstd-compressed in Redis (storage/payload_compression.hpp); 0: never.
  std::int64_t compress_payloads_above_bytes = 512;
  // Compress them with a zstd dictionary trained from the first payloads (payload_compression.hpp).
  bool compression_dictionary = true;
  // Call the scripts as delayd's function library (FUNCTION LOAD, FCALL) where Redis has
  // functions; false: as EVAL scripts always (storage/lua_scripts.hpp, "How Redis runs them").
  bool functions = true;
  // How often a running instance reads every server's eviction policy and persistence again
  // (broker/redis_settings_check.hpp, "While delayd runs"); 0: at start only.
  std::int64_t settings_check_interval_ms = 60000;
};

// The wheel's settings as a user writes them (milliseconds, signed like every integer setting).
// The service turns them into the wheel's own parameters, wheel::WheelConfig, in one place:
// scheduler_options() in broker/loop_settings.cpp.
struct WheelSettings {
  std::int64_t tick_ms = 1;    // the wheel's tick
  std::int64_t slot_bits = 8;  // three levels of 2^slot_bits slots

  // How far ahead the wheel can hold a timer: tick_ms * 2^(3 * slot_bits). At most
  // 60000 * 2^36, so it fits in 64 bits with room to spare.
  std::int64_t range_ms() const;
};

struct SchedulerConfig {
  std::int64_t load_window_ms = 60000;  // below the wheel's range
  std::int64_t ingest_batch = 500;      // jobs per batch (all three batches)
  std::int64_t load_batch = 1000;
  std::int64_t fire_batch = 500;
  std::int64_t max_attempts = 10;             // delivery attempts before a job fails
  std::int64_t max_catchup = 100;             // repeat-catchup all: missed occurrences delivered in a row
  std::int64_t retry_backoff_ms = 500;        // retry backoff, doubling
  std::int64_t retry_backoff_max_ms = 30000;  // ... up to this (at least retry_backoff_ms)
  std::int64_t max_value_bytes = 990000;      // larger values are dead-lettered; + 1024 <= message.max.bytes
  std::int64_t shutdown_timeout_ms = 10000;   // how long SIGTERM waits for in-flight records
  std::int64_t cancel_memory_s = 300;         // how long a cancel for an unknown id is remembered
  std::int64_t claim_ahead_ms = 50;           // jobs are claimed this long before due, then held in memory
  std::int64_t claim_gather_ms = 25;          // ... with those due up to this much later (fewer claim calls)
  // How long Kafka's acknowledgements gather before they are written to Redis as "ready" (fewer,
  // larger mark calls); unset: by kafka.delivery, mark_gather_ms() is the one reading of it.
  std::optional<std::int64_t> mark_gather_ms;
  // The job lifecycle (docs/consuming.md, "Job lifecycle"); each may be overridden per business in
  // `business` (config/business_policy.hpp):
  std::int64_t max_process_attempts = 5;       // deliveries a job gets through failed reports
  std::int64_t process_retry_base_ms = 1000;   // backoff after a failed report (doubling)
  std::int64_t process_retry_max_ms = 600000;  // the backoff's ceiling (at least the base)
  std::int64_t ack_timeout_ms = 0;             // 0: off; redelivered when no report comes this long
  bool keep_payload = false;                   // keep the payload after ready (implied by ack_timeout_ms)
  // "<business>.<one of the five above>" -> value: the per-business overrides.
  PropertyMap business;
};

// The etf1 format (etf1/kafka-message-scheduler's schedules topic; docs/producing.md "etf1 records").
struct Etf1Config {
  // A schedule already past due when it was produced (epoch < record timestamp - grace_s):
  // "fire" (at once, as delayd does every late job) or "drop" (counted and tombstoned).
  std::string past_due = "fire";
  std::int64_t grace_s = 0;
  bool tombstone_on_fire = true;  // after delivery, a tombstone of the id on the schedules topic
  std::string history_topic;      // a copy of each delivered record; empty: none
};

// The Chronos format (kindredgroup/chronos's input topic; docs/producing.md "Chronos records").
struct ChronosConfig {
  std::string output_topic;  // where every Chronos job is delivered; needed with a chronos topic
};

struct LogConfig {
  std::string level = "info";   // trace, debug, info, warn, error
  std::string format = "text";  // text: "<time> <level> <message>"; json: one JSON object per line
};

// The highest admin.max_redrives.
inline constexpr std::int64_t kMaxRedrives = 1'000'000;

struct AdminConfig {
  // host:port of the HTTP admin endpoint (/healthz, /readyz, /metrics, /stats, /jobs); empty: no endpoint. Port 0 picks
  // a free port (tests). Off by default so that instances sharing a host never collide.
  std::string listen;
  // Bearer token asked of every request but /healthz and /readyz (Authorization: Bearer <token>);
  // it may read and change everything. Empty: no token asked (unless read_token is set).
  // Secret: masked when the configuration is printed.
  std::string token;
  // A file that holds admin.token, read once by load_config() (Kubernetes secrets), a trailing
  // newline trimmed: load_config() leaves its content in `token`. Not with admin.token itself.
  std::string token_file;
  // Bearer token that may read every token-protected path (GET, HEAD) but change nothing: any
  // other method gets 403. Must differ from admin.token. Secret, like it.
  std::string read_token;
  // A file that holds admin.read_token, as token_file holds admin.token.
  std::string read_token_file;
  std::int64_t max_connections = 64;     // open connections; beyond it the oldest idle one is closed
  std::int64_t read_timeout_ms = 5000;   // to receive one whole request (and to send its answer)
  std::int64_t max_header_bytes = 8192;  // request line and headers; larger gets 431
  std::int64_t max_body_bytes = 4096;    // request body; larger gets 413
  // A dead letter redriven this many times already is left where it is (POST /dead-letters/redrive).
  std::int64_t max_redrives = 3;  // 1..kMaxRedrives
};

// The url with its password, if any, replaced by "***"; for logs and --print-config. The Redis
// url is parsed in one place only, redis/url.hpp; redis_options() (redis_options.hpp)
// combines it with redis.password and redis.db.
using redis::mask_redis_url;

struct Config {
  KafkaConfig kafka;
  RedisConfig redis;
  WheelSettings wheel;
  SchedulerConfig scheduler;
  Etf1Config etf1;
  ChronosConfig chronos;
  LogConfig log;
  AdminConfig admin;
  // Traces: from the standard OTEL_* variables, not from delayd's settings (config/otel_env.hpp).
  TracingConfig tracing;

  // Where each value came from, by dotted name ("redis.url", "kafka.properties.acks"):
  // "default", "file PATH line N", "env NAME", "--set", "--redis-url". Filled by load_config;
  // error messages and --print-config use it. Settings not present here count as defaults.
  std::map<std::string, std::string> origins;
  // Things worth a log line at start-up that are not errors (unknown DELAYD_* variables).
  std::vector<std::string> warnings;
};

// kafka.delivery, read.
enum class DeliveryMode : unsigned char { at_least_once, exactly_once };
constexpr std::string_view to_string(DeliveryMode m) {
  return m == DeliveryMode::exactly_once ? "exactly_once" : "at_least_once";
}
constexpr std::optional<DeliveryMode> parse_delivery_mode(std::string_view name) {
  for (const DeliveryMode m : {DeliveryMode::at_least_once, DeliveryMode::exactly_once}) {
    if (to_string(m) == name) return m;
  }
  return std::nullopt;
}
// The configuration's kafka.delivery (validate_config() has checked a loaded Config's; any other
// text reads as at_least_once).
DeliveryMode delivery_mode(const Config& config);

// scheduler.mark_gather_ms when unset: 20 ms with exactly_once (a mark waiting costs only the
// freshness of the job's state: a takeover finds the delivery in the delivery log), 0 with
// at_least_once (a kill -9 delivers again every job whose mark had not been written).
inline constexpr std::int64_t kMarkGatherExactlyOnceMs = 20;
// The mark stage's gather time, ms: the setting, else the default of the delivery mode.
std::int64_t mark_gather_ms(const Config& config);

// Throws ConfigError for the first setting out of its range or otherwise invalid.
void validate_config(const Config& config);

// "a,b,c" -> {"a", "b", "c"}, spaces around names trimmed; "" -> {}.
std::vector<std::string> split_business_list(std::string_view list);

// Bytes delayd's own headers and Kafka's per-record framing may add to a ready or dead-letter
// record; the rest of the producer's message.max.bytes is what a job's key, value and headers
// may take.
inline constexpr std::int64_t kReadyRecordReserveBytes = 1024;
// The producer's message.max.bytes as configured (librdkafka's default 1000000 if not set).
std::int64_t producer_max_message_bytes(const Config& config);
// What a job's record (key, value and headers) may take so that its ready record fits.
std::size_t max_ready_record_bytes(const Config& config);

enum class KafkaClient { consumer, producer, admin };

// bootstrap.servers (and group.id for the consumer, message.timeout.ms for the producer), then
// kafka.properties, then the client's own table. Names are unique; a later table wins.
// Validation refuses passthrough entries for the properties delayd sets itself and their
// librdkafka aliases (bootstrap.servers, metadata.broker.list, group.id, message.timeout.ms,
// delivery.timeout.ms), so a passthrough can never silently contradict kafka.bootstrap,
// group_id or message_timeout_ms.
KafkaProperties kafka_properties(const Config& config, KafkaClient client);

// DELAYD_* and OTEL_* variables of this process. Tests pass their own map instead.
using Environment = std::map<std::string, std::string>;
Environment process_environment();

// What the command line said; filled by the options add_config_flags() registers.
struct ConfigFlags {
  std::optional<std::string> config_file;
  std::vector<std::string> sets;  // "section.key=value", in command-line order
  std::optional<std::string> kafka_bootstrap;
  std::optional<std::string> redis_url;
  std::optional<std::string> log_level;
  std::optional<std::string> print_config;  // "toml" or "json" when --print-config was given
};

// Registers --config, --set, --kafka-bootstrap, --redis-url, --log-level and
// --print-config[=toml|json] on `app`, writing into `flags`, which must outlive app.parse().
void add_config_flags(CLI::App& app, ConfigFlags& flags);

// Defaults, then the file (flags.config_file, else env DELAYD_CONFIG), then env, then flags;
// then the secrets given as files (admin.token_file, admin.read_token_file,
// kafka.sasl_password_file) are read into their
// settings; then validate_config(). Throws ConfigError, also when a secret and its file are both
// set, or the file cannot be read or is empty.
Config load_config(const ConfigFlags& flags, const Environment& env);

enum class ConfigFormat { toml, json };

// The effective configuration, secrets masked (redis.password, the url's password, and
// passthrough properties whose name suggests a secret). TOML output is a valid config file;
// each line notes a value's origin when it is not the default.
std::string render_config(const Config& config, ConfigFormat format);

// The configuration reference page (docs/reference/configuration.md) as Markdown: every
// setting with its built-in default, range, environment variable and meaning
// (config_reference.cpp).
std::string render_config_reference();

// If --print-config was given, writes render_config() to `out` and returns true: the caller
// should then exit with status 0 without starting anything.
bool print_config_if_asked(const ConfigFlags& flags, const Config& config, std::ostream& out);

}  // namespace delayd::config
