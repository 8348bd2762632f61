// The configuration contract: defaults, where values come from and in what order, and that
// every kind of bad setting stops start-up with a message naming the setting and its source.
#include "config/config.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/redis_options.hpp"

using namespace delayd::config;

namespace {

// A TOML file in the temp directory, removed when the test ends.
class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("delayd-config-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".toml");
    std::ofstream(path_) << text;
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

ConfigFlags with_file(const TempFile& f) {
  ConfigFlags flags;
  flags.config_file = f.path();
  return flags;
}

ConfigFlags with_sets(std::vector<std::string> sets) {
  ConfigFlags flags;
  flags.sets = std::move(sets);
  return flags;
}

Config load_toml(const std::string& text, const Environment& env = {}) {
  TempFile f(text);
  return load_config(with_file(f), env);
}

// The ConfigError message load_config() throws, or "" if it does not throw.
std::string error_of(const ConfigFlags& flags, const Environment& env = {}) {
  try {
    (void)load_config(flags, env);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

std::string toml_error(const std::string& text, const Environment& env = {}) {
  TempFile f(text);
  return error_of(with_file(f), env);
}

ConfigFlags parse_argv(std::vector<std::string> args) {
  CLI::App app{"test"};
  ConfigFlags flags;
  add_config_flags(app, flags);
  std::vector<char*> argv;
  std::string prog = "delayd";
  argv.push_back(prog.data());
  for (auto& a : args) argv.push_back(a.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return flags;
}

}  // namespace

TEST_CASE("every setting has its documented default", "[unit][config]") {
  const Config c = load_config({}, {});
  CHECK(c.kafka.bootstrap == "127.0.0.1:19092");
  CHECK(c.kafka.group_id == "delayd");
  CHECK(c.kafka.ingest_topic == "delay-ingest");
  CHECK(c.kafka.dlq_topic == "delay-ingest.dlq");
  CHECK(c.kafka.ready_topic_template == "ready.{business}");
  CHECK(c.kafka.create_topics);
  CHECK(c.kafka.topic_partitions == 4);
  CHECK(c.kafka.topic_replication == 1);
  CHECK(c.kafka.message_timeout_ms == 30000);
  CHECK(c.kafka.properties.empty());
  CHECK(c.kafka.consumer_properties.empty());
  CHECK(c.kafka.producer_properties.empty());
  CHECK(c.redis.url == "redis://127.0.0.1:16379");
  CHECK(c.redis.password.empty());
  CHECK_FALSE(c.redis.db.has_value());
  CHECK(c.redis.prefix == "delayd");
  CHECK(c.redis.timeout_ms == 2000);
  CHECK(c.redis.job_retention_s == 604800);
  CHECK(c.wheel.tick_ms == 1);
  CHECK(c.wheel.slot_bits == 8);
  CHECK(c.wheel.range_ms() == 16777216);
  CHECK(c.scheduler.load_window_ms == 60000);
  CHECK(c.scheduler.ingest_batch == 500);
  CHECK(c.scheduler.load_batch == 1000);
  CHECK(c.scheduler.fire_batch == 500);
  CHECK(c.scheduler.max_attempts == 10);
  CHECK(c.scheduler.retry_backoff_ms == 500);
  CHECK(c.scheduler.retry_backoff_max_ms == 30000);
  CHECK(c.scheduler.max_value_bytes == 990000);
  CHECK(c.scheduler.shutdown_timeout_ms == 10000);
  CHECK(c.log.level == "info");
  CHECK(c.origins.empty());
  CHECK(c.warnings.empty());

  CHECK(redis_options(c) == delayd::redis::RedisOptions{"127.0.0.1", 16379, "", "", 0, 2000, {}});
  CHECK(c.kafka.ready_topic("orders") == "ready.orders");
}

TEST_CASE("a default-constructed Config is valid", "[unit][config]") { CHECK_NOTHROW(validate_config(Config{})); }

TEST_CASE("a file sets every kind of value", "[unit][config]") {
  const Config c = load_toml(R"(
[kafka]
bootstrap = "k1:9092,k2:9092"
ready_topic_template = "out-{business}-v1"
create_topics = false
topic_partitions = 12

[redis]
url = "redis://cache:6380/3"
db = 5

[wheel]
tick_ms = 2
slot_bits = 10

[scheduler]
load_window_ms = 120000

[log]
level = "debug"
)");
  CHECK(c.kafka.bootstrap == "k1:9092,k2:9092");
  CHECK(c.kafka.ready_topic("pay") == "out-pay-v1");
  CHECK_FALSE(c.kafka.create_topics);
  CHECK(c.kafka.topic_partitions == 12);
  CHECK(c.redis.db == 5);
  CHECK(redis_options(c) == delayd::redis::RedisOptions{"cache", 6380, "", "", 5, 2000, {}});
  CHECK(c.wheel.range_ms() == (std::int64_t{2} << 30));
  CHECK(c.scheduler.load_window_ms == 120000);
  CHECK(c.log.level == "debug");
  CHECK_THAT(c.origins.at("kafka.topic_partitions"), Catch::Matches("file .*\\.toml line 6"));
  CHECK(c.origins.count("kafka.group_id") == 0);
}

TEST_CASE("later sources win: file, then env, then --set, then shortcuts", "[unit][config]") {
  TempFile file(R"(
[kafka]
bootstrap = "from-file:1"
group_id = "file-group"
[scheduler]
fire_batch = 7
ingest_batch = 8
[log]
level = "warn"
)");
  const Environment env = {
      {"DELAYD_KAFKA_BOOTSTRAP", "from-env:2"}, {"DELAYD_SCHEDULER_FIRE_BATCH", "70"}, {"DELAYD_LOG_LEVEL", "error"}};

  SECTION("file alone") {
    const Config c = load_config(with_file(file), {});
    CHECK(c.kafka.bootstrap == "from-file:1");
    CHECK(c.scheduler.fire_batch == 7);
  }
  SECTION("env over file") {
    const Config c = load_config(with_file(file), env);
    CHECK(c.kafka.bootstrap == "from-env:2");
    CHECK(c.kafka.group_id == "file-group");
    CHECK(c.scheduler.fire_batch == 70);
    CHECK(c.scheduler.ingest_batch == 8);
    CHECK(c.log.level == "error");
    CHECK(c.origins.at("kafka.bootstrap") == "env DELAYD_KAFKA_BOOTSTRAP");
  }
  SECTION("--set over env, the last --set of a key wins") {
    ConfigFlags flags = with_file(file);
    flags.sets = {"scheduler.fire_batch=700", "kafka.bootstrap=from-set:3", "scheduler.fire_batch=701"};
    const Config c = load_config(flags, env);
    CHECK(c.kafka.bootstrap == "from-set:3");
    CHECK(c.scheduler.fire_batch == 701);
    CHECK(c.origins.at("scheduler.fire_batch") == "--set");
  }
  SECTION("shortcut flags over --set") {
    ConfigFlags flags = with_file(file);
    flags.sets = {"kafka.bootstrap=from-set:3", "log.level=trace"};
    flags.kafka_bootstrap = "from-flag:4";
    flags.log_level = "info";
    flags.redis_url = "redis://other:1";
    const Config c = load_config(flags, env);
    CHECK(c.kafka.bootstrap == "from-flag:4");
    CHECK(c.log.level == "info");
    CHECK(c.redis.url == "redis://other:1");
    CHECK(c.origins.at("kafka.bootstrap") == "--kafka-bootstrap");
  }
  SECTION("DELAYD_CONFIG names the file when --config is absent") {
    Environment e = env;
    e["DELAYD_CONFIG"] = file.path();
    const Config c = load_config({}, e);
    CHECK(c.kafka.group_id == "file-group");
  }
  SECTION("--config beats DELAYD_CONFIG") {
    TempFile other("[kafka]\ngroup_id = \"other-group\"\n");
    Environment e;
    e["DELAYD_CONFIG"] = file.path();
    const Config c = load_config(with_file(other), e);
    CHECK(c.kafka.group_id == "other-group");
  }
}

TEST_CASE("flags are registered on a CLI11 app", "[unit][config]") {
  const ConfigFlags flags = parse_argv({"--config", "/etc/delayd.toml", "--set", "scheduler.fire_batch=3", "--set",
                                        "kafka.properties.security.protocol=SSL", "--kafka-bootstrap", "k:1",
                                        "--redis-url", "redis://r:2", "--log-level", "debug", "--print-config=json"});
  CHECK(flags.config_file == "/etc/delayd.toml");
  CHECK(flags.sets == std::vector<std::string>{"scheduler.fire_batch=3", "kafka.properties.security.protocol=SSL"});
  CHECK(flags.kafka_bootstrap == "k:1");
  CHECK(flags.redis_url == "redis://r:2");
  CHECK(flags.log_level == "debug");
  CHECK(flags.print_config == "json");

  CHECK(parse_argv({"--print-config"}).print_config == "toml");
  CHECK_FALSE(parse_argv({}).print_config.has_value());
  CHECK_FALSE(parse_argv({}).config_file.has_value());
  CHECK_THROWS_AS(parse_argv({"--print-config=xml"}), CLI::ValidationError);
}

TEST_CASE("passthrough tables come from the file, env and --set and merge by key", "[unit][config]") {
  TempFile file(R"(
[kafka.properties]
"security.protocol" = "SASL_SSL"
sasl.mechanism = "PLAIN"
"socket.keepalive.enable" = true
"reconnect.backoff.ms" = 50

[kafka.consumer_properties]
"fetch.wait.max.ms" = "20"

[kafka.producer_properties]
"linger.ms" = "5"
"acks" = "all"
)");
  const Environment env = {{"DELAYD_KAFKA_PROPERTIES", "reconnect.backoff.ms=100, client.id = delayd-1"},
                           {"DELAYD_KAFKA_PRODUCER_PROPERTIES", "linger.ms=1"},
                           {"DELAYD_KAFKA_CONSUMER_PROPERTIES", "debug=cgrp\\,topic"}};
  ConfigFlags flags = with_file(file);
  flags.sets = {"kafka.properties.security.protocol=SSL", "kafka.producer_properties.acks=1"};
  const Config c = load_config(flags, env);

  CHECK(c.kafka.properties == PropertyMap{{"client.id", "delayd-1"},
                                          {"reconnect.backoff.ms", "100"},
                                          {"sasl.mechanism", "PLAIN"},
                                          {"security.protocol", "SSL"},
                                          {"socket.keepalive.enable", "true"}});
  CHECK(c.kafka.consumer_properties == PropertyMap{{"debug", "cgrp,topic"}, {"fetch.wait.max.ms", "20"}});
  CHECK(c.kafka.producer_properties == PropertyMap{{"acks", "1"}, {"linger.ms", "1"}});
  CHECK(c.origins.at("kafka.properties.security.protocol") == "--set");
  CHECK(c.origins.at("kafka.properties.reconnect.backoff.ms") == "env DELAYD_KAFKA_PROPERTIES");
  CHECK_THAT(c.origins.at("kafka.properties.sasl.mechanism"), Catch::StartsWith("file "));

  const KafkaProperties consumer = kafka_properties(c, KafkaClient::consumer);
  CHECK(consumer == KafkaProperties{{"bootstrap.servers", "127.0.0.1:19092"},
                                    {"group.id", "delayd"},
                                    {"client.id", "delayd-1"},
                                    {"reconnect.backoff.ms", "100"},
                                    {"sasl.mechanism", "PLAIN"},
                                    {"security.protocol", "SSL"},
                                    {"socket.keepalive.enable", "true"},
                                    {"debug", "cgrp,topic"},
                                    {"fetch.wait.max.ms", "20"}});
  const KafkaProperties producer = kafka_properties(c, KafkaClient::producer);
  CHECK(producer.at(0) == std::pair<std::string, std::string>{"bootstrap.servers", "127.0.0.1:19092"});
  CHECK(producer.at(1) == std::pair<std::string, std::string>{"message.timeout.ms", "30000"});
  CHECK(producer.back() == std::pair<std::string, std::string>{"linger.ms", "1"});
  const KafkaProperties admin = kafka_properties(c, KafkaClient::admin);
  CHECK(admin.size() == 1 + c.kafka.properties.size());
}

TEST_CASE("a client table overrides kafka.properties for its client only", "[unit][config]") {
  const Config c =
      load_config(with_sets({"kafka.properties.client.id=common", "kafka.producer_properties.client.id=prod"}), {});
  const auto value_of = [](const KafkaProperties& props, const std::string& name) {
    std::vector<std::string> values;
    for (const auto& [k, v] : props) {
      if (k == name) values.push_back(v);
    }
    return values;
  };
  CHECK(value_of(kafka_properties(c, KafkaClient::producer), "client.id") == std::vector<std::string>{"prod"});
  CHECK(value_of(kafka_properties(c, KafkaClient::consumer), "client.id") == std::vector<std::string>{"common"});
}

TEST_CASE("the exact message of a cross-setting error", "[unit][config]") {
  CHECK_THAT(error_of({}, {{"DELAYD_SCHEDULER_LOAD_WINDOW_MS", "999999999"}}),
             Catch::StartsWith("config error: scheduler.load_window_ms = 999999999 (from env "
                               "DELAYD_SCHEDULER_LOAD_WINDOW_MS): must be less than the wheel "
                               "range (16777216 ms"));
  // A larger wheel makes the same window legal.
  CHECK(error_of(with_sets({"wheel.slot_bits=10"}), {{"DELAYD_SCHEDULER_LOAD_WINDOW_MS", "999999999"}}) == "");
}

TEST_CASE("every kind of bad setting is refused with the setting and its source named", "[unit][config]") {
  struct Case {
    std::string toml;  // a file, or empty
    Environment env;   // environment
    std::vector<std::string> sets;
    std::vector<std::string> expected;  // substrings of the message
  };
  // clang-format off
  const std::vector<Case> cases = {
    // Unknown keys: typos must not pass silently.
    {"[kafka]\nbootstrapp = \"x\"\n", {}, {}, {"kafka.bootstrapp", "line 2", "unknown setting", "did you mean kafka.bootstrap?"}},
    {"[kafak]\nbootstrap = \"x\"\n", {}, {}, {"kafak.bootstrap", "unknown setting", "did you mean kafka.bootstrap?"}},
    {"[nonsense]\n", {}, {}, {"[nonsense]", "unknown section"}},
    {"[kafak]\nx = 1\n", {}, {}, {"kafak.x", "unknown section [kafak]; did you mean [kafka]?"}},
    {"", {}, {"sheduler.x=1"}, {"sheduler.x (from --set): unknown section [sheduler]; did you mean [scheduler]?"}},
    {"bootstrap = \"x\"\n", {}, {}, {"bootstrap", "line 1", "did you mean kafka.bootstrap?"}},
    {"[redis]\nurl = \"redis://h\"\n[redis.extra]\nx = 1\n", {}, {}, {"redis.extra", "unknown setting"}},
    {"", {}, {"scheduler.fire_batchh=3"}, {"scheduler.fire_batchh (from --set)", "did you mean scheduler.fire_batch?"}},
    {"", {}, {"fire_batch=3"}, {"fire_batch", "did you mean scheduler.fire_batch?"}},
    {"", {}, {"no-equals-sign"}, {"--set \"no-equals-sign\"", "expected section.key=value"}},
    // Wrong types in the file.
    {"[wheel]\ntick_ms = \"1\"\n", {}, {}, {"wheel.tick_ms", "line 2", "expected an integer, got a string"}},
    {"[wheel]\ntick_ms = 1.5\n", {}, {}, {"wheel.tick_ms", "expected an integer, got a float"}},
    {"[kafka]\ncreate_topics = \"yes\"\n", {}, {}, {"kafka.create_topics", "expected a boolean"}},
    {"[kafka]\nbootstrap = 9092\n", {}, {}, {"kafka.bootstrap", "expected a string, got an integer"}},
    {"kafka = 1\n", {}, {}, {"kafka", "expected a table"}},
    {"[kafka]\nproperties = \"a=b\"\n", {}, {}, {"kafka.properties", "expected a table"}},
    {"[kafka.properties]\n\"linger.ms\" = [1, 2]\n", {}, {}, {"kafka.properties.linger.ms", "expected a string, integer or boolean, got an array"}},
    // Non-numeric or non-boolean environment values.
    {"", {{"DELAYD_SCHEDULER_FIRE_BATCH", "lots"}}, {}, {"scheduler.fire_batch = \"lots\" (from env DELAYD_SCHEDULER_FIRE_BATCH): not an integer"}},
    {"", {{"DELAYD_SCHEDULER_FIRE_BATCH", ""}}, {}, {"DELAYD_SCHEDULER_FIRE_BATCH", "not an integer"}},
    {"", {{"DELAYD_SCHEDULER_FIRE_BATCH", "12abc"}}, {}, {"not an integer"}},
    {"", {{"DELAYD_SCHEDULER_FIRE_BATCH", "99999999999999999999"}}, {}, {"not an integer"}},
    {"", {{"DELAYD_KAFKA_CREATE_TOPICS", "maybe"}}, {}, {"kafka.create_topics", "not a boolean"}},
    {"", {{"DELAYD_KAFKA_PROPERTIES", "a=b,oops"}}, {}, {"kafka.properties", "env DELAYD_KAFKA_PROPERTIES", "\"oops\" has no '='"}},
    {"", {}, {"redis.db=two"}, {"redis.db = \"two\" (from --set): not an integer"}},
    // Out-of-range numbers.
    {"[wheel]\nslot_bits = 3\n", {}, {}, {"wheel.slot_bits = 3 (from file", "must be from 4 to 12"}},
    {"[wheel]\nslot_bits = 13\n", {}, {}, {"wheel.slot_bits = 13", "must be from 4 to 12"}},
    {"", {{"DELAYD_WHEEL_TICK_MS", "0"}}, {}, {"wheel.tick_ms = 0 (from env DELAYD_WHEEL_TICK_MS): must be from 1"}},
    {"", {}, {"scheduler.ingest_batch=0"}, {"scheduler.ingest_batch = 0 (from --set)", "must be from 1"}},
    {"", {}, {"scheduler.load_batch=-1"}, {"scheduler.load_batch = -1", "must be from 1"}},
    {"", {}, {"scheduler.fire_batch=0"}, {"scheduler.fire_batch = 0"}},
    {"", {}, {"scheduler.max_attempts=0"}, {"scheduler.max_attempts = 0"}},
    {"", {}, {"scheduler.max_value_bytes=0"}, {"scheduler.max_value_bytes = 0"}},
    // Sizes that cannot agree: a value that fits the ingest limit must fit a ready record too.
    {"", {}, {"scheduler.max_value_bytes=1000000"},
     {"scheduler.max_value_bytes = 1000000 (from --set)", "message.max.bytes (1000000)", "at most 998976"}},
    {"", {}, {"kafka.producer_properties.message.max.bytes=500000"},
     {"scheduler.max_value_bytes = 990000", "message.max.bytes (500000)"}},
    {"", {}, {"kafka.allowed_businesses=orders, bad name"}, {"kafka.allowed_businesses", "comma-separated list"}},
    {"", {}, {"kafka.topic_partitions=0"}, {"kafka.topic_partitions = 0", "must be from 1"}},
    {"", {}, {"kafka.topic_replication=0"}, {"kafka.topic_replication = 0"}},
    {"", {}, {"kafka.message_timeout_ms=0"}, {"kafka.message_timeout_ms = 0"}},
    {"", {}, {"redis.timeout_ms=0"}, {"redis.timeout_ms = 0"}},
    {"", {}, {"redis.db=-1"}, {"redis.db = -1", "must be from 0"}},
    {"", {}, {"redis.job_retention_s=-5"}, {"redis.job_retention_s = -5"}},
    {"", {}, {"scheduler.load_window_ms=0"}, {"scheduler.load_window_ms = 0", "must be from 1"}},
    {"", {}, {"scheduler.load_window_ms=16777216"}, {"scheduler.load_window_ms = 16777216 (from --set): must be less than the wheel range (16777216 ms"}},
    {"", {}, {"scheduler.retry_backoff_ms=5000", "scheduler.retry_backoff_max_ms=100"}, {"scheduler.retry_backoff_max_ms = 100", "must not be less than scheduler.retry_backoff_ms"}},
    // Bad strings.
    {"", {}, {"kafka.ready_topic_template=ready"}, {"kafka.ready_topic_template = \"ready\" (from --set): must contain {business} exactly once"}},
    {"", {}, {"kafka.ready_topic_template={business}.{business}"}, {"exactly once"}},
    {"", {}, {"kafka.ready_topic_template=ready/{business}"}, {"kafka.ready_topic_template", "legal Kafka topic name"}},
    {"", {}, {"kafka.ready_topic_template=" + std::string(150, 'x') + "{business}"}, {"at most 249"}},
    {"", {}, {"kafka.ready_topic_template=__{business}"}, {"legal Kafka topic name"}},
    {"", {}, {"kafka.ingest_topic=in put"}, {"kafka.ingest_topic = \"in put\"", "legal Kafka topic name"}},
    {"", {}, {"kafka.dlq_topic=delay-ingest"}, {"kafka.dlq_topic", "must differ from kafka.ingest_topic"}},
    {"", {}, {"kafka.ingest_topics=a:etf2"}, {"kafka.ingest_topics = \"a:etf2\"", "entry \"a:etf2\": the format must be delayd, etf1 or chronos"}},
    {"", {}, {"kafka.ingest_topics=a b"}, {"kafka.ingest_topics", "entry \"a b\": the topic must be a legal Kafka topic name"}},
    {"", {}, {"kafka.ingest_topics=s:etf1,s"}, {"kafka.ingest_topics", "names topic s twice"}},
    {"", {}, {"kafka.ingest_topics=delay-status"}, {"kafka.ingest_topics", "kafka.dlq_topic or kafka.status_topic"}},
    {"", {}, {"kafka.ingest_topics=c:chronos"}, {"chronos.output_topic = \"\"", "must be set: kafka.ingest_topics has a chronos topic"}},
    {"", {}, {"etf1.past_due=later"}, {"etf1.past_due = \"later\"", "must be fire or drop"}},
    {"", {}, {"kafka.bootstrap="}, {"kafka.bootstrap = \"\"", "must not be empty"}},
    {"", {}, {"kafka.group_id="}, {"kafka.group_id", "must not be empty"}},
    {"", {}, {"kafka.group_instance_id=a b"}, {"kafka.group_instance_id = \"a b\"", "1-249 characters of [A-Za-z0-9._-]"}},
    {"", {}, {"kafka.group_instance_id=.."}, {"kafka.group_instance_id = \"..\"", "not \".\" or \"..\""}},
    {"", {}, {"kafka.group_instance_id=" + std::string(250, 'm')}, {"kafka.group_instance_id", "1-249"}},
    {"", {}, {"redis.prefix=a:b"}, {"redis.prefix = \"a:b\"", "[A-Za-z0-9._-]"}},
    {"", {}, {"redis.prefix="}, {"redis.prefix"}},
    {"", {}, {"redis.prefix=" + std::string(65, 'p')}, {"redis.prefix", "1-64"}},
    {"", {{"DELAYD_REDIS_URL", "http://h:1"}}, {}, {"redis.url = \"http://h:1\" (from env DELAYD_REDIS_URL): must start with redis://"}},
    {"", {}, {"redis.url=redis://h:0"}, {"redis.url", "port must be"}},
    {"", {}, {"redis.url=redis://h:99999"}, {"port must be"}},
    {"", {}, {"redis.url=redis://h:12/x"}, {"database number"}},
    {"", {}, {"redis.url=redis://:secret@"}, {"missing host"}},
    {"", {}, {"redis.url=redis://justasecret@h"}, {"user:password"}},
    {"", {}, {"log.level=verbose"}, {"log.level = \"verbose\" (from --set): must be one of trace, debug, info, warn, error"}},
    {"", {}, {"log.level=INFO"}, {"log.level"}},
    // Passthrough entries that would fight delayd's own settings.
    {"", {}, {"kafka.properties.bootstrap.servers=x:1"}, {"kafka.properties.bootstrap.servers", "use kafka.bootstrap"}},
    {"", {}, {"kafka.consumer_properties.group.id=g"}, {"use kafka.group_id"}},
    {"", {}, {"kafka.consumer_properties.group.instance.id=m"}, {"use kafka.group_instance_id"}},
    {"", {}, {"kafka.producer_properties.message.timeout.ms=5"}, {"use kafka.message_timeout_ms"}},
    {"", {}, {"kafka.properties.bad name=1"}, {"property name"}},
  };
  // clang-format on
  for (const auto& c : cases) {
    ConfigFlags flags = with_sets(c.sets);
    std::optional<TempFile> file;
    if (!c.toml.empty()) {
      file.emplace(c.toml);
      flags.config_file = file->path();
    }
    const std::string message = error_of(flags, c.env);
    INFO("toml: " << c.toml << "\nsets: " << (c.sets.empty() ? "" : c.sets.front()) << "\nmessage: " << message);
    REQUIRE_THAT(message, Catch::StartsWith("config error: "));
    for (const auto& part : c.expected) CHECK_THAT(message, Catch::Contains(part));
  }
}

TEST_CASE("a file that cannot be read or parsed is an error", "[unit][config]") {
  SECTION("missing file, named by --config") {
    ConfigFlags flags;
    flags.config_file = "/nonexistent/delayd.toml";
    const std::string m = error_of(flags);
    CHECK_THAT(m, Catch::Contains("/nonexistent/delayd.toml"));
    CHECK_THAT(m, Catch::Contains("(from --config)"));
    CHECK_THAT(m, Catch::Contains("No such file"));
  }
  SECTION("missing file, named by DELAYD_CONFIG") {
    CHECK_THAT(error_of({}, {{"DELAYD_CONFIG", "/nonexistent/x.toml"}}), Catch::Contains("(from env DELAYD_CONFIG)"));
  }
  SECTION("a directory") {
    ConfigFlags flags;
    flags.config_file = std::filesystem::temp_directory_path().string();
    CHECK_THAT(error_of(flags), Catch::StartsWith("config error: config file"));
  }
  SECTION("TOML syntax error, with toml11's line information") {
    const std::string m = toml_error("[kafka]\nbootstrap = \"unterminated\n");
    CHECK_THAT(m, Catch::Contains("not valid TOML"));
    CHECK_THAT(m, Catch::Contains(" 2 |"));
  }
  SECTION("a key defined twice") {
    CHECK_THAT(toml_error("[log]\nlevel = \"info\"\nlevel = \"debug\"\n"), Catch::Contains("not valid TOML"));
  }
  SECTION("an integer too large for 64 bits") {
    // toml11 3.7 saturates such integers instead of refusing them; delayd must not.
    const std::string m = toml_error("[wheel]\ntick_ms = 99999999999999999999\n");
    CHECK_THAT(m, Catch::Contains("wheel.tick_ms (from file"));
    CHECK_THAT(m, Catch::Contains("beyond the 64-bit range"));
    CHECK_THAT(toml_error("[kafka.properties]\n\"linger.ms\" = -99999999999999999999\n"),
               Catch::Contains("beyond the 64-bit range"));
  }
}

TEST_CASE("the last value is validated, not an overridden one", "[unit][config]") {
  TempFile file("[wheel]\nslot_bits = 40\n");
  CHECK(error_of(with_file(file), {{"DELAYD_WHEEL_SLOT_BITS", "9"}}) == "");
}

TEST_CASE("unknown DELAYD_ variables are warnings, not errors", "[unit][config]") {
  const Config c = load_config({}, {{"DELAYD_KAFKA_BOOTSTRAPP", "x"}, {"DELAYD_CONFIG_X", "1"}});
  REQUIRE(c.warnings.size() == 2);
  CHECK_THAT(c.warnings[0], Catch::Contains("DELAYD_CONFIG_X"));
  CHECK_THAT(c.warnings[1], Catch::Contains("DELAYD_KAFKA_BOOTSTRAPP"));
}

TEST_CASE("process_environment reads the DELAYD_ variables", "[unit][config]") {
  ::setenv("DELAYD_UNIT_TEST_PROBE", "a=b", 1);
  ::setenv("NOT_DELAYD_UNIT_TEST_PROBE", "x", 1);
  const Environment env = process_environment();
  ::unsetenv("DELAYD_UNIT_TEST_PROBE");
  ::unsetenv("NOT_DELAYD_UNIT_TEST_PROBE");
  CHECK(env.at("DELAYD_UNIT_TEST_PROBE") == "a=b");
  CHECK(env.count("NOT_DELAYD_UNIT_TEST_PROBE") == 0);
}

TEST_CASE("env booleans and integers", "[unit][config]") {
  CHECK_FALSE(load_config({}, {{"DELAYD_KAFKA_CREATE_TOPICS", "false"}}).kafka.create_topics);
  CHECK_FALSE(load_config({}, {{"DELAYD_KAFKA_CREATE_TOPICS", "0"}}).kafka.create_topics);
  CHECK(load_config({}, {{"DELAYD_KAFKA_CREATE_TOPICS", "TRUE"}}).kafka.create_topics);
  CHECK(load_config({}, {{"DELAYD_REDIS_DB", "0"}}).redis.db == 0);
  CHECK(load_config({}, {{"DELAYD_REDIS_JOB_RETENTION_S", "0"}}).redis.job_retention_s == 0);
}

TEST_CASE("redis urls", "[unit][config]") {
  CHECK(delayd::redis::parse_redis_url("redis://h") == delayd::redis::RedisOptions{"h", 6379, "", "", 0, 2000, {}});
  CHECK(delayd::redis::parse_redis_url("redis://h:7000/") ==
        delayd::redis::RedisOptions{"h", 7000, "", "", 0, 2000, {}});
  CHECK(delayd::redis::parse_redis_url("redis://:pw@h:1/2") ==
        delayd::redis::RedisOptions{"h", 1, "", "pw", 2, 2000, {}});
  CHECK(delayd::redis::parse_redis_url("redis://alice:pw@h") ==
        delayd::redis::RedisOptions{"h", 6379, "alice", "pw", 0, 2000, {}});
  CHECK(delayd::redis::parse_redis_url("redis://u:p%40ss%3Aw@h") ==
        delayd::redis::RedisOptions{"h", 6379, "u", "p@ss:w", 0, 2000, {}});
  CHECK(delayd::redis::parse_redis_url("redis://u:p@ss@h") ==
        delayd::redis::RedisOptions{"h", 6379, "u", "p@ss", 0, 2000, {}});
  CHECK(delayd::redis::parse_redis_url("redis://[::1]:6380/4") ==
        delayd::redis::RedisOptions{"::1", 6380, "", "", 4, 2000, {}});
  CHECK(delayd::redis::parse_redis_url("redis://[::1]") ==
        delayd::redis::RedisOptions{"::1", 6379, "", "", 0, 2000, {}});
  for (const char* bad : {"", "redis:/h", "redis+tls://h", "redis://", "redis://h:", "redis://h:x", "redis://h:65536",
                          "redis://h/-1", "redis://h/1/2", "redis://h/1?x=1", "redis://[::1", "redis://[::1]x",
                          "redis://pw@h", "redis://:p%4@h", "redis://h h"}) {
    INFO(bad);
    CHECK_THROWS_AS(delayd::redis::parse_redis_url(bad), std::invalid_argument);
  }
}

TEST_CASE("redis.password and redis.db override the url", "[unit][config]") {
  const Config c = load_config(with_sets({"redis.url=redis://u:urlpw@h:1/3", "redis.password=flagpw"}), {});
  CHECK(redis_options(c) == delayd::redis::RedisOptions{"h", 1, "u", "flagpw", 3, 2000, {}});
  const Config d = load_config(with_sets({"redis.url=redis://:urlpw@h:1/3", "redis.db=0"}), {});
  CHECK(redis_options(d) == delayd::redis::RedisOptions{"h", 1, "", "urlpw", 0, 2000, {}});
}

TEST_CASE("printing the config masks secrets", "[unit][config]") {
  ConfigFlags flags = with_sets({"redis.url=redis://u:urlsecret@h:1/3", "redis.password=pwsecret",
                                 "kafka.properties.sasl.password=saslsecret", "kafka.properties.sasl.username=bob"});
  flags.print_config = "toml";
  const Config c = load_config(flags, {});
  for (auto format : {ConfigFormat::toml, ConfigFormat::json}) {
    const std::string out = render_config(c, format);
    INFO(out);
    CHECK_THAT(out, !Catch::Contains("secret"));
    CHECK_THAT(out, Catch::Contains("redis://u:***@h:1/3"));
    CHECK_THAT(out, Catch::Contains("bob"));
  }
  std::ostringstream printed;
  CHECK(print_config_if_asked(flags, c, printed));
  CHECK_THAT(printed.str(), Catch::Contains("password = \"***\"  # --set"));
  CHECK_THAT(printed.str(), Catch::Contains("\"sasl.password\" = \"***\""));

  std::ostringstream nothing;
  CHECK_FALSE(print_config_if_asked({}, c, nothing));
  CHECK(nothing.str().empty());

  // Errors mask them too.
  CHECK_THAT(error_of(with_sets({"redis.url=redis://u:topsecret@h:0"})), !Catch::Contains("topsecret"));
}

TEST_CASE("the printed TOML is a config file that loads back to the same settings", "[unit][config]") {
  const Config original =
      load_config(with_sets({"kafka.bootstrap=a:1,b:2", "kafka.create_topics=false", "redis.db=2",
                             "scheduler.fire_batch=42", "kafka.properties.security.protocol=SSL",
                             "kafka.consumer_properties.debug=\"quoted\"\\back", "log.level=trace"}),
                  {});
  const Config reloaded = load_toml(render_config(original, ConfigFormat::toml));
  CHECK(render_config(reloaded, ConfigFormat::json) == render_config(original, ConfigFormat::json));
  CHECK(reloaded.kafka.consumer_properties.at("debug") == "\"quoted\"\\back");
}

TEST_CASE("mask_redis_url", "[unit][config]") {
  CHECK(mask_redis_url("redis://h:1") == "redis://h:1");
  CHECK(mask_redis_url("redis://:pw@h:1") == "redis://:***@h:1");
  CHECK(mask_redis_url("redis://user:pw@h") == "redis://user:***@h");
  CHECK(mask_redis_url("redis://pw@h") == "redis://***@h");
  CHECK(mask_redis_url("redis://u:p@w@h/2") == "redis://u:***@h/2");
  CHECK(mask_redis_url("nonsense") == "nonsense");
}

TEST_CASE("redis-cluster urls, and the replica wait", "[unit][config]") {
  // The endpoint of a cluster url is its first seed; the client reads the others (redis_options.hpp).
  CHECK(delayd::redis::parse_redis_url("redis-cluster://:pw@a:1,b:2") ==
        delayd::redis::RedisOptions{"a", 1, "", "pw", 0, 2000, {}});
  CHECK(load_config(with_sets({"redis.url=redis-cluster://a:1,b:2,c:3"}), {}).redis.url ==
        "redis-cluster://a:1,b:2,c:3");
  CHECK_THROWS_AS(load_config(with_sets({"redis.url=redis-cluster://a:1/1"}), {}), ConfigError);
  CHECK_THROWS_AS(load_config(with_sets({"redis.url=redis-cluster://a:1", "redis.db=2"}), {}), ConfigError);
  CHECK(load_config(with_sets({"redis.url=redis-cluster://a:1", "redis.db=0"}), {}).redis.db == 0);

  const Config d = load_config({}, {});
  CHECK(d.redis.wait_replicas == 0);
  CHECK(d.redis.wait_timeout_ms == 1000);
  CHECK(load_config({}, {{"DELAYD_REDIS_WAIT_REPLICAS", "1"}}).redis.wait_replicas == 1);
  CHECK_THROWS_AS(load_config({}, {{"DELAYD_REDIS_WAIT_REPLICAS", "17"}}), ConfigError);
  CHECK_THROWS_AS(load_config({}, {{"DELAYD_REDIS_WAIT_TIMEOUT_MS", "0"}}), ConfigError);
}

TEST_CASE("admin settings: defaults, bounds, and the token is a secret", "[unit][config]") {
  const Config d = load_config({}, {});
  CHECK(d.admin.listen.empty());
  CHECK(d.admin.token.empty());
  CHECK(d.admin.max_connections == 64);
  CHECK(d.admin.read_timeout_ms == 5000);
  CHECK(d.admin.max_header_bytes == 8192);
  CHECK(d.admin.max_body_bytes == 4096);

  const Config c =
      load_config(with_sets({"admin.listen=127.0.0.1:9464", "admin.max_connections=8", "admin.read_timeout_ms=250",
                             "admin.max_header_bytes=4096", "admin.max_body_bytes=0"}),
                  {{"DELAYD_ADMIN_TOKEN", "tok-topsecret"}});
  CHECK(c.admin.token == "tok-topsecret");
  CHECK(c.admin.max_connections == 8);
  CHECK(c.admin.read_timeout_ms == 250);
  CHECK(c.admin.max_header_bytes == 4096);
  CHECK(c.admin.max_body_bytes == 0);
  for (auto format : {ConfigFormat::toml, ConfigFormat::json}) {
    const std::string out = render_config(c, format);
    INFO(out);
    CHECK_THAT(out, !Catch::Contains("topsecret"));
  }

  CHECK_THAT(error_of(with_sets({"admin.max_connections=0"})), Catch::Contains("admin.max_connections"));
  CHECK_THAT(error_of(with_sets({"admin.read_timeout_ms=0"})), Catch::Contains("admin.read_timeout_ms"));
  CHECK_THAT(error_of(with_sets({"admin.max_header_bytes=100"})), Catch::Contains("admin.max_header_bytes"));
  CHECK_THAT(error_of(with_sets({"admin.max_body_bytes=-1"})), Catch::Contains("admin.max_body_bytes"));
}

TEST_CASE("admin tokens from files: read at start-up, the trailing newline trimmed, masked", "[unit][config]") {
  TempFile admin_file("tok-admin-topsecret\n");
  TempFile read_file("tok-read-topsecret\r\n");
  const Config c = load_config(with_sets({"admin.token_file=" + admin_file.path()}),
                               {{"DELAYD_ADMIN_READ_TOKEN_FILE", read_file.path()}});
  CHECK(c.admin.token == "tok-admin-topsecret");
  CHECK(c.admin.read_token == "tok-read-topsecret");
  CHECK(c.admin.token_file == admin_file.path());
  CHECK(c.origins.at("admin.token") == "admin.token_file " + admin_file.path());
  CHECK(c.origins.at("admin.read_token_file") == "env DELAYD_ADMIN_READ_TOKEN_FILE");
  for (auto format : {ConfigFormat::toml, ConfigFormat::json}) {
    const std::string out = render_config(c, format);
    INFO(out);
    CHECK_THAT(out, !Catch::Contains("topsecret"));
    CHECK_THAT(out, Catch::Contains(admin_file.path()) && Catch::Contains(read_file.path()));
  }
  CHECK_THAT(render_config(c, ConfigFormat::toml),
             Catch::Contains("token = \"***\"  # admin.token_file " + admin_file.path()));

  // Only the newline goes: other whitespace is part of the token.
  TempFile spaced(" tok \n\n");
  CHECK(load_config(with_sets({"admin.token_file=" + spaced.path()}), {}).admin.token == " tok ");
  // The read token from the environment, masked like the admin token.
  const Config e = load_config({}, {{"DELAYD_ADMIN_READ_TOKEN", "tok-env-topsecret"}});
  CHECK(e.admin.read_token == "tok-env-topsecret");
  CHECK_THAT(render_config(e, ConfigFormat::json), !Catch::Contains("topsecret"));
  CHECK_THAT(render_config(e, ConfigFormat::toml),
             Catch::Contains("read_token = \"***\"  # env DELAYD_ADMIN_READ_TOKEN"));
}

TEST_CASE("kafka.sasl_password_file: read at start-up into every client's sasl.password, masked", "[unit][config]") {
  TempFile file("pw-kafka-topsecret\n");
  const Config c = load_config(with_sets({"kafka.sasl_password_file=" + file.path()}), {});
  CHECK(c.kafka.sasl_password == "pw-kafka-topsecret");
  CHECK(c.origins.at("kafka.sasl_password") == "kafka.sasl_password_file " + file.path());
  for (auto client : {KafkaClient::consumer, KafkaClient::producer, KafkaClient::admin}) {
    const KafkaProperties props = kafka_properties(c, client);
    CHECK(std::count(props.begin(), props.end(),
                     std::pair<std::string, std::string>("sasl.password", "pw-kafka-topsecret")) == 1);
  }
  for (auto format : {ConfigFormat::toml, ConfigFormat::json}) {
    const std::string out = render_config(c, format);
    INFO(out);
    CHECK_THAT(out, !Catch::Contains("topsecret") && Catch::Contains(file.path()));
  }
  // Without it, no sasl.password at all.
  const KafkaProperties none = kafka_properties(load_config({}, {}), KafkaClient::consumer);
  CHECK(std::none_of(none.begin(), none.end(), [](const auto& p) { return p.first == "sasl.password"; }));

  const std::string both = error_of(with_sets({"kafka.sasl_password_file=" + file.path()}),
                                    {{"DELAYD_KAFKA_SASL_PASSWORD", "pw-env-topsecret"}});
  CHECK_THAT(
      both, Catch::Contains("kafka.sasl_password (from env DELAYD_KAFKA_SASL_PASSWORD) and kafka.sasl_password_file") &&
                Catch::Contains("both are set") && !Catch::Contains("topsecret"));
  const std::string twice =
      error_of(with_sets({"kafka.sasl_password=a-topsecret", "kafka.properties.sasl.password=b-topsecret"}));
  CHECK_THAT(twice, Catch::Contains("kafka.properties.sasl.password") && Catch::Contains("give the password once") &&
                        !Catch::Contains("topsecret"));
  TempFile empty("\n");
  CHECK_THAT(error_of(with_sets({"kafka.sasl_password_file=" + empty.path()})), Catch::Contains("the file is empty"));
}

TEST_CASE("admin tokens from files: both a token and its file, a missing or empty file, are errors", "[unit][config]") {
  TempFile file("tok-file\n");
  const std::string both =
      error_of(with_sets({"admin.token_file=" + file.path()}), {{"DELAYD_ADMIN_TOKEN", "tok-env-topsecret"}});
  CHECK_THAT(both, Catch::Contains("admin.token (from env DELAYD_ADMIN_TOKEN) and admin.token_file = \"" + file.path() +
                                   "\" (from --set)") &&
                       Catch::Contains("both are set"));
  CHECK_THAT(both, !Catch::Contains("topsecret"));
  CHECK_THAT(error_of(with_sets({"admin.read_token=x", "admin.read_token_file=" + file.path()})),
             Catch::Contains("admin.read_token (from --set) and admin.read_token_file"));

  const std::string missing = "/nonexistent/delayd-token-" + std::to_string(::getpid());
  CHECK_THAT(error_of(with_sets({"admin.token_file=" + missing})),
             Catch::Contains("admin.token_file = \"" + missing + "\" (from --set): cannot open: No such file"));
  CHECK_THAT(error_of({}, {{"DELAYD_ADMIN_READ_TOKEN_FILE", missing}}),
             Catch::Contains("admin.read_token_file = \"" + missing + "\" (from env DELAYD_ADMIN_READ_TOKEN_FILE)"));
  TempFile empty("\n");
  CHECK_THAT(error_of(with_sets({"admin.token_file=" + empty.path()})),
             Catch::Contains("admin.token_file = \"" + empty.path() + "\"") && Catch::Contains("the file is empty"));
  CHECK_THAT(error_of(with_sets({"admin.token_file=" + std::filesystem::temp_directory_path().string()})),
             Catch::Contains("admin.token_file") && Catch::Contains("cannot read"));

  // The read token must not be the admin token (it would grant everything).
  const std::string same =
      error_of(with_sets({"admin.token=tok-same-topsecret", "admin.read_token=tok-same-topsecret"}));
  CHECK_THAT(same, Catch::Contains("admin.read_token") && Catch::Contains("must differ from admin.token"));
  CHECK_THAT(same, !Catch::Contains("topsecret"));
}

TEST_CASE("kafka.ingest_topics: a TOML array or a comma list, each <topic>[:<format>]", "[unit][config]") {
  using delayd::config::IngestFormat;
  using delayd::config::IngestTopic;
  const Config file = load_toml(R"(
[kafka]
ingest_topic = "in"
ingest_topics = ["schedules:etf1", "chronos.in:chronos", "more"]
[chronos]
output_topic = "out"
)");
  const std::vector<IngestTopic> want{{"in", IngestFormat::delayd},
                                      {"schedules", IngestFormat::etf1},
                                      {"chronos.in", IngestFormat::chronos},
                                      {"more", IngestFormat::delayd}};
  CHECK(ingest_topics(file) == want);
  CHECK(file.kafka.ingest_topics == "schedules:etf1,chronos.in:chronos,more");
  const Config env = load_toml("", {{"DELAYD_KAFKA_INGEST_TOPICS", "schedules:etf1, in:etf1"}});
  CHECK(ingest_topics(env) == std::vector<IngestTopic>{{"delay-ingest", IngestFormat::delayd},
                                                       {"schedules", IngestFormat::etf1},
                                                       {"in", IngestFormat::etf1}});
  // Naming kafka.ingest_topic sets its format.
  CHECK(ingest_topics(load_toml("", {{"DELAYD_KAFKA_INGEST_TOPICS", "delay-ingest:etf1"}})) ==
        std::vector<IngestTopic>{{"delay-ingest", IngestFormat::etf1}});
  CHECK(ingest_topics(Config{}) == std::vector<IngestTopic>{{"delay-ingest", IngestFormat::delayd}});
  CHECK_THROWS_WITH(load_toml("[kafka]\ningest_topics = [\"a\", 3]\n"), Catch::Contains("kafka.ingest_topics"));
  // The printed configuration loads back.
  CHECK(ingest_topics(load_toml(render_config(file, ConfigFormat::toml))) == want);
}

TEST_CASE("log.format is text or json", "[config]") {
  CHECK(load_config({}, {}).log.format == "text");
  CHECK(load_config(with_sets({"log.format=json"}), {}).log.format == "json");
  CHECK(load_config({}, {{"DELAYD_LOG_FORMAT", "json"}}).log.format == "json");
  CHECK_THROWS_WITH(load_config(with_sets({"log.format=xml"}), {}), Catch::Contains("must be text or json"));
}

TEST_CASE("redis.password_file and the TLS settings: read, passed to the connection, checked against the url",
          "[unit][config]") {
  TempFile password("redis-topsecret\n");
  const Config c = load_config(with_sets({"redis.password_file=" + password.path()}), {});
  CHECK(c.redis.password == "redis-topsecret");
  CHECK(redis_options(c).password == "redis-topsecret");
  CHECK_THAT(render_config(c, ConfigFormat::toml), !Catch::Contains("topsecret"));
  CHECK_THAT(error_of(with_sets({"redis.password=x", "redis.password_file=" + password.path()})),
             Catch::Contains("both are set"));

  // A TLS setting with a plain url would be ignored: refused, naming the setting.
  CHECK_THAT(error_of(with_sets({"redis.tls_ca_file=/etc/ssl/certs/ca-certificates.crt"})),
             Catch::Contains("redis.tls_ca_file") && Catch::Contains("not a TLS url"));
  CHECK_THAT(error_of({}, {{"DELAYD_REDIS_TLS_VERIFY", "false"}}), Catch::Contains("redis.tls_verify"));
  // A TLS url whose files cannot be used fails at start-up, naming the setting and the file.
  const std::string missing = "/nonexistent/delayd-ca-" + std::to_string(::getpid()) + ".pem";
  CHECK_THAT(error_of(with_sets({"redis.url=rediss://h:6380", "redis.tls_ca_file=" + missing})),
             Catch::Contains("redis.tls_ca_file") && Catch::Contains(missing));
  CHECK_THAT(error_of(with_sets({"redis.url=rediss://h:6380", "redis.tls_cert_file=" + password.path()})),
             Catch::Contains("redis.tls_key_file") && Catch::Contains("both its certificate file and its key file"));
  // The settings reach the connection; the url says TLS.
  const Config t = load_config(with_sets({"redis.url=redis-cluster+tls://a:1,b:2",
                                          "redis.tls_server_name=cache.internal", "redis.tls_verify=false"}),
                               {});
  const delayd::redis::RedisOptions o = redis_options(t);
  CHECK(o.tls.enabled);
  CHECK(o.tls.server_name == "cache.internal");
  CHECK_FALSE(o.tls.verify);
  CHECK_THAT(error_of(with_sets({"redis.url=redis-cluster+tls://a:1", "redis.db=2"})), Catch::Contains("redis.db"));
}

TEST_CASE("the mark stage gathers 20 ms with exactly_once, not at all with at_least_once, unless set",
          "[unit][config]") {
  CHECK(mark_gather_ms(load_config({}, {})) == kMarkGatherExactlyOnceMs);
  CHECK(mark_gather_ms(load_config({}, {{"DELAYD_KAFKA_DELIVERY", "at_least_once"}})) == 0);
  CHECK(mark_gather_ms(load_config(
            {}, {{"DELAYD_KAFKA_DELIVERY", "at_least_once"}, {"DELAYD_SCHEDULER_MARK_GATHER_MS", "15"}})) == 15);
  CHECK(mark_gather_ms(load_config({}, {{"DELAYD_SCHEDULER_MARK_GATHER_MS", "0"}})) == 0);
  CHECK_THAT(error_of({}, {{"DELAYD_SCHEDULER_MARK_GATHER_MS", "1001"}}), Catch::Contains("scheduler.mark_gather_ms"));
}
