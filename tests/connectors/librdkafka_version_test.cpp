// Which librdkafka runs (connectors/librdkafka_version.hpp): the hex version's parts, and which
// versions spin through a transaction's registration timer.
#include "connectors/librdkafka_version.hpp"

#include <librdkafka/rdkafka.h>

#include <catch2/catch.hpp>
#include <string>

using delayd::connectors::librdkafka_version_from_hex;
using delayd::connectors::LibrdkafkaVersion;
using delayd::connectors::running_librdkafka;
using delayd::connectors::transactions_spin;

TEST_CASE("the hex version splits into major, minor and patch", "[librdkafka]") {
  CHECK(librdkafka_version_from_hex(0x020002ff) == LibrdkafkaVersion{2, 0, 2, {}});
  CHECK(librdkafka_version_from_hex(0x020800ff) == LibrdkafkaVersion{2, 8, 0, {}});
  CHECK(librdkafka_version_from_hex(0x0a0b0c01) == LibrdkafkaVersion{10, 11, 12, {}});
}

TEST_CASE("librdkafka before 2.4.0 spins through a transaction's timer, 2.4.0 and later do not", "[librdkafka]") {
  CHECK(transactions_spin({1, 9, 2, {}}));
  CHECK(transactions_spin({2, 0, 2, {}}));
  CHECK(transactions_spin({2, 3, 9, {}}));
  CHECK_FALSE(transactions_spin({2, 4, 0, {}}));
  CHECK_FALSE(transactions_spin({2, 8, 0, {}}));
  CHECK_FALSE(transactions_spin({3, 0, 0, {}}));
}

TEST_CASE("the first librdkafka that does not spin is named as its numbers say", "[librdkafka]") {
  const LibrdkafkaVersion first = delayd::connectors::transactions_stop_spinning();
  CHECK(first.text ==
        std::to_string(first.major) + "." + std::to_string(first.minor) + "." + std::to_string(first.patch));
  CHECK_FALSE(transactions_spin(first));
  CHECK(transactions_spin({first.major, first.minor - 1, 99, {}}));
}

TEST_CASE("librdkafka before 2.10.0 drops its assignment on a commit refused for an old generation", "[librdkafka]") {
  using delayd::connectors::commits_lose_assignment;
  CHECK(commits_lose_assignment({2, 0, 2, {}}));
  CHECK(commits_lose_assignment({2, 8, 0, {}}));
  CHECK(commits_lose_assignment({2, 9, 99, {}}));
  CHECK_FALSE(commits_lose_assignment({2, 10, 0, {}}));
  CHECK_FALSE(commits_lose_assignment({2, 12, 1, {}}));
  CHECK_FALSE(commits_lose_assignment({3, 0, 0, {}}));
  const LibrdkafkaVersion first = delayd::connectors::commits_keep_assignment();
  CHECK(first.text ==
        std::to_string(first.major) + "." + std::to_string(first.minor) + "." + std::to_string(first.patch));
  CHECK_FALSE(commits_lose_assignment(first));
  // The later of the two facts: a librdkafka that keeps its assignment does not spin either.
  CHECK_FALSE(delayd::connectors::transactions_spin(first));
}

TEST_CASE("the running librdkafka is the one the process loaded, its text starting with its numbers", "[librdkafka]") {
  const LibrdkafkaVersion v = running_librdkafka();
  CHECK(v == LibrdkafkaVersion{v.major, v.minor, v.patch, rd_kafka_version_str()});
  const std::string numbers = std::to_string(v.major) + "." + std::to_string(v.minor) + "." + std::to_string(v.patch);
  CHECK(v.text.rfind(numbers, 0) == 0);
}
