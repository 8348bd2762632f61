#include "storage/payload_compression.hpp"

#include <zdict.h>
#include <zstd.h>

#include <algorithm>
#include <mutex>
#include <new>
#include <stdexcept>

namespace delayd::storage {

namespace {

// Compressed payloads are at most this large when decompressed: a record's payload is bounded by
// the producer's message.max.bytes (1 MB by default), well below it.
constexpr unsigned long long kMaxDecompressed = 64ull << 20;
constexpr int kLevel = 1;

// One compression and one decompression context per thread, kept: ZSTD_compress() would make
// (and allocate) a context for every payload, which costs more than compressing 1 KiB does.
struct FreeCCtx {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct FreeDCtx {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};
ZSTD_CCtx* compression_context() {
  thread_local const std::unique_ptr<ZSTD_CCtx, FreeCCtx> ctx(ZSTD_createCCtx());
  if (!ctx) throw std::bad_alloc();
  return ctx.get();
}
ZSTD_DCtx* decompression_context() {
  thread_local const std::unique_ptr<ZSTD_DCtx, FreeDCtx> ctx(ZSTD_createDCtx());
  if (!ctx) throw std::bad_alloc();
  return ctx.get();
}

// A dictionary trained from `samples`; nullopt when zstd cannot make one of them.
std::optional<std::string> train(const std::vector<std::string>& samples) {
  std::string joined;
  std::vector<std::size_t> sizes;
  sizes.reserve(samples.size());
  for (const std::string& s : samples) {
    joined += s;
    sizes.push_back(s.size());
  }
  std::string dictionary(kDictionaryBytes, '\0');
  const std::size_t n = ZDICT_trainFromBuffer(dictionary.data(), dictionary.size(), joined.data(), sizes.data(),
                                              static_cast<unsigned>(sizes.size()));
  if (ZDICT_isError(n) || ZDICT_getDictID(dictionary.data(), n) == 0) return std::nullopt;
  dictionary.resize(n);
  return dictionary;
}

// Every prefix's PayloadDictionaries in the process (of(), forget()).
struct Registry {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<PayloadDictionaries>> by_prefix;
};
Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

CompressionDictionary::CompressionDictionary(std::string bytes) : bytes_(std::move(bytes)) {
  id_ = ZDICT_getDictID(bytes_.data(), bytes_.size());
  if (id_ == 0) throw std::invalid_argument("not a zstd dictionary");
  cdict_ = ZSTD_createCDict(bytes_.data(), bytes_.size(), kLevel);
  ddict_ = ZSTD_createDDict(bytes_.data(), bytes_.size());
  if (cdict_ == nullptr || ddict_ == nullptr) {
    ZSTD_freeCDict(cdict_);
    ZSTD_freeDDict(ddict_);
    throw std::invalid_argument("zstd dictionary unusable");
  }
}

CompressionDictionary::~CompressionDictionary() {
  ZSTD_freeCDict(cdict_);
  ZSTD_freeDDict(ddict_);
}

std::shared_ptr<PayloadDictionaries> PayloadDictionaries::of(const std::string& prefix) {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  std::shared_ptr<PayloadDictionaries>& d = r.by_prefix[prefix];
  if (!d) d = std::make_shared<PayloadDictionaries>();
  return d;
}

void PayloadDictionaries::forget(const std::string& prefix) {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  r.by_prefix.erase(prefix);
}

std::shared_ptr<const CompressionDictionary> PayloadDictionaries::current() const {
  const std::shared_lock lock(mutex_);
  return current_;
}

std::uint32_t PayloadDictionaries::add(std::string bytes, bool make_current) {
  std::shared_ptr<const CompressionDictionary> d;
  try {
    d = std::make_shared<const CompressionDictionary>(std::move(bytes));
  } catch (const std::invalid_argument&) {
    return 0;
  }
  const std::unique_lock lock(mutex_);
  auto [at, added] = loaded_.emplace(d->id(), d);
  if (make_current && !current_) {
    current_ = at->second;
    samples_.clear();
  }
  return d->id();
}

std::shared_ptr<const CompressionDictionary> PayloadDictionaries::find(std::uint32_t id) const {
  const std::shared_lock lock(mutex_);
  const auto at = loaded_.find(id);
  return at == loaded_.end() ? nullptr : at->second;
}

std::shared_ptr<const CompressionDictionary> PayloadDictionaries::offer(std::string_view encoded) {
  std::vector<std::string> samples;
  {
    const std::unique_lock lock(mutex_);
    if (current_ || trained_) return current_;
    samples_.emplace_back(encoded.substr(0, std::min(encoded.size(), kSampleBytes)));
    if (samples_.size() < kDictionarySamples) return nullptr;
    trained_ = true;  // this call trains: the others go on without a dictionary meanwhile
    samples.swap(samples_);
  }
  std::optional<std::string> bytes = train(samples);
  if (bytes) add(std::move(*bytes), true);
  Trained told;
  std::shared_ptr<const CompressionDictionary> made;
  {
    const std::shared_lock lock(mutex_);
    told = on_trained_;
    made = current_;
  }
  if (told) told(bytes ? made.get() : nullptr, samples.size());
  return made;
}

void PayloadDictionaries::on_trained(Trained f) {
  const std::unique_lock lock(mutex_);
  on_trained_ = std::move(f);
}

void PayloadDictionaries::count(std::size_t encoded, std::size_t stored) noexcept {
  payloads_.fetch_add(1, std::memory_order_relaxed);
  encoded_bytes_.fetch_add(encoded, std::memory_order_relaxed);
  stored_bytes_.fetch_add(stored, std::memory_order_relaxed);
}

CompressionTotals PayloadDictionaries::totals() const {
  const std::shared_ptr<const CompressionDictionary> d = current();
  return {payloads_.load(std::memory_order_relaxed), encoded_bytes_.load(std::memory_order_relaxed),
          stored_bytes_.load(std::memory_order_relaxed), d ? d->id() : 0};
}

std::optional<std::string> compress_payload(std::string_view encoded, std::size_t above,
                                            const CompressionDictionary* dictionary) {
  if (above == 0 || encoded.size() <= above) return std::nullopt;
  std::string out(ZSTD_compressBound(encoded.size()), '\0');
  const std::size_t n =
      dictionary != nullptr
          ? ZSTD_compress_usingCDict(compression_context(), out.data(), out.size(), encoded.data(), encoded.size(),
                                     dictionary->compression())
          : ZSTD_compressCCtx(compression_context(), out.data(), out.size(), encoded.data(), encoded.size(), kLevel);
  if (ZSTD_isError(n) || n >= encoded.size()) return std::nullopt;
  out.resize(n);
  return out;
}

std::uint32_t dictionary_of(std::string_view stored) { return ZSTD_getDictID_fromFrame(stored.data(), stored.size()); }

std::string read_payload(std::string_view stored, bool compressed, const PayloadDictionaries* dictionaries) {
  if (!compressed) return std::string(stored);
  const unsigned long long size = ZSTD_getFrameContentSize(stored.data(), stored.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size > kMaxDecompressed) {
    throw std::invalid_argument("compressed payload unreadable (not a zstd frame of known size)");
  }
  std::shared_ptr<const CompressionDictionary> dictionary;
  if (const std::uint32_t id = dictionary_of(stored); id != 0) {
    if (dictionaries != nullptr) dictionary = dictionaries->find(id);
    if (!dictionary) {
      throw std::invalid_argument("compressed payload unreadable: its dictionary " + std::to_string(id) +
                                  " is not in Redis");
    }
  }
  std::string out(static_cast<std::size_t>(size), '\0');
  const std::size_t n =
      dictionary ? ZSTD_decompress_usingDDict(decompression_context(), out.data(), out.size(), stored.data(),
                                              stored.size(), dictionary->decompression())
                 : ZSTD_decompressDCtx(decompression_context(), out.data(), out.size(), stored.data(), stored.size());
  if (ZSTD_isError(n) || n != out.size()) {
    throw std::invalid_argument(std::string("compressed payload unreadable: ") +
                                (ZSTD_isError(n) ? ZSTD_getErrorName(n) : "size differs"));
  }
  return out;
}

}  // namespace delayd::storage
