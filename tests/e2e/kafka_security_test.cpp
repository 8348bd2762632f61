// delayd against a Kafka that authenticates (SASL_SSL, SCRAM-SHA-512) and authorizes (ACLs):
// the stack started with DELAYD_KAFKA_SASL=1 (scripts/test.sh --sasl). Each case takes one
// thing away from delayd's user (its password, an ACL), and checks that delayd says so in one
// log line naming what was refused, that /readyz answers 503 with that reason, that it stays up,
// and that once the thing is given back (without a restart) every job goes out exactly once.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "harness.hpp"
#include "support/requires.hpp"

using namespace delayd::e2e;
using delayd::testing::AclResource;

#ifndef DELAYD_SOURCE_DIR
#error "DELAYD_SOURCE_DIR must name the source tree (for scripts/stack.sh)"
#endif

namespace {

const delayd::testing::KafkaSecurity& security() {
  static const delayd::testing::KafkaSecurity s = delayd::testing::kafka_security();
  delayd::testing::require_setup(!s.protocol.empty(),
                                 "KAFKA_SECURITY_PROTOCOL is not set: these tests need the stack started with "
                                 "DELAYD_KAFKA_SASL=1 and its env exported (scripts/test.sh --sasl does both)");
  return s;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

// Waits until `path` holds `needle`; false after the timeout.
bool log_says(const std::string& path, const std::string& needle, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (read_all(path).find(needle) == std::string::npos) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return true;
}

// Waits until GET /readyz answers with a body holding `needle`; returns the last answer.
std::string readyz_until(std::uint16_t port, const std::string& needle, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string got = http_get(port, "/readyz");
  while (got.find(needle) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    got = http_get(port, "/readyz");
  }
  return got;
}

// `n` jobs of `business` due from now on, published as the stack's admin; their ids.
std::vector<std::string> publish(const World& w, const std::string& prefix, int n,
                                 const std::string& business = "orders") {
  Publisher pub(w);
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) {
    ids.push_back(prefix + std::to_string(i));
    pub.send(job_at(ids.back(), now_ms() + 200 + 20 * i, "v" + std::to_string(i), std::nullopt, business));
  }
  pub.flush();
  return ids;
}

// Every id arrives on the ready topic exactly once.
void expect_all_delivered_once(Collector& ready, const std::vector<std::string>& ids) {
  REQUIRE(ready.collect_until([&](const auto& recs) { return recs.size() >= ids.size(); }, std::chrono::seconds(60)));
  ready.collect_until([](const auto&) { return false; }, std::chrono::milliseconds(500));  // duplicates, if any
  for (const auto& id : ids) {
    INFO(id);
    CHECK(values_of(ready.records(), id).size() == 1);
  }
  CHECK(ready.records().size() == ids.size());
}

// Runs scripts/stack.sh with `args` (the stack's Kafka tools as its admin user).
void stack(const std::string& args) {
  const std::string cmd = std::string(DELAYD_SOURCE_DIR) + "/scripts/stack.sh " + args + " >/dev/null";
  INFO(cmd);
  REQUIRE(std::system(cmd.c_str()) == 0);
}

// Prints delayd's refusal line and /readyz's body (the figures scripts/test.sh shows).
void show(const World& w, const std::string& what, const std::string& readyz) {
  std::istringstream in(read_all(w.log_path));
  for (std::string line; std::getline(in, line);) {
    if (line.find(what) != std::string::npos) std::cout << "kafka security: log: " << line << "\n";
  }
  std::cout << "kafka security: /readyz: " << readyz.substr(readyz.find("\r\n\r\n") + 4);
}

// One refusal line in delayd's log, naming `what`; the sentence starts with "Kafka refused", and
// no other line speaks of the refusal (librdkafka repeats it at every retry).
void expect_one_refusal_line(const World& w, const std::string& what) {
  const std::string log = read_all(w.log_path);
  INFO(log);
  CHECK(count_of(log, what) == 1);
  CHECK(count_of(log, "Kafka refused") == 1);
  std::size_t lines = 0;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.find(" debug ") != std::string::npos) continue;
    for (const char* word : {"refused", "authentication", "authorization", "brokers are down", "fatal"}) {
      if (line.find(word) != std::string::npos) {
        ++lines;
        break;
      }
    }
  }
  CHECK(lines == 1);
}

// While a refusal lasts: /readyz 503 naming the outage and the refusal, no job of `ready`'s topic
// delivered for 3 s (retries spend no attempt and write no second line), delayd running, one
// refusal line.
void expect_refused(const World& w, std::uint16_t admin, DelaydProcess& delayd, Collector& ready,
                    const std::string& outage, const std::string& refused) {
  const std::string readyz = readyz_until(admin, refused, std::chrono::seconds(10));
  CHECK_THAT(readyz, Catch::StartsWith("HTTP/1.0 503") && Catch::Contains("not ready: outage of " + outage) &&
                         Catch::Contains(refused));
  ready.collect_until([](const auto&) { return false; }, std::chrono::seconds(3));
  CHECK(ready.records().empty());
  CHECK(delayd.running());
  expect_one_refusal_line(w, refused);
  show(w, refused, readyz);
}

// Once the cause is fixed, without a restart: every job of `ids` delivered once, /readyz 200, the
// outage's end logged, delayd running, still one refusal line.
void expect_recovered(const World& w, std::uint16_t admin, DelaydProcess& delayd, Collector& ready,
                      const std::vector<std::string>& ids, const std::string& outage, const std::string& refused) {
  expect_all_delivered_once(ready, ids);
  CHECK_THAT(readyz_until(admin, "ready\n", std::chrono::seconds(10)), Catch::StartsWith("HTTP/1.0 200"));
  CHECK(log_says(w.log_path, outage + " is back", std::chrono::seconds(5)));
  CHECK(delayd.running());
  expect_one_refusal_line(w, refused);
}

}  // namespace

TEST_CASE("without Write on its ready topic delayd says so once, is not ready, and delivers all once granted",
          "[e2e][kafka-security]") {
  const auto& sec = security();
  World w("acl-write");
  const std::uint16_t admin = free_port();
  w.settings["DELAYD_ADMIN_LISTEN"] = "127.0.0.1:" + std::to_string(admin);
  w.grant_acls = false;
  w.create_topics({"orders", "mail"});
  const auto admin_props = delayd::testing::kafka_client_properties(w.bootstrap);
  std::vector<delayd::testing::Acl> granted;
  for (const auto& acl : w.delayd_acls({"orders", "mail"})) {
    if (acl.name != w.ready_topic("orders")) granted.push_back(acl);
  }
  delayd::testing::set_acls(admin_props, sec.delayd_user, granted);

  DelaydProcess delayd(w);
  delayd.start();
  Collector ready(w, {w.ready_topic("orders")});
  Collector mail(w, {w.ready_topic("mail")});
  const auto ids = publish(w, "w-", 20);
  // Another business, whose topic delayd may write: its jobs go out meanwhile, and do not end
  // (nor restart) the outage of the refused one.
  const auto mail_ids = publish(w, "m-", 20, "mail");
  expect_all_delivered_once(mail, mail_ids);
  const auto more_mail = publish(w, "m2-", 5, "mail");

  const std::string refused = "Kafka refused Write on topic " + w.ready_topic("orders") + " to user " +
                              sec.delayd_user + " (SASL " + sec.mechanism + ")";
  REQUIRE(log_says(w.log_path, refused, std::chrono::seconds(30)));
  expect_refused(w, admin, delayd, ready, "kafka (deliveries)", refused);

  CHECK(read_all(w.log_path).find("kafka (deliveries) is back") == std::string::npos);
  CHECK_THAT(http_get(admin, "/readyz"), Catch::StartsWith("HTTP/1.0 503") && Catch::Contains(refused));

  delayd::testing::set_acls(admin_props, sec.delayd_user, {{AclResource::topic, w.ready_topic("orders"), "Write"}});
  expect_recovered(w, admin, delayd, ready, ids, "kafka (deliveries)", refused);
  CHECK(count_of(read_all(w.log_path), "kafka (deliveries) is back") == 1);
  std::vector<std::string> all_mail = mail_ids;
  all_mail.insert(all_mail.end(), more_mail.begin(), more_mail.end());
  expect_all_delivered_once(mail, all_mail);
  delayd::testing::set_acls(admin_props, sec.delayd_user, w.delayd_acls({"orders", "mail"}), false);
}

TEST_CASE("without Read on its consumer group delayd says so once, is not ready, and delivers all once granted",
          "[e2e][kafka-security]") {
  const auto& sec = security();
  World w("acl-group");
  const std::uint16_t admin = free_port();
  w.settings["DELAYD_ADMIN_LISTEN"] = "127.0.0.1:" + std::to_string(admin);
  w.grant_acls = false;
  w.create_topics({"orders"});
  const auto admin_props = delayd::testing::kafka_client_properties(w.bootstrap);
  // Read on the ingest topic's group is withheld (the status topic's group, a group of its own,
  // is granted: a second refusal, of another group, would be a second line of its own).
  std::vector<delayd::testing::Acl> granted;
  std::vector<delayd::testing::Acl> groups;
  for (const auto& acl : w.delayd_acls({"orders"})) {
    (acl.resource == AclResource::group && acl.name == w.group ? groups : granted).push_back(acl);
  }
  delayd::testing::set_acls(admin_props, sec.delayd_user, granted);

  const std::string refused =
      "Kafka refused Read on group " + w.group + " to user " + sec.delayd_user + " (SASL " + sec.mechanism + ")";
  DelaydProcess delayd(w);
  delayd.start_until(refused);
  Collector ready(w, {w.ready_topic("orders")});
  const auto ids = publish(w, "g-", 20);
  expect_refused(w, admin, delayd, ready, "kafka (access)", refused);

  delayd::testing::set_acls(admin_props, sec.delayd_user, groups);
  expect_recovered(w, admin, delayd, ready, ids, "kafka (access)", refused);
  delayd::testing::set_acls(admin_props, sec.delayd_user, w.delayd_acls({"orders"}), false);
}

TEST_CASE("with a wrong password delayd says so once, is not ready, and delivers all once Kafka takes it",
          "[e2e][kafka-security]") {
  const auto& sec = security();
  World w("login");
  const std::uint16_t admin = free_port();
  w.settings["DELAYD_ADMIN_LISTEN"] = "127.0.0.1:" + std::to_string(admin);
  // A user of its own, whose password Kafka knows as another than delayd's.
  const std::string user = delayd::testing::unique_name("login");
  const std::string password_file = w.log_path + ".password";
  { std::ofstream(password_file) << "delayd-has-" << user << "\n"; }
  stack("scram " + user + " kafka-has-" + user);
  for (const auto& [k, v] : delayd::testing::delayd_kafka_security_env(user, password_file)) w.settings[k] = v;
  w.grant_acls = false;
  w.create_topics({"orders"});
  const auto admin_props = delayd::testing::kafka_client_properties(w.bootstrap);
  delayd::testing::set_acls(admin_props, user, w.delayd_acls({"orders"}));

  const std::string refused = "Kafka refused the login of user " + user + " (SASL " + sec.mechanism + ")";
  DelaydProcess delayd(w);
  delayd.start_until(refused);
  Collector ready(w, {w.ready_topic("orders")});
  const auto ids = publish(w, "p-", 20);
  expect_refused(w, admin, delayd, ready, "kafka (access)", refused);

  // Kafka's side is fixed: the user's password becomes the one delayd has.
  stack("scram " + user + " delayd-has-" + user);
  expect_recovered(w, admin, delayd, ready, ids, "kafka (access)", refused);
  delayd::testing::set_acls(admin_props, user, w.delayd_acls({"orders"}), false);
}

TEST_CASE("without Read on the status topic delayd says so once and is not ready, while other jobs go out",
          "[e2e][kafka-security]") {
  const auto& sec = security();
  World w("acl-status");
  const std::uint16_t admin = free_port();
  w.settings["DELAYD_ADMIN_LISTEN"] = "127.0.0.1:" + std::to_string(admin);
  // librdkafka looks at a subscribed topic it may not read again every
  // topic.metadata.refresh.interval.ms (5 minutes by default): 2 s here.
  w.settings["DELAYD_KAFKA_CONSUMER_PROPERTIES"] =
      "session.timeout.ms=6000,heartbeat.interval.ms=1000,topic.metadata.refresh.interval.ms=2000";
  w.grant_acls = false;
  w.create_topics({"orders"});
  const auto admin_props = delayd::testing::kafka_client_properties(w.bootstrap);
  std::vector<delayd::testing::Acl> granted;
  for (const auto& acl : w.delayd_acls({"orders"})) {
    if (acl.name != w.status_topic) granted.push_back(acl);
  }
  delayd::testing::set_acls(admin_props, sec.delayd_user, granted);

  DelaydProcess delayd(w);
  delayd.start();
  Collector ready(w, {w.ready_topic("orders")});
  const std::string refused = "Kafka refused Read or Describe on topic " + w.status_topic + " to user " +
                              sec.delayd_user + " (SASL " + sec.mechanism + ")";
  REQUIRE(log_says(w.log_path, refused, std::chrono::seconds(30)));
  // The ingest topic's records keep coming and going out: they do not end the status topic's
  // refusal (nor restart it).
  const auto ids = publish(w, "s-", 20);
  expect_all_delivered_once(ready, ids);
  const std::string readyz = readyz_until(admin, refused, std::chrono::seconds(10));
  CHECK_THAT(readyz,
             Catch::StartsWith("HTTP/1.0 503") && Catch::Contains("kafka (access)") && Catch::Contains(refused));
  CHECK(read_all(w.log_path).find("kafka (access) is back") == std::string::npos);
  CHECK(delayd.running());
  expect_one_refusal_line(w, refused);
  show(w, refused, readyz);

  delayd::testing::set_acls(
      admin_props, sec.delayd_user,
      {{AclResource::topic, w.status_topic, "Read"}, {AclResource::topic, w.status_topic, "Describe"}});
  // The next metadata refresh finds the topic readable: a rebalance assigns it.
  CHECK_THAT(readyz_until(admin, "ready\n", std::chrono::seconds(30)), Catch::StartsWith("HTTP/1.0 200"));
  CHECK(count_of(read_all(w.log_path), "kafka (access) is back") == 1);
  expect_one_refusal_line(w, refused);
  delayd::testing::set_acls(admin_props, sec.delayd_user, w.delayd_acls({"orders"}), false);
}
