// Which librdkafka the process runs on, and what delayd knows about that version.
//
// The version is read at run time (rd_kafka_version()), not from the headers delayd was built
// with: a package or an LD_LIBRARY_PATH may load another shared library than the one it was
// compiled against, and the costs below belong to the library that runs.
#pragma once

#include <string>

namespace delayd::connectors {

// librdkafka's version as major.minor.patch; `text` is its own rd_kafka_version_str().
struct LibrdkafkaVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;
  std::string text;

  friend bool operator==(const LibrdkafkaVersion&, const LibrdkafkaVersion&) = default;
};

// Splits librdkafka's hex version (0xMMmmrrxx: major, minor, revision, pre-release) into its parts;
// `text` is left empty. Any int is accepted.
LibrdkafkaVersion librdkafka_version_from_hex(int hex) noexcept;

// The librdkafka loaded in this process: rd_kafka_version() and rd_kafka_version_str().
LibrdkafkaVersion running_librdkafka() noexcept;

// The first librdkafka whose transactional producer does not spin (2.4.0; its home is the
// top-level CMakeLists.txt, DELAYD_LIBRDKAFKA_NO_SPIN, which the package's dependency reads too).
LibrdkafkaVersion transactions_stop_spinning();

// True when this librdkafka's transactional producer spins: before transactions_stop_spinning()
// its main thread serves the 1 ms timer that registers a transaction's partitions
// (AddPartitionsToTxn) by polling without sleeping through that millisecond
// (confluentinc/librdkafka#4671), so each transaction costs one to two milliseconds of a busy
// thread. docs/performance/cost.md has the measurement.
bool transactions_spin(const LibrdkafkaVersion& v) noexcept;

// The first librdkafka whose cooperative consumer keeps its assignment when the coordinator
// refuses an offset commit for a generation that a rebalance has just replaced (2.10.0; its home
// is the top-level CMakeLists.txt, DELAYD_LIBRDKAFKA_KEEPS_ASSIGNMENT).
LibrdkafkaVersion commits_keep_assignment();

// True when a commit refused with ILLEGAL_GENERATION makes this librdkafka's consumer drop its
// whole assignment as lost and rejoin, even while it is rebalancing (before
// commits_keep_assignment(); confluentinc/librdkafka#4059). delayd commits ingest offsets after
// every batch, so a commit is often in flight when a rebalance's join completes: when one member
// of a group leaves (by session timeout, or on its own), the others can lose their shards too
// (their epochs move, their streams reopen) and the departed member's jobs wait through a
// rebalance or two more. docs/guarantees.md has the measurement.
bool commits_lose_assignment(const LibrdkafkaVersion& v) noexcept;

}  // namespace delayd::connectors
