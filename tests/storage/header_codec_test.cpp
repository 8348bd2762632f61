#include <catch2/catch.hpp>

#include "storage/header_codec.hpp"

using delayd::storage::decode_headers;
using delayd::storage::encode_headers;
using delayd::storage::StoredHeaders;

TEST_CASE("headers survive encoding: order, repeats, null and binary values", "[codec]") {
  const StoredHeaders in{{"b", "2"},
                         {"a", std::nullopt},
                         {"a", ""},
                         {"bin", std::string("\0\xff\x01", 3)},
                         {"", "empty name"}};
  CHECK(decode_headers(encode_headers(in)) == in);
  CHECK(decode_headers(encode_headers({})).empty());
}

TEST_CASE("a truncated header blob is refused, not read past its end", "[codec]") {
  const std::string blob = encode_headers({{"name", "value"}});
  for (size_t n = 1; n < blob.size(); ++n) {
    INFO("prefix of " << n << " bytes");
    CHECK_THROWS_AS(decode_headers(std::string_view(blob).substr(0, n)), std::invalid_argument);
  }
}

TEST_CASE("a payload survives encoding: null and empty key and value, binary bytes, headers", "[codec]") {
  using delayd::storage::decode_payload;
  using delayd::storage::encode_payload;
  using delayd::storage::StoredPayload;
  const StoredPayload full{std::string("k\0y", 3), std::string(300, 'v'), {{"h", std::nullopt}, {"h", "2"}}};
  CHECK(decode_payload(encode_payload(full)) == full);
  const StoredPayload nulls{std::nullopt, std::nullopt, {}};
  CHECK(decode_payload(encode_payload(nulls)) == nulls);
  const StoredPayload empties{std::string(), std::string(), {}};
  CHECK(decode_payload(encode_payload(empties)) == empties);
  // Cut anywhere inside the key or the value (a cut between two headers would be a valid,
  // shorter payload: the format has no count, only lengths).
  const std::string blob = encode_payload(full);
  const size_t value_end = 1 + 3 + 2 + 300;  // varint lengths: one byte for 3 + 1, two for 300 + 1
  for (size_t n = 1; n < value_end; ++n) {
    INFO("prefix of " << n << " bytes");
    CHECK_THROWS_AS(decode_payload(std::string_view(blob).substr(0, n)), std::invalid_argument);
  }
}

TEST_CASE("lengths are short varints, and a length that cannot be is refused", "[codec]") {
  using delayd::storage::decode_payload;
  using delayd::storage::encode_payload;
  // key null (1 byte), value of 200 (2 bytes of length), header "h"="2" (1 + 1 + 1 + 1).
  CHECK(encode_payload({std::nullopt, std::string(200, 'v'), {{"h", "2"}}}).size() == 1 + 2 + 200 + 4);
  CHECK_THROWS_AS(decode_payload(std::string("\xff\xff\xff\xff\xff\x01", 6)), std::invalid_argument);  // > 5 bytes
  CHECK_THROWS_AS(decode_payload(std::string("\xff\xff\xff\xff\x7f", 5)), std::invalid_argument);  // > 4 GiB
  CHECK_THROWS_AS(decode_headers(std::string("\x00", 1)), std::invalid_argument);  // a null header name
  CHECK_THROWS_AS(decode_payload(std::string("\x81\x00\x01", 3)), std::invalid_argument);  // 1 padded to 2 bytes
}
