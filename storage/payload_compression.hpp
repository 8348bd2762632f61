// Payloads kept compressed in Redis: a job's payload (key, value and headers, header_codec.hpp)
// larger than a threshold is stored zstd-compressed, and its record's header line carries the
// field z=1 (job_record.hpp's kFields: the Lua scripts keep it through every rewrite, and never
// read a payload's bytes, only whether there is one). Every reader in C++ (the claim, get(), the
// console, delayctl, a retry, a redrive) goes through read_payload(), which undoes it; a record
// written before, or below the threshold, has no z and reads as it is.
//
// Why zstd at level 1: on the JSON documents jobs carry (names repeated, about 1 KiB), a pending
// job keeps 0.22 of its bytes in Redis for about 3 us more of delayd's CPU a job, which Redis
// and Kafka save more than (docs/performance/compression.md, "Compressed payloads"); Debian ships it (libzstd).
//
// The dictionary. What repeats in a job's value is mostly what it shares with the other jobs
// (field names, enum values, URLs, currencies), which a value compressed alone cannot take. So
// the first kDictionarySamples payloads above the threshold that a process compresses are also
// kept as samples (at most kSampleBytes of each), and the one that completes them trains a zstd
// dictionary of kDictionaryBytes (ZDICT_trainFromBuffer, about 0.1 s once) from which every
// later payload is compressed: on the corpus of the benchmark a value's 870 bytes become about
// 130 instead of 400. redis.compression_dictionary = false compresses each payload alone. The frame names its
// dictionary (zstd's dictionary id, in the frame header), so a record stays z=1 and says which dictionary it needs; one
// written without a dictionary names none.
//
// Where dictionaries are kept (storage/key_schema.hpp), and the order that makes every record
// readable at every crash point (JobStore::accept*, job_store.cpp):
//   <prefix>:{<shard>}:zdict:<id>  the dictionary's bytes, in each shard that holds a record
//                                  compressed with it: set (SET NX; immutable) by a store before
//                                  its first write of such a record in that shard, on the same
//                                  connection, so in the same node and ahead in its AOF. A crash
//                                  between the two leaves a dictionary no record uses: harmless.
//   <prefix>:zdict                 the dictionary a process that starts compresses with (SET NX:
//                                  the first one trained under the prefix), read when a store is
//                                  told to compress; a process that trained its own meanwhile
//                                  (two started together) keeps using it: both are in the shards.
// A reader meeting a frame whose dictionary this process has not loaded reads it from the
// record's shard first (JobStore::load_dictionaries()). A dictionary is never removed (16 KiB a
// shard); one that is missing makes its records' payloads unreadable, which a claim sets aside
// as corrupt with that reason.
//
// Errors: read_payload() throws std::invalid_argument for a frame that does not decompress, or
// whose dictionary is not loaded (the record is then corrupt, as one whose payload does not
// decode is). A dictionary that fails to train leaves the process compressing without one.
// Threading: any thread. Each thread keeps its own zstd contexts (thread_local); a
// PayloadDictionaries is shared by every store of a prefix in the process, and locks.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

struct ZSTD_CDict_s;
struct ZSTD_DDict_s;

namespace delayd::storage {

// The record field that marks a compressed payload, and its value.
inline constexpr std::string_view kCompressedField = "z";
inline constexpr std::string_view kCompressedValue = "1";

// A trained dictionary's size (the best of 16, 32, 64 and 110 KiB on the benchmark's corpus), how
// many payloads train it, and how much of each (a larger one teaches no more than its start).
inline constexpr std::size_t kDictionaryBytes = 16 * 1024;
inline constexpr std::size_t kDictionarySamples = 1000;
inline constexpr std::size_t kSampleBytes = 4096;

// A zstd dictionary, ready to compress (level 1) and decompress with. Immutable.
class CompressionDictionary {
 public:
  // Throws std::invalid_argument when `bytes` is not a zstd dictionary with an id.
  explicit CompressionDictionary(std::string bytes);
  ~CompressionDictionary();
  CompressionDictionary(const CompressionDictionary&) = delete;
  CompressionDictionary& operator=(const CompressionDictionary&) = delete;

  std::uint32_t id() const { return id_; }             // never 0
  const std::string& bytes() const { return bytes_; }  // as stored in Redis
  const ZSTD_CDict_s* compression() const { return cdict_; }
  const ZSTD_DDict_s* decompression() const { return ddict_; }

 private:
  std::string bytes_;
  std::uint32_t id_ = 0;
  ZSTD_CDict_s* cdict_ = nullptr;  // owned
  ZSTD_DDict_s* ddict_ = nullptr;  // owned
};

// What a process stored compressed under a prefix since it started (for /metrics: the ratio an
// operator gets is stored_bytes / encoded_bytes), and the dictionary new payloads are compressed with.
struct CompressionTotals {
  std::uint64_t payloads = 0;       // payloads written compressed (a rewrite of one counts again)
  std::uint64_t encoded_bytes = 0;  // their size before compression (header_codec.hpp's encoding)
  std::uint64_t stored_bytes = 0;   // their size as written to Redis
  std::uint32_t dictionary = 0;     // the current dictionary's id; 0 while there is none
};

// The dictionaries one prefix's stores share in a process: those loaded (by id), the one new
// payloads are compressed with, and the samples that train it while there is none.
class PayloadDictionaries {
 public:
  // The prefix's, made on first use and kept for the life of the process.
  static std::shared_ptr<PayloadDictionaries> of(const std::string& prefix);
  // Drops the prefix's: its next of() starts empty, as a new process would (tests). Stores
  // holding the old one keep it.
  static void forget(const std::string& prefix);

  // The dictionary new payloads are compressed with; nullptr while there is none.
  std::shared_ptr<const CompressionDictionary> current() const;
  // Loads `bytes` (a dictionary read from Redis) for reading, and makes it current when
  // `make_current` and there is none. Returns its id; 0 (and loads nothing) when the bytes are
  // not a zstd dictionary.
  std::uint32_t add(std::string bytes, bool make_current);
  // The loaded dictionary `id`; nullptr if this process has not loaded it.
  std::shared_ptr<const CompressionDictionary> find(std::uint32_t id) const;
  // Keeps `encoded` (a payload about to be compressed) as a sample while there is no current
  // dictionary and training has not been tried; the call that completes kDictionarySamples
  // trains one and makes it current. Returns the current dictionary afterwards (nullptr: none).
  std::shared_ptr<const CompressionDictionary> offer(std::string_view encoded);
  // Called (on the thread of the offer() that trained) after each training: with the dictionary
  // made current, or nullptr when zstd could not make one; and the number of samples. For a log
  // line; replaces the one set before.
  using Trained = std::function<void(const CompressionDictionary*, std::size_t)>;
  void on_trained(Trained f);
  // Counts a payload written compressed: `encoded` bytes kept as `stored`. Any thread.
  void count(std::size_t encoded, std::size_t stored) noexcept;
  // What count() has counted so far, and the current dictionary's id.
  CompressionTotals totals() const;

 private:
  mutable std::shared_mutex mutex_;
  std::map<std::uint32_t, std::shared_ptr<const CompressionDictionary>> loaded_;
  std::shared_ptr<const CompressionDictionary> current_;
  std::vector<std::string> samples_;  // while training has not been tried
  bool trained_ = false;              // tried (made current_, or failed: no more sampling)
  Trained on_trained_;
  // count()'s totals: relaxed, each a running sum read for a metric.
  std::atomic<std::uint64_t> payloads_{0};
  std::atomic<std::uint64_t> encoded_bytes_{0};
  std::atomic<std::uint64_t> stored_bytes_{0};
};

// `encoded` compressed (with `dictionary` if given), when it is longer than `above` bytes
// (0: never) and compression makes it shorter; nullopt otherwise (store it as it is).
std::optional<std::string> compress_payload(std::string_view encoded, std::size_t above,
                                            const CompressionDictionary* dictionary = nullptr);
// The encoded payload (header_codec.hpp) of a record's payload bytes: decompressed when the record
// says z=1, with the dictionary its frame names (from `dictionaries`).
std::string read_payload(std::string_view stored, bool compressed, const PayloadDictionaries* dictionaries = nullptr);
// The id of the dictionary a compressed payload's frame was made with; 0: none (or not a frame).
std::uint32_t dictionary_of(std::string_view stored);

}  // namespace delayd::storage
