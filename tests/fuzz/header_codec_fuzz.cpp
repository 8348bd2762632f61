// The payload codec on bytes as they come back from Redis (storage/header_codec.hpp). A
// malformed blob must be refused with std::invalid_argument and nothing else; a blob that
// decodes must be exactly what encoding its result gives back (the format has one encoding per
// value), and decoding that again must give the same value.
#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "storage/header_codec.hpp"
#include "tests/fuzz/fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace delayd::storage;
  const std::string_view blob = delayd::fuzz::bytes(data, size);

  try {
    const StoredPayload p = decode_payload(blob);
    const std::string again = encode_payload(p);
    FUZZ_CHECK(again == blob);
    FUZZ_CHECK(decode_payload(again) == p);
  } catch (const std::invalid_argument&) {
  }

  try {
    const StoredHeaders h = decode_headers(blob);
    const std::string again = encode_headers(h);
    FUZZ_CHECK(again == blob);
    FUZZ_CHECK(decode_headers(again) == h);
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
