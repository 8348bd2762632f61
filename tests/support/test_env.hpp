// Helpers shared by the integration tests: the stack's addresses (and, for a stack started with
// DELAYD_KAFKA_SASL=1, its Kafka security settings) from the environment, and names that no
// other run uses. A missing variable fails the test (never a silent skip).
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace delayd::testing {

inline std::string require_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    FAIL(name << " is not set: start the stack with scripts/stack.sh up and export its env "
                 "(scripts/test.sh does both)");
  }
  return v;
}

// The stack's Kafka security settings (scripts/stack.sh env with DELAYD_KAFKA_SASL=1), or none:
// KAFKA_SECURITY_PROTOCOL unset or empty means a PLAINTEXT stack.
struct KafkaSecurity {
  std::string protocol;                           // security.protocol; empty: PLAINTEXT
  std::string mechanism;                          // sasl.mechanism
  std::string ca;                                 // ssl.ca.location
  std::string admin_user, admin_password;         // the tests' own clients: a super user
  std::string delayd_user, delayd_password_file;  // delayd's own user, with only the ACLs granted to it
};

inline KafkaSecurity kafka_security() {
  KafkaSecurity s;
  const char* protocol = std::getenv("KAFKA_SECURITY_PROTOCOL");
  if (protocol == nullptr || *protocol == '\0') return s;
  s.protocol = protocol;
  s.mechanism = require_env("KAFKA_SASL_MECHANISM");
  s.ca = require_env("KAFKA_SSL_CA_LOCATION");
  s.admin_user = require_env("KAFKA_SASL_USERNAME");
  s.admin_password = require_env("KAFKA_SASL_PASSWORD");
  s.delayd_user = require_env("KAFKA_DELAYD_USERNAME");
  s.delayd_password_file = require_env("KAFKA_DELAYD_PASSWORD_FILE");
  return s;
}

// librdkafka properties for a test's own client (producer, consumer, admin): the bootstrap and,
// on a secured stack, the admin user's login.
inline std::vector<std::pair<std::string, std::string>> kafka_client_properties(const std::string& bootstrap) {
  std::vector<std::pair<std::string, std::string>> p{{"bootstrap.servers", bootstrap}};
  const KafkaSecurity s = kafka_security();
  if (s.protocol.empty()) return p;
  p.insert(p.end(), {{"security.protocol", s.protocol},
                     {"sasl.mechanism", s.mechanism},
                     {"sasl.username", s.admin_user},
                     {"sasl.password", s.admin_password},
                     {"ssl.ca.location", s.ca}});
  return p;
}

// delayd's environment for the stack's Kafka security, as its own user `user` (the stack's
// delayd user by default) whose password is read from `password_file` (the stack's by default):
// DELAYD_KAFKA_PROPERTIES and DELAYD_KAFKA_SASL_PASSWORD_FILE. Empty on a PLAINTEXT stack.
inline std::vector<std::pair<std::string, std::string>> delayd_kafka_security_env(std::string user = "",
                                                                                  std::string password_file = "") {
  const KafkaSecurity s = kafka_security();
  if (s.protocol.empty()) return {};
  if (user.empty()) user = s.delayd_user;
  if (password_file.empty()) password_file = s.delayd_password_file;
  return {{"DELAYD_KAFKA_PROPERTIES", "security.protocol=" + s.protocol + ",sasl.mechanism=" + s.mechanism +
                                          ",sasl.username=" + user + ",ssl.ca.location=" + s.ca},
          {"DELAYD_KAFKA_SASL_PASSWORD_FILE", password_file}};
}

// Unique per process and call: pid plus a steady-clock reading.
inline std::string unique_name(const std::string& base) {
  static unsigned counter = 0;
  return base + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() % 1000000000) + "-" +
         std::to_string(++counter);
}

}  // namespace delayd::testing
