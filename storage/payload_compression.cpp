#include "storage/payload_compression.hpp"

#include <zstd.h>

#include <memory>
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

}  // namespace

std::optional<std::string> compress_payload(std::string_view encoded, std::size_t above) {
  if (above == 0 || encoded.size() <= above) return std::nullopt;
  std::string out(ZSTD_compressBound(encoded.size()), '\0');
  const std::size_t n =
      ZSTD_compressCCtx(compression_context(), out.data(), out.size(), encoded.data(), encoded.size(), kLevel);
  if (ZSTD_isError(n) || n >= encoded.size()) return std::nullopt;
  out.resize(n);
  return out;
}

std::string read_payload(std::string_view stored, bool compressed) {
  if (!compressed) return std::string(stored);
  const unsigned long long size = ZSTD_getFrameContentSize(stored.data(), stored.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size > kMaxDecompressed) {
    throw std::invalid_argument("compressed payload unreadable (not a zstd frame of known size)");
  }
  std::string out(static_cast<std::size_t>(size), '\0');
  const std::size_t n =
      ZSTD_decompressDCtx(decompression_context(), out.data(), out.size(), stored.data(), stored.size());
  if (ZSTD_isError(n) || n != out.size()) {
    throw std::invalid_argument(std::string("compressed payload unreadable: ") +
                                (ZSTD_isError(n) ? ZSTD_getErrorName(n) : "size differs"));
  }
  return out;
}

}  // namespace delayd::storage
