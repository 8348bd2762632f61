// The admin endpoint's request-line reader (admin::parse_request_head) on the fuzzer's bytes:
// total, and what it returns is the first line's text up to its first two spaces.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "admin/admin_server.hpp"
#include "tests/fuzz/fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view request = delayd::fuzz::bytes(data, size);
  const std::string_view line = request.substr(0, request.find("\r\n"));
  const auto head = delayd::admin::parse_request_head(request);
  if (!head) {
    FUZZ_CHECK(std::count(line.begin(), line.end(), ' ') < 2);
    return 0;
  }
  FUZZ_CHECK(head->method.find(' ') == std::string::npos);
  FUZZ_CHECK(head->path.find(' ') == std::string::npos);
  FUZZ_CHECK(line.starts_with(head->method + ' ' + head->path + ' '));
  return 0;
}
