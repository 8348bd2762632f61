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
