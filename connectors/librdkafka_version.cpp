#include "connectors/librdkafka_version.hpp"

#include <librdkafka/rdkafka.h>

#include <tuple>

namespace delayd::connectors {

LibrdkafkaVersion librdkafka_version_from_hex(int hex) noexcept {
  const auto bits = static_cast<unsigned>(hex);
  return {static_cast<int>((bits >> 24) & 0xffU),
          static_cast<int>((bits >> 16) & 0xffU),
          static_cast<int>((bits >> 8) & 0xffU),
          {}};
}

LibrdkafkaVersion running_librdkafka() noexcept {
  LibrdkafkaVersion v = librdkafka_version_from_hex(rd_kafka_version());
  try {
    v.text = rd_kafka_version_str();
  } catch (...) {  // an allocation failure: the numbers still say it
  }
  return v;
}

// DELAYD_NO_SPIN_*: set by connectors/CMakeLists.txt from DELAYD_LIBRDKAFKA_NO_SPIN.
LibrdkafkaVersion transactions_stop_spinning() {
  return {DELAYD_NO_SPIN_MAJOR, DELAYD_NO_SPIN_MINOR, DELAYD_NO_SPIN_PATCH, DELAYD_NO_SPIN_TEXT};
}

bool transactions_spin(const LibrdkafkaVersion& v) noexcept {
  return std::tie(v.major, v.minor, v.patch) <
         std::tuple(DELAYD_NO_SPIN_MAJOR, DELAYD_NO_SPIN_MINOR, DELAYD_NO_SPIN_PATCH);
}

// DELAYD_KEEPS_ASSIGNMENT_*: from DELAYD_LIBRDKAFKA_KEEPS_ASSIGNMENT, the same way.
LibrdkafkaVersion commits_keep_assignment() {
  return {DELAYD_KEEPS_ASSIGNMENT_MAJOR, DELAYD_KEEPS_ASSIGNMENT_MINOR, DELAYD_KEEPS_ASSIGNMENT_PATCH,
          DELAYD_KEEPS_ASSIGNMENT_TEXT};
}

bool commits_lose_assignment(const LibrdkafkaVersion& v) noexcept {
  return std::tie(v.major, v.minor, v.patch) <
         std::tuple(DELAYD_KEEPS_ASSIGNMENT_MAJOR, DELAYD_KEEPS_ASSIGNMENT_MINOR, DELAYD_KEEPS_ASSIGNMENT_PATCH);
}

}  // namespace delayd::connectors
