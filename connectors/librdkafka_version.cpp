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

bool transactions_spin(const LibrdkafkaVersion& v) noexcept { return std::tie(v.major, v.minor) < std::tuple(2, 4); }

}  // namespace delayd::connectors
