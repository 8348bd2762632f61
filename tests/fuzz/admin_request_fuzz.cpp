// The admin endpoint's request reading on the fuzzer's bytes: Boost.Beast's request parser with
// the endpoint's default limits (it must refuse or accept, never crash), then our own part, the
// target's path and the job id of /jobs/{id} (admin/request_target.hpp), on both the parsed
// target and the raw bytes. job_id_of must be total, and %XX-encoding an id it returned must
// give the same id back.
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstdint>
#include <string>
#include <string_view>

#include "admin/request_target.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace {

void check_target(std::string_view target) {
  const std::string_view path = delayd::admin::target_path(target);
  FUZZ_CHECK(path.find('?') == std::string_view::npos);
  const auto id = delayd::admin::job_id_of(path);
  if (!id) return;
  FUZZ_CHECK(path.starts_with(delayd::admin::kJobsPrefix));
  FUZZ_CHECK(!id->empty() && id->size() <= path.size() - delayd::admin::kJobsPrefix.size());
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string encoded(delayd::admin::kJobsPrefix);
  for (unsigned char c : *id) {
    encoded += '%';
    encoded += kHex[c >> 4];
    encoded += kHex[c & 15];
  }
  FUZZ_CHECK(delayd::admin::job_id_of(encoded) == id);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes = delayd::fuzz::bytes(data, size);
  check_target(bytes);

  namespace http = boost::beast::http;
  http::request_parser<http::string_body> parser;
  parser.header_limit(8192);
  parser.body_limit(4096);
  parser.eager(true);
  boost::beast::error_code ec;
  parser.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
  if (!ec && parser.is_header_done()) {
    const auto target = parser.get().target();
    check_target(std::string_view(target.data(), target.size()));
  }
  return 0;
}
