// JobStore's compressed payloads: the zstd dictionaries a store compresses with, read from Redis,
// written beside the records that use them (job_store.hpp: compress_payloads_above(); the
// format in payload_compression.hpp).
#include <algorithm>
#include <string>

#include "storage/job_record.hpp"
#include "storage/job_store.hpp"
#include "storage/payload_compression.hpp"

namespace delayd::storage {

void JobStore::compress_payloads_above(std::size_t bytes, bool dictionary) {
  compress_above_ = bytes;
  use_dictionary_ = dictionary;
  if (bytes == 0 || !dictionary || dictionaries_->current()) return;
  try {
    const redis::RedisReply r = redis_.command({"GET", keys_.dictionary()});
    if (r.view().is_string()) {
      if (const std::uint32_t id = dictionaries_->add(std::string(r.view().str()), true); id != 0) {
        dictionary_id_ = id;  // there already: not written again
        dictionary_prefix_ = true;
      }
    }
  } catch (const std::exception&) {
    // Not read: this process trains a dictionary of its own, which works as well.
  }
}

std::vector<redis::Command> JobStore::dictionary_writes(const DictionaryUse& used, std::vector<std::string>& shards,
                                                        bool& prefix) const {
  std::vector<redis::Command> writes;
  shards.clear();
  prefix = false;
  if (!used.dictionary) return writes;
  const CompressionDictionary& d = *used.dictionary;
  const bool known = d.id() == dictionary_id_;
  for (const std::string& shard : used.shards) {
    if (known && dictionary_shards_.count(shard) != 0) continue;
    writes.push_back({"SET", keys_.dictionary(shard, d.id()), d.bytes(), "NX"});
    shards.push_back(shard);
  }
  if (!(known && dictionary_prefix_)) {
    writes.push_back({"SET", keys_.dictionary(), d.bytes(), "NX"});
    prefix = true;
  }
  return writes;
}

void JobStore::dictionary_written(const DictionaryUse& used, const std::vector<std::string>& shards, bool prefix,
                                  std::span<const redis::RedisReply> replies) {
  for (const redis::RedisReply& r : replies) {  // "OK", or nil when it was there: both will do
    if (r.view().is_error())
      throw redis::RedisCommandError("redis: SET of a compression dictionary: " + r.view().error());
  }
  if (!used.dictionary) return;
  if (used.dictionary->id() != dictionary_id_) {
    dictionary_id_ = used.dictionary->id();
    dictionary_shards_.clear();
    dictionary_prefix_ = false;
  }
  dictionary_shards_.insert(shards.begin(), shards.end());
  dictionary_prefix_ = dictionary_prefix_ || prefix;
}

void JobStore::load_dictionaries(std::span<const std::pair<std::string_view, std::string_view>> records) {
  std::vector<redis::Command> reads;
  std::vector<std::uint32_t> ids;
  for (const auto& [shard, record] : records) {
    const auto nl = record.find('\n');
    if (nl == std::string_view::npos || header_field(record.substr(0, nl), kCompressedField) != kCompressedValue)
      continue;
    const std::uint32_t id = dictionary_of(record.substr(nl + 1));
    if (id == 0 || dictionaries_->find(id) || std::find(ids.begin(), ids.end(), id) != ids.end()) continue;
    reads.push_back({"GET", keys_.dictionary(shard, id)});
    ids.push_back(id);
  }
  if (reads.empty()) return;
  const std::vector<redis::RedisReply> replies = redis_.pipeline(reads);
  for (const redis::RedisReply& r : replies) {
    if (r.view().is_string()) dictionaries_->add(std::string(r.view().str()), false);
  }
}

}  // namespace delayd::storage
